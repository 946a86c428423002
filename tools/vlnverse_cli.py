#!/usr/bin/env python3
"""Run the ``vlnverse`` command from a checkout without installing it.

Useful with Isaac Sim's bundled Python as a standalone application, e.g.
``./python.sh tools/vlnverse_cli.py eval oracle_fine_grained_strict --backend isaac`` (add ``--gui`` to
open the Isaac Sim window instead of running headless), or with any interpreter that has the
dependencies. It puts ``exts/vlnverse/`` on ``sys.path`` so ``import vlnverse`` resolves to this
checkout; when the arguments select the Isaac backend it constructs ``SimulationApp`` first, before
anything imports Omniverse (``vlnverse.sim.isaac.adapter.start_standalone_app``), then calls the same
entry point as the console command. Without Isaac Sim that fails at once with how to install it.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "exts" / "vlnverse"))


def _run(argv: list) -> int:
    from vlnverse.core.errors import VLNVerseError
    from vlnverse.sim.isaac.adapter import start_standalone_app, wants_isaac

    gui = "--gui" in argv
    argv = [a for a in argv if a != "--gui"]
    if wants_isaac(argv):
        try:
            start_standalone_app(headless=not gui)
        except VLNVerseError as exc:  # not installed, or Kit could not start (one line: Kit's reason)
            print(f"vlnverse: error: {exc}", file=sys.stderr)
            return 2
    from vlnverse.cli import main

    return main(argv)


if __name__ == "__main__":
    sys.exit(_run(sys.argv[1:]))
