"""Small planar-geometry helpers shared by every layer (angles in radians, yaw CCW from +X)."""
from __future__ import annotations

import math

import numpy as np


def wrap_angle(angle: float | np.ndarray) -> float | np.ndarray:
    """Wrap an angle (or array of angles) to (-pi, pi]; scalars come back as ``float``."""
    if isinstance(angle, (float, int, np.floating, np.integer)):
        a = math.remainder(float(angle), 2 * math.pi)  # exactly rounded, in [-pi, pi]
        return math.pi if abs(a + math.pi) < 1e-12 else a
    wrapped = np.mod(np.asarray(angle, dtype=float) + np.pi, 2 * np.pi) - np.pi
    wrapped = np.where(wrapped == -np.pi, np.pi, wrapped)
    return float(wrapped) if np.ndim(wrapped) == 0 else wrapped
