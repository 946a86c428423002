"""The ``MODELS`` registry: what an agent wraps to decide (e.g. a multimodal LLM client).

An eval config names a model and its parameters; the runner builds it with :func:`make_model`
and hands it to the agent's constructor as ``model=``. A new model is one decorated class::

    @register_model("my_mllm")
    class MyMLLM:
        def __init__(self, endpoint: str): ...
"""
from __future__ import annotations

from typing import Any

from ..core.errors import ConfigError
from ..core.params import parse_params
from ..core.registry import Registry

#: Name → model class (or factory).
MODELS: Registry[Any] = Registry("model")


def register_model(name: str):
    """Class decorator adding a model to ``MODELS`` under ``name``; returns the class unchanged."""
    return MODELS.register(name)


def make_model(name: str, params: dict[str, Any] | None = None) -> Any:
    """Instantiate the registered model ``name`` (``UnknownNameError`` lists the names); a model
    class's ``Params`` (``vlnverse.core.params``) checks ``params`` first."""
    factory = MODELS.get(name)
    declared = getattr(factory, "Params", None)  # a plug-in factory may be a plain function: no Params
    if declared is not None:  # unknown keys, types and ranges, before anything is built
        parse_params(declared, params, owner=f"model '{name}'", prefix="model.params")
    try:
        return factory(**dict(params or {}))
    except (TypeError, ValueError) as exc:
        raise ConfigError(str(exc), field="model.params") from None


# Models of modules above this one register themselves on import; they are named here and imported
# on first use (so this registry never imports its plug-ins: no import circle, no torch for API models).
for _name in ("openai", "ollama", "scripted"):
    MODELS.register_lazy(_name, "vlnverse.run.chat_models")
MODELS.register_lazy("transformers", "vlnverse.learn.vlm")   # torch: the learning layer
