"""``il.ema``: Polyak averaging of the weights in the trainer (corridor, CPU, 16 px)."""
from __future__ import annotations

import pytest

from learn_helpers import small_config
from test_trainer import TINY, _train, interrupt_batch

EMA = {**TINY, "il__epochs": 3, "il__batch_size": 1, "il__ema": 0.5, "validation__every": 5, "val": {}}


def _recording(monkeypatch):
    """Record the trained (raw) weights after every optimizer step."""
    from vlnverse.learn import trainer as T

    steps: list[dict] = []
    original = T.Trainer._update_ema

    def update(self):
        steps.append({k: v.detach().clone() for k, v in self.policy.state_dict().items()})
        original(self)

    monkeypatch.setattr(T.Trainer, "_update_ema", update)
    return steps


def test_saved_weights_are_the_warmed_up_moving_average_of_the_trained_ones(corridor, episodes_file, tmp_path,
                                                                             monkeypatch):
    from vlnverse.learn.checkpoint import export_checkpoint, read_checkpoint

    steps = _recording(monkeypatch)
    _train(small_config(tmp_path / "run", episodes_file, policy="seq2seq", **EMA), corridor)
    assert len(steps) >= 10  # past the warm-up: d_t = min(0.5, (1 + t) / (10 + t)) reaches 0.5 at t = 8
    expected = {k: v.clone() for k, v in steps[0].items()}
    for t, raw in enumerate(steps[1:], start=1):
        d = min(0.5, (1 + t) / (10 + t))
        for k, v in raw.items():
            if v.is_floating_point():
                expected[k] = d * expected[k] + (1 - d) * v
    data = read_checkpoint(tmp_path / "run" / "last.pt")
    trained = [k for k in steps[0] if steps[0][k].is_floating_point() and not (steps[0][k] == steps[-1][k]).all()]
    assert trained  # some weights moved, so the average differs from the last weights
    for k in trained:
        assert data["state_dict"][k] == pytest.approx(expected[k], abs=1e-6)
        assert (data["raw_state"][k] == steps[-1][k]).all()
        assert not (data["state_dict"][k] == data["raw_state"][k]).all()
    # best.pt (no validation ran: the last weights) holds the average too, and the policy agent reads it
    assert (tmp_path / "run" / "best.pt").read_bytes() == (tmp_path / "run" / "last.pt").read_bytes()
    # an exported checkpoint keeps the average and drops the raw weights (resuming only)
    export_checkpoint(tmp_path / "run" / "best.pt", tmp_path / "shipped.pt")
    shipped = read_checkpoint(tmp_path / "shipped.pt")
    assert "raw_state" not in shipped and all((shipped["state_dict"][k] == data["state_dict"][k]).all() for k in trained)


def test_validation_runs_on_the_averaged_weights(corridor, episodes_file, tmp_path, monkeypatch):
    from vlnverse.learn import trainer as T

    seen = []
    original = T.Trainer.validate

    def validate(self, tag):
        seen.append({k: v.detach().clone() for k, v in self.policy.state_dict().items()})
        return original(self, tag)

    monkeypatch.setattr(T.Trainer, "validate", validate)
    from vlnverse.learn.checkpoint import read_checkpoint

    kw = {**EMA, "validation__every": 2}
    kw.pop("val")
    _train(small_config(tmp_path / "run", episodes_file, policy="seq2seq", **kw), corridor)
    best = read_checkpoint(tmp_path / "run" / "best.pt")
    assert len(seen) == 2  # epoch 2 and the final weights; best.pt holds the average one of them was run with
    assert any(all((s[k] == best["state_dict"][k]).all() for k in s) for s in seen)
    assert any(not (best["state_dict"][k] == best["raw_state"][k]).all() for k in best["raw_state"])


def test_interrupted_run_with_an_average_resumes_to_the_same_weights(corridor, episodes_file, tmp_path, monkeypatch):
    import torch

    from vlnverse.learn.checkpoint import read_checkpoint

    _train(small_config(tmp_path / "full", episodes_file, policy="seq2seq", **EMA), corridor)
    cfg = small_config(tmp_path / "cut", episodes_file, policy="seq2seq", **EMA)
    undo = interrupt_batch(monkeypatch, 6)
    with pytest.raises(KeyboardInterrupt):
        _train(cfg, corridor)
    undo()
    _train(cfg, corridor)
    a, b = read_checkpoint(tmp_path / "full" / "last.pt"), read_checkpoint(tmp_path / "cut" / "last.pt")
    for key in ("state_dict", "raw_state"):
        assert all(torch.equal(a[key][k], b[key][k]) for k in a[key])


@pytest.mark.parametrize("value", [1.0, -0.1, True, "0.9"])
def test_an_ema_decay_outside_zero_to_one_is_refused(value, episodes_file, tmp_path):
    from vlnverse.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"il\.ema") as err:
        small_config(tmp_path / "run", episodes_file, policy="seq2seq", il__ema=value)
    assert "\n" not in str(err.value)
    assert ("[0, 1)" if isinstance(value, float) else "a number") in str(err.value)
