"""The pretrained visual encoder (moving into modules by concern: the pretraining module holds it whole for now)."""
from .pretraining import *  # noqa: F401,F403
from .pretraining import _config_dict, _paths  # noqa: F401 (private names its callers read, until the split)
