"""Plug-in parameters: ranges are field metadata of each plug-in's ``Params`` dataclass."""
from __future__ import annotations

import dataclasses

import pytest

from vlnverse.core.errors import ConfigError
from vlnverse.core.params import param, param_range, parse_params


@dataclasses.dataclass
class _Params:
    steps: int = param(3, low=1, high=5)
    gain: float = 0.5
    label: str = "x"


def test_values_are_checked_against_the_fields_own_ranges():
    assert parse_params(_Params, {"steps": 5}, owner="thing 't'") == _Params(5, 0.5, "x")
    assert param_range(dataclasses.fields(_Params)[0]) == (1, 5)
    with pytest.raises(ConfigError, match=r"^f.yaml: params.steps: got 6 \(expected a number in \[1, 5\]\)"):
        parse_params(_Params, {"steps": 6}, owner="thing 't'", file="f.yaml")
    with pytest.raises(ConfigError, match=r"^params.gain: got inf \(expected a number finite\)"):
        parse_params(_Params, {"gain": float("inf")}, owner="thing 't'")
    with pytest.raises(ConfigError, match=r"^x.y.colour: unknown field\(s\) \['colour'\] for thing 't'"):
        parse_params(_Params, {"colour": 1}, owner="thing 't'", prefix="x.y")


def test_task_and_collision_mode_params_declare_their_ranges():
    """The shipped task types and collision modes carry their limits in their ``Params``; no
    name-keyed table decides for them (a plug-in's field of the same name is its own)."""
    from vlnverse.run.modes import MODES, check_mode_params
    from vlnverse.tasks import base
    from vlnverse.tasks.base import TASKS, TaskConfig, load_task_types

    load_task_types()
    assert not hasattr(base, "PARAM_RANGES")
    fine = TASKS.get("fine_grained")
    ranges = {f.name: param_range(f) for f in dataclasses.fields(fine.Params)}
    assert ranges["instructions_per_episode"] == (1, 20) and ranges["max_attempts_per_episode"] == (1, 1000)
    with pytest.raises(ConfigError, match="params.instructions_per_episode: got 21"):
        fine.parse_params(TaskConfig(task_type="fine_grained", params={"instructions_per_episode": 21}))

    @dataclasses.dataclass
    class PluginParams:
        goal_offset: float = 50.0  # the name of a built-in's bounded field, unbounded here

    class Plugin(base.TaskGenerator):
        Params = PluginParams

    assert Plugin.parse_params(TaskConfig(task_type="plugin", params={"goal_offset": 40.0})).goal_offset == 40.0
    assert param_range(dataclasses.fields(MODES.get("strict").Params)[-1])[1] == 10.0
    check_mode_params("telhop", {"resolve_tolerance": 0.05, "forward_step": 0.5})
    with pytest.raises(ConfigError, match=r"^mode_params.strict.displacement_threshold: got 0"):
        check_mode_params("strict", {"displacement_threshold": 0})
    with pytest.raises(ConfigError, match=r"^mode_params.graph.displacement_threshold: unknown"):
        check_mode_params("graph", {"displacement_threshold": 0.2})


def test_every_built_in_agent_declares_params_matching_its_constructor():
    """Every agent of the evaluation layer (the ``policy`` agent is the learning layer's) declares
    ``Params`` whose fields and defaults are its constructors' keyword parameters (along its
    bases); ``make_agent`` checks against them."""
    import inspect

    from vlnverse.run.agents import AGENTS, VLN_MME, make_agent

    names = ["random", "forward", "oracle", "wall_bumper", *AGENTS.tagged(VLN_MME), "mv_dualvln", "roam", "som"]
    for name in names:
        cls = AGENTS.get(name)
        own: dict = {}
        for klass in reversed(cls.__mro__):
            if "__init__" in vars(klass):
                own.update({k: p.default for k, p in inspect.signature(klass.__init__).parameters.items()
                            if p.kind is p.KEYWORD_ONLY and k not in ("seed", "model")})
        declared = {f.name: f.default for f in dataclasses.fields(cls.Params)}
        assert declared == own, name
    with pytest.raises(ConfigError, match=r"^agent.params.stop_prob: got 1.5 \(expected a number in \[0, 1\]\)"):
        make_agent("random", {"stop_prob": 1.5})
    with pytest.raises(ConfigError, match=r"^agent.params.hop: unknown field"):
        make_agent("forward", {"hop": 1.0})
    with pytest.raises(ConfigError, match=r"^agent.params.views: got 'eyes'"):
        make_agent("navgpt", {"views": "eyes"})
    with pytest.raises(ConfigError, match=r"^agent.params.video_frames: got 0"):
        make_agent("mv_dualvln", {"video_frames": 0})
    assert make_agent("oracle", {"turn_angle_deg": 20.0}).patience == 40


def test_the_chat_models_declare_params_matching_their_constructors():
    """Each chat model's ``Params`` names its constructor's keyword parameters with the same
    defaults, and ``make_model`` refuses what they refuse before anything is built."""
    import inspect

    from vlnverse.run.chat_models import ChatModel, OllamaModel, OpenAIChatModel, ScriptedModel
    from vlnverse.run.models import make_model

    def own(cls):
        return {k: p.default for k, p in inspect.signature(cls.__init__).parameters.items()
                if p.kind is p.KEYWORD_ONLY}

    def declared(cls):
        return {f.name: f.default if f.default is not dataclasses.MISSING else
                (f.default_factory() if f.default_factory is not dataclasses.MISSING else inspect.Parameter.empty)
                for f in dataclasses.fields(cls.Params)}

    base = {k: v for k, v in own(ChatModel).items() if k != "model"}
    assert declared(ChatModel) == base
    assert declared(OpenAIChatModel) == {**base, **own(OpenAIChatModel)}
    assert declared(OllamaModel) == {**base, **own(OpenAIChatModel), **own(OllamaModel), "api_key_env": None}
    assert declared(ScriptedModel) == {**base, **own(ScriptedModel), "answers": ["Action: STOP"]}
    with pytest.raises(ConfigError, match=r"^model.params.max_concurrency: got 0"):
        make_model("scripted", {"max_concurrency": 0})
    with pytest.raises(ConfigError, match=r"^model.params.api: got 'grpc'"):
        make_model("ollama", {"model": "m", "api": "grpc"})
    with pytest.raises(ConfigError, match=r"^model.params.bogus: unknown field"):
        make_model("openai", {"model": "m", "bogus": 1})
