"""A train config's ``validate()`` reads nothing from the machine; ``preflight()`` does."""
from __future__ import annotations

import pytest

from vlnverse.core.errors import ConfigError


def test_validate_is_pure_and_preflight_checks_the_init_checkpoint(tmp_path, monkeypatch):
    from pathlib import Path

    from vlnverse.learn.config import load_train_config, resolve_train_config_path

    missing = tmp_path / "nowhere.pt"
    touched: list = []
    real_is_file = Path.is_file
    monkeypatch.setattr(Path, "is_file", lambda self: touched.append(self) or real_is_file(self))
    path = resolve_train_config_path("cma_fine_grained")
    from vlnverse.core.config import load_config
    from vlnverse.learn.config import TrainConfig

    cfg = load_config(TrainConfig, path, {"mode": "dagger", "init": str(missing)})  # validate() only
    assert cfg.init == str(missing) and missing not in touched
    with pytest.raises(ConfigError, match=r"cma_fine_grained.yaml: init: no such file"):
        load_train_config(path, {"mode": "dagger", "init": str(missing)})
    assert missing in touched
    missing.write_bytes(b"x")
    assert load_train_config(path, {"mode": "dagger", "init": str(missing)}).init == str(missing)
