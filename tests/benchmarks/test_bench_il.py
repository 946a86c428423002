"""``vlnverse bench il``: the recurrent work per epoch of the padded and the bucketed path (hand-
checked), its bad input, and (slow) a whole run on two generated homes."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


def _args(*argv: str):
    from vlnverse.cli import build_parser

    return build_parser().parse_args(["bench", "il", *argv])


def test_unroll_counts_the_padded_and_the_packed_work_of_an_epoch():
    import numpy as np

    from vlnverse.benchmarks.il import unroll

    lengths = [5, 1, 4, 2, 3, 6]
    order = np.random.default_rng([0, 0]).permutation(6)
    batches = [np.asarray(lengths)[order[i:i + 2]] for i in (0, 2, 4)]
    padded = unroll(lengths, 2, "padded", 0)
    assert padded == {"steps": sum(int(b.max()) for b in batches), "rows": sum(2 * int(b.max()) for b in batches)}
    # one pool holds the epoch: the batches are {1, 2}, {3, 4}, {5, 6}; packed rows are the 21 valid steps
    assert unroll(lengths, 2, "bucketed", 0) == {"steps": 2 + 4 + 6, "rows": 21}


@pytest.mark.parametrize("argv, field", [(["--policies", "vlnbert"], "--policies"), (["--policies", "nope"], "--policies"),
                                         (["--epochs", "0"], "--epochs"), (["--validation-every", "0"], "--validation-every"),
                                         (["--train-homes", "0"], "--train-homes")])
def test_bad_input_is_a_one_line_error_naming_the_flag(argv, field, tmp_path):
    from vlnverse.benchmarks.il import run
    from vlnverse.core.errors import ConfigError

    with pytest.raises(ConfigError, match=field):
        run(_args(*argv, "--out", str(tmp_path / "il.json")))
    assert not (tmp_path / "il").exists()  # refused before any work


@pytest.mark.slow
def test_one_run_measures_both_paths_on_the_same_data_and_their_curves(tmp_path):
    from vlnverse.benchmarks.il import run

    out = run(_args("--train-homes", "2", "--episodes-per-home", "3", "--val-seen-episodes", "2", "--epochs", "2",
                    "--repeat", "1", "--encoder", "cnn", "--validation-every", "2", "--validation-episodes", "1",
                    "--out", str(tmp_path / "il.json")))
    row = out["rows"]["cma"]
    assert set(row["paths"]) == {"padded", "bucketed"} and row["ratio_samples_per_s"] > 0
    assert row["paths"]["padded"]["samples"] == row["paths"]["bucketed"]["samples"] == 2 * row["steps_per_epoch"]
    assert row["paths"]["bucketed"]["unroll_per_epoch"]["rows"] == row["steps_per_epoch"]
    assert row["paths"]["padded"]["unroll_per_epoch"]["rows"] >= row["steps_per_epoch"]
    assert {p: [v["split"] for v in c["validation"]] for p, c in row["validation_curves"].items()} == \
        {"padded": ["val_seen"], "bucketed": ["val_seen"]}
    assert out["device"]["device"] == "cpu" and out["device"]["torch"] == torch.__version__
