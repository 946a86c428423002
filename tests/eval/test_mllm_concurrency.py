"""``model.concurrency``: MLLM evaluation sends up to N requests at once to the model endpoint,
whatever the number of simulator workers, and gives exactly the serial records and summary.

Simulator-free graph mode (cached views) runs up to N episodes of a scene at once in threads;
with worker processes the limit is one semaphore for the whole run. The local test server
counts the requests it is answering at once."""
from __future__ import annotations

import json
from pathlib import Path

import pytest


from eval_scenes import named_corridor_loader  # noqa: E402
from mllm_server import message_text, openai_server  # noqa: E402
from vlnverse.core.errors import ConfigError  # noqa: E402
from vlnverse.eval.config import load_eval_config  # noqa: E402
from vlnverse.eval.mllm.cache import build_scene_cache  # noqa: E402
from vlnverse.eval.folder import EPISODES_FILE  # noqa: E402
from vlnverse.eval.runner import run_eval  # noqa: E402
from vlnverse.sim.body import load_body  # noqa: E402
from vlnverse.tasks.episode import Episode, Goal, Instruction, save_episodes  # noqa: E402

SIZE = 32
SCENES = ("corridor_a", "corridor_b")
PER_SCENE = 4


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """Scenes, their view cache and an episode file: PER_SCENE episodes per scene."""
    root = tmp_path_factory.mktemp("mllm_conc")
    body = load_body("r2r_ce")
    episodes = []
    for stem in SCENES:
        ctx = named_corridor_loader(root / f"{stem}.usda", body, 0.05)
        build_scene_cache(ctx.with_render_options({"objects": "meshes"}), root / "views", size=SIZE)  # the MLLM default
        path = ctx.planner.shortest_path((1.3, 1.5), (9.0, 1.5))
        for i in range(PER_SCENE):
            episodes.append(Episode(f"{stem}-{i}", stem, str(root / f"{stem}.usda"), "test", "fine_grained",
                                    [1.3, 1.5, 0.0], 0.0, [Goal([9.0, 1.5, 0.0])], [[*p, 0.0] for p in path.waypoints],
                                    path.length, [Instruction(f"walk {i + 1} places along the corridor and stop")]))
    save_episodes(root / "episodes.jsonl", episodes)
    return root


def walker(body, n):
    """Deterministic answers from the prompt alone (never from the arrival order): move to
    marker 1 until the instruction's number of steps is in the history, then STOP; each answer
    takes 0.2 s so concurrent requests overlap."""
    last = message_text(body["messages"][-1])
    want = int(last.split("Instruction: walk ")[1].split(" ")[0]) if "Instruction: walk " in last else 1
    steps = last.count("\nStep ")
    text = "Action: STOP" if steps >= want else "Action: 1"
    return {"text": text, "sleep": 0.2, "prompt_tokens": len(last)}


def overlapping(at_once: int):
    """``walker`` whose first ``at_once`` requests wait for each other (at most 60 s, which only ends
    a run that never sends that many: a worker starting late on a busy machine still arrives): a run
    allowed that many requests at once reaches it however busy the machine is."""
    import contextlib
    import threading

    meet = threading.Barrier(at_once, timeout=60)

    def reply(body, n):
        if n < at_once:
            with contextlib.suppress(threading.BrokenBarrierError):
                meet.wait()
        return walker(body, n)

    return reply


def _run(setup: Path, url: str, out: Path, concurrency: int | None, workers: int = 1,
         engine: str = "local") -> tuple[dict, list[dict]]:
    conc = "" if concurrency is None else f", concurrency: {concurrency}"
    (out.parent / f"{out.name}.yaml").write_text(
        f"agent: {{name: navgpt, params: {{view_size: {SIZE}, image_dir: '{setup / 'images'}'}}}}\n"
        f"model: {{name: openai{conc}, params: {{model: nav-vlm, base_url: '{url}', api_key_env: null, cache: false, "
        f"max_retries: 0, timeout: 120}}}}\n"
        f"task: fine_grained\nepisodes: {setup / 'episodes.jsonl'}\ncollision_mode: graph\nbackend: viewpoints\n"
        f"max_steps: 8\nout: {out}\nreport: {{enabled: false}}\n")
    cfg = load_eval_config(out.parent / f"{out.name}.yaml")
    summary = run_eval(cfg, progress=False, print_summary=False, scene_loader=named_corridor_loader, workers=workers,
                       engine=engine)
    return summary, [json.loads(line) for line in (out / EPISODES_FILE).read_text().splitlines()]


