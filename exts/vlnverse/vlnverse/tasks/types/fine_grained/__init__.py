"""Fine-grained (R2R-style) navigation, in one folder: the generator and its scoring (``generator``),
the instruction templates (``templates``) and the default config (``config.yaml``). Importing the
package registers the task type ``fine_grained`` and its template set."""
from . import generator, templates  # noqa: F401 - importing registers them
