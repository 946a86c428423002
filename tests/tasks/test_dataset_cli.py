"""``vlnverse data ...`` end to end on generated homes: determinism, atomicity, bad input, R2R."""
from __future__ import annotations

import json

import numpy as np
import pytest

from vlnverse.cli import main
from vlnverse.tasks.base import TaskGenerator, load_scene_context, load_task_types, register_task
from vlnverse.tasks.episode import Instruction, load_episodes
from vlnverse.tasks.pathing import polyline_length
from vlnverse.tasks.scene_roots import resolve_episode_scenes, scene_roots


@register_task("test_geometry")
class GeometryOnly(TaskGenerator):
    """Test-only task: real sampled start/goal pairs and planned paths, a fixed instruction."""

    fail_on_scene: str | None = None

    def generate(self, ctx, rng, n, split):
        if ctx.scene_id == self.fail_on_scene:
            raise RuntimeError("simulated crash mid-generation")
        episodes = []
        for i in range(n):
            pair, path = self.sample_path(ctx, rng)
            episodes.append(self.make_episode(ctx, i, split, path, [Instruction("Walk to the goal and stop.")],
                                              info={"grid_cost": path.grid_cost}))
        return episodes


@pytest.fixture(scope="module")
def homes(tmp_path_factory):
    from vlnverse.scenes.procgen import generate_home
    from vlnverse.scenes.usd_io import write_usd

    folder = tmp_path_factory.mktemp("homes")
    return [write_usd(generate_home(seed, scene_id=f"home_{seed:03d}", min_rooms=4, max_rooms=6),
                      folder / f"home_{seed:03d}.usda") for seed in (1, 2, 3)]


def run(*argv) -> int:
    return main(["data", *map(str, argv)])


def generate(homes, out, *extra, task="test_geometry", k=6, seed=7):
    scenes = ",".join(str(h) for h in homes)
    return run("generate", "--task", task, "--scenes", scenes, "--episodes-per-scene", k, "--seed", seed,
               "--out", out, "--no-progress", *extra)


