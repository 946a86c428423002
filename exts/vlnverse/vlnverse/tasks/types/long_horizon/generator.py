"""Long-horizon navigation: 2–3 coarse sub-goals in distinct rooms, visited in order.

``goals`` are the sub-goals in visiting order; ``reference_path`` is the concatenation of the
per-leg shortest paths, stored separately in ``info["subgoal_paths"]`` with their lengths
(``info["subgoal_lengths"]``, summing to the reference path's length) and geodesic distances
(``info["subgoal_geodesics"]``, summing to ``geodesic_distance``). One instruction chains the
sub-goal descriptions ("First …, then …, and finally …"). Config ``params``:
``min_subgoals``/``max_subgoals`` (2/3), ``leg_min_geodesic``/``leg_max_geodesic`` (2/15 m),
``goal_offset`` (1.0 m), ``max_attempts_per_episode`` (30), ``llm_url``/``llm_model`` (optional
LLM rewrite, kept only when verified).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ....core.config import require
from ....core.params import param
from ...base import SceneContext, TaskGenerator, register_task
from ...scoring import TaskScoring
from ...episode import Episode
from ...instructions import Synthesizer, synthesize_verified
from ...pathing import PlannedPath, polyline_length
from ..goals import (GoalObject, LLMParams, goal_objects, llm_rewriter, maybe_rewrite,
                    no_episodes_error, pipeline, sample_start, target_goal, target_info)


def concatenate_paths(paths: list[PlannedPath]) -> PlannedPath:
    """One path through the legs in order (shared end/start points kept once)."""
    waypoints = np.concatenate([paths[0].waypoints] + [p.waypoints[1:] for p in paths[1:]])
    dense = np.concatenate([paths[0].dense] + [p.dense[1:] for p in paths[1:]])
    cells = np.concatenate([paths[0].cells] + [p.cells[1:] for p in paths[1:]])
    return PlannedPath(waypoints=waypoints, dense=dense, length=float(sum(p.length for p in paths)),
                       grid_cost=float(sum(p.grid_cost for p in paths)), cells=cells)


@dataclass
class LongHorizonParams(LLMParams):
    """``params`` of ``config.yaml`` (beside this module): 2–3 sub-goals per episode, each leg's geodesic
    range (m), the goal point's largest offset from its object (m), the sampling budget."""

    min_subgoals: int = 2
    max_subgoals: int = 3
    leg_min_geodesic: float = param(2.0, low=0.0, high=200.0)
    leg_max_geodesic: float = param(15.0, low=0.0, high=200.0)
    goal_offset: float = param(1.0, low=0.0, high=10.0)
    max_attempts_per_episode: int = param(30, low=1, high=1000)

    def validate(self) -> None:
        """2 <= min_subgoals <= max_subgoals <= 3 and an ordered, positive leg range."""
        require(2 <= self.min_subgoals <= self.max_subgoals <= 3, "min_subgoals/max_subgoals",
                f"got min_subgoals={self.min_subgoals}, max_subgoals={self.max_subgoals}",
                "2 <= min_subgoals <= max_subgoals <= 3")
        require(0 <= self.leg_min_geodesic < self.leg_max_geodesic, "leg_min_geodesic/leg_max_geodesic",
                f"got [{self.leg_min_geodesic}, {self.leg_max_geodesic}]", "0 <= min < max (m)")
        require(self.goal_offset > 0, "goal_offset", f"got {self.goal_offset}", "a distance > 0 m")


def _named_categories(goal: GoalObject) -> set[str]:
    """Object categories a sub-goal's description names: its target and its relation's anchor."""
    facts = goal.facts
    return {facts.target.category} | ({facts.relation.anchor.category} if facts.relation is not None else set())


