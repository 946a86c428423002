"""Shared pytest fixtures and skip rules (optional hardware and data skip cleanly)."""
from __future__ import annotations

import os

import pytest

os.environ.setdefault("MUJOCO_GL", "egl")
# One OpenMP/BLAS thread in the tests and the processes they start (unless set): results do not
# depend on the machine's cores, and threads waiting for each other on a loaded machine cannot
# stretch a test many times over. Set here, before numpy or torch is imported.
for _name in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_name, "1")
