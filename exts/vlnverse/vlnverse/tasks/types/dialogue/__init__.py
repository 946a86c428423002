"""Dialogue navigation, in one folder: the generator and its scoring (``generator``),
the instruction templates (``templates``) and the default config (``config.yaml``). Importing the
package registers the task type ``dialogue`` and its template set."""
from . import generator, templates  # noqa: F401 - importing registers them
