"""Task types: importing this package registers every built-in generator in ``vlnverse.tasks.registry.TASKS`` (each is also named there and imported on first use)."""
from . import coarse_grained, dialogue, fine_grained, long_horizon, object_goal, visual_reference  # noqa: F401
from . import false_premise, video_contextualized  # noqa: F401
