"""Video-contextualized navigation (VCN-Bench style): instructions resolved from a prior video.

Per scene, a tour through every room (``tasks.tours``) is rendered once with the injected
renderer and stored under the dataset's ``assets/tours/``. Each episode takes a sliding window of
that tour as its prior video; the agent starts where the window ends (last frame's pose), so the
video covers both the start and the destination. Five instruction kinds:

* ``instance`` — an object seen in the video, described (category, colour, room type) so that it
  is the only visible object matching the description;
* room-to-object (R2O) kinds name a room through the video, then an object category to locate in
  it: ``count`` ("the second bedroom you saw"; subclass ``entry``: "the room right after your
  second entry into the room you are in now"), ``order`` ("the bedroom you visited after the
  kitchen", "the room right after the kitchen"; subclass ``single_room``: "of the bathroom and
  the living room, the one you visited before the kitchen"), ``distance`` ("the bathroom closest
  to you"), ``orientation`` ("the bedroom farthest to your left"). Count and Order pick a
  subclass uniformly among those the window allows (``answer.subclass``).

**Kind mix.** ``params.kind_mix`` (kind → weight; default equal weights over ``kinds``) sets
per-kind quotas of the ``n`` episodes (largest remainder); tries cycle through the kinds still
under quota, and the quotas are lifted once half the tries are spent (a scene that cannot
host a kind fills up with the others). The achieved mix is ``generator.achieved_mix`` and the
dataset summary's ``kinds``.

Answers are emitted only when unambiguous from the video (VCN-Bench App. B.4): at least two rooms
of the target type in the window (distractors) for every R2O kind; count — earlier rooms of the
type are not revisited after the target's first entry; count ``entry`` (VCN-Bench App. B.4, second
Count subclass) — the room you stand in was entered at least twice in the window and the target
is the room of the visit right after its k-th entry; order — the anchor is the only room of its
type and is visited once, and exactly one room of the target type lies on the asked side of it;
order ``single_room`` (first Order subclass) — the target's type has exactly one room in the
window, all its visits on the asked side of the anchor, and a listed distractor type (also a
single room) lies wholly on the other side;
distance — geodesic distances to the room centroids, from where you stand or from an anchor room
whose type is unique in the window ("the bedroom closest to the kitchen"), differ by
≥ ``distance_margin`` (5 m) from the runner-up; orientation — exactly one room of the type among the rooms at that extreme, and the
target is not a corner room (not also extreme sideways). Rooms with blurry boundaries (hallways,
entryways, balconies, ...) are never targets or anchors, and R2O episodes never start in one.

``info`` holds ``video`` (path of the tour ``.npz``), ``window`` ``[start, end)`` (tour frames),
``kind``, ``target_room_id``, ``target_object_id`` (the nearest goal instance),
``target_object_ids`` (all goal instances), ``target_frames`` (indices *within the window*: frames
in the target room for R2O kinds, frames where the object is visible for ``instance``) and the
``answer`` details needed to recompute it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from ....core.config import require
from ....core.errors import ConfigError, NoNavigableSpaceError
from ....core.io import to_jsonable
from ...base import SceneContext, TaskGenerator, register_task
from ...scoring import TaskScoring
from ...episode import Episode, Goal
from ...tours import (Tour, object_visibility, plan_tour, render_tour, room_visits, save_prior_video,
                     sliding_windows, view_blocking_grid)
from ..goals import footprint_distance, nearest_viewpoint

TASK = "video_contextualized"
KINDS = ("instance", "count", "order", "distance", "orientation")
#: Room types without a clear boundary: never a target or an anchor (VCN-Bench App. B.2).
BLURRY_ROOM_TYPES = ("hallway", "corridor", "entryway", "foyer", "lobby", "balcony", "porch", "terrace",
                     "outdoor", "other", "stairs", "staircase")
#: Directions in the agent's frame at the start, with their phrases.
SIDES = {"left": "farthest to your left", "right": "farthest to your right",
         "ahead": "farthest ahead of you", "behind": "farthest behind you"}
_SIDE_ANGLE = {"ahead": 0.0, "left": math.pi / 2, "behind": math.pi, "right": -math.pi / 2}
_PERPENDICULAR = {"ahead": ("left", "right"), "behind": ("left", "right"), "left": ("ahead", "behind"),
                  "right": ("ahead", "behind")}


@dataclass
class VCNParams:
    """Task-specific settings (``params:`` of ``config.yaml`` beside this module)."""

    kinds: list[str] = field(default_factory=lambda: list(KINDS))
    kind_mix: dict[str, float] = field(default_factory=dict)
    tour_spacing: float = 0.5
    spin_frames: int = 8
    frame_size: int = 128
    camera_pitch_deg: float = 0.0
    hfov_deg: float = 90.0
    visibility_range: float = 3.0
    window_min_frames: int = 60
    window_max_frames: int = 400
    window_step: int = 10
    distance_margin: float = 5.0
    orientation_margin: float = 5.0
    blurry_room_types: list[str] = field(default_factory=lambda: list(BLURRY_ROOM_TYPES))
    styles: list[str] = field(default_factory=lambda: ["natural", "formal", "casual"])
    tries_per_episode: int = 30
    preview: bool = True

    def validate(self) -> None:
        """Check kinds are known and sizes/margins positive."""
        unknown = sorted(set(self.kinds) - set(KINDS))
        require(bool(self.kinds) and not unknown, "kinds", f"got {self.kinds}", f"a non-empty subset of {list(KINDS)}")
        bad_mix = {k: w for k, w in self.kind_mix.items()
                   if k not in self.kinds or isinstance(w, bool) or not isinstance(w, (int, float))
                   or not math.isfinite(w) or w < 0}
        require(not bad_mix and (not self.kind_mix or sum(self.kind_mix.values()) > 0), "kind_mix",
                f"got {self.kind_mix}", f"weights >= 0 (not all 0) for kinds among {self.kinds}")
        for name in ("tour_spacing", "hfov_deg", "visibility_range", "distance_margin", "orientation_margin"):
            value = getattr(self, name)
            require(math.isfinite(value) and value > 0, name, f"got {value}", "a positive number")
        require(0 < self.window_step <= self.window_min_frames <= self.window_max_frames, "window_min_frames",
                f"got step {self.window_step}, min {self.window_min_frames}, max {self.window_max_frames}",
                "0 < window_step <= window_min_frames <= window_max_frames")
        require(self.spin_frames >= 0 and self.tries_per_episode > 0 and self.frame_size > 0, "spin_frames",
                "negative spin_frames or non-positive tries_per_episode/frame_size", "counts >= 0 / > 0")


# ------------------------------------------------------------------------------------------
# Ambiguity rules (pure functions of the window's room sequence and geometry)


@dataclass(frozen=True)
class RoomAnswer:
    """A target room resolved from the video, with the facts that make it unambiguous."""

    kind: str
    room_id: int
    room_type: str
    details: dict = field(default_factory=dict, hash=False, compare=False)


def kind_quotas(n: int, weights: dict[str, float]) -> dict[str, int]:
    """Episodes per kind for ``n`` episodes in proportion to ``weights`` (largest remainder,
    ties in the order given); equal weights give a balanced mix."""
    total = sum(weights.values())
    if total <= 0:
        return dict.fromkeys(weights, 0)
    exact = {k: n * w / total for k, w in weights.items()}
    quotas = {k: int(math.floor(v)) for k, v in exact.items()}
    order = sorted(weights, key=lambda k: -(exact[k] - quotas[k]))
    for k in order[:n - sum(quotas.values())]:
        quotas[k] += 1
    return quotas


def _one_subclass(answers: list[RoomAnswer], rng: np.random.Generator) -> list[RoomAnswer]:
    """The answers of one subclass, drawn uniformly among the subclasses present (``details.subclass``;
    none = the main subclass), so a rarer subclass is not drowned by a frequent one."""
    groups: dict[str, list[RoomAnswer]] = {}
    for a in answers:
        groups.setdefault(a.details.get("subclass", "main"), []).append(a)
    if not groups:
        return []
    names = sorted(groups)
    return groups[names[int(rng.integers(len(names)))]]


def _typed_rooms(visits, room_types: dict[int, str]) -> dict[str, list[int]]:
    """Distinct rooms per type in order of first appearance."""
    out: dict[str, list[int]] = {}
    for v in visits:
        rooms = out.setdefault(room_types[v.room_id], [])
        if v.room_id not in rooms:
            rooms.append(v.room_id)
    return out


def count_answers(visits, room_types: dict[int, str], blurry: Iterable[str] = BLURRY_ROOM_TYPES) -> list[RoomAnswer]:
    """"The k-th <type> you saw": rooms of a type with ≥ 2 distinct rooms in the window, numbered by
    first appearance; the k-th is valid only if no earlier room of the type is revisited after the
    k-th room's first entry."""
    blurry = set(blurry)
    out = []
    for rtype, rooms in _typed_rooms(visits, room_types).items():
        if rtype in blurry or len(rooms) < 2:
            continue
        first = {r: min(i for i, v in enumerate(visits) if v.room_id == r) for r in rooms}
        for k, room in enumerate(rooms, start=1):
            earlier = set(rooms[:k - 1])
            if any(v.room_id in earlier for v in visits[first[room] + 1:]):
                continue
            out.append(RoomAnswer("count", room, rtype, {"ordinal": k}))
    return out


