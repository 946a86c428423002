"""``vlnverse.core.parallel.run_jobs``: every item exactly once, dead workers replaced, failing
jobs reported by key, bad input rejected."""
from __future__ import annotations

import pytest

from parallel_jobs import squares
from vlnverse.core.errors import ConfigError
from vlnverse.core.parallel import Job, run_jobs


def _jobs(**payload):
    return [Job(f"scene{k}", tuple(f"s{k}-{i}" for i in range(4)), {**payload}) for k in range(4)]


def test_local_workers_deliver_every_item_once_and_replace_a_dead_worker(tmp_path):
    got: dict = {}
    report = run_jobs(squares, _jobs(die_once=str(tmp_path / "died"), die_at="s2-2"), workers=2,
                      on_result=lambda item, value: got.setdefault(item, []).append(value))
    assert (tmp_path / "died").exists()  # a worker really died (os._exit) on s2-2
    assert sorted(got) == sorted(f"s{k}-{i}" for k in range(4) for i in range(4))
    assert all(len(v) == 1 for v in got.values())
    assert got["s3-3"][0][0] == 9 and report.retries == 1 and not report.failures
    assert len({v[0][1] for v in got.values()}) >= 2  # more than one process did the work


def test_a_job_that_keeps_failing_is_reported_with_its_key_and_the_rest_completes():
    got: list = []
    report = run_jobs(squares, _jobs(raise_at="s1-2"), workers=2, on_result=lambda item, value: got.append(item))
    assert [f.key for f in report.failures] == ["scene1"]
    failure = report.failures[0]
    assert failure.missing == ["s1-2", "s1-3"] and failure.attempts == 2 and "bad item s1-2" in failure.error
    assert sorted(got) == sorted([f"s{k}-{i}" for k in (0, 2, 3) for i in range(4)] + ["s1-0", "s1-1"])


def test_serial_path_raises_like_a_plain_loop():
    with pytest.raises(RuntimeError, match="bad item s0-1"):
        run_jobs(squares, _jobs(raise_at="s0-1"), workers=1, on_result=lambda *a: None)


@pytest.mark.parametrize("kwargs, field", [({"workers": 0}, "--workers"), ({"engine": "dask"}, "--engine"),
                                           ({"engine": "local", "address": "h:1"}, "--address")])
def test_bad_settings_are_config_errors(kwargs, field):
    with pytest.raises(ConfigError, match=field):
        run_jobs(squares, _jobs(), on_result=lambda *a: None, **kwargs)
