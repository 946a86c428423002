"""Fine-grained (R2R-style) navigation: step-by-step instructions along the reference path.

The Describer lists the rooms the path crosses, landmarks within 1.5 m of it, the turns at its
waypoints (relative to the random start heading) and the end point; the Synthesizer turns them
into second-person clauses in the natural style. Config ``params``: ``instructions_per_episode``
(3, as in R2R), ``landmark_radius`` (1.5 m), ``max_attempts_per_episode`` (20), ``llm_url``/``llm_model``
(optional LLM rewrite, kept only when verified), ``instruction_version`` (1: today's language, the
default the shipped data and checkpoints use; 2: references told apart by attribute, relation or
ordinal, rooms by contents, distances and more varied clauses, ``instructions.route_v2``) and
``language_split`` (version 2: train and val_seen use template family 0; each val_unseen episode is
also written, with family-1 wording, to ``val_unseen_language``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ....core.config import require
from ....core.params import param
from ...base import SceneContext, TaskGenerator, register_task
from ...episode import LANGUAGE_SPLIT, LANGUAGE_TWIN_SUFFIX, Episode
from ...instructions import Describer, Synthesizer, synthesize_verified
from ..goals import LLMParams, llm_rewriter, maybe_rewrite, pipeline


@dataclass
class FineGrainedParams(LLMParams):
    """``params`` of ``config.yaml`` (beside this module): distinct instructions per episode, the radius
    (m) within which landmarks are named, and the sampling budget per episode."""

    instructions_per_episode: int = param(3, low=1, high=20)
    landmark_radius: float = param(1.5, low=0.1, high=20.0)
    max_attempts_per_episode: int = param(20, low=1, high=1000)
    instruction_version: int = param(1, low=1, high=2)
    language_split: bool = False

    def validate(self) -> None:
        """A positive landmark radius (the counts: their fields' ranges); version 2 without the LLM
        rewrite (its references and route claims would not survive a rewrite)."""
        require(self.landmark_radius > 0, "landmark_radius", f"got {self.landmark_radius}", "a distance > 0 m")
        require(self.instruction_version in (1, 2), "instruction_version", f"got {self.instruction_version!r}",
                "1 or 2")
        require(not (self.instruction_version == 2 and self.llm_url), "llm_url",
                "set with instruction_version 2", "no LLM rewrite with the version-2 language")
        require(not (self.language_split and self.instruction_version != 2), "language_split",
                f"set with instruction_version {self.instruction_version}", "instruction_version 2")


#: why a fine-grained ``generate`` made fewer episodes than asked
NO_ROUTE = "sampled paths had no describable rooms or landmarks within the attempt budget"


def route_info(facts, grounded: list) -> dict:
    """An episode's ``info`` of its route facts and the templates of its instructions."""
    return {"rooms": [r.room_id for r in facts.rooms], "room_types": [r.room_type for r in facts.rooms],
            "landmarks": [lm.instance_id for lm in facts.landmarks],
            "template_ids": [list(g.template_ids) for g in grounded]}


@register_task("fine_grained", config="config.yaml")
class FineGrained(TaskGenerator):
    """Start/goal pairs with step-by-step instructions naming rooms, landmarks and turns."""

    Params = FineGrainedParams

    def generate(self, ctx: SceneContext, rng: np.random.Generator, n: int, split: str) -> list[Episode]:
        """``n`` episodes with ``params.instructions_per_episode`` distinct instructions each."""
        params = self.params
        if params.instruction_version == 2:
            return self._generate_v2(ctx, rng, n, split)
        _, verifier = pipeline(ctx)
        describer = Describer.from_context(ctx, landmark_radius=params.landmark_radius)
        synth = Synthesizer("fine_grained", lexicon=verifier.lexicon)
        per_episode = params.instructions_per_episode
        rewriter = llm_rewriter(params, verifier)
        episodes: list[Episode] = []
        for _ in self.attempts(n, episodes):
            sampled = self._described_path(ctx, rng, describer.describe_route)
            if sampled is None:
                continue
            pair, path, start_yaw, facts = sampled
            texts: dict[str, object] = {}
            for _ in range(per_episode * 4):
                grounded = maybe_rewrite(rewriter, synthesize_verified(lambda: synth.route(facts, rng), verifier), rng)
                texts.setdefault(grounded.text, grounded)
                if len(texts) == per_episode:
                    break
            grounded_list = list(texts.values())
            info = route_info(facts, grounded_list)
            episodes.append(self.make_episode(ctx, len(episodes), split, path,
                                              [g.to_instruction() for g in grounded_list],
                                              geodesic_distance=pair.geodesic_distance, start_yaw=start_yaw,
                                              info=info))
        return episodes if len(episodes) == n else self.partial(ctx, episodes, n, NO_ROUTE)

    def _described_path(self, ctx: SceneContext, rng: np.random.Generator, describe):
        """(pair, path, start yaw, route facts) of a sampled path, its facts from ``describe(dense,
        waypoints, start_yaw)``; None when the route passes no room or landmark to describe."""
        pair, path = self.sample_path(ctx, rng)
        start_yaw = float(rng.uniform(-math.pi, math.pi))
        facts = describe(path.dense, path.waypoints, start_yaw)
        return (pair, path, start_yaw, facts) if facts.rooms or facts.landmarks else None

    def _generate_v2(self, ctx: SceneContext, rng: np.random.Generator, n: int, split: str) -> list[Episode]:
        """Version-2 language (``instructions.route_v2.RouteLanguageV2``); see the module docstring."""
        from ...instructions.route_v2 import RouteLanguageV2

        params = self.params
        language = RouteLanguageV2.from_context(ctx, landmark_radius=params.landmark_radius)
        shift = params.language_split
        families = (0,) if shift else (0, 1)
        episodes: list[Episode] = []
        shifted: list[Episode] = []
        for _ in self.attempts(n, episodes):
            sampled = self._described_path(ctx, rng, language.describe)
            if sampled is None:
                continue
            pair, path, start_yaw, facts = sampled
            grounded, info = language.instructions(facts, path.dense, rng, params.instructions_per_episode, families)
            if not grounded:
                continue
            other = None
            if shift and split == "val_unseen":
                other = language.instructions(facts, path.dense, rng, params.instructions_per_episode, (1,))
                if not other[0]:
                    continue
            info.update(route_info(facts, grounded))
            episodes.append(self.make_episode(ctx, len(episodes), split, path, [g.to_instruction() for g in grounded],
                                              geodesic_distance=pair.geodesic_distance, start_yaw=start_yaw,
                                              info=info))
            if other is not None:
                texts, other_info = other
                other_info.update({k: info[k] for k in ("rooms", "room_types", "landmarks")},
                                  template_ids=[list(g.template_ids) for g in texts])
                twin = self.make_episode(ctx, len(episodes) - 1, LANGUAGE_SPLIT, path,
                                         [g.to_instruction() for g in texts], geodesic_distance=pair.geodesic_distance,
                                         start_yaw=start_yaw, info=other_info)
                twin.episode_id += LANGUAGE_TWIN_SUFFIX   # the same path as its val_unseen twin, other wording
                shifted.append(twin)
        return (episodes if len(episodes) == n else self.partial(ctx, episodes, n, NO_ROUTE)) + shifted

    def reworded(self, ctx: SceneContext, episode: Episode, rng: np.random.Generator) -> list[Episode]:
        """``episode`` (made on ``ctx``'s scene) with its frozen path, start and goals re-instructed in
        the version-2 language (``params.instruction_version`` 2, families as ``_generate_v2``'s),
        followed, with ``language_split`` and a val_unseen episode, by its ``val_unseen_language``
        twin in family 1; ``[]`` when the path has nothing to describe or no verified wording."""
        from ...instructions.route_v2 import RouteLanguageV2
        from ...path_geometry import resample_polyline

        params = self.params
        require(params.instruction_version == 2, "instruction_version", f"got {params.instruction_version}",
                "2 (re-instructing a path in the version-2 language)")
        language = RouteLanguageV2.from_context(ctx, landmark_radius=params.landmark_radius)
        waypoints = np.asarray(episode.reference_path, dtype=float)[:, :2]
        dense = resample_polyline(waypoints, 0.1)  # as ``PathPlanner.shortest_path`` resamples
        facts = language.describe(dense, waypoints, episode.start_yaw)
        if not (facts.rooms or facts.landmarks):
            return []
        shift = params.language_split
        grounded, info = language.instructions(facts, dense, rng, params.instructions_per_episode,
                                               (0,) if shift else (0, 1))
        if not grounded:
            return []
        info.update(route_info(facts, grounded))
        out = [replace(episode, instructions=[g.to_instruction() for g in grounded], info=info)]
        if shift and episode.split == "val_unseen":
            texts, other = language.instructions(facts, dense, rng, params.instructions_per_episode, (1,))
            if not texts:
                return []
            other.update({k: info[k] for k in ("rooms", "room_types", "landmarks")},
                         template_ids=[list(g.template_ids) for g in texts])
            out.append(replace(episode, episode_id=episode.episode_id + LANGUAGE_TWIN_SUFFIX,
                                           split=LANGUAGE_SPLIT, instructions=[g.to_instruction() for g in texts],
                                           info=other))
        return out
