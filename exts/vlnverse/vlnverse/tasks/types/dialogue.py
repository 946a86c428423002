"""Dialogue navigation: coarse-grained episodes plus an oracle the agent may query.

``info["oracle"]`` stores what the default ``SceneGraphOracle`` needs (target instance, room,
goal point, relation); evaluation rebuilds it with
``vlnverse.tasks.dialogue_oracle.oracle_for_episode(episode, ctx)``. Config ``params`` as for
coarse-grained plus ``oracle`` (``scene_graph`` or ``llm``) and, for ``llm``, ``oracle_url`` and
``oracle_model``.
"""
from __future__ import annotations

from ...core.errors import ConfigError
from ..base import SceneContext, register_task
from .coarse_grained import CoarseGrained
from .goals import GoalObject, target_info


@register_task("dialogue")
class Dialogue(CoarseGrained):
    """Coarse-grained targets, dialogue-style instructions, oracle data in ``info["oracle"]``."""

    template_task = "dialogue"
    PARAMS = {**CoarseGrained.PARAMS, "oracle": str, "oracle_url": str, "oracle_model": str}

    def __init__(self, config=None):
        super().__init__(config)
        kind = self.config.params.get("oracle", "scene_graph")
        if kind not in ("scene_graph", "llm"):
            raise ConfigError(f"unknown oracle '{kind}'", field="params.oracle", expected="scene_graph or llm")
        if kind == "llm" and not self.config.params.get("oracle_url"):
            raise ConfigError("the llm oracle needs an endpoint", field="params.oracle_url",
                              expected="an OpenAI-compatible base URL")

    def extra_info(self, ctx: SceneContext, goal: GoalObject) -> dict:
        """The oracle's settings and the target data it answers from."""
        params = self.config.params
        oracle = {"type": str(params.get("oracle", "scene_graph")), "target": target_info(goal)}
        if oracle["type"] == "llm":
            oracle["url"] = params.get("oracle_url")
            oracle["model"] = params.get("oracle_model")
        return {"oracle": oracle}
