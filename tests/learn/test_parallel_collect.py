"""Observation caches and DAgger collection across worker processes: the same store files, byte
for byte, as a serial run (``vlnverse.learn.collect`` over ``vlnverse.core.jobs``)."""
from __future__ import annotations

import pytest

from learn_helpers import PAIRS, make_episodes
from eval_scenes import corridor_loader

SCENES = ("corridor_a", "corridor_b", "corridor_c")


def _files(root):
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """Four corridor episodes on each of three corridor variants (one scene file each)."""
    from vlnverse.run.episodes import RunSettings
    from vlnverse.sim.body import load_body
    from vlnverse.sim.sensors import CameraSpec

    folder = tmp_path_factory.mktemp("scenes")
    body = load_body("r2r_ce")
    episodes = []
    for stem in SCENES:
        ctx = corridor_loader(folder / f"{stem}.usda", body, 0.05)
        for ep in make_episodes(ctx, PAIRS):
            ep.episode_id, ep.scene_id, ep.scene_path = f"{stem}-{ep.episode_id}", stem, str(folder / f"{stem}.usda")
            episodes.append(ep)
    settings = RunSettings(max_steps=40, success_distance=1.5, body=body, resolution=0.05, task_type="fine_grained")
    sensors = [CameraSpec(name="rgb", kind="rgb", width=16, height=16),
               CameraSpec(name="depth", kind="depth", width=16, height=16)]
    return episodes, settings, sensors


def test_observation_cache_is_byte_identical_with_two_workers(setup, tmp_path):
    from vlnverse.learn.cache import teacher_cache

    episodes, settings, sensors = setup
    kw = dict(sensors=sensors, settings=settings, collision_mode="telhop", scene_loader=corridor_loader,
              chunk_frames=64, progress=False, report=lambda msg: None)
    serial, s_stats = teacher_cache(episodes, base_dir=tmp_path / "serial", **kw)
    parallel, p_stats = teacher_cache(episodes, base_dir=tmp_path / "parallel", workers=2, **kw)
    assert s_stats["status"] == p_stats["status"] == "built" and p_stats["workers"] == 2
    assert s_stats["frames"] == p_stats["frames"] > 12 * 5 and len(parallel) == len(episodes)
    a, b = _files(serial.root), _files(parallel.root)
    assert len([k for k in a if k.startswith("chunks")]) >= 2 * 3  # several chunks of several fields
    assert a == b


def test_dagger_collection_with_a_learner_aggregates_the_same_steps_with_two_workers(setup, tmp_path):
    import torch

    from vlnverse.learn.agent import PolicyAgent
    from vlnverse.learn.collect import collect
    from vlnverse.learn.policies import build_policy
    from vlnverse.learn.store import StepStore, sensor_layout
    from vlnverse.learn.vocab import Vocabulary

    from dataclasses import replace

    episodes, settings, sensors = setup
    episodes, settings = episodes[:8], replace(settings, max_steps=6)  # two scenes; an untrained learner wanders
    torch.manual_seed(0)
    vocab = Vocabulary.build(ep.instruction_text for ep in episodes)
    policy = build_policy("cma", {"hidden_size": 32}, vocab, sensor_layout(sensors)).eval()
    got, stores = {}, {}
    for workers in (1, 2):
        store = StepStore.create(tmp_path / f"agg{workers}", key={"test": 1}, sensors=sensor_layout(sensors),
                                 chunk_frames=64)
        learner = PolicyAgent(policy=policy, seed=3, device="cpu")
        got[workers] = collect(episodes, settings=settings, sensors=sensors, collision_mode="telhop", store=store,
                               scene_loader=corridor_loader, learner=learner, beta=0.5, seed=7, progress=False,
                               workers=workers)
        store.close()
        stores[workers] = store
    serial, parallel = got[1], got[2]
    assert serial["steps"] == parallel["steps"] == stores[1].num_steps == stores[2].num_steps > 8 * 2
    executed = stores[1].manifest  # the learner really acted: some executed actions differ from the labels
    assert executed["episodes"] == len(episodes)
    assert [r["episode_id"] for r in parallel["records"]] == [ep.episode_id for ep in episodes]
    assert [r["trajectory"] for r in serial["records"]] == [r["trajectory"] for r in parallel["records"]]
    assert _files(stores[1].root) == _files(stores[2].root)
    import numpy as np

    labels = np.concatenate([np.load(p) for p in sorted((stores[1].root / "chunks").glob("*.label.npy"))])
    done = np.concatenate([np.load(p) for p in sorted((stores[1].root / "chunks").glob("*.executed.npy"))])
    assert (labels != done).any()  # β = 0.5: the learner's (untrained) actions were executed too
    for run in (serial, parallel):  # the rate is of the steps collected over the seconds (kept to the ms) reported
        assert run["steps_per_s"] == round(run["steps"] / run["seconds"], 2)


