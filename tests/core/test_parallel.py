"""``vlnverse.core.jobs.run_jobs`` on the engines of ``vlnverse.engines``: every item exactly
once, dead workers replaced, failing jobs reported by key, bad input rejected."""
from __future__ import annotations

import pytest

from parallel_jobs import limited, squares, with_children
from vlnverse.core.errors import ConfigError
from vlnverse.core.jobs import Job, run_jobs


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


def test_a_job_may_start_processes_of_its_own():
    """``bench train --seeds``' row jobs evaluate with environment processes: daemonic workers
    failed every row with "daemonic processes are not allowed to have children"."""
    got: dict = {}
    report = run_jobs(with_children, _jobs()[:2], workers=2, on_result=lambda item, value: got.setdefault(item, value))
    assert not report.failures, report.failures
    assert got == {f"s{k}-{i}": i * i for k in range(2) for i in range(4)}


def test_a_job_that_keeps_failing_is_reported_with_its_key_and_the_rest_completes():
    got: list = []
    report = run_jobs(squares, _jobs(raise_at="s1-2"), workers=2, on_result=lambda item, value: got.append(item))
    assert [f.key for f in report.failures] == ["scene1"]
    failure = report.failures[0]
    assert failure.missing == ["s1-2", "s1-3"] and failure.attempts == 2 and "bad item s1-2" in failure.error
    assert sorted(got) == sorted([f"s{k}-{i}" for k in (0, 2, 3) for i in range(4)] + ["s1-0", "s1-1"])


def test_a_worker_mid_job_exits_with_its_child_processes_once_its_driver_is_killed(tmp_path):
    """A driver killed (``kill -9``) while its workers run jobs: each worker, and the processes its
    job started, end within seconds instead of writing on into the work folder a rerun resumes."""
    import os
    import signal
    import subprocess
    import sys
    import time
    from pathlib import Path

    from vlnverse.core.io import pid_alive

    pids = tmp_path / "pids"
    script = ("import sys; sys.path.insert(0, %r)\n"
              "from parallel_jobs import sleeper_with_child\n"
              "from vlnverse.core.jobs import Job, run_jobs\n"
              "run_jobs(sleeper_with_child, [Job('a', ('a',), {'pids': %r}), Job('b', ('b',), {'pids': %r + '.b'})], "
              "workers=2, on_result=lambda *a: None)\n") % (str(Path(__file__).parent), str(pids), str(pids))
    driver = subprocess.Popen([sys.executable, "-c", script])
    try:
        deadline = time.monotonic() + 120
        while not (pids.is_file() and pids.read_text().strip()) and time.monotonic() < deadline:
            time.sleep(0.2)
        worker, child = map(int, pids.read_text().split())
        assert pid_alive(worker) and pid_alive(child)
        driver.send_signal(signal.SIGKILL)
        driver.wait(10)
        deadline = time.monotonic() + 20
        while (pid_alive(worker) or pid_alive(child)) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not pid_alive(worker) and not pid_alive(child)
    finally:
        driver.kill()
        for path in (pids, Path(str(pids) + ".b")):
            if path.is_file() and path.read_text().strip():
                for pid in map(int, path.read_text().split()):
                    try:
                        os.kill(pid, signal.SIGKILL)
                    except OSError:
                        pass


def test_serial_path_raises_like_a_plain_loop():
    with pytest.raises(RuntimeError, match="bad item s0-1"):
        run_jobs(squares, _jobs(raise_at="s0-1"), workers=1, on_result=lambda *a: None)


@pytest.mark.parametrize("kwargs, field", [({"workers": 0}, "--workers"), ({"engine": "dask"}, "--engine"),
                                           ({"engine": "local", "address": "h:1"}, "--address")])
def test_bad_settings_are_config_errors(kwargs, field):
    with pytest.raises(ConfigError, match=field):
        run_jobs(squares, _jobs(), on_result=lambda *a: None, **kwargs)


def test_engines_are_registered_driver_classes_and_a_plug_in_engine_runs_jobs():
    """The engine is looked up in ``ENGINES``: a registered class builds the driver, says whether
    it runs inline, and is accepted by every check, the command-line option included."""
    import argparse

    from vlnverse.core.cli_options import add_parallel_options
    from vlnverse.core.jobs import ENGINES, Engine, ParallelConfig
    from vlnverse.engines.local import _InlineDriver

    assert ENGINES.names() == ["local", "ray"]
    assert ParallelConfig(1).inline and not ParallelConfig(2).inline
    built, checked = [], []

    class Recording(Engine):
        default_workers = 3

        @classmethod
        def preflight(cls, address, fields):
            checked.append(address)

        @classmethod
        def inline(cls, workers):
            return True

        @classmethod
        def driver(cls, fn, *, workers, n_jobs, address, shared, preload):
            built.append((workers, n_jobs))
            return _InlineDriver(fn, shared)

    ENGINES.register("recording")(Recording)
    try:
        got: dict = {}
        report = run_jobs(squares, _jobs(), workers=3, engine="recording", on_result=got.__setitem__)
        assert built == [(3, 4)] and checked == [None] and len(got) == 16 and got["s3-3"][0] == 9
        assert report.engine == "recording"
        settled = ParallelConfig(engine="recording").checked()
        assert settled.workers == 3 and settled.inline and checked == [None, None]
        parser = argparse.ArgumentParser()
        add_parallel_options(parser, "jobs")
        assert ParallelConfig.from_args(parser.parse_args(["--engine", "recording"])).validate().workers == 3
    finally:
        ENGINES._items.pop("recording", None)
    with pytest.raises(ConfigError, match="one of local, ray"):
        ParallelConfig(engine="recording").validate()


