"""Tests run inside Kit by ``omni.kit.test`` (``[[test]]`` in config/extension.toml); pytest never imports them."""
from .test_extension import *  # noqa: F401,F403
