"""The ``POLICIES`` registry, importable without torch: ``TrainConfig`` checks names against it.

Built-in policies register lazily by module (imported, with torch, on first ``get``), as the eval
``AGENTS`` registry does; a plug-in registers its own ``VLNPolicy`` subclass on import::

    from vlnverse.learn.policies import VLNPolicy, register_policy

    @register_policy("my_policy")
    class MyPolicy(VLNPolicy): ...

and is trained with ``vlnverse train CONFIG plugins=[my_pkg.policies]`` (or a ``.py`` path).

Capabilities a config check needs without importing the policy are registry tags: ``OWN_LOOP``
(the class trains itself with ``run_training(cfg, ...)`` instead of the shared trainer; one task
only) and ``GRAPH`` (it acts between navigation-graph viewpoints: ``collision_mode: graph``). A
plug-in declares them: ``@register_policy("my_policy", tags=(OWN_LOOP,))``.
"""
from __future__ import annotations

from typing import Any

from ..core.registry import Registry

#: tag: the policy class trains itself (``run_training``), not through the shared trainer
OWN_LOOP = "own_loop"
#: tag: the policy acts between navigation-graph viewpoints (``collision_mode: graph``)
GRAPH = "graph"

#: Policy name → ``VLNPolicy`` subclass (``vlnverse.learn.policies``).
POLICIES: Registry[type[Any]] = Registry("policy")
POLICIES.register_lazy("seq2seq", "vlnverse.learn.policies")
POLICIES.register_lazy("cma", "vlnverse.learn.policies")
POLICIES.register_lazy("rdp", "vlnverse.learn.rdp")
POLICIES.register_lazy("vlnbert", "vlnverse.learn.vlnbert")
POLICIES.register_lazy("hnr", "vlnverse.learn.hnr")
POLICIES.register_lazy("gama", "vlnverse.learn.gama")
POLICIES.register_lazy("graph_nf", "vlnverse.learn.graph_policy", tags=(OWN_LOOP, GRAPH))
POLICIES.register_lazy("room_classifier", "vlnverse.learn.room_classifier", tags=(OWN_LOOP,))


def register_policy(name: str, *, tags: tuple[str, ...] = ()):
    """Class decorator adding a ``VLNPolicy`` subclass (or, tagged ``OWN_LOOP``, a class with its
    own ``run_training``) to ``POLICIES`` under ``name`` (also set as its ``name``) with ``tags``."""

    def decorator(cls: type) -> type:
        cls.name = name
        return POLICIES.register(name, tags=tags)(cls)

    return decorator
