"""Isaac Sim 6.x / 5.x backend (``make_simulator(backend="isaac")``).

Importing this package imports no Omniverse module: ``IsaacSimulator`` needs Isaac Sim only when it
is constructed (then it fails at once, in one line, with how to install it, where ``isaacsim`` does
not import). Every Omniverse call is listed in ``adapter.CALLS``; see ``exts/vlnverse/docs/isaac.md``.
"""
from .adapter import (API, CALLS, INSTALL_HINT, IsaacAdapter, IsaacNotInstalledError, isaacsim_available,
                      isaacsim_unusable_reason, require_isaacsim)
from .backend import IsaacSimulator

#: ``vlnverse.sim.api.check_backend`` calls this before anything else runs.
require_available = require_isaacsim

__all__ = ["API", "CALLS", "INSTALL_HINT", "IsaacAdapter", "IsaacNotInstalledError", "IsaacSimulator",
           "isaacsim_available", "isaacsim_unusable_reason", "require_available", "require_isaacsim"]