def test_parallel_config_validate_is_pure_and_names_the_fields_of_its_source():
    """``validate`` checks values without I/O (an unreachable cluster passes it; ``preflight``
    is what connects) and names each field as the command line or a config file spells it."""
    from vlnverse.core.jobs import CONFIG_FIELDS, ParallelConfig

    ray_cfg = ParallelConfig(engine="ray", address="127.0.0.1:1")
    assert ray_cfg.validate() == ParallelConfig(2, "ray", "127.0.0.1:1", None)
    assert ParallelConfig(2, job_timeout=5).validate().job_timeout == 5.0
    with pytest.raises(ConfigError, match="^--job-timeout: got 0"):
        ParallelConfig(job_timeout=0).validate()
    with pytest.raises(ConfigError, match="^job_timeout: got 0"):
        ParallelConfig(job_timeout=0).validate(CONFIG_FIELDS)
    with pytest.raises(ConfigError, match="^address: .* with the local engine.*engine: ray"):
        ParallelConfig(address="h:1").validate(CONFIG_FIELDS)
    with pytest.raises(ConfigError, match="^--address: .*expected --engine ray"):
        ParallelConfig(address="h:1").validate()
    with pytest.raises(ConfigError, match="^--address: got 'nohost'"):
        ParallelConfig(engine="ray", address="nohost").validate()


def test_a_hung_worker_is_killed_after_the_job_timeout_and_its_job_retried(tmp_path):
    got: dict = {}
    failures: list = []
    report = run_jobs(squares, _jobs(hang_once=str(tmp_path / "hung"), hang_at="s1-2"), workers=2, job_timeout=5.0,
                      on_result=lambda item, value: got.setdefault(item, []).append(value),
                      on_failure=failures.append)
    assert (tmp_path / "hung").exists()  # a worker really stopped making progress (asleep, alive) on s1-2
    assert report.timeouts == 1 and report.retries == 1 and not failures
    assert sorted(got) == sorted(f"s{k}-{i}" for k in range(4) for i in range(4))
    assert all(len(v) == 1 for v in got.values()) and got["s1-3"][0][0] == 9


def test_a_job_that_hangs_every_time_is_reported_with_its_key(tmp_path):
    got: list = []
    report = run_jobs(squares, _jobs(hang_once=str(tmp_path / "hung"), hang_always=True, hang_at="s2-1"), workers=2,
                      job_timeout=5.0, on_result=lambda item, value: got.append(item))
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
    (tmp_path / "held").mkdir()
    # the first two holders wait for each other (``meet``): the peak does not depend on how fast threads start
    jobs = [Job(f"scene{k}", tuple(f"s{k}-{i}" for i in range(3)), {"dir": str(tmp_path / "held"), "hold": 0.3, "meet": 2})
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
        jobs = [Job(f"scene{k}", tuple(f"s{k}-{i}" for i in range(3)), {"dir": str(tmp_path / "held"), "hold": 0.3, "meet": 2})
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


def test_workers_take_the_costliest_jobs_first():
    order: list = []
    jobs = [Job(f"scene{k}", (f"s{k}-1",), {}, cost=cost) for k, cost in enumerate([1.0, 5.0, 3.0, 5.0])]
    run_jobs(squares, jobs, workers=1, on_result=lambda item, value: order.append(item))
    # longest first; equal costs keep their order (scene1 before scene3)
    assert order == ["s1-1", "s3-1", "s2-1", "s0-1"]


def test_the_fork_server_preloads_modules_into_every_worker(tmp_path):
    """In a fresh interpreter (this one's fork server may already run): the first call starts the
    server with the modules imported, a second call starts nothing, and a worker forked from it
    has the preloaded module (a stdlib one nothing else imports) but not another. A fork server
    that died is started again by the next run."""
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "preload.py"
    script.write_text(
        "from vlnverse.core.jobs import Job, run_jobs\n"
        "from vlnverse.engines.local import start_fork_server\n"
        "from parallel_jobs import loaded_modules\n"
        "if __name__ == '__main__':\n"
        "    first = start_fork_server(['colorsys', 'parallel_jobs'], wait=True)\n"
        "    again = start_fork_server(['wave'], wait=True)\n"
        "    got = {}\n"
        "    run_jobs(loaded_modules, [Job('a', ('colorsys', 'wave'), {})], workers=2, preload=['wave'],\n"
        "             on_result=lambda item, value: got.update({item: value}))\n"
        "    import os, signal, time\n"
        "    from multiprocessing import forkserver\n"
        "    pid = forkserver._forkserver._forkserver_pid\n"
        "    os.kill(pid, signal.SIGKILL)  # the server dies; wait until it has (a zombie: nothing reaps it)\n"
        "    while os.path.exists(f'/proc/{pid}') and open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()[0] not in 'ZX':\n"
        "        time.sleep(0.01)\n"
        "    start_fork_server(['colorsys'], wait=True)  # must not trip over the dead one\n"
        "    after = {}\n"
        "    run_jobs(loaded_modules, [Job('b', ('colorsys',), {})], workers=2,\n"
        "             on_result=lambda item, value: after.update({item: value}))\n"
        "    print(first, again, got['colorsys'], got['wave'], sorted(after))\n")
    import os

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(Path(__file__).parent),
                                                                     os.environ.get("PYTHONPATH")]))}
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, env=env)
    assert result.returncode == 0, result.stderr
    # 'wave' was asked for after the server started: a run's preload only counts for a new server
    assert result.stdout.split() == ["True", "False", "True", "False", "['colorsys']"]


