"""What the Kit entry point (:mod:`vlnverse.extension`) does, without importing Omniverse at module
level: the Isaac Sim extensions it needs, the error it logs without them, the Isaac backend it
registers and the study panel it opens."""
from __future__ import annotations

#: Kit extensions vlnverse needs, each as alternatives (the Isaac Sim 5 name first, then the 4.x one).
REQUIRED_EXTENSIONS: tuple[tuple[str, ...], ...] = (
    ("omni.usd",),
    ("omni.physx",),
    ("isaacsim.core.api", "omni.isaac.core"),
    ("omni.ui",),
)
#: Backend registered on startup: name → ``"module:factory"`` (``vlnverse.sim.api.BACKENDS``).
ISAAC_BACKEND = ("isaac", "vlnverse.sim.isaac:IsaacSimulator")


def missing_extensions(is_enabled) -> list[str]:
    """Names of required extensions (``" or "``-joined alternatives) for which ``is_enabled(name)`` is false."""
    return [" or ".join(group) for group in REQUIRED_EXTENSIONS if not any(is_enabled(name) for name in group)]


def missing_message(ext_id: str, missing: list[str]) -> str:
    """The one-line error logged when required extensions are not enabled."""
    return (f"{ext_id}: cannot start, required Isaac Sim extension(s) not enabled: {', '.join(missing)}; "
            "run inside Isaac Sim or enable them (e.g. --enable omni.physx)")


def register_isaac_backend() -> None:
    """Register the Isaac Sim backend's import string in the simulator backend registry."""
    from ..sim.api import BACKENDS

    name, target = ISAAC_BACKEND
    BACKENDS.register(name, overwrite=True)(target)


def open_study_panel():
    """The in-GUI study panel (``omni.ui``; imported only here)."""
    from .panel import StudyPanelWindow

    return StudyPanelWindow()
