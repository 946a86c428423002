#!/usr/bin/env python3
"""Run the ``vlnverse`` command from a checkout without installing it.

Useful with Isaac Sim's bundled Python (``./python.sh tools/vlnverse_cli.py quickstart``) or any
interpreter that has the dependencies: it puts ``exts/vlnverse/`` on ``sys.path`` so ``import vlnverse``
resolves to this checkout, then calls the same entry point as the console command.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "exts" / "vlnverse"))

from vlnverse.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