def _strip(value):
    """``value`` without timings (latency, observation access, durations) and the test server's
    port (``endpoint_host``), which no two runs share."""
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items()
                if k not in ("timing", "duration_s", "endpoint_host") and "latency" not in k and "access_ms" not in k}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    return value


@pytest.fixture(scope="module")
def serial(setup, tmp_path_factory, monkeypatch_module):
    monkeypatch_module.setenv("VLNVERSE_VIEW_CACHE", str(setup / "views"))
    with openai_server(walker) as (url, reqs):
        summary, records = _run(setup, url, tmp_path_factory.mktemp("serial") / "run", None)
        assert reqs.max_in_flight == 1  # one episode at a time: one request at a time
    assert len(records) == len(SCENES) * PER_SCENE
    assert sorted({r["moves"] for r in records}) == [1, 2, 3, 4]  # the episodes really differ
    return summary, records


@pytest.fixture(scope="module")
def monkeypatch_module():
    mp = pytest.MonkeyPatch()
    yield mp
    mp.undo()


def test_graph_mode_runs_n_requests_at_once_with_the_serial_records(setup, serial, tmp_path):
    with openai_server(overlapping(3)) as (url, reqs):
        summary, records = _run(setup, url, tmp_path / "run", 3)
        assert reqs.max_in_flight == 3
    assert [r["episode_id"] for r in records] == [r["episode_id"] for r in serial[1]]  # same order in the log
    assert _strip(records) == _strip(serial[1])
    assert _strip(summary) == _strip(serial[0])
    assert json.loads((tmp_path / "run" / "summary.json").read_text())["overall"]["means"] == serial[0]["overall"]["means"]


def test_the_limit_is_global_across_worker_processes(setup, serial, tmp_path):
    # 2 workers × 3 episode threads could send 6 requests at once; the run-wide limit is 3
    with openai_server(overlapping(3)) as (url, reqs):
        summary, records = _run(setup, url, tmp_path / "run", 3, workers=2)
        assert reqs.max_in_flight == 3
    by_id = {r["episode_id"]: r for r in serial[1]}
    assert sorted(r["episode_id"] for r in records) == sorted(by_id)
    assert _strip(sorted(records, key=lambda r: r["episode_id"])) == _strip([by_id[k] for k in sorted(by_id)])
    assert _strip(summary) == _strip(serial[0])


@pytest.mark.slow  # ~15 s: every request waits for the one before it
def test_one_request_at_a_time_across_two_workers(setup, serial, tmp_path):
    with openai_server(walker) as (url, reqs):
        _, records = _run(setup, url, tmp_path / "run", 1, workers=2)
        assert reqs.max_in_flight == 1  # two workers, one endpoint slot
    assert len(records) == len(serial[1])


@pytest.mark.slow  # starting Ray takes ~10-30 s here
def test_the_limit_is_global_across_ray_workers(setup, serial, tmp_path):
    ray = pytest.importorskip("ray", reason="Ray is the optional [ray] extra")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        with openai_server(overlapping(3)) as (url, reqs):
            summary, records = _run(setup, url, tmp_path / "run", 3, workers=2, engine="ray")
            assert reqs.max_in_flight == 3
    finally:
        ray.shutdown()
    assert sorted(r["episode_id"] for r in records) == sorted(r["episode_id"] for r in serial[1])
    assert _strip(summary) == _strip(serial[0])


@pytest.mark.parametrize("bad", ["0", "300", "two"])
def test_bad_concurrency_is_a_config_error(setup, tmp_path, bad):
    (tmp_path / "c.yaml").write_text(
        f"agent: {{name: navgpt}}\nmodel: {{name: openai, concurrency: {bad}, params: {{model: m}}}}\n"
        f"task: fine_grained\nepisodes: {setup / 'episodes.jsonl'}\nout: {tmp_path / 'o'}\n")
    with pytest.raises(ConfigError, match="concurrency"):
        load_eval_config(tmp_path / "c.yaml")