def test_bad_worker_count_is_a_config_error(setup, tmp_path):
    from vlnverse.core.errors import ConfigError
    from vlnverse.learn.collect import collect

    episodes, settings, sensors = setup
    with pytest.raises(ConfigError, match="workers"):
        collect(episodes, settings=settings, sensors=sensors, collision_mode="telhop", store=None, workers=0,
                progress=False)


@pytest.mark.parametrize("argv, field", [(["--workers", "0"], "workers"), (["workers=0"], "workers"),
                                         (["--engine", "dask"], "--engine"), (["job_timeout=-1"], "job_timeout")])
def test_train_cli_bad_parallel_settings_are_one_line_errors(argv, field, capsys):
    from vlnverse.cli import main

    assert main(["train", "cma_fine_grained", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and field in err



def test_the_fork_server_preload_covers_what_a_collection_job_imports(tmp_path):
    """In a fresh interpreter that imported what ``collect`` preloads into its fork server, a
    teleport collection job on a USD scene file (``load_scene_context``, the on-disk scene cache)
    imports nothing but the GL modules (a GL context is per worker) and the backend's looks (2 ms), so
    no worker imports the rest
    (e.g. ``matplotlib.path``, about 0.1 CPU s) on its first scene."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "imports.py"
    script.write_text(
        "import importlib, sys\n"
        "from vlnverse.run.rollout import WORKER_PRELOAD\n"
        "from vlnverse.sim.api import backend_module\n"
        "from vlnverse.learn.collect import CollectJob, collect_scene_job\n"
        "for m in WORKER_PRELOAD + (backend_module('auto'),):\n"
        "    importlib.import_module(m)\n"
        "from eval_scenes import corridor_scene\n"
        "from learn_helpers import PAIRS, make_episodes\n"
        "from vlnverse.run.episodes import RunSettings\n"
        "from vlnverse.scenes.usd_io import write_usd\n"
        "from vlnverse.sim.body import load_body\n"
        "from vlnverse.sim.sensors import CameraSpec\n"
        "from vlnverse.tasks.base import context_from_description\n"
        f"path = str(write_usd(corridor_scene(), {str(tmp_path / 'corridor.usda')!r}))\n"
        "body = load_body('r2r_ce')\n"
        "episodes = make_episodes(context_from_description(corridor_scene(), body, 0.05))[:2]\n"
        "for ep in episodes:\n"
        "    ep.scene_path = path\n"
        "sensors = [CameraSpec(name='rgb', kind='rgb', width=16, height=16),\n"
        "           CameraSpec(name='depth', kind='depth', width=16, height=16)]\n"
        "settings = RunSettings(max_steps=10, success_distance=1.5, body=body, resolution=0.05, task_type='fine_grained')\n"
        "job = CollectJob(teacher=None, learner=None, beta=1.0, seed=0, settings=settings, sensors=sensors,\n"
        "                 sensor_names=('rgb', 'depth'), collision_mode='telhop', mode_params={}, backend='auto',\n"
        "                 scene_loader=None, torch_threads=None, render='teleport', scene_path=path, episodes=episodes)\n"
        "before, got = set(sys.modules), []\n"
        "collect_scene_job(job, tuple(ep.episode_id for ep in episodes), {}, lambda i, r: got.append(len(r['steps'])))\n"
        "print(len(got), min(got) > 0, sorted(m for m in set(sys.modules) - before\n"
        "                                      if not m.startswith(('OpenGL', 'mujoco.gl_context', 'vlnverse.sim.mujoco.gl',\n"
        "                                                        'vlnverse.sim.mujoco.looks'))))  # 2 ms\n")
    here = Path(__file__).parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(here), str(here.parent / "eval"), os.environ.get("PYTHONPATH", "")]),
           "VLNVERSE_CACHE": str(tmp_path / "cache")}
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split("\n")[-2] == "2 True []"
