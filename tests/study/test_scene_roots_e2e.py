"""One scene resolver for every consumer of episodes, from real ``vlnverse data generate`` output
(portable scene paths relative to the shipped scenes): study serve (the CLI, driven in Chromium),
study score, the viewer over the study and over an ordinary ``vlnverse eval`` run (map and view
images HTTP 200), the gym env, train's episode loading, cache build; a scene in no root is one
line naming the episode and the roots searched."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the study extra is not installed (pip install -e '.[study]')")

from vlnverse.cli import main


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(url: str) -> tuple[int, bytes, str]:
    try:
        with urllib.request.urlopen(url, timeout=120) as r:
            return r.status, r.read(), r.headers.get("content-type", "")
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read(), exc.headers.get("content-type", "")


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """``vlnverse data generate`` output (1 coarse-grained episode on each val_unseen home) and a
    copy whose scene is in no root."""
    root = tmp_path_factory.mktemp("generated")
    cwd = os.getcwd()
    os.chdir(root)  # relative scene paths must not resolve against the working folder by chance
    try:
        assert main(["data", "generate", "--task", "coarse_grained", "--scenes", "val_unseen",
                     "--episodes-per-scene", "1", "--seed", "0", "--out", "D", "--no-progress"]) == 0
    finally:
        os.chdir(cwd)
    data = root / "D" / "val_unseen.jsonl"
    lines = [json.loads(x) for x in data.read_text().splitlines()]
    assert all(not Path(x["scene_path"]).is_absolute() for x in lines), [x["scene_path"] for x in lines]
    missing = root / "E" / "val_unseen.jsonl"
    missing.parent.mkdir()
    missing.write_text(data.read_text().replace("home_0014", "home_9914"))
    return root, data, missing


def _wait_for(url: str, proc: subprocess.Popen, log: Path, seconds: float = 300) -> None:
    """Poll ``url``'s status until the server answers (readiness; ``seconds`` only ends a hang)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"`vlnverse study serve` exited with status {proc.returncode}: "
                                 f"{log.read_text(errors='replace')[-3000:]}")
        try:
            if _get(url + "/api/status")[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.3)
    raise AssertionError(f"`vlnverse study serve` did not answer at {url} within {seconds:.0f} s: "
                         f"{log.read_text(errors='replace')[-3000:]}")


