"""The ``POLICIES`` registry, importable without torch: ``TrainConfig`` checks names against it.

Built-in policies register lazily by module (imported, with torch, on first ``get``), as the eval
``AGENTS`` registry does; a plug-in registers its own ``VLNPolicy`` subclass on import::

    from vlnverse.learn.policies import VLNPolicy, register_policy

    @register_policy("my_policy")
    class MyPolicy(VLNPolicy): ...

and is trained with ``vlnverse train CONFIG plugins=[my_pkg.policies]`` (or a ``.py`` path).
"""
from __future__ import annotations

from typing import Any

from ..core.registry import Registry

#: Policy name → ``VLNPolicy`` subclass (``vlnverse.learn.policies``).
POLICIES: Registry[type[Any]] = Registry("policy")
POLICIES.register_lazy("seq2seq", "vlnverse.learn.policies")
POLICIES.register_lazy("cma", "vlnverse.learn.policies")
POLICIES.register_lazy("rdp", "vlnverse.learn.rdp")
POLICIES.register_lazy("vlnbert", "vlnverse.learn.vlnbert")
POLICIES.register_lazy("hnr", "vlnverse.learn.hnr")
POLICIES.register_lazy("gama", "vlnverse.learn.gama")
# policies with their own training loop (``run_training``)
POLICIES.register_lazy("graph_nf", "vlnverse.learn.graph_policy")
POLICIES.register_lazy("room_classifier", "vlnverse.learn.room_classifier")
#: built-in policies with their own training loop (single-task: no ``tasks`` mix)
OWN_LOOP_POLICIES = ("graph_nf", "room_classifier")
#: policies that act between navigation-graph viewpoints (``collision_mode: graph``)
GRAPH_POLICIES = ("graph_nf",)


def register_policy(name: str):
    """Class decorator adding a ``VLNPolicy`` subclass to ``POLICIES`` under ``name`` (also set as its ``name``)."""

    def decorator(cls: type) -> type:
        cls.name = name
        return POLICIES.register(name)(cls)

    return decorator
