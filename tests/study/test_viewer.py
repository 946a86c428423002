"""``vlnverse view``: the step timeline, the off-reference flag, and the page in headless Chromium."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("fastapi", reason="the study extra is not installed (pip install -e '.[study]')")

from vlnverse.study.viewer import Viewer, create_viewer_app, distance_to_polyline, left_reference_step, timeline


def test_distance_to_polyline_and_first_off_reference_step():
    line = np.array([[0.0, 0.0], [4.0, 0.0], [4.0, 4.0]])
    d = distance_to_polyline(np.array([[2.0, 1.0], [5.0, 2.0], [-3.0, -4.0], [4.0, 4.0]]), line)
    assert np.allclose(d, [1.0, 1.0, 5.0, 0.0])
    steps = [{"pose": [x, y, 0.0, 0.0]} for x, y in [(0, 0), (1, 0.5), (2, 1.5), (3, 0.2)]]
    assert left_reference_step(steps, line, 1.0) == 2
    assert left_reference_step(steps, line, 2.0) is None


def test_timeline_aligns_actions_poses_collisions_and_outputs():
    record = {"trajectory": [[0, 0, 0], [0.25, 0, 0], [0.25, 0, 0.26]],
              "actions": ["MOVE_FORWARD", None, "TURN_LEFT", "STOP"],
              "collisions": [{"step": 2, "position": [0.25, 0]}],
              "agent_outputs": [{"prompt": "p0", "raw": "forward"}, {"raw": "???"}, {"raw": "left"}, {"raw": "stop"}]}
    steps = timeline(record)
    assert [s["action"] for s in steps] == [None, "MOVE_FORWARD", None, "TURN_LEFT", "STOP"]
    assert [s["pose"][:3] for s in steps] == [[0, 0, 0], [0.25, 0, 0], [0.25, 0, 0], [0.25, 0, 0.26], [0.25, 0, 0.26]]
    assert [s["collided"] for s in steps] == [False, False, False, True, False]
    assert steps[1]["output"] == {"prompt": "p0", "raw": "forward"}


@pytest.fixture(scope="module")
def runs(tmp_path_factory, study_episodes):
    """An oracle eval run (1 episode, report frames) and a study folder with one driven episode."""
    from vlnverse.eval.config import load_eval_config
    from vlnverse.eval.runner import run_eval
    from vlnverse.study.assign import StudyStore
    from vlnverse.study.config import StudyConfig
    from vlnverse.study.log import EpisodeLog, LogRow, write_episode_end

    root = tmp_path_factory.mktemp("viewer")
    cfg_path = root / "eval.yaml"
    cfg_path.write_text(f"agent: {{name: oracle}}\ntask: fine_grained\nepisodes: {{path: {study_episodes}}}\n"
                        f"collision_mode: strict\nlimit: 1\nout: {root / 'oracle'}\n"
                        "sensors: [{name: rgb, kind: rgb, width: 96, height: 96, hfov_deg: 90}]\n")
    run_eval(load_eval_config(cfg_path), progress=False, print_summary=False)
    store = StudyStore(root / "study", StudyConfig(), study_episodes)
    ep = store.episodes[store.order[0]]
    log = EpisodeLog(store.folder("P9") / f"{ep.episode_id}.csv")
    ref = np.asarray(ep.reference_path)[:, :2]
    back = (ref[0] - ref[1]) / np.linalg.norm(ref[0] - ref[1])  # away from the reference's first leg
    for i in range(80):  # 4 s at 0.5 m/s: 2 m behind the start, off the reference after 1 m
        x, y = ref[0] + 0.025 * i * back
        log.write(LogRow(0.05 * i, 1e9 + 0.05 * i, x, y, 0.0, 0.0, "back", False))
    log.close()
    write_episode_end(store.folder("P9"), ep.episode_id, termination="stop", collision_mode="strict")
    return root / "oracle", root / "study", ep


def test_viewer_page_steps_and_compares(browser, runs, artifacts):
    from vlnverse.study.server import BackgroundServer

    oracle, study, ep = runs
    viewer = Viewer([oracle, study])
    assert viewer.runs[1].kind == "study" and f"P9/{ep.episode_id}" in viewer.runs[1].records
    with BackgroundServer(create_viewer_app(viewer)) as url:
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        page.goto(url)
        page.wait_for_selector(".vpanel")
        assert ep.episode_id in page.inner_text(".vpanel .p-title")
        assert "SR" in page.inner_text(".vpanel .p-metrics")
        page.wait_for_function("document.querySelector('.vpanel .p-map').naturalWidth > 0", timeout=120_000)
        page.click("#next")
        page.click("#next")
        assert page.inner_text("#step-label").startswith("step 2 /")
        assert "step=2" in page.get_attribute(".vpanel .p-map", "src")
        page.wait_for_function("document.querySelector('.vpanel .p-view').naturalWidth > 0", timeout=120_000)
        # the study session as the chosen run, compared with the agent (a run is never offered against itself)
        page.goto(f"{url}/run/1/P9/{ep.episode_id}")
        page.wait_for_selector(".vpanel")
        assert [o for o in page.eval_on_selector_all("#compare option", "os => os.map(o => o.value)")] == ["", "0"]
        page.select_option("#compare", "0")
        page.wait_for_function("document.querySelectorAll('.vpanel').length === 2")
        first, second = page.locator(".vpanel").nth(0), page.locator(".vpanel").nth(1)
        assert "participant P9" in first.locator(".p-title").inner_text()
        page.wait_for_function("[...document.querySelectorAll('.vpanel .p-map')].every(i => i.naturalWidth > 0)",
                               timeout=120_000)
        view = viewer.episode_view(1, f"P9/{ep.episode_id}")
        assert 40 <= view["left_reference_step"] <= 42  # 1 m at 25 mm a row
        off = view["left_reference_step"]
        page.click("#jump-off")  # the study path drives straight off the reference
        page.wait_for_function(f"document.getElementById('step-label').textContent.startsWith('step {off} /')",
                               timeout=120_000)
        assert "this step" in first.locator(".p-off").inner_text()
        # the maps of the new step render on the worker thread: wait until both panels show them
        page.wait_for_function(f"[...document.querySelectorAll('.vpanel .p-map')].every(i => i.complete && "
                               f"i.naturalWidth > 0) && /[?&]step={off}(&|$)/.test("
                               f"document.querySelectorAll('.vpanel .p-map')[0].src)", timeout=120_000)
        page.screenshot(path=str(artifacts / "viewer_compare.png"), full_page=True)
        response = page.goto(url + "/run/5/missing-episode")
        assert response.status == 404 and "no run 5" in page.inner_text("main")
        page.close()


def test_unknown_run_folder_is_a_clear_error(tmp_path):
    from vlnverse.core.errors import ConfigError

    with pytest.raises(ConfigError, match="run folder not found"):
        Viewer([tmp_path / "nope"])
    with pytest.raises(ConfigError, match="not a run folder"):
        Viewer([tmp_path])