def count_entry_answers(visits, room_types: dict[int, str], current_room: int,
                        blurry: Iterable[str] = BLURRY_ROOM_TYPES) -> list[RoomAnswer]:
    """"The room right after your k-th entry into the room you are in now" (VCN-Bench's second
    Count subclass): the current room was entered at least twice in the window; for each entry k
    followed by another visit, the target is that visit's room (not of a blurry type)."""
    blurry = set(blurry)
    entries = [i for i, v in enumerate(visits) if v.room_id == current_room]
    if len(entries) < 2:
        return []
    out = []
    for k, i in enumerate(entries, start=1):
        if i + 1 < len(visits):
            room = visits[i + 1].room_id
            if room_types[room] not in blurry and room != current_room:
                out.append(RoomAnswer("count", room, room_types[room],
                                      {"subclass": "entry", "ordinal": k, "anchor_room_id": current_room}))
    return out


def _anchors(visits, room_types: dict[int, str], typed: dict[str, list[int]], blurry: set[str]):
    """(visit index, room, type) of each anchor an Order question may name: a room visited once,
    the only room of its type in the window, of a type that is not blurry."""
    for i, anchor_visit in enumerate(visits):
        anchor = anchor_visit.room_id
        atype = room_types[anchor]
        if atype in blurry or len(typed[atype]) != 1 or sum(v.room_id == anchor for v in visits) != 1:
            continue
        yield i, anchor, atype


