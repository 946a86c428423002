"""Object-goal (zero-grained) navigation: a category name; success near any instance of it.

Every reachable instance of the chosen category is a ``Goal`` (its navigable goal point,
``object_id``, ``room_id``, ``category``); the start lies within the geodesic range of the
*nearest* instance and the reference path leads there. Config ``params``: ``goal_offset`` (1.0 m),
``categories`` (optional allow-list), ``max_attempts_per_episode`` (20).
"""
from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np

from ....core.config import require
from ....core.params import param
from ...base import SceneContext, TaskGenerator, register_task
from ...episode import Episode
from ...instructions import Synthesizer, synthesize_verified
from ..goals import GoalObject, goal_objects, no_episodes_error, pipeline, target_goal


@dataclass
class ObjectGoalParams:
    """``params`` of ``config.yaml`` (beside this module): the goal point's largest offset from its object
    (m), the allowed goal ``categories`` (all when unset) and the sampling budget per episode."""

    goal_offset: float = param(1.0, low=0.0, high=10.0)
    categories: list[str] | None = None
    max_attempts_per_episode: int = param(20, low=1, high=1000)

    def validate(self) -> None:
        """A positive offset; a non-empty category list when given."""
        require(self.goal_offset > 0, "goal_offset", f"got {self.goal_offset}", "a distance > 0 m")
        require(self.categories is None or len(self.categories) > 0, "categories", "empty",
                "a non-empty list of categories, or unset for all")


@register_task("object_goal", config="config.yaml")
class ObjectGoal(TaskGenerator):
    """Category-only episodes whose goals are all instances of the category."""

    instruction_optional = True

    Params = ObjectGoalParams

    def instances_by_category(self, ctx: SceneContext) -> dict[str, list[GoalObject]]:
        """Reachable instances (goal point within ``goal_offset``) grouped by category."""
        describer, _ = pipeline(ctx)
        allowed = self.params.categories
        groups: dict[str, list[GoalObject]] = defaultdict(list)
        for goal in goal_objects(ctx, describer, require_unique=False, categories=allowed,
                                 max_offset=self.params.goal_offset):
            groups[goal.facts.target.category].append(goal)
        return dict(sorted(groups.items()))

    def generate(self, ctx: SceneContext, rng: np.random.Generator, n: int, split: str) -> list[Episode]:
        """``n`` episodes on categories drawn uniformly from those present in the scene."""
        cfg = self.config
        groups = self.instances_by_category(ctx)
        if not groups:
            raise no_episodes_error(ctx, self.name, "no reachable object of an allowed category")
        categories = list(groups)
        _, verifier = pipeline(ctx)
        synth = Synthesizer("object_goal", lexicon=verifier.lexicon)
        planner = ctx.planner
        episodes: list[Episode] = []
        for _ in self.attempts(n, episodes):
            category = categories[int(rng.integers(len(categories)))]
            instances = groups[category]
            fields = np.stack([planner.distance_field(g.goal_xy).grid for g in instances])
            nearest = fields.min(axis=0)
            ok = (nearest >= cfg.min_geodesic) & (nearest <= cfg.max_geodesic)
            if rng.random() < cfg.room_change_fraction:
                goal_rooms = {g.room_id for g in instances}
                ok &= (ctx.room_map >= 0) & ~np.isin(ctx.room_map, list(goal_rooms))
            cand = np.flatnonzero(ok)
            if len(cand) == 0:
                continue
            cell = int(cand[rng.integers(len(cand))])
            r, c = divmod(cell, ok.shape[1])
            start_xy = planner.cell_centres(r, c)
            which = int(np.argmin(fields[:, r, c]))
            path = planner.shortest_path(start_xy, instances[which].goal_xy)
            grounded = synthesize_verified(lambda: synth.category(category, rng, count=len(instances)), verifier)
            info = {"category": category, "instances": [g.instance_id for g in instances],
                    "nearest_instance": instances[which].instance_id, "template_ids": [list(grounded.template_ids)]}
            episodes.append(self.make_episode(
                ctx, len(episodes), split, path, [grounded.to_instruction()],
                goals=[target_goal(ctx, g, cfg.success_distance) for g in instances],
                geodesic_distance=float(nearest[r, c]), start_yaw=float(rng.uniform(-math.pi, math.pi)), info=info))
        if len(episodes) < n:
            return self.partial(ctx, episodes, n, f"no further start with geodesic distance in "
                                f"[{cfg.min_geodesic}, {cfg.max_geodesic}] m to a category within the attempt budget")
        return episodes
