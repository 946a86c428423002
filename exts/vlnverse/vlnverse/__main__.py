"""``python -m vlnverse`` — same as the ``vlnverse`` command."""
import sys

from .cli import main

sys.exit(main())
