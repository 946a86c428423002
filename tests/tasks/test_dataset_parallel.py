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


def test_two_workers_with_a_job_timeout_write_the_serial_dataset(tmp_path):
    scenes = [str(p) for p in resolve_scene_paths("all")[:2]]
    generate_dataset("fine_grained", scenes, 2, 7, tmp_path / "serial", progress=False)
    generate_dataset("fine_grained", scenes, 2, 7, tmp_path / "parallel", progress=False, workers=2, job_timeout=120)
    assert (tmp_path / "serial" / "summary.json").read_bytes() == (tmp_path / "parallel" / "summary.json").read_bytes()


@pytest.mark.parametrize("value", ["0", "-5"])  # a non-number is argparse's usage error, as for every typed option
def test_cli_bad_job_timeout_is_one_line_exit_2(tmp_path, value, capsys):
    from vlnverse.cli import main

    code = main(["data", "generate", "--task", "fine_grained", "--scenes", "all", "--episodes-per-scene", "1",
                 "--seed", "0", "--out", str(tmp_path / "x"), "--workers", "2", "--job-timeout", value])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "--job-timeout" in err and "\n" not in err
    assert not (tmp_path / "x").exists()
