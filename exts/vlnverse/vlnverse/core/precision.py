"""Fixed precision of every float vlnverse writes (USD, JSON/JSONL, ``.npz``).

Floating-point results differ in the last bits between CPUs (SIMD paths), BLAS, numpy,
usd-core and MuJoCo builds. Files are made byte-identical on every machine by rounding each
float to a stated precision before it is written; the last-bit noise (~1e-16 relative) then
almost never reaches the kept digits. One place states the precision per quantity:

=================  ===========================  =====================================
quantity           precision                    where
=================  ===========================  =====================================
length, position   1e-6 m (6 decimals)          USD translate/scale/radius/points/extent,
                                                room polygons, door centres, JSON, npz
angle              1e-6 rad (6 decimals)        yaw/pitch in JSON and npz
unit quaternion    normalised, w >= 0, then     USD ``xformOp:orient``
                   1e-9 (9 decimals)
colour             1e-4 (4 decimals)            USD ``displayColor``
mass, friction     1e-4 kg / 1e-4               USD ``physics:mass``, physics materials
any other float    6 decimals, but at least     JSON/JSONL (metrics, configs), npz arrays
                   6 significant digits
=================  ===========================  =====================================

Rounding uses Python's correctly rounded ``round`` (scalars) and ``numpy.round`` (arrays),
which give the same result for the same input on every machine.
"""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

#: Decimal places of lengths and positions in metres (1 µm).
LENGTH_DECIMALS = 6
#: Decimal places of angles in radians.
ANGLE_DECIMALS = 6
#: Decimal places of unit-quaternion components (after normalisation).
QUATERNION_DECIMALS = 9
#: Decimal places of RGB colour components in [0, 1].
COLOR_DECIMALS = 4
#: Decimal places of masses (kg) and friction coefficients.
MASS_DECIMALS = 4
FRICTION_DECIMALS = 4
#: Decimal places of any other float (JSON values, npz arrays) ...
DEFAULT_DECIMALS = 6
#: ... raised for small magnitudes so that at least this many significant digits survive.
MIN_SIGNIFICANT_DIGITS = 6


def round_float(value: float, decimals: int = DEFAULT_DECIMALS) -> float:
    """``value`` rounded to ``decimals`` places (more for tiny magnitudes: >= 6 significant digits).

    Non-finite values are returned unchanged; ``-0.0`` becomes ``0.0``.
    """
    value = float(value)
    if value == 0.0 or not math.isfinite(value):
        return value + 0.0
    places = max(decimals, MIN_SIGNIFICANT_DIGITS - 1 - math.floor(math.log10(abs(value))))
    return round(value, places) + 0.0


def timed_rate(count: float, seconds: float, *, digits: int = 2,
               seconds_digits: int = 3) -> tuple[float, float | None]:
    """``(seconds, count / seconds)`` as written: the seconds rounded to ``seconds_digits`` and
    the rate computed from those rounded seconds, so a reader who divides the written figures
    gets the written rate to the last digit (rate None where no time was kept)."""
    kept = round(float(seconds), seconds_digits)
    return kept, (round(count / kept, digits) if kept > 0 else None)


def round_length(value: float) -> float:
    """A length or coordinate in metres, rounded to ``LENGTH_DECIMALS``."""
    return round(float(value), LENGTH_DECIMALS) + 0.0


def round_lengths(values: Sequence[float] | np.ndarray) -> list[float]:
    """Each length of ``values`` rounded to ``LENGTH_DECIMALS`` (a list of plain floats)."""
    return [round_length(v) for v in np.asarray(values, dtype=float).ravel()]


def round_color(values: Sequence[float]) -> list[float]:
    """RGB components rounded to ``COLOR_DECIMALS``."""
    return [round(float(c), COLOR_DECIMALS) + 0.0 for c in values]


def unit_quaternion(q: Sequence[float]) -> tuple[float, float, float, float]:
    """(w, x, y, z) normalised, sign fixed (w >= 0; first nonzero > 0), rounded to ``QUATERNION_DECIMALS``."""
    arr = np.asarray(q, dtype=float).reshape(4)
    norm = math.sqrt(math.fsum(float(v) * float(v) for v in arr))
    if norm == 0.0 or not math.isfinite(norm):
        raise ValueError(f"cannot normalise quaternion {list(arr)}")
    arr = arr / norm
    lead = next((v for v in arr if v != 0.0), 1.0)
    if arr[0] < 0 or (arr[0] == 0.0 and lead < 0):  # q and -q are one rotation: w >= 0, then first nonzero > 0
        arr = -arr
    w, x, y, z = (round(float(v), QUATERNION_DECIMALS) + 0.0 for v in arr)
    return w, x, y, z


def round_array(array: np.ndarray, decimals: int = DEFAULT_DECIMALS) -> np.ndarray:
    """A copy of a float array rounded to ``decimals`` places; other dtypes are returned unchanged."""
    array = np.asanyarray(array)
    if not np.issubdtype(array.dtype, np.floating):
        return array
    return np.round(array, decimals) + 0.0  # + 0.0: no negative zeros


def round_floats(obj: Any, decimals: int = DEFAULT_DECIMALS) -> Any:
    """``obj`` with every float inside (dicts, lists, tuples) passed through ``round_float``."""
    if isinstance(obj, float):
        return round_float(obj, decimals)
    if isinstance(obj, dict):
        return {k: round_floats(v, decimals) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(round_floats(v, decimals) for v in obj)
    return obj
