"""``vlnverse view`` comparing an agent with a human: steps aligned by distance travelled or by
progress along the reference (not by index), one metric column list for every run kind, a run
never compared with itself, scenes and renderers held per run."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("fastapi", reason="the study extra is not installed (pip install -e '.[study]')")

from vlnverse.study.viewer import Viewer, create_viewer_app, metric_columns, path_progress


def test_path_progress_travelled_and_progress_along_the_reference():
    reference = [[0.0, 0.0], [2.0, 0.0], [2.0, 2.0]]
    steps = [{"pose": [x, y, 0.0, 0.0]} for x, y in [(0, 0), (1, 0.5), (1, 0), (2, 1), (3, 1)]]
    travelled, progress = path_progress(steps, reference)
    expected = np.r_[0.0, np.cumsum([np.hypot(1, 0.5), 0.5, np.hypot(1, 1), 1.0])]
    assert np.allclose(travelled, expected, atol=1e-4)
    assert np.allclose(progress, [0.0, 1.0, 1.0, 3.0, 3.0], atol=1e-4)  # the last is 1 m beside (2, 1)


def test_metric_columns_are_one_list_for_every_run_kind():
    agent = {"CLS": 0.5, "CR": 0.0, "NE": 1.0, "OSR": 1.0, "SPL": 0.9, "SR": 1.0, "TL": 9.0, "nDTW": 0.8,
             "sDTW": 0.7, "goals_reached": [1], "RD_SR": 1.0}  # as written by eval (sorted keys)
    human = {"TL": 9.5, "NE": 0.5, "SR": 1.0, "OSR": 1.0, "SPL": 0.8, "RD_SR": 0.0, "nDTW": 0.7, "sDTW": 0.6,
             "CLS": 0.4, "CR": 0.1, "goals_reached": [1]}
    assert metric_columns(agent) == metric_columns(human)
    assert metric_columns(human) == ["TL", "NE", "SR", "OSR", "SPL", "nDTW", "CLS", "CR", "sDTW", "RD_SR"]


@pytest.fixture(scope="module")
def agent_and_human(tmp_path_factory, study_episodes):
    """An oracle eval run and a study session that drives along the reference at 25 mm a row."""
    from vlnverse.eval.config import load_eval_config
    from vlnverse.eval.runner import run_eval
    from vlnverse.study.assign import StudyStore
    from vlnverse.study.config import StudyConfig
    from vlnverse.study.log import EpisodeLog, LogRow, write_episode_end
    from vlnverse.study.score import resample_by_arc_length

    root = tmp_path_factory.mktemp("compare")
    cfg_path = root / "eval.yaml"
    cfg_path.write_text(f"agent: {{name: oracle}}\ntask: fine_grained\nepisodes: {{path: {study_episodes}}}\n"
                        f"collision_mode: telhop\nlimit: 1\nout: {root / 'oracle'}\n"
                        "sensors: [{name: rgb, kind: rgb, width: 64, height: 64, hfov_deg: 90}]\n"
                        "report: {enabled: false}\n")
    run_eval(load_eval_config(cfg_path), progress=False, print_summary=False)
    store = StudyStore(root / "study", StudyConfig(), study_episodes)
    from vlnverse.tasks.episode import load_episodes

    ep = load_episodes(study_episodes)[0]
    log = EpisodeLog(store.folder("P8") / f"{ep.episode_id}.csv")
    for i, (x, y) in enumerate(resample_by_arc_length(np.asarray(ep.reference_path)[:, :2], 0.025)):
        log.write(LogRow(0.05 * i, 1e9 + 0.05 * i, x, y, 0.0, 0.0, "forward", False))
    log.close()
    write_episode_end(store.folder("P8"), ep.episode_id, termination="stop", collision_mode="telhop")
    return root / "oracle", root / "study", ep


def test_compare_aligns_by_distance_not_index(browser, agent_and_human, artifacts):
    from vlnverse.study.server import BackgroundServer

    oracle, study, ep = agent_and_human
    viewer = Viewer([oracle, study])
    agent = viewer.episode_view(0, ep.episode_id)
    human = viewer.episode_view(1, f"P8/{ep.episode_id}")
    assert agent["metric_columns"] == human["metric_columns"]
    h_travelled = np.array([s["travelled"] for s in human["steps"]])
    h_progress = np.array([s["progress"] for s in human["steps"]])
    with BackgroundServer(create_viewer_app(viewer)) as url:
        page = browser.new_page(viewport={"width": 1500, "height": 1000})
        page.goto(f"{url}/run/0/{ep.episode_id}")
        page.wait_for_selector(".vpanel")
        assert page.eval_on_selector_all("#compare option", "os => os.map(o => o.value)") == ["", "1"]
        page.select_option("#compare", "1")
        page.wait_for_function("document.querySelectorAll('.vpanel').length === 2")
        first, second = page.locator(".vpanel").nth(0), page.locator(".vpanel").nth(1)
        heads = [p.locator(".p-metrics tr").first.inner_text() for p in (first, second)]
        assert heads[0] == heads[1] and heads[0].split()[:3] == ["TL", "NE", "SR"]
        moves = [k for k, s in enumerate(agent["steps"]) if s["travelled"] > 0.6][:3]
        assert moves, "the oracle did not move"
        for k in moves:
            page.fill("#step", str(k))
            page.dispatch_event("#step", "input")
            shown = int(second.get_attribute("data-step"))
            want = int(np.argmin(np.abs(h_travelled - agent["steps"][k]["travelled"])))
            assert shown == want and shown > 2 * k, (k, shown, want)  # 25 mm ticks vs 0.25 m steps
        page.select_option("#align", "progress")
        k = moves[-1]
        shown = int(second.get_attribute("data-step"))
        assert abs(h_progress[shown] - agent["steps"][k]["progress"]) < 0.05
        page.select_option("#align", "index")
        assert int(second.get_attribute("data-step")) == k
        page.screenshot(path=str(artifacts / "viewer_aligned.png"), full_page=True)
        page.close()


def test_viewer_holds_one_scene_and_renderer_per_run(agent_and_human):
    oracle, study, ep = agent_and_human
    viewer = Viewer([oracle, study])
    try:
        for step in (0, 1, 2):
            assert viewer.picture("view", 0, ep.episode_id, step)[:2] == b"\xff\xd8"
            assert viewer.picture("view", 1, f"P8/{ep.episode_id}", step)[:2] == b"\xff\xd8"
        assert sorted(viewer._sims) == [0, 1]  # one simulator per run, not rebuilt per step
        sims = {i: id(s) for i, (_, s) in viewer._sims.items()}
        viewer.picture("view", 0, ep.episode_id, 3)
        assert {i: id(s) for i, (_, s) in viewer._sims.items()} == sims
        assert all(len(r.contexts) == 1 for r in viewer.runs)  # the scene loaded once per run
    finally:
        viewer.close()