def order_single_room_answers(visits, room_types: dict[int, str],
                              blurry: Iterable[str] = BLURRY_ROOM_TYPES) -> list[RoomAnswer]:
    """VCN-Bench's first Order subclass, rooms of different types: "of the bathroom and the living
    room, go to the one you visited before the kitchen". The anchor is visited once and is the only
    room of its type; the target's type has one room in the window, visited only on the asked side
    of the anchor; the distractor (first such type in order of appearance) likewise only on the
    other side. ``choices`` lists both types alphabetically."""
    blurry = set(blurry)
    typed = _typed_rooms(visits, room_types)
    single = [t for t, rooms in typed.items() if len(rooms) == 1 and t not in blurry]
    out = []
    for i, anchor, atype in _anchors(visits, room_types, typed, blurry):
        before = {room_types[v.room_id] for v in visits[:i]}
        after = {room_types[v.room_id] for v in visits[i + 1:]}
        only = {"before": [t for t in single if t != atype and t in before and t not in after],
                "after": [t for t in single if t != atype and t in after and t not in before]}
        for relation, other in (("before", "after"), ("after", "before")):
            if not only[other]:
                continue
            distractor = only[other][0]
            for rtype in only[relation]:
                out.append(RoomAnswer("order", typed[rtype][0], rtype,
                                      {"subclass": "single_room", "relation": relation, "anchor_room_id": anchor,
                                       "choices": sorted([rtype, distractor]),
                                       "distractor_room_id": typed[distractor][0]}))
    return out


def order_answers(visits, room_types: dict[int, str], blurry: Iterable[str] = BLURRY_ROOM_TYPES) -> list[RoomAnswer]:
    """Order relations to an anchor room visited exactly once whose type is unique in the window.

    ``after``/``before``: the only room of the target type seen after/before the anchor's visit
    (with ≥ 2 rooms of that type in the window); ``next``/``previous``: the room of the visit right
    after/before the anchor's (its type again having ≥ 2 rooms in the window).
    """
    blurry = set(blurry)
    typed = _typed_rooms(visits, room_types)
    out = []
    for i, anchor, atype in _anchors(visits, room_types, typed, blurry):
        for relation, side in (("after", visits[i + 1:]), ("before", visits[:i])):
            for rtype, rooms in typed.items():
                if rtype in blurry or rtype == atype or len(rooms) < 2:
                    continue
                seen = {v.room_id for v in side if room_types[v.room_id] == rtype}
                if len(seen) == 1:
                    out.append(RoomAnswer("order", seen.pop(), rtype, {"relation": relation, "anchor_room_id": anchor}))
        for relation, j in (("next", i + 1), ("previous", i - 1)):
            if 0 <= j < len(visits):
                room = visits[j].room_id
                rtype = room_types[room]
                if rtype not in blurry and len(typed[rtype]) >= 2:
                    out.append(RoomAnswer("order", room, rtype, {"relation": relation, "anchor_room_id": anchor}))
    return out


