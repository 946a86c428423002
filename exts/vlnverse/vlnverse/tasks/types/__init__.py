"""Task types: importing this package registers every generator in ``vlnverse.tasks.base.TASKS``."""
from . import coarse_grained, dialogue, fine_grained, long_horizon, object_goal, visual_reference  # noqa: F401
from . import false_premise, video_contextualized  # noqa: F401