def test_missing_scene_is_one_line_naming_episode_and_roots(generated, tmp_path, capsys):
    root, _, missing = generated
    assert main(["study", "serve", "--episodes", str(missing), "--out", str(tmp_path / "S")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    assert "coarse_grained-home_9914-00000" in err[0] and str(missing.parent) in err[0] and "scenes_usd" in err[0]
    assert not (tmp_path / "S" / "participants").exists()
    # a --scene-root that is not a folder is named
    assert main(["study", "serve", "--episodes", str(missing), "--out", str(tmp_path / "S"),
                 "--scene-root", str(tmp_path / "nope")]) == 2
    assert "--scene-root" in capsys.readouterr().err


def test_generate_serve_drive_score_view(generated, browser, tmp_path, artifacts):
    from vlnverse.study.server import BackgroundServer
    from vlnverse.study.viewer import Viewer, create_viewer_app

    root, data, _ = generated
    config = tmp_path / "study.yaml"
    config.write_text("episodes_per_participant: 1\npractice_episodes: 0\nseed: 0\n")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    log = tmp_path / "serve.log"  # a file, not a pipe: a chatty server never blocks on a full pipe
    with log.open("w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "vlnverse", "study", "serve", "--episodes", str(data),
                                 "--out", str(tmp_path / "S"), "--config", str(config), "--port", str(port)],
                                cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT, text=True)
    try:
        _wait_for(url, proc, log)
        page = browser.new_page()
        page.goto(url)
        page.fill("#pid", "E2E")
        page.click("#login-button")
        page.click("#agree")
        page.wait_for_selector("#instruction-modal:not(.hidden)", timeout=120_000)
        page.click("#modal-go")
        page.wait_for_function("document.getElementById('status').textContent === 'driving'", timeout=120_000)
        page.wait_for_function("document.getElementById('view').naturalWidth > 0", timeout=120_000)
        page.keyboard.down("a")
        page.wait_for_timeout(600)
        page.keyboard.up("a")
        page.wait_for_timeout(300)
        page.keyboard.press("Enter")
        page.click("#confirm-yes")
        page.screenshot(path=str(artifacts / "e2e_after_episode.png"))
        folder = tmp_path / "S" / "participants" / "E2E"
        deadline = time.monotonic() + 120

        def ends_written():  # the episode's end record (assignment.json is there from the login on)
            return [p for p in folder.glob("*.json") if p.name != "assignment.json"]

        while not ends_written():
            assert time.monotonic() < deadline, f"the episode's end was not recorded within 120 s: {sorted(folder.iterdir())}"
            time.sleep(0.2)
        page.close()
    finally:
        proc.terminate()
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(60)
    ends = [json.loads(p.read_text()) for p in folder.glob("*.json") if p.name != "assignment.json"]
    assert [e["termination"] for e in ends] == ["stop"]

    # score the study from another working folder: the scenes are found through the recorded roots
    os.chdir(tmp_path)
    assert main(["study", "score", str(tmp_path / "S")]) == 0
    summary = json.loads((tmp_path / "S" / "summary.json").read_text())
    assert summary["skipped"]["malformed"] == 0 and len(summary["human"]) == 1

    # an ordinary eval run on the same generated dataset
    eval_cfg = tmp_path / "eval.yaml"
    eval_cfg.write_text(f"agent: {{name: oracle}}\ntask: coarse_grained\nepisodes: {{path: {data}}}\n"
                        f"collision_mode: strict\nlimit: 1\nout: {tmp_path / 'oracle'}\n"
                        "sensors: [{name: rgb, kind: rgb, width: 64, height: 64, hfov_deg: 90}]\n"
                        "report: {enabled: false}\n")
    assert main(["eval", str(eval_cfg), "--no-progress"]) == 0

    viewer = Viewer([tmp_path / "S", tmp_path / "oracle"])
    with BackgroundServer(create_viewer_app(viewer)) as vurl:
        for index, run in enumerate(viewer.runs):
            key = next(iter(run.records))
            q = f"key={urllib.parse.quote(key)}&step=1"
            status, body, kind = _get(f"{vurl}/api/runs/{index}/episode?{q}")
            assert status == 200, body
            status, body, kind = _get(f"{vurl}/api/runs/{index}/map.png?{q}")
            assert status == 200 and kind == "image/png" and body[:4] == b"\x89PNG", (run.kind, body[:200])
            status, body, kind = _get(f"{vurl}/api/runs/{index}/view.jpg?{q}")
            assert status == 200 and kind == "image/jpeg" and body[:2] == b"\xff\xd8", (run.kind, body[:200])


def test_viewer_names_a_missing_scene_in_its_error(generated, tmp_path):
    from vlnverse.study.server import BackgroundServer
    from vlnverse.study.viewer import Viewer, create_viewer_app

    root, data, missing = generated
    run = tmp_path / "run"
    run.mkdir()
    # an eval output whose dataset was moved away: the scene is in no root any more
    (run / "input_episodes.jsonl").write_text(missing.read_text())
    record = json.loads(missing.read_text().splitlines()[0])
    (run / "episodes.jsonl").write_text(json.dumps({
        "episode_id": record["episode_id"], "task_type": "coarse_grained", "split": "val_unseen", "metrics": {"SR": 0.0},
        "termination": "stop", "trajectory": [[*record["start_position"][:2], 0.0]], "actions": ["STOP"],
        "reference_path": record["reference_path"], "goals": [[0.0, 0.0]]}) + "\n")
    viewer = Viewer([run])
    with BackgroundServer(create_viewer_app(viewer)) as vurl:
        status, body, _ = _get(f"{vurl}/api/runs/0/map.png?key={record['episode_id']}&step=0")
    assert status == 404
    error = json.loads(body)["error"]
    assert record["episode_id"] in error and "scenes_usd" in error and "\n" not in error


def test_gym_env_on_a_generated_dataset(generated, monkeypatch, tmp_path):
    import gymnasium

    import vlnverse.learn  # noqa: F401 - registers vlnverse/VLN-v0
    from vlnverse.core.errors import SceneError

    root, data, missing = generated
    monkeypatch.chdir(tmp_path)
    env = gymnasium.make("vlnverse/VLN-v0", episodes=str(data),
                         sensors=[{"name": "rgb", "kind": "rgb", "width": 32, "height": 32}])
    obs, info = env.reset(seed=0, options={"episode": 0})
    assert obs["rgb"].shape == (32, 32, 3) and obs["rgb"].max() > 0 and info["distance_to_goal"] > 0
    env.close()
    bad = gymnasium.make("vlnverse/VLN-v0", episodes=str(missing), sensors=[{"name": "rgb", "kind": "rgb",
                                                                              "width": 32, "height": 32}])
    with pytest.raises(SceneError, match="coarse_grained-home_9914-00000.*searched scene roots"):
        bad.reset(options={"episode": "coarse_grained-home_9914-00000"})
    # scene_root finds it: a folder holding home_9914.usd
    scenes = tmp_path / "my_scenes"
    scenes.mkdir()
    from vlnverse.paths import scenes_dir

    (scenes / "home_9914.usd").symlink_to(scenes_dir() / "home_0014.usd")
    good = gymnasium.make("vlnverse/VLN-v0", episodes=str(missing), scene_root=str(scenes),
                          sensors=[{"name": "rgb", "kind": "rgb", "width": 32, "height": 32}])
    good.reset(options={"episode": "coarse_grained-home_9914-00000"})
    assert str(good.unwrapped._scene).endswith("home_9914.usd")
    good.close()


def test_train_and_cache_build_resolve_with_scene_root(generated, tmp_path):
    from vlnverse.core.errors import SceneError
    from vlnverse.run.setup import EpisodeSource
    from vlnverse.eval.mllm.cli import cache_scenes
    from vlnverse.learn.splits import resolve_split

    root, data, missing = generated
    common = dict(split=None, task_type="coarse_grained", task="coarse_grained", body=None, cache_dir=None,
                  field="train", progress=False)
    eps = resolve_split(EpisodeSource(path=str(data)), **common)
    assert all(Path(e.scene_path).is_file() for e in eps)
    with pytest.raises(SceneError, match="home_9914"):
        resolve_split(EpisodeSource(path=str(missing)), **common)
    scenes = tmp_path / "roots"
    scenes.mkdir()
    from vlnverse.paths import scenes_dir

    (scenes / "home_9914.usd").symlink_to(scenes_dir() / "home_0014.usd")
    eps = resolve_split(EpisodeSource(path=str(missing)), scene_root=[str(scenes)], **common)
    assert {Path(e.scene_path).name for e in eps} == {"home_9914.usd", "home_0016.usd"}
    # cache build: the scenes of an episode file, found by the same resolver
    assert sorted(Path(p).name for p in cache_scenes("val_unseen", str(missing), [str(scenes)])) == \
        ["home_0016.usd", "home_9914.usd"]
    assert cache_scenes("home_9914", None, [str(scenes)]) == [str(scenes / "home_9914.usd")]
    with pytest.raises(SceneError, match="home_9914"):
        cache_scenes("val_unseen", str(missing), [])