@pytest.mark.slow  # starting Ray takes ~10-30 s here
def test_a_local_ray_instance_started_here_gives_its_workers_the_environment_without_a_runtime_env(tmp_path,
                                                                                                 monkeypatch):
    pytest.importorskip("ray", reason="Ray is the optional [ray] extra")
    import ray

    from parallel_jobs import environment
    from vlnverse.engines import ray as ray_engine

    monkeypatch.setenv("VLNVERSE_TEST_SETTING", "at-start")
    ray_engine.connect_ray(None, num_cpus=2)
    try:
        assert ray_engine._ray_runtime_env(ray) is None  # actors reuse the instance's prestarted workers
        got: dict = {}
        run_jobs(environment, [Job("a", ("VLNVERSE_TEST_SETTING",), {})], workers=1, engine="ray",
                 on_result=lambda item, value: got.update({item: value}))
        assert got == {"VLNVERSE_TEST_SETTING": "at-start"}
        # a setting changed since the instance started reaches the workers through a runtime_env
        monkeypatch.setenv("VLNVERSE_TEST_SETTING", "changed")
        assert ray_engine._ray_runtime_env(ray)["env_vars"]["VLNVERSE_TEST_SETTING"] == "changed"
        run_jobs(environment, [Job("a", ("VLNVERSE_TEST_SETTING",), {})], workers=1, engine="ray",
                 on_result=lambda item, value: got.update({item: value}))
        assert got == {"VLNVERSE_TEST_SETTING": "changed"}
    finally:
        ray.shutdown()


@pytest.mark.slow  # starting Ray takes ~10-30 s here
def test_a_local_ray_instance_keeps_its_actors_for_the_next_run_with_fresh_state():
    pytest.importorskip("ray", reason="Ray is the optional [ray] extra")
    import os
    import signal
    import ray

    from parallel_jobs import state_probe
    from vlnverse.engines import ray as ray_engine

    def one_run():
        got: dict = {}
        report = run_jobs(state_probe, [Job(f"scene{k}", (f"s{k}-0", f"s{k}-1"), {}) for k in range(2)], workers=2,
                          engine="ray", on_result=lambda item, value: got.update({item: value}))
        return got, report

    ray_engine.connect_ray(None, num_cpus=2)
    try:
        first, _ = one_run()
        second, report = one_run()
        assert {pid for pid, _ in first.values()} == {pid for pid, _ in second.values()}  # the same two processes
        assert len({pid for pid, _ in second.values()}) == 2 and report.retries == 0
        # each run starts from a fresh state: a worker saw 0 then 1 items of its own job, never the first run's
        assert sorted(seen for _, seen in second.values()) == [0, 0, 1, 1]
        # a kept actor that died between runs is replaced before the run: no job is lost or retried
        os.kill(next(iter(second.values()))[0], signal.SIGKILL)
        third, report = one_run()
        assert sorted(third) == ["s0-0", "s0-1", "s1-0", "s1-1"] and report.retries == 0 and not report.failures
        assert len({pid for pid, _ in third.values()} & {pid for pid, _ in second.values()}) == 1
    finally:
        ray.shutdown()
        ray_engine._RAY_POOL.clear()
