"""Fixed precision of written floats: one rounding per quantity, applied by every writer."""
from __future__ import annotations

import json
import math

import numpy as np

from vlnverse.core.io import to_jsonable, write_json_atomic, write_jsonl_atomic, write_npz
from vlnverse.core.precision import round_array, round_float, round_length, unit_quaternion


def test_round_float_keeps_six_decimals_and_six_significant_digits():
    assert round_float(1.23456789) == 1.234568
    assert round_float(123.4567891) == 123.456789
    assert round_float(3.2123456789e-9) == 3.21235e-9  # small magnitudes keep 6 significant digits
    assert math.copysign(1.0, round_float(-1e-30 * 0)) == 1.0  # no negative zero
    assert round_float(float("inf")) == float("inf")
    # last-ulp noise does not survive: x and its neighbouring doubles round to the same value
    x = 0.7179815579358233
    assert round_float(np.nextafter(x, 1.0)) == round_float(np.nextafter(x, 0.0)) == round_float(x)
    assert round_length(0.1 + 0.2) == 0.3


def test_unit_quaternion_is_normalised_sign_fixed_and_rounded():
    w, x, y, z = unit_quaternion([-2.0, 0.0, 0.0, 2.0])
    assert (w, x, y, z) == (0.707106781, 0.0, 0.0, -0.707106781)
    assert unit_quaternion([0.0, 0.0, 0.0, -3.0]) == (0.0, 0.0, 0.0, 1.0)  # q and -q: one canonical sign
    assert abs(math.hypot(w, z) - 1.0) < 1e-9


def test_json_jsonl_and_npz_writers_round(tmp_path):
    data = {"length": 1.0000000000000002, "angle": np.float64(0.30000000000000004), "nested": [[2.9999999999999996]],
            "nan": float("nan"), "int": 3, "flag": True}
    assert to_jsonable(data) == {"length": 1.0, "angle": 0.3, "nested": [[3.0]], "nan": None, "int": 3, "flag": True}
    assert to_jsonable(0.1234567891, decimals=None) == 0.1234567891
    text = write_json_atomic(tmp_path / "a.json", data).read_text()
    assert json.loads(text)["length"] == 1.0 and "0000000000000002" not in text
    assert "0.30000000000000004" not in write_jsonl_atomic(tmp_path / "a.jsonl", [data]).read_text()
    arrays = {"xy": np.array([[0.1 + 0.2, -1e-12]]), "grid": np.array([[1, 2]], dtype=np.uint8)}
    a = write_npz(tmp_path / "a.npz", **arrays).read_bytes()
    b = write_npz(tmp_path / "b.npz", xy=arrays["xy"] + 1e-15, grid=arrays["grid"]).read_bytes()
    assert a == b  # equal after rounding: equal bytes
    with np.load(tmp_path / "a.npz") as f:
        assert f["xy"].tolist() == [[0.3, 0.0]] and f["grid"].dtype == np.uint8
    assert round_array(np.array([1, 2])).dtype.kind == "i"


def test_a_timed_rate_is_the_count_over_the_seconds_as_written():
    from vlnverse.core.precision import timed_rate

    # 45 steps in 1.33151 s: the seconds kept to the ms (1.332), the rate 45 / 1.332 = 33.7838 -> 33.78,
    # not 45 / 1.33151 = 33.796 -> 33.80, which a reader dividing the written figures could not recover
    assert timed_rate(45, 1.33151) == (1.332, 33.78)
    assert timed_rate(7, 2.0, digits=1, seconds_digits=6) == (2.0, 3.5)
    assert timed_rate(3, 0.0004) == (0.0, None)  # no time kept: no rate