def test_generate_writes_valid_collision_free_dataset(homes, tmp_path):
    out = tmp_path / "ds"
    assert generate(homes[:2], out) == 0
    files = sorted(p.name for p in out.iterdir())
    assert "summary.json" in files and "summary.png" in files and "train.jsonl" in files
    summary = json.loads((out / "summary.json").read_text())
    episodes = load_episodes(out)
    assert len(episodes) == 12 == summary["total_episodes"] == sum(summary["counts"].values())
    assert set(summary["counts"]) <= {"train", "val_seen"}
    assert (out / "summary.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    ids = [e.episode_id for e in episodes]
    assert len(set(ids)) == len(ids) and "test_geometry-home_001-00000" in ids
    for ep in resolve_episode_scenes(episodes, scene_roots(dataset_dir=out)):  # scene paths are relative
        ctx = load_scene_context(ep.scene_path, "r2r_ce")
        ref = np.asarray(ep.reference_path)[:, :2]
        assert np.all(ctx.planner.segments_free(ref[:-1], ref[1:]))
        assert 3.0 <= ep.geodesic_distance == ep.info["grid_cost"] <= 20.0
        start_cost = ctx.planner.distance_field(ref[-1]).distance(ref[:1])[0]
        assert ep.geodesic_distance == pytest.approx(start_cost, abs=1e-6)  # files keep 1e-6 m (core.precision)
        length = polyline_length(ref)
        assert ep.geodesic_distance / 1.0824 <= length <= ep.geodesic_distance + 1e-5
        # The start faces along the first reference segment.
        d = ref[1] - ref[0]
        assert ep.start_yaw == pytest.approx(np.arctan2(d[1], d[0]), abs=1e-5)  # from 1e-6 m points


def test_same_seed_gives_identical_bytes_and_scenes_are_independent(homes, tmp_path):
    assert generate(homes[:2], tmp_path / "a") == 0
    assert generate(homes[:2], tmp_path / "b") == 0
    for name in ("train.jsonl", "summary.json", "summary.png"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()
    assert generate(homes[:2], tmp_path / "c", seed=8) == 0
    assert (tmp_path / "c" / "train.jsonl").read_bytes() != (tmp_path / "a" / "train.jsonl").read_bytes()
    # Adding a scene leaves the other scenes' episodes unchanged.
    assert generate(homes, tmp_path / "d") == 0
    before = {e.episode_id: e.to_dict() for e in load_episodes(tmp_path / "a")}
    after = {e.episode_id: e.to_dict() for e in load_episodes(tmp_path / "d") if e.scene_id != "home_003"}
    assert before == after


def test_failure_mid_generation_leaves_no_output(homes, tmp_path, monkeypatch):
    monkeypatch.setattr(GeometryOnly, "fail_on_scene", "home_002")
    out = tmp_path / "ds"
    with pytest.raises(RuntimeError, match="simulated crash"):
        generate(homes[:2], out)
    assert list(tmp_path.iterdir()) == []
    # An existing dataset is left untouched by a failed regeneration.
    monkeypatch.setattr(GeometryOnly, "fail_on_scene", None)
    assert generate(homes[:1], out) == 0
    before = (out / "train.jsonl").read_bytes()
    monkeypatch.setattr(GeometryOnly, "fail_on_scene", "home_002")
    with pytest.raises(RuntimeError):
        generate(homes[:2], out)
    assert (out / "train.jsonl").read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]


@pytest.mark.parametrize("argv, message", [
    (("--task", "no_such_task"), "unknown task 'no_such_task' (registered: coarse_grained"),
    (("--episodes-per-scene", "0"), "--episodes-per-scene: got 0 (expected an integer in 1..10000)"),
    (("--set", "min_geodesic=80", "--set", "max_geodesic=90"), "scene 'home_001': no navigable start/goal pair"),
    (("--scenes", "missing_file.usda"), "missing_file.usda: --scenes: scene file not found"),
    (("--set", "max_geodesic=1"), "max_geodesic: got 1.0 with min_geodesic 3.0"),
])
def test_bad_input_is_one_line_exit_2(homes, tmp_path, capsys, argv, message):
    args = {"--task": "test_geometry", "--scenes": str(homes[0]), "--episodes-per-scene": "2", "--out": str(tmp_path / "x")}
    extra = []
    it = iter(argv)
    for key in it:
        value = next(it)
        if key in args:
            args[key] = value
        else:
            extra += [key, value]
    flat = [x for kv in args.items() for x in kv]
    assert main(["data", "generate", *flat, "--no-progress", *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("vlnverse: error:") and message in err and "\n" not in err
    assert not (tmp_path / "x").exists()


def test_show_reports_corrupt_line(homes, tmp_path, capsys):
    out = tmp_path / "ds"
    assert generate(homes[:1], out, k=3) == 0
    assert run("show", out / "train.jsonl", "--n", 1) == 0
    assert "test_geometry-home_001-00000" in capsys.readouterr().out
    lines = (out / "train.jsonl").read_text().splitlines()
    lines[1] = lines[1][:40]
    (out / "train.jsonl").write_text("\n".join(lines) + "\n")
    assert run("show", out / "train.jsonl") == 2
    assert "train.jsonl:2: malformed JSON" in capsys.readouterr().err


def test_r2r_cli_round_trip(homes, tmp_path):
    out = tmp_path / "ds"
    assert generate(homes[:1], out, k=3) == 0
    assert run("export-r2r", out, "--split", "train", "--out", tmp_path / "r2r.json") == 0
    assert run("import-r2r", tmp_path / "r2r.json", "--split", "train", "--task", "test_geometry",
               "--out", tmp_path / "back.jsonl") == 0
    orig = load_episodes(out, split="train")
    back = load_episodes(tmp_path / "back.jsonl")
    assert [e.episode_id for e in back] == [e.episode_id for e in orig]
    for a, b in zip(orig, back):
        assert b.start_position == a.start_position and b.reference_path == a.reference_path
        assert b.goals[0].position == a.goals[0].position and b.geodesic_distance == a.geodesic_distance
        assert b.start_yaw == pytest.approx(a.start_yaw, abs=1e-12)


@pytest.mark.slow
def test_fine_grained_end_to_end(homes, tmp_path):
    if "fine_grained" not in load_task_types():
        pytest.skip("fine_grained task type not registered")
    out = tmp_path / "fg"
    assert generate(homes[:1], out, task="fine_grained", k=3) == 0
    episodes = load_episodes(out)
    assert len(episodes) == 3
    for ep in resolve_episode_scenes(episodes, scene_roots(dataset_dir=out)):
        assert ep.task_type == "fine_grained" and ep.instructions
        ctx = load_scene_context(ep.scene_path, "r2r_ce")
        ref = np.asarray(ep.reference_path)[:, :2]
        assert np.all(ctx.planner.segments_free(ref[:-1], ref[1:]))


def test_rendering_task_assets_land_inside_the_dataset(homes, tmp_path):
    from vlnverse.tasks.dataset import generate_dataset

    if "visual_reference" not in load_task_types():
        pytest.skip("visual_reference task type not registered")
    from vlnverse.tasks.dataset import simulator_renderer_factory

    calls = []

    def factory(ctx):
        camera, close = simulator_renderer_factory(32, 32)(ctx)

        class Recording:
            hfov_deg = camera.hfov_deg
            instances = staticmethod(camera.instances)

            def __call__(self, x, y, yaw, pitch=0.0):
                calls.append((x, y, yaw, pitch))
                return camera(x, y, yaw, pitch)

        return Recording(), lambda: (close(), calls.append("closed"))

    summary = generate_dataset("visual_reference", [homes[0]], 2, 0, tmp_path / "vr", progress=False,
                               renderer_factory=factory)
    assert summary["total_episodes"] == 2 and calls[-1] == "closed"
    for ep in load_episodes(tmp_path / "vr"):
        image = tmp_path / "vr" / ep.info["reference_image"]
        assert image.is_file() and image.read_bytes()[:4] == b"\x89PNG"
    with pytest.raises(Exception, match="needs a renderer"):
        generate_dataset("visual_reference", [homes[0]], 1, 0, tmp_path / "none", progress=False)
    assert not (tmp_path / "none").exists()


@pytest.mark.slow
def test_splits_from_shipped_scenes(tmp_path):
    from vlnverse.paths import scenes_dir

    try:
        from vlnverse.scenes.splits import load_splits
        splits = load_splits()
    except Exception:  # no shipped scenes in this checkout
        pytest.skip("no scenes_usd/splits.json")
    train, test = splits["train"][0], splits["test"][0]
    out = tmp_path / "ds"
    assert run("generate", "--task", "test_geometry", "--scenes", f"{train},{test}", "--episodes-per-scene", 10,
               "--seed", 0, "--val-seen-fraction", 0.5, "--out", out, "--no-progress") == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["scenes"]["test"] == [test]
    assert summary["counts"]["test"] == 10
    assert summary["counts"]["train"] + summary["counts"]["val_seen"] == 10
    assert summary["counts"]["val_seen"] > 0 and summary["scenes"]["val_seen"] == [train]
    assert {e.split for e in load_episodes(out / "test.jsonl")} == {"test"}
    assert scenes_dir().is_dir()


def test_navgraph_cli(homes, tmp_path, capsys):
    from vlnverse.tasks.navgraph import NavGraph

    assert run("navgraph", homes[0], "--out", tmp_path / "nav.json") == 0
    assert "(connected)" in capsys.readouterr().out
    nav = NavGraph.load(tmp_path / "nav.json")
    ctx = load_scene_context(homes[0], "r2r_ce")
    pos = nav.positions()
    u, v = np.array(list(nav.graph.edges)).T
    assert nav.is_connected() and np.all(ctx.planner.segments_free(pos[u], pos[v]))
    kinds = {d["kind"] for _, d in nav.graph.nodes(data=True)}
    assert {"door", "room"} <= kinds
    assert run("navgraph", homes[0], "--out", tmp_path / "x.json", "--spacing", 4) == 2


def test_task_config_validation_and_context_cache(homes, tmp_path):
    from vlnverse.core.errors import ConfigError, UnknownNameError
    from vlnverse.tasks.base import load_task_config

    bad = tmp_path / "t.yaml"
    bad.write_text("task_type: test_geometry\nmin_geodesic: 5.0\nmax_geodesic: 4.0\n")
    with pytest.raises(ConfigError, match=r"t.yaml: max_geodesic: got 4.0 with min_geodesic 5.0"):
        load_task_config(bad)
    bad.write_text("task_type: test_geometry\nmax_steps: 0\n")
    with pytest.raises(ConfigError, match=r"t.yaml: max_steps: got 0 \(expected a positive integer\)"):
        load_task_config(bad)
    assert load_task_config("test_geometry").min_geodesic == 3.0  # registered, no YAML: defaults
    with pytest.raises(UnknownNameError, match="unknown task 'nope'"):
        load_task_config("nope")
    a = load_scene_context(homes[0], "r2r_ce")
    b = load_scene_context(homes[0], "r2r_ce", renderer=lambda *p: None)
    assert b.planner is a.planner and b.renderer is not None and a.renderer is None
    assert load_scene_context(homes[0], "stretch").planner is not a.planner