def distance_answers(room_ids: Iterable[int], room_types: dict[int, str], distances: dict[int, float], *,
                     margin: float = 5.0, blurry: Iterable[str] = BLURRY_ROOM_TYPES,
                     reference: Any = "start") -> list[RoomAnswer]:
    """Closest/farthest room of a type (≥ 2 rooms of it in the window) by ``distances`` (room id →
    metres from the reference), kept only when the runner-up differs by at least ``margin``."""
    blurry = set(blurry)
    by_type: dict[str, list[int]] = {}
    for r in dict.fromkeys(room_ids):
        if r in distances and np.isfinite(distances[r]):
            by_type.setdefault(room_types[r], []).append(r)
    out = []
    for rtype, rooms in by_type.items():
        if rtype in blurry or len(rooms) < 2:
            continue
        ranked = sorted(rooms, key=lambda r: (distances[r], r))
        d = [distances[r] for r in ranked]
        if d[1] - d[0] >= margin:
            out.append(RoomAnswer("distance", ranked[0], rtype, {"extreme": "closest", "reference": reference,
                                                                 "distances": {r: distances[r] for r in ranked}}))
        if d[-1] - d[-2] >= margin:
            out.append(RoomAnswer("distance", ranked[-1], rtype, {"extreme": "farthest", "reference": reference,
                                                                  "distances": {r: distances[r] for r in ranked}}))
    return out


def side_vector(side: str, yaw: float) -> np.ndarray:
    """World unit vector of ``side`` (ahead/left/behind/right) for an agent facing ``yaw``."""
    a = yaw + _SIDE_ANGLE[side]
    return np.array([math.cos(a), math.sin(a)])


def extreme_rooms(polygons: dict[int, np.ndarray], direction: np.ndarray, margin: float = 5.0) -> set[int]:
    """Rooms lying at the extreme of ``direction`` among ``polygons`` (VCN-Bench App. B.4).

    Candidates reach within ``margin`` of the farthest extent along the direction; a candidate is
    extreme if no other room whose centroid falls within its lateral extent has its centroid
    farther along the direction.
    """
    d = np.asarray(direction, dtype=float)
    perp = np.array([-d[1], d[0]])
    ids = list(polygons)
    far = {r: float((polygons[r] @ d).max()) for r in ids}
    lat = {r: ((polygons[r] @ perp).min(), (polygons[r] @ perp).max()) for r in ids}
    cen = {r: _centroid(polygons[r]) for r in ids}
    top = max(far.values())
    out = set()
    for r in ids:
        if far[r] <= top - margin:
            continue
        lo, hi = lat[r]
        beaten = any(q != r and lo <= cen[q] @ perp <= hi and cen[q] @ d > cen[r] @ d + 1e-9 for q in ids)
        if not beaten:
            out.add(r)
    return out


def _centroid(polygon: np.ndarray) -> np.ndarray:
    from ....scenes.description import Room

    return Room(0, "", polygon).centroid


def orientation_answers(polygons: dict[int, np.ndarray], room_types: dict[int, str], yaw: float, *,
                        margin: float = 5.0, blurry: Iterable[str] = BLURRY_ROOM_TYPES) -> list[RoomAnswer]:
    """"The <type> farthest to your left" and co. for an agent facing ``yaw``: exactly one room of
    the type among the extreme rooms of that side, ≥ 2 rooms of the type in the window, and the
    target not a corner room (not extreme along either perpendicular side)."""
    blurry = set(blurry)
    per_type: dict[str, int] = {}
    for r in polygons:
        per_type[room_types[r]] = per_type.get(room_types[r], 0) + 1
    extremes = {s: extreme_rooms(polygons, side_vector(s, yaw), margin) for s in SIDES}
    out = []
    for side, rooms in extremes.items():
        by_type: dict[str, list[int]] = {}
        for r in rooms:
            by_type.setdefault(room_types[r], []).append(r)
        for rtype, hits in by_type.items():
            if rtype in blurry or per_type[rtype] < 2 or len(hits) != 1:
                continue
            room = hits[0]
            if any(room in extremes[p] for p in _PERPENDICULAR[side]):
                continue
            out.append(RoomAnswer("orientation", room, rtype, {"side": side}))
    return out


def instance_answers(visible: Iterable[int], objects: dict[int, dict]) -> list[tuple[int, tuple[str, ...]]]:
    """Objects seen in the video that a short description singles out among all seen objects.

    ``objects`` maps instance id → ``{"category", "attributes", "room_type"}``. Returns
    ``(instance_id, keys)`` with ``keys`` the fewest of ``()``, ``("color",)``, ``("room",)``,
    ``("color", "room")`` that make category + those facts unique among the visible objects.
    """
    visible = sorted(set(visible))

    def sig(i: int, keys: tuple[str, ...]) -> tuple:
        o = objects[i]
        color = (o.get("attributes") or {}).get("color")
        return (o["category"],) + tuple(color if k == "color" else o.get("room_type") for k in keys)

    out = []
    for i in visible:
        for keys in ((), ("color",), ("room",), ("color", "room")):
            if "color" in keys and not (objects[i].get("attributes") or {}).get("color"):
                continue
            if "room" in keys and not objects[i].get("room_type"):
                continue
            mine = sig(i, keys)
            if sum(sig(j, keys) == mine for j in visible) == 1:
                out.append((i, keys))
                break
    return out


