"""Isaac Sim 5.x backend (``make_simulator(backend="isaac")``).

Importing this package imports no Omniverse module: ``IsaacSimulator`` needs Isaac Sim only when it
is constructed (then it fails at once, in one line, with how to install it, where ``isaacsim`` does
not import). Every Omniverse call is listed in ``adapter.API``; see ``exts/vlnverse/docs/isaac.md``.
"""
from .adapter import API, INSTALL_HINT, IsaacAdapter, IsaacNotInstalledError, isaacsim_available, require_isaacsim
from .backend import IsaacSimulator

#: ``vlnverse.sim.api.check_backend`` calls this before anything else runs.
require_available = require_isaacsim

__all__ = ["API", "INSTALL_HINT", "IsaacAdapter", "IsaacNotInstalledError", "IsaacSimulator",
           "isaacsim_available", "require_available", "require_isaacsim"]
