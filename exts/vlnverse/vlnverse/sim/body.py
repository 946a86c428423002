"""Agent bodies for the simulator layer: re-exported from :mod:`vlnverse.core.body`, where the
one definition lives (the maps, tasks and evaluation import it from there)."""
from ..core.body import DEFAULT_BODY, R2R_CE, AgentBody, as_body, list_bodies, load_body

__all__ = ["AgentBody", "DEFAULT_BODY", "R2R_CE", "as_body", "list_bodies", "load_body"]
