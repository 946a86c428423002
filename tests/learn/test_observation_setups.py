"""Per-task observation setups of the waypoint policies (``tasks[i].observation``: panoramic or a
monocular forward camera of ``hfov_deg``; GAMA's "diverse observation spaces"): what the
perception sees, the feature cloud's unseen points, and the setup reaching teacher and agent of
a multi-task GAMA run with its per-task report."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from test_multitask import _config, task_files  # noqa: E402,F401 (the module fixture)
from test_vlnbert import _train, predictor_file  # noqa: E402,F401 (the session fixture)

MONO = {"view": "monocular", "hfov_deg": 90}


def _wrap(a):
    return (np.asarray(a) + math.pi) % (2 * math.pi) - math.pi


def test_observation_setup_views_and_errors():
    from vlnverse.core.errors import ConfigError
    from vlnverse.learn.waypoints.grid import ObservationSetup

    mono = ObservationSetup.parse(MONO)
    assert mono.visible(12, 90).tolist() == [True] + [False] * 11
    assert np.flatnonzero(ObservationSetup.parse({"view": "monocular", "hfov_deg": 150}).visible(12, 90)).tolist() == [0, 1, 11]
    assert mono.in_view(np.radians([0, 44, -44, 46, 180, 315])).tolist() == [True, True, True, False, False, True]
    assert ObservationSetup.parse(None).visible(12, 90).all() and ObservationSetup().in_view(np.radians([180])).all()
    for bad, field in (({"view": "fisheye"}, "tasks[1].observation.view"), ({"view": "monocular", "hfov_deg": 60},
                       "tasks[1].observation.hfov_deg"), ({"fov": 90}, "tasks[1].observation"), ([90], "tasks[1].observation")):
        with pytest.raises(ConfigError) as err:
            ObservationSetup.parse(bad, "tasks[1].observation")
        assert field in str(err.value) and "\n" not in str(err.value)


def test_monocular_perception_sees_its_view_only(corridor, predictor_file):
    from vlnverse.learn.hnr import UNSEEN, FeatureCloud, HNRPerception, panorama_points
    from vlnverse.learn.waypoints.model import load_predictor

    predictor = load_predictor(predictor_file)
    pano, mono = HNRPerception(predictor, 2), HNRPerception(predictor, 2, MONO)
    behind = 0
    poses = [(1.3, 1.5, 0.0), (2.0, 2.5, math.pi / 2), (8.5, 2.5, math.pi), (3.0, 1.0, -math.pi / 2)]
    for pose in poses:
        fp, cp, n_p = pano(corridor.desc, corridor.body, pose)
        fm, cm, n_m = mono(corridor.desc, corridor.body, pose)
        # monocular: every candidate within ±45°, the unseen views' features zero, their cells UNSEEN
        assert np.all(np.abs(_wrap(cm[:n_m, 0])) <= math.radians(45) + 1e-6) and not cm[n_m + 3:].any()
        assert (cm[n_m:n_m + 3, 1] == 0).all() and (cm[n_m:n_m + 3, 2] == 1).all()  # the turns (distance 0)
        assert not fm[1:].any() and np.abs(fm[0]).sum() > 0
        assert not np.allclose(fm[0], fp[0], atol=1e-4)  # the predictor read blank views beside and behind
        assert (mono.last_depth[1:] == UNSEEN).all() and (mono.last_depth[0] >= 0).all() and not mono.last_grid[1:].any()
        behind += int(np.sum(np.abs(_wrap(cp[:n_p, 0])) > math.radians(45)))
        # the cloud keeps the seen cells alone (one view x 2 x 2); the panorama's 12 x 4
        cloud = FeatureCloud(1, predictor.grid_channels, 1000)
        for p in (pano, mono):
            cloud.add(panorama_points(torch.from_numpy(p.last_grid)[None], torch.from_numpy(p.last_depth)[None],
                                      torch.tensor([pose], dtype=torch.float32), 90.0))
        assert len(cloud) == 48 + 4
    assert behind > 0  # the panoramic setup proposes candidates beside and behind the agent


def test_a_batch_parks_the_points_no_episode_saw_and_renders_without_them():
    from vlnverse.learn.hnr import PARKED, UNSEEN, FeatureCloud, VolumeRenderer, panorama_points

    g = torch.randn(2, 12, 5, 2, 2)
    depth = torch.full((2, 12, 2, 2), 2.0)
    depth[1, 1:] = UNSEEN  # episode 1 monocular: sees view 0 alone
    pose = torch.zeros(2, 3)
    cloud = FeatureCloud(2, 5, 1000)
    cloud.add(panorama_points(g, depth, pose, 90.0))
    assert len(cloud) == 48  # episode 0 saw every view: no column dropped
    assert (cloud.positions[1, 4:] == PARKED).all() and not cloud.features[1, 4:].any()
    assert (cloud.positions[1, :4].abs() < 10).all()
    renderer = VolumeRenderer(5, k=4, rays=3, samples=4, radius=1.5)
    # a view rendered behind the monocular agent finds nothing: its opacity is 0
    _, opacity = renderer(cloud, torch.tensor([[[-0.5, 0.0, 0.0]]]).expand(2, 1, 3), torch.full((2, 1), math.pi))
    assert opacity[0, 0] > 0 and opacity[1, 0] == 0


@pytest.mark.slow
def test_gama_multitask_run_gives_each_task_its_observation_setup(corridor, task_files, predictor_file, tmp_path):
    from vlnverse.core.errors import ConfigError
    from vlnverse.learn.store import StepStore

    mono = {**MONO, "hfov_deg": 90.0}
    cfg = _config(tmp_path / "run", task_files, predictor_file, il={"epochs": 1, "batch_size": 4, "lr": 0.003})
    cfg.tasks[1].observation = mono
    summary = _train(cfg, corridor)
    out = Path(cfg.out)
    # the teacher caches: the coarse (monocular) task's candidates all within ±45°, the fine task's not
    stores = {name: StepStore(c["path"]) for name, c in summary["cache"]["tasks"].items()}
    angles = {}
    for name, store in stores.items():
        eps = [store.episode(i) for i in range(len(store))]
        angles[name] = np.concatenate([np.abs(_wrap(c[..., 0][(c[..., 2] > 0.5) & (c[..., 1] > 0)]))
                                       for c in (e["candidates"] for e in eps)])  # moving candidates (not turns)
        assert len(angles[name]) > 0
    assert angles["coarse"].max() <= math.radians(45) + 1e-6 < angles["fine_grained"].max()
    assert all((StepStore(summary["cache"]["tasks"]["coarse"]["path"]).episode(i)["view_depth"][:, 1:] == -1).all()
               for i in range(4))
    # acting: the per-task report holds both tasks, the monocular one's waypoints within its field of view
    report = json.loads((out / "tasks.json").read_text())
    assert set(report["tasks"]) == {"fine_grained", "coarse"} and report["observation"]["coarse"] == mono
    assert report["observation"]["fine_grained"] == {"view": "panoramic"}
    for name in ("fine_grained", "coarse"):
        assert report["tasks"][name]["val_seen"]["episodes"] == 4
    records = [json.loads(x) for x in (out / "tasks" / "coarse" / "val_seen" / "episodes.jsonl").read_text().splitlines()]
    picked = [o["waypoint"][0] for r in records for o in r["agent_outputs"] if "waypoint" in o and o["waypoint"][1] > 0]
    assert picked and max(abs(a) for a in _wrap(picked)) <= math.radians(45) + 1e-3
    # a policy without waypoint perception cannot take an observation setup: one line naming the field
    bad = _config(tmp_path / "cma", task_files, predictor_file, policy={"name": "cma", "params": {"hidden_size": 16}},
                  il={"epochs": 1, "batch_size": 4, "lr": 0.003})
    bad.tasks[0].observation = mono
    with pytest.raises(ConfigError, match=r"tasks\[0\]\.observation"):
        _train(bad, corridor)
