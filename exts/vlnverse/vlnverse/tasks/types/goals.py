"""Shared pieces of the goal-object task types: target choice, goal points, start sampling.

A goal object is reached by standing at its *goal point*: the navigable cell nearest to the
object's footprint (within ``max_offset`` metres of it). Starts are drawn from the exact
distance field to the goal point, inside the config's geodesic range and, when asked, in a
different room than the goal.
"""
from __future__ import annotations

import math

import os
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from ...core.config import short
from ...core.errors import ConfigError, NoNavigableSpaceError
from ..episode import Goal
from ..instructions import Describer, GroundedInstruction, TargetFacts, Verifier
from ..instructions.llm import ChatClient, LLMSynthesizer

#: Categories never used as navigation targets.
NON_TARGETS = frozenset({"wall", "floor", "ceiling", "door_frame", "door", "window", "rug"})


@dataclass(frozen=True)
class GoalObject:
    """A reachable target: its facts, the navigable goal point and its room."""

    facts: TargetFacts
    goal_xy: np.ndarray

    @property
    def instance_id(self) -> int:
        """Instance id of the target object."""
        return self.facts.target.instance_id

    @property
    def room_id(self) -> int | None:
        """Room id of the target (None when in no room)."""
        return self.facts.room.room_id if self.facts.room else None


def footprint_distance(bounds_min, bounds_max, points: np.ndarray) -> np.ndarray:
    """Distance (N,) from (N, 2) points to an object's axis-aligned xy footprint (0 inside)."""
    lo, hi = np.asarray(bounds_min, float)[:2], np.asarray(bounds_max, float)[:2]
    d = np.maximum(np.maximum(lo - points, points - hi), 0.0)
    return np.hypot(d[:, 0], d[:, 1])


def goal_point(ctx, obj: dict, max_offset: float = 1.0) -> np.ndarray | None:
    """The navigable point nearest an object's footprint, or None if none lies within ``max_offset``.

    Searches navigable cells in a window around the footprint; vectorised over the window.
    """
    planner = ctx.planner
    lo = np.asarray(obj["bounds_min"], float)[:2] - max_offset
    hi = np.asarray(obj["bounds_max"], float)[:2] + max_offset
    rc = planner.map.world_to_cell(np.array([lo, hi]))
    r0, c0 = np.maximum(rc.min(axis=0), 0)
    r1, c1 = np.minimum(rc.max(axis=0) + 1, planner.shape)
    if r0 >= r1 or c0 >= c1:
        return None
    rows, cols = np.nonzero(planner.free[r0:r1, c0:c1])
    if len(rows) == 0:
        return None
    centres = planner.cell_centres(rows + r0, cols + c0)
    dist = footprint_distance(obj["bounds_min"], obj["bounds_max"], centres)
    k = int(np.argmin(dist))
    return centres[k] if dist[k] <= max_offset else None


def goal_objects(ctx, describer: Describer, *, require_unique: bool = True, max_offset: float = 1.0,
                 categories: Iterable[str] | None = None) -> list[GoalObject]:
    """Every object usable as a goal: in a room, a goal point within ``max_offset``, and (with
    ``require_unique``) a description that singles it out in its room. Ordered by instance id."""
    wanted = set(categories) if categories is not None else None
    out = []
    for iid, obj in sorted(describer.view.objects.items()):
        if obj["category"] in NON_TARGETS or (wanted is not None and obj["category"] not in wanted):
            continue
        if describer.view.room_of(iid) is None:
            continue
        facts = describer.describe_target(iid)
        if require_unique and not facts.unique:
            continue
        point = goal_point(ctx, obj, max_offset)
        if point is not None:
            out.append(GoalObject(facts, point))
    return out


def sample_start(ctx, rng: np.random.Generator, goal_xy: np.ndarray, min_geodesic: float, max_geodesic: float,
                 require_room_change: bool) -> tuple[np.ndarray, float] | None:
    """A navigable start whose geodesic distance to ``goal_xy`` is in range (None if there is none)."""
    field = ctx.planner.distance_field(goal_xy)
    ok = (field.grid >= min_geodesic) & (field.grid <= max_geodesic)
    if require_room_change:
        room_map = ctx.room_map
        gr, gc = field.goal_cell
        ok &= (room_map >= 0) & (room_map != room_map[gr, gc])
    cand = np.flatnonzero(ok)
    if len(cand) == 0:
        return None
    s = int(cand[rng.integers(len(cand))])
    r, c = divmod(s, ok.shape[1])
    return ctx.planner.cell_centres(r, c), float(field.grid[r, c])


