"""``data generate --workers 2`` writes the same files, byte for byte, as a serial run."""
from __future__ import annotations

import pytest

from vlnverse.core.errors import ConfigError
from vlnverse.tasks.dataset import generate_dataset, resolve_scene_paths


def test_two_workers_write_the_serial_dataset_byte_for_byte(tmp_path):
    scenes = [str(p) for p in resolve_scene_paths("all")[:3]]
    generate_dataset("fine_grained", scenes, 2, 7, tmp_path / "serial", progress=False)
    generate_dataset("fine_grained", scenes, 2, 7, tmp_path / "parallel", progress=False, workers=2)
    serial = {p.relative_to(tmp_path / "serial"): p.read_bytes() for p in (tmp_path / "serial").rglob("*") if p.is_file()}
    parallel = {p.relative_to(tmp_path / "parallel"): p.read_bytes()
                for p in (tmp_path / "parallel").rglob("*") if p.is_file()}
    assert serial and serial == parallel
    assert b"home_" in next(v for k, v in serial.items() if k.suffix == ".jsonl")


def test_zero_workers_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="--workers"):
        generate_dataset("fine_grained", "all", 1, 0, tmp_path / "x", progress=False, workers=0)
    assert not (tmp_path / "x").exists()
