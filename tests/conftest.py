"""Shared pytest fixtures and skip rules (optional hardware and data skip cleanly)."""
from __future__ import annotations

import os

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")
