"""Dialogue navigation: coarse-grained episodes plus an oracle the agent may query.

``info["oracle"]`` stores what the default ``SceneGraphOracle`` needs (target instance, room,
goal point, relation); evaluation rebuilds it with
``vlnverse.tasks.dialogue_oracle.oracle_for_episode(episode, ctx)``. Config ``params`` as for
coarse-grained plus ``oracle`` (``scene_graph`` or ``llm``) and, for ``llm``, ``oracle_url`` and
``oracle_model``.
"""
from __future__ import annotations

from dataclasses import dataclass

from ....core.errors import ConfigError
from ....core.io import redact_url
from ...base import SceneContext, register_task
from ..coarse_grained.generator import CoarseGrained, CoarseGrainedParams
from ..goals import GoalObject, target_info


@dataclass
class DialogueParams(CoarseGrainedParams):
    """``params`` of ``config.yaml`` (beside this module): the coarse-grained ones plus the ``oracle`` that
    answers the agent's questions (``scene_graph`` or ``llm`` at ``oracle_url``)."""

    oracle: str = "scene_graph"
    oracle_url: str | None = None
    oracle_model: str | None = None

    def validate(self) -> None:
        """A known oracle; the LLM oracle needs an endpoint."""
        super().validate()
        if self.oracle not in ("scene_graph", "llm"):
            raise ConfigError(f"unknown oracle '{self.oracle}'", field="oracle", expected="scene_graph or llm")
        if self.oracle == "llm" and not self.oracle_url:
            raise ConfigError("the llm oracle needs an endpoint", field="oracle_url",
                              expected="an OpenAI-compatible base URL")


@register_task("dialogue", config="config.yaml")
class Dialogue(CoarseGrained):
    """Coarse-grained targets, dialogue-style instructions, oracle data in ``info["oracle"]``."""

    template_task = "dialogue"
    Params = DialogueParams

    def extra_info(self, ctx: SceneContext, goal: GoalObject) -> dict:
        """The oracle's settings and the target data it answers from."""
        params = self.params
        oracle = {"type": params.oracle, "target": target_info(goal)}
        if oracle["type"] == "llm":
            oracle["url"] = redact_url(params.oracle_url)  # episodes never hold a key (VLNVERSE_LLM_API_KEY)
            oracle["model"] = params.oracle_model
        return {"oracle": oracle}
