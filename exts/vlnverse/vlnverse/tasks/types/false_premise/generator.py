"""False-premise navigation (VLN-NF style): paired FOUND / NOT_FOUND goal descriptions.

Each pair shares the start, the target room, the instruction template and the reference
exploration path; only the named object differs:

* FOUND — a coarse-grained description of an object that is in the target room;
* NOT_FOUND — the same text with the object replaced by a plausible object for that room type
  (``PLAUSIBLE_OBJECTS`` plus what the scene catalog can place in such a room) that is verified
  absent: no object of that category — nor one sharing a spoken form or head noun with it
  ("table" vs. "coffee table") — lies in the room, by the scene graph and by the room polygon.

Reference exploration (VLN-NF Sec. 3.2) over viewpoints inside the target room (a lattice of its
navigable cells) starting from the room's entry viewpoint (geodesically closest to the start):

* landmark-cued (the instruction names a landmark through a relation, "on the counter"): the
  shortest visiting order, by brute force over permutations, of the viewpoints that see the
  original target (at most ``max_landmark_viewpoints``, nearest to the target);
* coverage (no landmark): greedy set cover — repeatedly go to the viewpoint revealing most unseen
  room objects (ties: geodesically closest) until all are seen or none adds any.

Visibility is line of sight on a view-blocking grid at camera height within
``visibility_range`` (4 m). Episodes whose reference sees < ``min_coverage`` (85%) of the room's
objects are dropped. ``info``: ``decision``, ``pair_id``, ``target_room_id``,
``named_category``, ``original_object_id``, ``absent_category`` (NOT_FOUND), ``search_mode``,
``reference_exploration_path`` ([x, y, z] viewpoints in visiting order, entry first),
``reference_exploration_length`` (geodesic, m), ``reference_exploration_route`` (collision-free
waypoints through those viewpoints, for imitation learning), ``room_object_ids``, ``seen_object_ids``, ``coverage``.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np

from ....core.config import require
from ....core.errors import NoNavigableSpaceError
from ...base import SceneContext, TaskGenerator, register_task
from ...scoring import TaskScoring
from ...episode import Episode, Goal
from ...pathing import PathPlanner
from ...tours import object_visibility, view_blocking_grid
from ..goals import nearest_viewpoint

TASK = "false_premise"
FOUND, NOT_FOUND = "FOUND", "NOT_FOUND"

#: Objects one plausibly looks for in each room type (used even when no scene has them).
PLAUSIBLE_OBJECTS: dict[str, tuple[str, ...]] = {
    "kitchen": ("toaster", "blender", "kettle", "microwave", "coffee_maker", "cutting_board", "fruit_bowl",
                "dish_rack", "bread_box", "teapot", "mug", "bowl", "plate", "pot", "bottle", "dishwasher"),
    "bedroom": ("lamp", "alarm_clock", "laptop", "book", "teddy_bear", "pillow", "laundry_basket", "mirror",
                "vase", "picture_frame", "jewelry_box", "candle", "plant", "mug"),
    "bathroom": ("towel", "soap_dispenser", "toothbrush_holder", "hair_dryer", "laundry_basket", "plant",
                 "candle", "bath_mat", "scale", "trash_can", "basket"),
    "living_room": ("remote", "vase", "candle", "book", "plant", "lamp", "clock", "speaker", "cushion",
                    "picture_frame", "tv", "guitar", "fruit_bowl", "magazine_rack"),
    "dining_room": ("fruit_bowl", "vase", "candle", "plate", "cup", "bottle", "bowl", "teapot", "napkin_holder",
                    "plant", "clock"),
    "office": ("laptop", "monitor", "keyboard", "printer", "lamp", "mug", "book", "plant", "clock", "globe",
               "desk_organizer"),
    "hallway": ("umbrella", "coat_rack", "shoe_rack", "mirror", "plant", "bench", "basket", "umbrella_stand"),
    "closet": ("basket", "shoe_rack", "suitcase", "laundry_basket", "umbrella", "storage_box"),
    "laundry_room": ("basket", "iron", "ironing_board", "bottle", "towel", "laundry_basket", "drying_rack"),
}
DEFAULT_PLAUSIBLE = ("plant", "vase", "lamp", "clock", "basket", "book", "candle", "picture_frame")


@dataclass
class FalsePremiseParams:
    """Task-specific settings (``params:`` of ``config.yaml`` beside this module)."""

    landmark_fraction: float = 0.5
    min_coverage: float = 0.85
    visibility_range: float = 4.0
    viewpoint_spacing: float = 1.0
    max_landmark_viewpoints: int = 7
    min_room_objects: int = 2
    styles: list[str] = field(default_factory=lambda: ["natural", "formal", "casual"])
    tries_per_pair: int = 12

    def validate(self) -> None:
        """Check fractions lie in [0, 1] and distances/counts are positive."""
        require(0.0 <= self.landmark_fraction <= 1.0, "landmark_fraction", f"got {self.landmark_fraction}",
                "a fraction in [0, 1]")
        require(0.0 < self.min_coverage <= 1.0, "min_coverage", f"got {self.min_coverage}", "a fraction in (0, 1]")
        require(self.visibility_range > 0 and self.viewpoint_spacing > 0, "visibility_range",
                f"got range {self.visibility_range}, spacing {self.viewpoint_spacing}", "positive distances (m)")
        require(1 <= self.max_landmark_viewpoints <= 9, "max_landmark_viewpoints", f"got {self.max_landmark_viewpoints}",
                "1..9 (the visiting order is found by brute force)")
        require(self.min_room_objects >= 1 and self.tries_per_pair >= 1, "min_room_objects",
                f"got {self.min_room_objects}, tries {self.tries_per_pair}", "positive integers")


# ------------------------------------------------------------------------------------------
# Absent but plausible objects


def plausible_categories(room_type: str) -> list[str]:
    """Categories one may plausibly look for in a ``room_type``: ``PLAUSIBLE_OBJECTS`` plus what the
    procedural-home catalog places in (or on furniture of) such rooms; sorted, deduplicated."""
    names = set(PLAUSIBLE_OBJECTS.get(room_type, DEFAULT_PLAUSIBLE))
    try:
        from ....scenes.catalog import ROOM_RULES, SMALL_OBJECT_RULES
    except ImportError:  # the catalog is optional: the curated table suffices
        return sorted(names)
    for rule in ROOM_RULES.get(room_type, ()):
        furniture = [rule.category] + [c.category for c in rule.companions]
        names.update(furniture)
        for f in furniture:
            names.update(small for small, _ in SMALL_OBJECT_RULES.get(f, ((), 0))[0])
    return sorted(names)


def _forms(category: str, lexicon) -> set[str]:
    return {f.lower() for f in lexicon.object_variants(category)}


def _heads(category: str, lexicon) -> set[str]:
    return {f.split()[-1] for f in _forms(category, lexicon)}


def conflicts(candidate: str, present: Iterable[str], lexicon) -> bool:
    """Whether naming ``candidate`` could refer to an object of a ``present`` category: the same
    category, a shared spoken form ("fridge"/"refrigerator") or a shared head noun ("table" /
    "coffee table", "lamp" / "floor lamp")."""
    forms, heads = _forms(candidate, lexicon), _heads(candidate, lexicon)
    for cat in present:
        if cat == candidate or forms & _forms(cat, lexicon) or heads & _heads(cat, lexicon):
            return True
    return False


def absent_categories(room_type: str, present: Iterable[str], lexicon) -> list[str]:
    """Plausible categories for ``room_type`` that conflict with none of the ``present`` ones."""
    present = set(present)
    return [c for c in plausible_categories(room_type) if not conflicts(c, present, lexicon)]


def categories_in_room(desc, view, room_id: int) -> set[str]:
    """Object categories in a room, by the scene graph *and* by the scene description (objects whose
    footprint centre lies in the room polygon or that carry the room id), so nothing present slips."""
    from ....scenes.description import STRUCTURE_LABELS

    cats = {o["category"] for i, o in view.objects.items() if view.room_of(i) == room_id}
    objs = [o for o in desc.objects if o.category not in STRUCTURE_LABELS]
    if objs:
        inside = desc.room_by_id(room_id).contains(np.array([o.position[:2] for o in objs]))
        cats.update(o.category for o, hit in zip(objs, inside) if hit or o.room_id == room_id)
    return cats


# ------------------------------------------------------------------------------------------
# Reference exploration


def shortest_visit_order(from_entry: np.ndarray, pairwise: np.ndarray) -> tuple[list[int], float]:
    """Exhaustive shortest open tour from the entry through every target: returns (order, length).

    ``from_entry`` (m,) holds distances entry → target; ``pairwise`` (m, m) target → target.
    All m! orders are scored at once with numpy (m ≤ 9).
    """
    m = len(from_entry)
    if m == 0:
        return [], 0.0
    perms = np.array(list(itertools.permutations(range(m))), dtype=np.int64)
    cost = from_entry[perms[:, 0]]
    if m > 1:
        cost = cost + pairwise[perms[:, :-1], perms[:, 1:]].sum(axis=1)
    best = int(np.argmin(cost))
    return perms[best].tolist(), float(cost[best])


def greedy_coverage(entry: int, sees: np.ndarray, distances: np.ndarray) -> list[int]:
    """Greedy set-cover exploration: from viewpoint ``entry``, repeatedly move to the viewpoint
    seeing the most not-yet-seen objects (ties → geodesically closest to the current one) until
    every object visible from some viewpoint is seen. ``sees`` (V, O) bool; ``distances`` (V, V).
    Returns the visited viewpoint indices, ``entry`` first."""
    seen = sees[entry].copy()
    order = [entry]
    current = entry
    while True:
        gain = (sees & ~seen).sum(axis=1)
        gain[order] = 0
        reachable = np.isfinite(distances[current])
        gain[~reachable] = 0
        if gain.max(initial=0) == 0:
            return order
        best = np.flatnonzero(gain == gain.max())
        current = int(best[np.argmin(distances[current, best])])
        order.append(current)
        seen |= sees[current]


def room_viewpoints(navigable, room_map: np.ndarray, room_id: int, spacing: float) -> np.ndarray:
    """Viewpoints inside a room: navigable cells of the room on a lattice of ``spacing`` metres
    (the cell nearest the room's navigable centre when the lattice misses the room), shape (V, 2)."""
    cells = np.argwhere((room_map == room_id) & navigable.free_mask())
    if len(cells) == 0:
        return np.zeros((0, 2))
    step = max(1, int(round(spacing / navigable.resolution)))
    lattice = cells[(cells[:, 0] % step == step // 2) & (cells[:, 1] % step == step // 2)]
    if len(lattice) == 0:
        centre = cells.mean(axis=0)
        lattice = cells[[int(np.argmin(np.linalg.norm(cells - centre, axis=1)))]]
    return navigable.cell_to_world(lattice)


@dataclass
class Exploration:
    """A reference exploration of a room: viewpoints visited in order and what they see."""

    viewpoints: np.ndarray  # (K, 2), entry first
    length: float
    seen: list[int]
    room_objects: list[int]
    mode: str
    route: np.ndarray  # (M, 2) collision-free waypoints through the viewpoints, entry first

    @property
    def coverage(self) -> float:
        """Fraction of the room's objects seen from the visited viewpoints (1 for an empty room)."""
        return len(set(self.seen) & set(self.room_objects)) / len(self.room_objects) if self.room_objects else 1.0


def plan_exploration(planner: PathPlanner, viewpoints: np.ndarray, sees: np.ndarray, room_objects: list[int],
                     entry: int, *, target_column: int | None = None, max_landmark_viewpoints: int = 7) -> Exploration:
    """Reference exploration over ``viewpoints`` (V, 2) with visibility ``sees`` (V, O) of the room's
    objects ``room_objects`` (column order). ``target_column`` set → landmark-cued exhaustive order
    over the viewpoints seeing that object; otherwise greedy coverage. Distances are geodesic."""
    dist = np.stack([planner.distance_field(v).distance(viewpoints) for v in viewpoints])
    if target_column is not None:
        cand = [v for v in np.flatnonzero(sees[:, target_column]) if v != entry]
        if len(cand) > max_landmark_viewpoints:
            cand = sorted(cand, key=lambda v: (dist[entry, v], v))[:max_landmark_viewpoints]
        cand = [v for v in cand if np.isfinite(dist[entry, v])]
        order, _ = shortest_visit_order(dist[entry, cand], dist[np.ix_(cand, cand)])
        visit = [entry] + [cand[i] for i in order]
        mode = "landmark"
    else:
        visit = greedy_coverage(entry, sees, dist)
        mode = "coverage"
    length = float(sum(dist[a, b] for a, b in zip(visit[:-1], visit[1:])))
    seen_cols = np.flatnonzero(sees[visit].any(axis=0))
    route = [viewpoints[visit[0]][None, :]]
    for a, b in zip(visit[:-1], visit[1:]):
        route.append(planner.shortest_path(viewpoints[a], viewpoints[b]).waypoints[1:])
    return Exploration(viewpoints=viewpoints[visit], length=length, seen=[room_objects[c] for c in seen_cols],
                       room_objects=list(room_objects), mode=mode, route=np.concatenate(route))


# ------------------------------------------------------------------------------------------
# The generator


@register_task(TASK, config="config.yaml")
class FalsePremiseTask(TaskGenerator):
    """VLN-NF style pairs; ``generate(ctx, rng, n, split)`` returns ``n`` episodes (``n // 2`` pairs,
    plus one FOUND episode when ``n`` is odd), each pair FOUND first."""

    #: VLN-NF: reach the target room and state FOUND / NOT_FOUND (RD_SR, REV_SPL, coverage)
    scoring = TaskScoring(decision=True, headline="RD_SR")

    Params = FalsePremiseParams

    def generate(self, ctx: SceneContext, rng: np.random.Generator, n: int, split: str) -> list[Episode]:
        """Sample target rooms/objects, verify absent substitutes, plan references, keep covered pairs."""
        scene = _Scene.build(ctx, self.params)
        episodes: list[Episode] = []
        pairs = (n + 1) // 2
        tries = pairs * self.params.tries_per_pair
        used: set[tuple] = set()
        for _ in range(tries):
            if len(episodes) >= n:
                break
            pair = self._pair(ctx, scene, rng, len(episodes), split, used)
            if pair is not None:
                episodes.extend(pair[: n - len(episodes)])
        if not episodes and n > 0:
            raise NoNavigableSpaceError(f"scene '{ctx.scene_id}': no {TASK} pair passed the checks in {tries} tries "
                                        f"(rooms with >= {self.params.min_room_objects} objects, an absent plausible "
                                        f"object, reference coverage >= {self.params.min_coverage})")
        if len(episodes) < n:
            return self.partial(ctx, episodes, n, f"only {len(episodes) // 2} distinct pair(s) passed the checks "
                                f"in {tries} tries")
        return episodes

    def _pair(self, ctx: SceneContext, scene: "_Scene", rng: np.random.Generator, index: int, split: str,
              used: set) -> list[Episode] | None:
        from ...instructions.synthesizer import Synthesizer

        p = self.params
        rooms = [r for r in scene.rooms if len(scene.room_objects[r]) >= p.min_room_objects]
        if not rooms:
            return None
        room_id = rooms[int(rng.integers(len(rooms)))]
        room_objs = scene.room_objects[room_id]
        target = room_objs[int(rng.integers(len(room_objs)))]
        absent = absent_categories(scene.room_types[room_id], categories_in_room(ctx.desc, scene.view, room_id),
                                   scene.lexicon)
        if not absent:
            return None
        substitute = absent[int(rng.integers(len(absent)))]
        facts = scene.describer.describe_target(target)
        landmark = facts.relation is not None and rng.random() < p.landmark_fraction
        key = (target, substitute, landmark)
        if key in used:
            return None

        # Start outside the room, geodesic distance to the room entry within the configured range.
        viewpoints = scene.viewpoints[room_id]
        if len(viewpoints) == 0:
            return None
        cands = ctx.planner.sample_navigable_points(rng, 64)
        cand_rooms = scene.room_at(cands)
        cands = cands[cand_rooms != room_id]
        if len(cands) == 0:
            return None
        field_ = ctx.planner.distance_field(ctx.desc.object_by_id(target).position[:2])
        d = field_.distance(cands)
        ok = np.flatnonzero((d >= self.config.min_geodesic) & (d <= self.config.max_geodesic))
        if len(ok) == 0:
            return None
        start = cands[ok[int(rng.integers(len(ok)))]]
        entry = int(np.argmin(ctx.planner.distance_field(start).distance(viewpoints)))

        sees = scene.sees[room_id]
        col = room_objs.index(target)
        exploration = plan_exploration(ctx.planner, viewpoints, sees, room_objs, entry,
                                       target_column=col if landmark else None,
                                       max_landmark_viewpoints=p.max_landmark_viewpoints)
        if exploration.coverage < p.min_coverage:
            return None

        synth = Synthesizer(TASK, lexicon=scene.lexicon)
        style = p.styles[int(rng.integers(len(p.styles)))]
        slots = synth.goal_slots(facts, rng)
        if not landmark:
            slots.pop("rel", None)
        part = "landmark" if landmark else "room"
        if "room" not in slots:
            return None
        found_text, nf_text, template_id = _render_pair(slots, substitute, part, style, scene.lexicon, rng)
        problems = scene.verifier.check(found_text)
        problems += verify_false_premise(scene.verifier, nf_text, substitute, room_id,
                                         categories_in_room(ctx.desc, scene.view, room_id))
        if problems:
            from ...instructions.synthesizer import InstructionError

            raise InstructionError(f"{TASK}: template {template_id} failed verification: {problems}")
        used.add(key)

        category = scene.view.objects[target]["category"]
        instances = [i for i in room_objs if scene.view.objects[i]["category"] == category]
        goal_radius = self.config.success_distance
        found_goals = [Goal(position=ctx.to_3d(ctx.desc.object_by_id(i).position[:2]), radius=goal_radius,
                            object_id=int(i), room_id=int(room_id), category=category) for i in instances]
        entry_xy = viewpoints[entry]
        room_goal = Goal(position=ctx.to_3d(entry_xy), radius=goal_radius, object_id=None, room_id=int(room_id),
                         category=None)
        # Geodesic to the instances' navigable viewpoints (the definition success uses), not to
        # their centres (which would add the straight offset from the nearest navigable cell).
        nearest = nearest_viewpoint(ctx, start, found_goals)
        if nearest is None:
            return None
        found_end, found_geodesic = nearest
        found_path = ctx.planner.shortest_path(start, found_end)
        room_path = ctx.planner.shortest_path(start, entry_xy)
        pair_id = f"{ctx.scene_id}-pair{index // 2:05d}"
        common = {
            "pair_id": pair_id, "target_room_id": int(room_id), "target_room_type": scene.room_types[room_id],
            "original_object_id": int(target), "search_mode": exploration.mode,
            "reference_exploration_path": [ctx.to_3d(v) for v in exploration.viewpoints],
            "reference_exploration_length": exploration.length,
            "reference_exploration_route": [ctx.to_3d(v) for v in exploration.route],
            "room_object_ids": [int(i) for i in room_objs], "seen_object_ids": sorted(int(i) for i in exploration.seen),
            "coverage": exploration.coverage, "entry_viewpoint": ctx.to_3d(entry_xy),
            "visibility_range": p.visibility_range, "template_id": template_id,
        }
        yaw = float(room_path.start_yaw)
        found_ep = self.make_episode(ctx, index, split, found_path, [found_text.to_instruction()], goals=found_goals,
                                     geodesic_distance=found_geodesic, start_yaw=yaw,
                                     info={**common, "decision": FOUND, "named_category": category,
                                           "mentions": [m.to_dict() for m in found_text.mentions]})
        nf_ep = self.make_episode(ctx, index + 1, split, room_path, [nf_text.to_instruction()], goals=[room_goal],
                                  geodesic_distance=float(ctx.planner.geodesic_distance(start, entry_xy)), start_yaw=yaw,
                                  info={**common, "decision": NOT_FOUND, "named_category": substitute,
                                        "absent_category": substitute,
                                        "mentions": [m.to_dict() for m in nf_text.mentions]})
        return [found_ep, nf_ep]


def _render_pair(slots: dict, substitute: str, part: str, style: str, lexicon, rng: np.random.Generator):
    """Render one template twice: with the real target's slots and with ``substitute`` in the target
    slots (plain noun phrase: the original's colour or material would rarely suit another object)."""
    from ...instructions.grammar import capitalize_first
    from ...instructions.phrases import category_phrase, render
    from ...instructions.synthesizer import TEMPLATES
    from ...instructions.types import GroundedInstruction

    tset = TEMPLATES.get(TASK)
    choices = tset.select(part, style, set(slots)) or tset.select(part, None, set(slots))
    tmpl = choices[int(rng.integers(len(choices)))]
    variant = int(rng.integers(4))
    nf_slots = dict(slots)
    nf_slots.update({name: category_phrase(substitute, lexicon, determiner=det, variant=variant)
                     for name, det in (("target", "the"), ("a_target", "a"), ("target_noun", ""),
                                       ("target_plain", "the"))})
    out = []
    for s in (slots, nf_slots):
        phrase = render(tmpl.text, s)
        text = capitalize_first(phrase.text.rstrip())
        if text[-1:] not in ".!?":
            text += "."
        out.append(GroundedInstruction(text, list(phrase.mentions), style=tmpl.style, task_type=TASK,
                                       template_ids=(tmpl.template_id,)))
    return out[0], out[1], tmpl.template_id


def verify_false_premise(verifier, instruction, absent_category: str, room_id: int, present: set[str]) -> list[str]:
    """Verify a NOT_FOUND instruction: every mention other than the absent object must pass the
    Verifier, every vocabulary word outside the absent object's span must be covered by one, and the
    absent category must conflict with no category present in the room."""
    text = instruction.text
    absent = [m for m in instruction.mentions if m.kind == "object" and m.category == absent_category
              and m.instance_id is None]
    if not absent:
        return [f"'{text}': no mention of the absent '{absent_category}'"]
    others = [m for m in instruction.mentions if m not in absent]
    problems, verified = [], []
    for m in others:
        found = verifier.check_mention(m, text)
        problems += found
        if not found:
            verified.append(m)
    spans = [m.span for m in absent]
    for hit in verifier.lexicon.find(text):
        if any(a <= hit.span[0] and hit.span[1] <= b for a, b in spans):
            continue
        if not any(m.kind == hit.kind and m.category in hit.names and m.span[0] <= hit.span[0]
                   and hit.span[1] <= m.span[1] for m in verified):
            problems.append(f"'{text[hit.span[0]:hit.span[1]]}' at {hit.span[0]}: not supported by any mention")
    if conflicts(absent_category, present, verifier.lexicon):
        problems.append(f"'{absent_category}' is (or could name) an object present in room {room_id}")
    return problems


@dataclass
class _Scene:
    """Per-scene lookups: rooms with their objects, viewpoints and visibility."""

    rooms: list[int]
    room_types: dict[int, str]
    room_objects: dict[int, list[int]]
    viewpoints: dict[int, np.ndarray]
    sees: dict[int, np.ndarray]
    view: Any
    lexicon: Any
    verifier: Any
    describer: Any
    room_map: np.ndarray
    navigable: Any

    def room_at(self, xy: np.ndarray) -> np.ndarray:
        """Room id (room map) at world points (N, 2); -1 outside rooms."""
        rc = self.navigable.world_to_cell(xy)
        ok = self.navigable.in_bounds(rc)
        out = np.full(len(rc), -1, dtype=np.int64)
        out[ok] = self.room_map[rc[ok, 0], rc[ok, 1]]
        return out

    @classmethod
    def build(cls, ctx: SceneContext, p: FalsePremiseParams) -> "_Scene":
        from ...instructions.describer import Describer
        from ...instructions.graph import SceneGraphView
        from ...instructions.lexicon import Lexicon
        from ...instructions.verifier import Verifier

        desc = ctx.desc
        view = SceneGraphView(ctx.maps.scene_graph)
        lexicon = Lexicon(view.categories(), view.room_types())
        room_types = {r.room_id: r.room_type for r in desc.rooms}
        room_objects: dict[int, list[int]] = {}
        for i in sorted(view.objects):
            rid = view.room_of(i)
            if rid is not None and rid in room_types:
                room_objects.setdefault(rid, []).append(i)
        blocked, origin = view_blocking_grid(desc, ctx.planner.resolution, ctx.body.camera_height)
        viewpoints, sees = {}, {}
        for rid, objs in room_objects.items():
            vps = room_viewpoints(ctx.maps.navigable, ctx.room_map, rid, p.viewpoint_spacing)
            bmin = np.array([desc.object_by_id(i).bounds_min for i in objs])
            bmax = np.array([desc.object_by_id(i).bounds_max for i in objs])
            viewpoints[rid] = vps
            sees[rid] = object_visibility(blocked, origin, ctx.planner.resolution, vps, bmin, bmax,
                                          max_range=p.visibility_range)
        return cls(rooms=sorted(room_objects), room_types=room_types, room_objects=room_objects,
                   viewpoints=viewpoints, sees=sees, view=view, lexicon=lexicon, verifier=Verifier(view, lexicon),
                   describer=Describer.from_context(ctx), room_map=ctx.room_map, navigable=ctx.maps.navigable)


def episode_pairs(episodes: list[Episode]) -> dict[str, list[Episode]]:
    """Group false-premise episodes by ``info["pair_id"]``."""
    out: dict[str, list[Episode]] = {}
    for e in episodes:
        out.setdefault(e.info["pair_id"], []).append(e)
    return out


__all__ = ["FOUND", "NOT_FOUND", "PLAUSIBLE_OBJECTS", "FalsePremiseParams", "FalsePremiseTask", "Exploration",
           "absent_categories", "categories_in_room", "conflicts", "episode_pairs", "greedy_coverage",
           "plan_exploration", "plausible_categories", "room_viewpoints", "shortest_visit_order",
           "verify_false_premise"]
