"""``vlnverse bench train``'s policy rows: every row names a registered policy whose params build,
and ``--policies`` picks rows or fails in one line naming the flag."""
from types import SimpleNamespace

import pytest


def test_every_row_builds_its_policy_on_the_bench_rig():
    from vlnverse.benchmarks.train import POLICY_ROWS, SENSORS
    from vlnverse.learn.policies import build_policy
    from vlnverse.learn.vocab import Vocabulary

    rig = [{"name": s["name"], "kind": s["kind"], "shape": [s["height"], s["width"], 3] if s["kind"] == "rgb"
            else [s["height"], s["width"]]} for s in SENSORS]
    assert [r["name"] for r in POLICY_ROWS] == ["cma", "rdp", "vlnbert"]
    for row in POLICY_ROWS:
        params = dict(row["params"])
        if row.get("waypoint_predictor"):  # the bench trains one first; an untrained one of default size here
            params["waypoint_predictor"] = {}
        policy = build_policy(row["policy"], params, Vocabulary.build(["go to the kitchen"]), rig)
        assert policy.name == row["policy"] and row["lr"] > 0


def test_policies_flag_picks_rows_and_rejects_unknown_names():
    from vlnverse.benchmarks.train import _rows
    from vlnverse.core.errors import ConfigError

    assert [r["name"] for r in _rows(SimpleNamespace(policies=None))] == ["cma", "rdp", "vlnbert"]
    assert [r["name"] for r in _rows(SimpleNamespace(policies="rdp, cma"))] == ["cma", "rdp"]  # table order
    assert [r["name"] for r in _rows(SimpleNamespace(policies="rdp"))] == ["rdp"]
    assert [r["name"] for r in _rows(SimpleNamespace(policies="vlnbert,rdp"))] == ["rdp", "vlnbert"]
    with pytest.raises(ConfigError, match="--policies.*seq2sq"):
        _rows(SimpleNamespace(policies="rdp,seq2sq"))