def target_goal(ctx, goal: GoalObject, radius: float) -> Goal:
    """The episode ``Goal`` record of a goal object."""
    t = goal.facts.target
    return Goal(position=ctx.to_3d(goal.goal_xy), radius=float(radius), object_id=int(t.instance_id),
                room_id=goal.room_id, category=t.category)


def target_info(goal: GoalObject) -> dict:
    """JSON-ready record of a target's grounding (for ``Episode.info``)."""
    facts = goal.facts
    t = facts.target
    info = {"instance_id": int(t.instance_id), "category": t.category, "attributes": t.attribute_dict,
            "room_id": goal.room_id, "room_type": facts.room.room_type if facts.room else None,
            "position": [float(v) for v in t.position], "goal_point": [float(v) for v in goal.goal_xy]}
    if facts.relation is not None:
        info["relation"] = {"relation": facts.relation.relation, "anchor_id": int(facts.relation.anchor.instance_id),
                            "anchor_category": facts.relation.anchor.category}
    return info


def pipeline(ctx) -> tuple[Describer, Verifier]:
    """The scene's Describer and Verifier (built once per context and cached on it)."""
    cached = getattr(ctx, "_instruction_pipeline", None)
    if cached is None:
        cached = (Describer.from_context(ctx), Verifier(ctx.maps.scene_graph))
        try:
            object.__setattr__(ctx, "_instruction_pipeline", cached)
        except (AttributeError, TypeError):
            pass
    return cached


def no_episodes_error(ctx, task: str, reason: str) -> NoNavigableSpaceError:
    """The error raised when a scene cannot host any episode of ``task``."""
    return NoNavigableSpaceError(f"scene '{ctx.scene_id}' ({ctx.scene_path}): no {task} episode possible: {reason}")


#: Allowed ranges of numeric ``params`` (any other numeric parameter must be finite). Counts are
#: capped so that a typo cannot make generation run for days; distances are metres.
PARAM_RANGES: dict[str, tuple[float, float]] = {
    "instructions_per_episode": (1, 20), "max_attempts_per_episode": (1, 1000),
    "landmark_radius": (0.1, 20.0), "goal_offset": (0.0, 10.0),
    "min_subgoals": (1, 10), "max_subgoals": (1, 10),
    "leg_min_geodesic": (0.0, 200.0), "leg_max_geodesic": (0.0, 200.0),
    "pitch_limit_deg": (0.0, 90.0),
}


def check_params(config, schema: dict[str, type | tuple[type, ...]]) -> None:
    """Reject unknown or mistyped ``params`` keys of a task config with a ``ConfigError``."""
    for key, value in (config.params or {}).items():
        if key not in schema:
            raise ConfigError(f"unknown parameter for task '{config.task_type}'", field=f"params.{key}",
                              expected=f"one of {sorted(schema)}")
        expected = schema[key]
        ok = isinstance(value, expected) and not (isinstance(value, bool) and bool not in
                                                  (expected if isinstance(expected, tuple) else (expected,)))
        if not ok:
            names = "/".join(t.__name__ for t in (expected if isinstance(expected, tuple) else (expected,)))
            raise ConfigError(f"got {short(value)}", field=f"params.{key}", expected=f"a {names}")
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            lo, hi = PARAM_RANGES.get(key, (-math.inf, math.inf))
            if not (math.isfinite(value) and lo <= value <= hi):
                span = f"in [{lo:g}, {hi:g}]" if math.isfinite(lo) and math.isfinite(hi) else "finite"
                raise ConfigError(f"got {short(value)}", field=f"params.{key}", expected=f"a number {span}")


#: ``params`` keys enabling the optional LLM rewrite of instructions.
LLM_PARAMS = {"llm_url": str, "llm_model": str}


def llm_rewriter(config, verifier: Verifier) -> LLMSynthesizer | None:
    """The LLM rewrite stage when ``params.llm_url`` is set (API key from ``VLNVERSE_LLM_API_KEY``)."""
    url = (config.params or {}).get("llm_url")
    if not url:
        return None
    client = ChatClient(url, model=str(config.params.get("llm_model", "default")),
                        api_key=os.environ.get("VLNVERSE_LLM_API_KEY"))
    return LLMSynthesizer(client, verifier)


def maybe_rewrite(rewriter: LLMSynthesizer | None, instruction: GroundedInstruction, rng) -> GroundedInstruction:
    """``instruction`` rewritten by the LLM stage if configured and verified, else unchanged."""
    if rewriter is None:
        return instruction
    return rewriter.rewrite(instruction, seed=int(rng.integers(2 ** 31)))
