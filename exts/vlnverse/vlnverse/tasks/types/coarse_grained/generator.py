"""Coarse-grained (REVERIE/SOON-style) navigation: reach a described target object.

Each episode has one target object; its goal is the navigable point nearest the object
(``object_id``, ``room_id``, ``category`` on the ``Goal``) and it carries one instruction per
style (formal, natural, casual), all checked by the Verifier. Config ``params``:
``styles`` (default all three), ``goal_offset`` (max distance goal point ↔ object, m, 1.0),
``max_attempts_per_episode`` (20), ``llm_url``/``llm_model`` (optional LLM rewrite, kept only
when verified), ``instruction_version`` (1: today's templates, the default; 2: more verbs,
connectives and clause orders per style, ``templates_v2``; coarse-grained only) and
``language_split`` (version 2: a formal-to-natural/casual shift; every episode gets the formal
description only, and each val_unseen episode is also written with the other styles of
``styles`` to ``val_unseen_language``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ...base import SceneContext, TaskGenerator, register_task
from ...episode import LANGUAGE_SPLIT, LANGUAGE_TWIN_SUFFIX, Episode
from ....core.config import require
from ....core.params import param
from ....core.errors import ConfigError
from ...instructions import STYLES, TEMPLATES, Synthesizer, synthesize_verified
from ..goals import (GoalObject, LLMParams, goal_objects, llm_rewriter, maybe_rewrite,
                    no_episodes_error, pipeline, sample_start, target_goal, target_info)


@dataclass
class CoarseGrainedParams(LLMParams):
    """``params`` of ``config.yaml`` (beside this module): instruction ``styles``, how far the goal point
    may lie from its object (``goal_offset``, m) and the sampling budget per episode."""

    styles: list[str] = field(default_factory=lambda: list(STYLES))
    goal_offset: float = param(1.0, low=0.0, high=10.0)
    max_attempts_per_episode: int = param(20, low=1, high=1000)
    instruction_version: int = param(1, low=1, high=2)
    language_split: bool = False

    def validate(self) -> None:
        """A positive goal offset (the budget: its field's range); a language split needs version 2
        and the formal style beside another."""
        require(self.goal_offset > 0, "goal_offset", f"got {self.goal_offset}", "a distance > 0 m")
        require(not (self.language_split and self.instruction_version != 2), "language_split",
                f"set with instruction_version {self.instruction_version}", "instruction_version 2")
        require(not self.language_split or ("formal" in self.styles and len(set(self.styles)) > 1), "styles",
                f"{self.styles} with language_split", "formal and at least one other style")


@register_task("coarse_grained", config="config.yaml")
class CoarseGrained(TaskGenerator):
    """Goal-object episodes with a formal, a natural and a casual description of the target."""

    #: The optional LLM rewrite stage (set per ``generate`` call from ``params.llm_url``).
    _rewriter = None
    Params = CoarseGrainedParams

    def __init__(self, config=None):
        super().__init__(config)
        if self.params.instruction_version != 1 and self.template_task != "coarse_grained":
            raise ConfigError(f"got {self.params.instruction_version} for task '{self.template_task}'",
                              field="params.instruction_version", expected="1 (version 2 is coarse-grained only)")
        known = TEMPLATES.get(self.template_task).styles()
        bad = [s for s in self.styles if s not in known]
        if bad or not self.styles:
            raise ConfigError(f"styles {bad or '[]'} not available for task '{self.template_task}'",
                              field="params.styles", expected=f"a non-empty list from {known}")

    #: Template set used for the instructions (subclasses reuse the episode logic with their own).
    template_task = "coarse_grained"

    @property
    def styles(self) -> tuple[str, ...]:
        """Instruction styles generated per episode (``params.styles``; formal alone with
        ``params.language_split``)."""
        return ("formal",) if self.params.language_split else tuple(self.params.styles)

    def goal_candidates(self, ctx: SceneContext) -> list[GoalObject]:
        """Targets that are in a room, reachable, and uniquely describable."""
        describer, _ = pipeline(ctx)
        return goal_objects(ctx, describer, max_offset=self.params.goal_offset)

    def generate(self, ctx: SceneContext, rng: np.random.Generator, n: int, split: str) -> list[Episode]:
        """``n`` episodes on random uniquely-describable targets of the scene."""
        candidates = self.goal_candidates(ctx)
        if not candidates:
            raise no_episodes_error(ctx, self.name, "no reachable, uniquely describable target object")
        _, verifier = pipeline(ctx)
        templates = None
        if self.params.instruction_version == 2:
            from .templates_v2 import template_set

            templates = template_set()
        synth = Synthesizer(self.template_task, lexicon=verifier.lexicon, templates=templates)
        self._rewriter = llm_rewriter(self.params, verifier)
        episodes: list[Episode] = []
        twins: list[Episode] = []      # val_unseen_language (params.language_split)
        self.rejected_targets: set[int] = set()  # targets finish_episode ruled out for good
        for _ in self.attempts(n, episodes):
            if not candidates:
                break
            goal = candidates[int(rng.integers(len(candidates)))]
            episode = self.episode_for_goal(ctx, rng, goal, len(episodes), split, synth, verifier)
            if episode is not None:
                episodes.append(episode)
                if self.params.language_split and split == "val_unseen":
                    twins.append(self.language_twin(episode, goal, rng, synth, verifier))
            elif goal.instance_id in self.rejected_targets:
                candidates = [c for c in candidates if c.instance_id not in self.rejected_targets]
        if len(episodes) < n:
            return self.partial(ctx, episodes, n, self.shortfall_reason(candidates)) + twins
        return episodes + twins

    def language_twin(self, episode: Episode, goal: GoalObject, rng: np.random.Generator, synth: Synthesizer,
                      verifier) -> Episode:
        """``episode`` described in the held-out styles (every style of ``params.styles`` but
        formal), as ``<id>-language`` in split ``val_unseen_language``."""
        import dataclasses

        held = [s for s in self.params.styles if s != "formal"]
        grounded = [synthesize_verified(lambda s=style: synth.goal(goal.facts, s, rng), verifier) for style in held]
        info = dict(episode.info, template_ids=[list(g.template_ids) for g in grounded])
        return dataclasses.replace(episode, episode_id=episode.episode_id + LANGUAGE_TWIN_SUFFIX, split=LANGUAGE_SPLIT,
                                   instructions=[g.to_instruction() for g in grounded], info=info)

    def shortfall_reason(self, candidates: list[GoalObject]) -> str:
        """Why fewer episodes than asked were found (for the dataset summary)."""
        rejected = len(getattr(self, "rejected_targets", ()))
        why = (f"no start within geodesic distance [{self.config.min_geodesic}, {self.config.max_geodesic}] m "
               f"of the {len(candidates)} remaining target(s) in the attempt budget")
        return why + (f"; {rejected} target(s) rejected by {self.name}" if rejected else "")

    def episode_for_goal(self, ctx: SceneContext, rng: np.random.Generator, goal: GoalObject, index: int,
                         split: str, synth: Synthesizer, verifier) -> Episode | None:
        """One episode towards ``goal`` (None when no start lies in the geodesic range)."""
        cfg = self.config
        change = bool(rng.random() < cfg.room_change_fraction)
        start = sample_start(ctx, rng, goal.goal_xy, cfg.min_geodesic, cfg.max_geodesic, change)
        if start is None:
            return None
        start_xy, geodesic = start
        path = ctx.planner.shortest_path(start_xy, goal.goal_xy)
        grounded = [maybe_rewrite(self._rewriter, synthesize_verified(lambda s=style: synth.goal(goal.facts, s, rng),
                                                                      verifier), rng)
                    for style in self.styles]
        info = {"target": target_info(goal), "template_ids": [list(g.template_ids) for g in grounded]}
        info.update(self.extra_info(ctx, goal))
        episode = self.make_episode(ctx, index, split, path, [g.to_instruction() for g in grounded],
                                    goals=[target_goal(ctx, goal, cfg.success_distance)],
                                    geodesic_distance=geodesic, start_yaw=float(rng.uniform(-math.pi, math.pi)),
                                    info=info)
        return self.finish_episode(ctx, rng, goal, episode)

    def extra_info(self, ctx: SceneContext, goal: GoalObject) -> dict:
        """Task-specific ``info`` fields (none for coarse-grained)."""
        return {}

    def finish_episode(self, ctx: SceneContext, rng: np.random.Generator, goal: GoalObject, episode: Episode) -> Episode:
        """Hook for subclasses to attach assets (images) to a finished episode."""
        return episode
