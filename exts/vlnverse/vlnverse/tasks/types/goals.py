"""Shared pieces of the goal-object task types: target choice, goal points, start sampling.

A goal object is reached by standing at its *goal point*: the navigable cell nearest to the
object's footprint (within ``max_offset`` metres of it). Starts are drawn from the exact
distance field to the goal point, inside the config's geodesic range and, when asked, in a
different room than the goal.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterable

import numpy as np

from ...core.errors import NoNavigableSpaceError
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


@dataclass
class LLMParams:
    """``params`` enabling the optional LLM rewrite of instructions (shared by several task types)."""

    llm_url: str | None = None
    llm_model: str = "default"


def llm_rewriter(params: LLMParams, verifier: Verifier) -> LLMSynthesizer | None:
    """The LLM rewrite stage when ``params.llm_url`` is set (API key from ``VLNVERSE_LLM_API_KEY``)."""
    url = params.llm_url
    if not url:
        return None
    client = ChatClient(url, model=str(params.llm_model),
                        api_key=os.environ.get("VLNVERSE_LLM_API_KEY"))
    return LLMSynthesizer(client, verifier)


def maybe_rewrite(rewriter: LLMSynthesizer | None, instruction: GroundedInstruction, rng) -> GroundedInstruction:
    """``instruction`` rewritten by the LLM stage if configured and verified, else unchanged."""
    if rewriter is None:
        return instruction
    return rewriter.rewrite(instruction, seed=int(rng.integers(2 ** 31)))
