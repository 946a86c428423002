"""VLN-BERT (moving into modules by concern: the policy module holds it whole for now)."""
from .policy import *  # noqa: F401,F403
