"""The Omniverse Kit / Isaac Sim extension entry point (``omni.ext.IExt``).

Only Kit imports this module: ``exts/vlnverse/config/extension.toml`` lists it as a
``[[python.module]]`` beside ``vlnverse`` itself, so ``import vlnverse`` in plain Python never
touches Omniverse. Its one module-level Omniverse import is ``omni.ext`` (the base class); every
other Kit/Isaac import happens inside the methods.

On startup the extension checks that the Isaac Sim extensions it needs (USD, PhysX, Isaac Sim
core, UI) are enabled; if some are missing it logs one error naming them and stays inert.
Otherwise it registers the Isaac Sim simulator backend (``vlnverse.sim.api.BACKENDS``) under
the name ``isaac`` and opens the study panel (``vlnverse.kit.panel.StudyPanelWindow``: pick a
scene, an episode file and a body, and run a human study session in the GUI).
"""
from __future__ import annotations

import omni.ext

from .kit.extension import (ISAAC_BACKEND, REQUIRED_EXTENSIONS, missing_extensions,  # noqa: F401
                            missing_message, open_study_panel, register_isaac_backend)


class VLNVerseExtension(omni.ext.IExt):
    """Kit extension: checks its Isaac Sim dependencies, registers the Isaac backend and opens the study panel."""

    ready: bool = False
    error: str | None = None
    panel = None

    def on_startup(self, ext_id: str) -> None:
        """Called by Kit when the extension is enabled."""
        import carb
        import omni.kit.app

        manager = omni.kit.app.get_app().get_extension_manager()
        missing = missing_extensions(manager.is_extension_enabled)
        if missing:
            self.ready, self.error = False, missing_message(ext_id, missing)
            carb.log_error(self.error)
            return
        register_isaac_backend()
        self.ready, self.error = True, None
        carb.log_info(f"{ext_id}: registered simulator backend '{ISAAC_BACKEND[0]}'")
        try:
            self.panel = open_study_panel()
        except Exception as exc:  # noqa: BLE001 - the backend stays usable without the panel
            self.panel = None
            carb.log_warn(f"{ext_id}: study panel not opened: {exc}")

    def on_shutdown(self) -> None:
        """Called by Kit when the extension is disabled."""
        if self.panel is not None:
            self.panel.destroy()
            self.panel = None
        self.ready = False