# ------------------------------------------------------------------------------------------
# The generator


@register_task(TASK, config="config.yaml")
class VideoContextualizedTask(TaskGenerator):
    """VCN-Bench style episodes; needs ``ctx.renderer`` to record the prior video.

    Tour videos go to ``<assets_dir>/tours/<scene_id>.npz`` (``assets_dir``: the constructor argument,
    else ``<output_dir>/assets`` when the dataset writer sets ``output_dir``, else the cache's
    ``assets/``); ``info["video"]`` stores that path relative to the dataset root (the folder
    holding ``assets/``).
    """

    #: VCN-Bench: success near a goal object's viewpoints (App. C.1), RSR, goal identification
    scoring = TaskScoring(goal_region="object_viewpoints", room_success=True, frame_selection=True)
    needs_renderer = True
    Params = VCNParams

    def __init__(self, config=None, assets_dir: str | Path | None = None):
        super().__init__(config)
        self.assets_dir = Path(assets_dir) if assets_dir is not None else None

    def _assets(self) -> Path:
        """``assets_dir``, else ``<output_dir>/assets`` (set by ``generate_dataset``), else the cache's."""
        if self.assets_dir is not None:
            return self.assets_dir
        output_dir = getattr(self, "output_dir", None)
        if output_dir is not None:
            return Path(output_dir) / "assets"
        from ....paths import cache_dir

        return cache_dir() / "assets"

    # ------------------------------------------------------------------ per scene
    def record_tour(self, ctx: SceneContext, rng: np.random.Generator) -> tuple[Tour, np.ndarray, dict[str, str]]:
        """Plan, render and store the scene's tour; returns (tour, frames, stored paths)."""
        if ctx.renderer is None:
            raise ConfigError(f"task '{TASK}' needs a renderer to record the prior video of scene "
                              f"'{ctx.scene_id}' (run it through 'vlnverse data generate', which injects the "
                              f"simulator's camera, or pass renderer= to load_scene_context)", field="renderer",
                              expected="a callable (x, y, yaw, pitch) -> RGB image")
        p = self.params
        rooms = [r.room_id for r in ctx.desc.rooms]
        start_room = int(rooms[rng.integers(len(rooms))]) if rooms else None
        try:
            tour = plan_tour(ctx.desc, ctx.planner, ctx.maps.navigable, start_room=start_room,
                             spacing=p.tour_spacing, spin_frames=p.spin_frames)
        except ConfigError:  # the drawn room has no navigable cell: start anywhere
            tour = plan_tour(ctx.desc, ctx.planner, ctx.maps.navigable, spacing=p.tour_spacing,
                             spin_frames=p.spin_frames)
        frames = render_tour(tour, ctx.renderer, pitch=math.radians(p.camera_pitch_deg), size=p.frame_size)
        stored = save_prior_video(self._assets() / "tours" / f"{ctx.scene_id}.npz", frames, tour, preview=p.preview)
        return tour, frames, stored

    def generate(self, ctx: SceneContext, rng: np.random.Generator, n: int, split: str) -> list[Episode]:
        """``n`` episodes over one scene's tour (fewer only if the tour admits fewer distinct ones)."""
        p = self.params
        tour, _, stored = self.record_tour(ctx, rng)
        video_rel = f"{self._assets().name}/tours/{Path(stored['video']).name}"
        scene = _SceneFacts.build(ctx, tour, p)
        episodes: list[Episode] = []
        seen_tags: set[tuple] = set()
        kinds = list(p.kinds)
        counts = dict.fromkeys(kinds, 0)
        quotas = kind_quotas(n, {k: float(p.kind_mix.get(k, 1.0 if not p.kind_mix else 0.0)) for k in kinds})
        kinds = [k for k in kinds if quotas[k] > 0] or kinds
        budget = n * p.tries_per_episode
        for attempt in range(budget):
            if len(episodes) >= n:
                break
            if attempt == budget // 2:  # lift the quotas: fill up with the kinds the scene allows
                quotas = dict.fromkeys(kinds, n)
            open_kinds = [k for k in kinds if counts[k] < quotas[k]] or kinds
            kind = open_kinds[attempt % len(open_kinds)]
            start, end = sliding_windows(tour, rng, 1, min_frames=p.window_min_frames,
                                         max_frames=p.window_max_frames, length_step=p.window_step)[0]
            built = self._episode(ctx, scene, tour, (start, end), kind, rng, len(episodes), split, seen_tags)
            if built is not None:
                built.info["video"] = video_rel
                episodes.append(built)
                counts[kind] += 1
        self.achieved_mix = {k: counts[k] for k in kinds}
        if not episodes and n > 0:
            raise NoNavigableSpaceError(f"scene '{ctx.scene_id}': no unambiguous {TASK} episode in "
                                        f"{n * p.tries_per_episode} tries (kinds {kinds})")
        if len(episodes) < n:
            mix = ", ".join(f"{k} {c}" for k, c in self.achieved_mix.items())
            return self.partial(ctx, episodes, n, f"the tour's windows admit no further distinct unambiguous "
                                f"episode in {budget} tries (achieved mix: {mix})")
        return episodes

    # ------------------------------------------------------------------ per episode
    def _episode(self, ctx, scene: "_SceneFacts", tour: Tour, window: tuple[int, int], kind: str,
                 rng: np.random.Generator, index: int, split: str, seen_tags: set) -> Episode | None:
        s, e = window
        visits = [v for v in room_visits(tour.room_ids[s:e]) if v.room_id in scene.room_types]
        start_xy, start_yaw = tour.positions[e - 1], float(tour.yaws[e - 1])
        start_room = int(tour.room_ids[e - 1])
        if not visits or start_room < 0:
            return None
        window_rooms = list(dict.fromkeys(v.room_id for v in visits))
        blurry = self.params.blurry_room_types
        if kind == "instance":
            visible = np.flatnonzero(scene.visibility[s:e].any(axis=0))
            answers = instance_answers([scene.object_ids[i] for i in visible], scene.objects)
            if not answers:
                return None
            obj_id, keys = answers[int(rng.integers(len(answers)))]
            return self._instance_episode(ctx, scene, window, obj_id, keys, start_xy, start_yaw, rng, index,
                                          split, seen_tags)
        if scene.room_types[start_room] in blurry:  # R2O episodes start in a clearly bounded room
            return None
        if kind == "count":
            answers = _one_subclass(count_answers(visits, scene.room_types, blurry)
                                    + count_entry_answers(visits, scene.room_types, start_room, blurry), rng)
        elif kind == "order":
            answers = _one_subclass(order_answers(visits, scene.room_types, blurry)
                                    + order_single_room_answers(visits, scene.room_types, blurry), rng)
        elif kind == "distance":
            # Reference: where you stand, or a room of the window whose type is unique in it.
            typed = {}
            for r in window_rooms:
                typed.setdefault(scene.room_types[r], []).append(r)
            anchors = [rs[0] for t, rs in typed.items() if len(rs) == 1 and t not in blurry]
            references = ["start"] + anchors
            reference = references[int(rng.integers(len(references)))]
            origin = start_xy if reference == "start" else scene.centroids[reference]
            field_ = ctx.planner.distance_field(origin)
            dist = {r: float(field_.distance(scene.centroids[r][None])[0]) for r in window_rooms if r != reference}
            answers = distance_answers(list(dist), scene.room_types, dist, margin=self.params.distance_margin,
                                       blurry=blurry, reference=reference)
        else:
            polys = {r: scene.polygons[r] for r in window_rooms}
            answers = orientation_answers(polys, scene.room_types, start_yaw, margin=self.params.orientation_margin,
                                          blurry=blurry)
        answers = [a for a in answers if a.room_id != start_room and scene.objects_in_room.get(a.room_id)]
        if not answers:
            return None
        answer = answers[int(rng.integers(len(answers)))]
        return self._room_episode(ctx, scene, window, answer, start_xy, start_yaw, rng, index, split, seen_tags)

    def _goals(self, ctx, scene: "_SceneFacts", instance_ids: list[int]) -> list[Goal]:
        goals = []
        for i in instance_ids:
            obj = ctx.desc.object_by_id(i)
            half = 0.5 * float(max(obj.size[0], obj.size[1]))
            goals.append(Goal(position=ctx.to_3d(obj.position[:2]), radius=self.config.success_distance + half,
                              object_id=int(i), room_id=scene.object_room.get(i), category=obj.category))
        return goals

    def _finish(self, ctx, window, kind: str, start_xy, start_yaw, goals: list[Goal], instruction, rng, index, split,
                info: dict, tag: tuple, seen_tags: set) -> Episode | None:
        if tag in seen_tags:
            return None
        # Geodesic to the goals' navigable viewpoints (the definition success uses, App. C.1), not
        # to the object centres (which would add the offset from the nearest navigable cell).
        nearest = nearest_viewpoint(ctx, start_xy, goals)
        if nearest is None:
            return None
        end_xy, geodesic = nearest
        if not (self.config.min_geodesic <= geodesic <= self.config.max_geodesic):
            return None
        boxes = [ctx.desc.object_by_id(int(g.object_id)) for g in goals]
        best = int(np.argmin([footprint_distance(o.bounds_min, o.bounds_max, end_xy[None])[0] for o in boxes]))
        path = ctx.planner.shortest_path(start_xy, end_xy)
        seen_tags.add(tag)
        info.update({"kind": kind, "window": [int(window[0]), int(window[1])],
                     "target_object_id": goals[best].object_id,
                     "target_object_ids": [g.object_id for g in goals],
                     "success_distance": float(self.config.success_distance),
                     "max_steps": int(self.config.max_steps),
                     "template_ids": list(instruction.template_ids),
                     "mentions": [m.to_dict() for m in instruction.mentions]})
        episode = self.make_episode(ctx, index, split, path, [instruction.to_instruction()], goals=goals,
                                    geodesic_distance=geodesic, start_yaw=start_yaw, info=info)
        episode.start_position = ctx.to_3d(start_xy)
        return episode

    def _instance_episode(self, ctx, scene, window, obj_id, keys, start_xy, start_yaw, rng, index, split,
                          seen_tags) -> Episode | None:
        from ...instructions.phrases import object_phrase, room_phrase

        s, e = window
        col = scene.column[obj_id]
        frames = np.flatnonzero(scene.visibility[s:e, col])
        ref = scene.view.object_ref(obj_id)
        slots = {"target": object_phrase(ref, scene.lexicon, attribute_keys=tuple(k for k in keys if k == "color"),
                                         variant=int(rng.integers(4)))}
        if ref.room is not None:
            slots["room"] = room_phrase(ref.room, scene.lexicon, contains=ref)
        part_needs_room = "room" in keys
        instruction = scene.render("instance", slots, rng, require={"room"} if part_needs_room else set())
        if instruction is None:
            return None
        info = {"target_room_id": scene.object_room.get(obj_id), "target_frames": frames.tolist(),
                "answer": {"instance_id": int(obj_id), "description_keys": list(keys)}}
        return self._finish(ctx, window, "instance", start_xy, start_yaw, self._goals(ctx, scene, [obj_id]),
                            instruction, rng, index, split, info, ("instance", obj_id, keys), seen_tags)

    def _room_episode(self, ctx, scene, window, answer: RoomAnswer, start_xy, start_yaw, rng, index, split,
                      seen_tags) -> Episode | None:
        from ...instructions.grammar import ordinal_word
        from ...instructions.phrases import Phrase, category_phrase, room_phrase
        from ...instructions.types import RoomRef

        s, e = window
        categories = sorted({scene.objects[i]["category"] for i in scene.objects_in_room[answer.room_id]})
        category = categories[int(rng.integers(len(categories)))]
        instances = [i for i in scene.objects_in_room[answer.room_id] if scene.objects[i]["category"] == category]
        variant = int(rng.integers(4))
        room_variant = int(rng.integers(3))
        target = RoomRef(answer.room_id, answer.room_type)
        slots: dict[str, Any] = {
            "object": category_phrase(category, scene.lexicon, determiner="the", variant=variant),
            "a_object": category_phrase(category, scene.lexicon, determiner="a", variant=variant),
            "room_noun": room_phrase(target, scene.lexicon, determiner="", variant=room_variant),
        }
        d = answer.details
        part = answer.kind
        if answer.kind == "count":
            slots["ordinal"] = Phrase(ordinal_word(d["ordinal"]))
            if d.get("subclass") == "entry":
                part = "count_entry"
        elif answer.kind == "order":
            anchor = RoomRef(d["anchor_room_id"], scene.room_types[d["anchor_room_id"]])
            slots["anchor"] = room_phrase(anchor, scene.lexicon, variant=int(rng.integers(3)))
            part = f"order_{d['relation']}"
            if d.get("subclass") == "single_room":
                part = f"order_single_{d['relation']}"
                rooms = {answer.room_type: answer.room_id, scene.room_types[d["distractor_room_id"]]:
                         d["distractor_room_id"]}
                for slot, rtype in zip(("choice_a", "choice_b"), d["choices"]):
                    slots[slot] = room_phrase(RoomRef(rooms[rtype], rtype), scene.lexicon, variant=0)
        elif answer.kind == "distance":
            slots["extreme"] = Phrase("closest to" if d["extreme"] == "closest" else "farthest from")
            if d["reference"] != "start":
                anchor = RoomRef(d["reference"], scene.room_types[d["reference"]])
                slots["anchor"] = room_phrase(anchor, scene.lexicon, variant=int(rng.integers(3)))
                part = "distance_from"
        else:
            slots["side"] = Phrase(SIDES[d["side"]])
        instruction = scene.render(part, slots, rng)
        if instruction is None:
            return None
        frames = np.flatnonzero(scene.room_ids[s:e] == answer.room_id)
        info = {"target_room_id": int(answer.room_id), "target_frames": frames.tolist(),
                "answer": {"room_id": int(answer.room_id), "room_type": answer.room_type,
                           "category": category, **to_jsonable(d)}}
        tag = (answer.kind, answer.room_id, category, part, tuple(sorted((k, str(v)) for k, v in d.items()
                                                                           if k != "distances")))
        return self._finish(ctx, window, answer.kind, start_xy, start_yaw, self._goals(ctx, scene, instances),
                            instruction, rng, index, split, info, tag, seen_tags)


