"""``vlnverse.core.parallel.run_jobs``: every item exactly once, dead workers replaced, failing
jobs reported by key, bad input rejected."""
from __future__ import annotations

import pytest

from parallel_jobs import limited, squares
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


def test_a_hung_worker_is_killed_after_the_job_timeout_and_its_job_retried(tmp_path):
    import time

    got: dict = {}
    failures: list = []
    t0 = time.monotonic()
    report = run_jobs(squares, _jobs(hang_once=str(tmp_path / "hung"), hang_at="s1-2"), workers=2, job_timeout=2.0,
                      on_result=lambda item, value: got.setdefault(item, []).append(value),
                      on_failure=failures.append)
    assert (tmp_path / "hung").exists()  # a worker really stopped making progress (asleep, alive) on s1-2
    assert time.monotonic() - t0 < 60  # not the hour it slept
    assert report.timeouts == 1 and report.retries == 1 and not failures
    assert sorted(got) == sorted(f"s{k}-{i}" for k in range(4) for i in range(4))
    assert all(len(v) == 1 for v in got.values()) and got["s1-3"][0][0] == 9


def test_a_job_that_hangs_every_time_is_reported_with_its_key(tmp_path):
    got: list = []
    report = run_jobs(squares, _jobs(hang_once=str(tmp_path / "hung"), hang_always=True, hang_at="s2-1"), workers=2,
                      job_timeout=1.0, on_result=lambda item, value: got.append(item))
    assert [f.key for f in report.failures] == ["scene2"] and report.timeouts == 2
    assert "no progress on scene2" in report.failures[0].error and report.failures[0].missing == ["s2-1", "s2-2", "s2-3"]
    assert sorted(got) == sorted([f"s{k}-{i}" for k in (0, 1, 3) for i in range(4)] + ["s2-0"])


@pytest.mark.parametrize("bad", [0, -1.0, "10", True, float("inf")])
def test_bad_job_timeout_is_a_config_error(bad):
    with pytest.raises(ConfigError, match="--job-timeout"):
        run_jobs(squares, _jobs(), on_result=lambda *a: None, workers=2, job_timeout=bad)


@pytest.mark.parametrize("workers", [1, 2])
def test_a_shared_limit_bounds_holders_across_worker_processes_and_threads(tmp_path, workers):
    got: dict = {}
    jobs = [Job(f"scene{k}", tuple(f"s{k}-{i}" for i in range(3)), {"dir": str(tmp_path), "hold": 0.3})
            for k in range(2)]
    run_jobs(limited, jobs, workers=workers, shared={"slots": 2}, on_result=lambda item, peak: got.update({item: peak}))
    assert len(got) == 6
    # 3 threads per job and (with 2 workers) 2 jobs at once want up to 6 slots; the limit allows 2
    assert max(got.values()) == 2


def test_a_worker_killed_holding_a_shared_slot_gives_it_back(tmp_path):
    got: dict = {}
    (tmp_path / "held").mkdir()
    jobs = [Job(f"scene{k}", tuple(f"s{k}-{i}" for i in range(2)),
                {"dir": str(tmp_path / "held"), "hold": 0.1, "die_once": str(tmp_path / "died")}) for k in range(3)]
    # one slot: had the dead worker kept it, every later acquire would wait until the job timeout
    report = run_jobs(limited, jobs, workers=2, shared={"slots": 1}, job_timeout=20.0,
                      on_result=lambda item, peak: got.update({item: peak}))
    assert (tmp_path / "died").exists() and report.retries == 1 and report.timeouts == 0 and not report.failures
    assert len(got) == 6 and max(got.values()) == 1


@pytest.mark.slow  # starting Ray takes ~10-30 s here
def test_ray_engine_shared_limit_and_hung_actor(tmp_path):
    ray = pytest.importorskip("ray", reason="Ray is the optional [ray] extra")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        got: dict = {}
        jobs = [Job(f"scene{k}", tuple(f"s{k}-{i}" for i in range(3)), {"dir": str(tmp_path / "held"), "hold": 0.3})
                for k in range(2)]
        (tmp_path / "held").mkdir()
        run_jobs(limited, jobs, workers=2, engine="ray", shared={"slots": 2},
                 on_result=lambda item, peak: got.update({item: peak}))
        assert len(got) == 6 and max(got.values()) == 2
        items: dict = {}
        report = run_jobs(squares, _jobs(hang_once=str(tmp_path / "hung"), hang_at="s1-2"), workers=2, engine="ray",
                          job_timeout=3.0, on_result=lambda item, value: items.setdefault(item, []).append(value))
        assert (tmp_path / "hung").exists() and report.timeouts == 1 and not report.failures
        assert sorted(items) == sorted(f"s{k}-{i}" for k in range(4) for i in range(4))
        assert all(len(v) == 1 for v in items.values())
    finally:
        ray.shutdown()