@register_task("long_horizon", config="config.yaml")
class LongHorizon(TaskGenerator):
    """Chains of coarse-grained sub-goals with per-leg reference paths."""

    #: success = every sub-goal reached in order and a STOP near the last (SR_n per sub-goal)
    scoring = TaskScoring(ordered_goals=True)

    #: The optional LLM rewrite stage (set per ``generate`` call from ``params.llm_url``).
    _rewriter = None
    Params = LongHorizonParams

    def generate(self, ctx: SceneContext, rng: np.random.Generator, n: int, split: str) -> list[Episode]:
        """``n`` episodes of 2–3 ordered sub-goals in pairwise distinct rooms."""
        params = self.params
        describer, verifier = pipeline(ctx)
        candidates = goal_objects(ctx, describer, max_offset=params.goal_offset)
        rooms = {g.room_id for g in candidates}
        lo, hi = params.min_subgoals, params.max_subgoals
        if len(rooms) < lo:
            raise no_episodes_error(ctx, self.name, f"targets in {len(rooms)} room(s), need {lo} distinct rooms")
        synth = Synthesizer("long_horizon", lexicon=verifier.lexicon)
        self._rewriter = llm_rewriter(params, verifier)
        episodes: list[Episode] = []
        for _ in self.attempts(n, episodes):
            count = int(rng.integers(lo, min(hi, len(rooms)) + 1))
            chain = self._sample_chain(ctx, rng, candidates, count)
            if chain is None:
                continue
            episodes.append(self._episode(ctx, rng, chain, len(episodes), split, synth, verifier))
        if len(episodes) < n:
            return self.partial(ctx, episodes, n, "no further sub-goal chain in distinct rooms within the attempt budget")
        return episodes

    def _sample_chain(self, ctx: SceneContext, rng, candidates: list[GoalObject], count: int):
        """Start point and ``count`` sub-goals in distinct rooms with every leg in the leg range;
        no object category (target or relation anchor) is named by two sub-goals, so a landmark
        never repeats within the chain's instruction."""
        params, cfg = self.params, self.config
        leg_lo, leg_hi = params.leg_min_geodesic, params.leg_max_geodesic
        first = candidates[int(rng.integers(len(candidates)))]
        start = sample_start(ctx, rng, first.goal_xy, leg_lo, leg_hi,
                             bool(rng.random() < cfg.room_change_fraction))
        if start is None:
            return None
        chain, legs = [first], [start[1]]
        for _ in range(count - 1):
            prev = chain[-1]
            used = {g.room_id for g in chain}
            named = set().union(*(_named_categories(g) for g in chain))
            field = ctx.planner.distance_field(prev.goal_xy)
            options = [g for g in candidates if g.room_id not in used and not (_named_categories(g) & named)]
            if not options:
                return None
            dist = field.distance(np.array([g.goal_xy for g in options]))
            ok = np.flatnonzero((dist >= leg_lo) & (dist <= leg_hi))
            if len(ok) == 0:
                return None
            k = int(ok[rng.integers(len(ok))])
            chain.append(options[k])
            legs.append(float(dist[k]))
        total = sum(legs)
        if not (cfg.min_geodesic <= total <= cfg.max_geodesic * count):
            return None
        return start[0], chain, legs

    def _episode(self, ctx: SceneContext, rng, sampled, index: int, split: str, synth: Synthesizer, verifier) -> Episode:
        start_xy, chain, legs = sampled
        points = [start_xy] + [g.goal_xy for g in chain]
        paths = [ctx.planner.shortest_path(a, b) for a, b in zip(points[:-1], points[1:])]
        full = concatenate_paths(paths)
        grounded = maybe_rewrite(self._rewriter, synthesize_verified(lambda: synth.chain([g.facts for g in chain], rng),
                                                                     verifier), rng)
        info = {"subgoals": [target_info(g) for g in chain],
                "subgoal_paths": [[ctx.to_3d(p) for p in path.waypoints] for path in paths],
                "subgoal_lengths": [float(polyline_length(path.waypoints)) for path in paths],
                "subgoal_geodesics": [float(d) for d in legs],
                "template_ids": [list(grounded.template_ids)]}
        return self.make_episode(ctx, index, split, full, [grounded.to_instruction()],
                                 goals=[target_goal(ctx, g, self.config.success_distance) for g in chain],
                                 geodesic_distance=float(sum(legs)), start_yaw=float(rng.uniform(-math.pi, math.pi)),
                                 info=info)