@dataclass
class _SceneFacts:
    """Per-scene lookups shared by every episode of a tour."""

    room_types: dict[int, str]
    polygons: dict[int, np.ndarray]
    centroids: dict[int, np.ndarray]
    objects: dict[int, dict]
    object_room: dict[int, int | None]
    objects_in_room: dict[int, list[int]]
    object_ids: list[int]
    column: dict[int, int]
    visibility: np.ndarray  # (frames, objects) bool
    room_ids: np.ndarray
    view: Any
    lexicon: Any
    verifier: Any
    styles: list[str]

    @classmethod
    def build(cls, ctx: SceneContext, tour: Tour, p: VCNParams) -> "_SceneFacts":
        from ...instructions.graph import SceneGraphView
        from ...instructions.lexicon import Lexicon
        from ...instructions.verifier import Verifier

        desc = ctx.desc
        view = SceneGraphView(ctx.maps.scene_graph)
        room_types = {r.room_id: r.room_type for r in desc.rooms}
        objects = {}
        for i, o in view.objects.items():
            rid = view.room_of(i)
            objects[i] = {"category": o["category"], "attributes": o.get("attributes") or {},
                          "room_type": room_types.get(rid) if rid is not None else None}
        object_room = {i: view.room_of(i) for i in objects}
        in_room: dict[int, list[int]] = {}
        for i, rid in object_room.items():
            if rid is not None:
                in_room.setdefault(rid, []).append(i)
        ids = sorted(objects)
        bmin = np.array([desc.object_by_id(i).bounds_min for i in ids]).reshape(-1, 3)
        bmax = np.array([desc.object_by_id(i).bounds_max for i in ids]).reshape(-1, 3)
        blocked, origin = view_blocking_grid(desc, ctx.planner.resolution, ctx.body.camera_height)
        vis = object_visibility(blocked, origin, ctx.planner.resolution, tour.positions, bmin, bmax,
                                max_range=p.visibility_range, yaws=tour.yaws, hfov_deg=p.hfov_deg)
        lexicon = Lexicon(view.categories(), view.room_types())
        return cls(room_types=room_types, polygons={r.room_id: r.polygon for r in desc.rooms},
                   centroids={r.room_id: r.centroid for r in desc.rooms}, objects=objects, object_room=object_room,
                   objects_in_room=in_room, object_ids=ids, column={i: c for c, i in enumerate(ids)},
                   visibility=vis, room_ids=tour.room_ids, view=view, lexicon=lexicon,
                   verifier=Verifier(view, lexicon), styles=list(p.styles))

    def render(self, part: str, slots: dict, rng: np.random.Generator, require: set[str] = frozenset()):
        """A verified ``GroundedInstruction`` from a random template of ``part`` (``None`` if none fits)."""
        from ...instructions.grammar import capitalize_first
        from ...instructions.phrases import Phrase, render
        from ...instructions.synthesizer import TEMPLATES
        from ...instructions.types import GroundedInstruction

        tset = TEMPLATES.get(TASK)
        style = self.styles[int(rng.integers(len(self.styles)))]
        choices = [t for t in tset.select(part, style, set(slots)) if require <= t.slots]
        if not choices:
            choices = [t for t in tset.select(part, None, set(slots)) if require <= t.slots]
        if not choices:
            return None
        tmpl = choices[int(rng.integers(len(choices)))]
        phrase = render(tmpl.text, slots)
        text = capitalize_first(phrase.text.rstrip())
        if text[-1:] not in ".!?":
            text += "."
        instruction = GroundedInstruction(text, list(phrase.mentions), style=tmpl.style, task_type=TASK,
                                          template_ids=(tmpl.template_id,))
        problems = self.verifier.check(instruction)
        if problems:
            from ...instructions.synthesizer import InstructionError

            raise InstructionError(f"{TASK}: template {tmpl.template_id} produced an unverified instruction "
                                 f"{text!r}: {problems}")
        return instruction
