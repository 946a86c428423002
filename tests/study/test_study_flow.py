"""The participant flow as a lab runs it, in headless Chromium: practice episode (flagged, not
scored), Enter asks "Are you at the goal?", a double Enter never starts the next episode, pause
screen, collision cue, withdraw (data deleted or kept; the id refused afterwards), frame-rate
counter only in debug mode, and held keys driving the body at the configured speeds."""
from __future__ import annotations

import json
import math

import pytest

pytest.importorskip("fastapi", reason="the study extra is not installed (pip install -e '.[study]')")

from vlnverse.core.errors import ConfigError
from vlnverse.study.assign import StudyStore
from vlnverse.study.config import StudyConfig
from vlnverse.study.log import read_episode_end, read_rows  # strict=True on live files: a row being written is skipped, not cut off
from vlnverse.study.server import NEUTRAL_REFUSAL, BackgroundServer, create_app

from study_helpers import assert_t_is_driving_time


def _serve(tmp_path, episodes, **config):
    store = StudyStore(tmp_path / "study", StudyConfig(seed=1, **config), episodes)
    return store, BackgroundServer(create_app(store))


def _login(page, url, pid):
    page.goto(url)
    page.fill("#pid", pid)
    page.click("#login-button")


def _start(page):
    page.wait_for_selector("#instruction-modal:not(.hidden)", timeout=120_000)
    page.click("#modal-go")
    page.wait_for_function("document.getElementById('status').textContent === 'driving'", timeout=120_000)


ACTIONS = {"w": "forward", "a": "left", "d": "right"}


def _hold(page, store, pid, key, rows, timeout=120.0):
    """Hold ``key`` until the server logged ``rows`` rows of its action in the current episode (polls
    the log: no duration tuned to an idle machine), then release it and wait for an idle row."""
    import time

    eid = store.current(pid)
    path = store.folder(pid) / f"{eid}.csv"
    count = lambda: sum(r.action == ACTIONS[key] for r in read_rows(path, strict=True)) if path.is_file() else 0  # noqa: E731
    before, deadline = count(), time.monotonic() + timeout
    page.keyboard.down(key)
    while count() < before + rows:
        assert time.monotonic() < deadline, f"{rows} rows of {ACTIONS[key]} not logged"
        time.sleep(0.05)
    page.keyboard.up(key)
    while read_rows(path, strict=True)[-1].action != "idle":
        assert time.monotonic() < deadline, "no idle row after the release"
        time.sleep(0.05)


def test_practice_confirm_pause_and_double_enter(browser, study_episodes, tmp_path, artifacts):
    from vlnverse.study.score import score_study

    store, server = _serve(tmp_path, study_episodes, practice_episodes=1, episodes_per_participant=1, pause_s=2.0)
    practice = store.practice[0]
    assert practice not in store.order  # the practice episode is never assigned as a real one
    with server as url:
        page = browser.new_page()
        _login(page, url, "F01")
        page.wait_for_selector("#consent:not(.hidden)")
        assert "withdraw" in page.inner_text("#consent-text")
        page.click("#agree")
        page.wait_for_selector("#instruction-modal:not(.hidden)")
        assert "Practice" in page.inner_text("#modal-title")
        # Enter on the pop-up (twice) never starts the episode: the button needs a click
        page.keyboard.press("Enter")
        page.keyboard.press("Enter")
        page.wait_for_timeout(1500)
        assert page.is_visible("#instruction-modal") and page.inner_text("#status") != "driving"
        assert not (store.folder("F01") / f"{practice}.csv").exists()
        _start(page)
        assert "Practice episode" in page.inner_text("#ep-head")
        _hold(page, store, "F01", "a", 5)
        # Enter asks; a second Enter does not answer; "keep driving" goes on driving
        page.keyboard.press("Enter")
        page.wait_for_selector("#confirm-modal:not(.hidden)")
        assert "Are you at the goal?" in page.inner_text("#confirm-modal")
        page.keyboard.press("Enter")
        page.wait_for_timeout(500)
        assert page.is_visible("#confirm-modal") and read_episode_end(store.folder("F01"), practice) is None
        page.screenshot(path=str(artifacts / "study_confirm.png"))
        page.click("#confirm-no")
        rows_before = len(read_rows(store.folder("F01") / f"{practice}.csv", strict=True))
        _hold(page, store, "F01", "a", 5)
        rows = read_rows(store.folder("F01") / f"{practice}.csv", strict=True)
        assert len(rows) > rows_before and any(r.action == "left" for r in rows[rows_before:])
        assert read_episode_end(store.folder("F01"), practice) is None
        # confirmed: the practice episode ends (flagged), the pause screen shows, then the first real episode
        page.keyboard.press("Enter")
        page.click("#confirm-yes")
        page.wait_for_selector("#pause:not(.hidden)", timeout=120_000)
        assert "Practice finished" in page.inner_text("#pause-title")
        page.screenshot(path=str(artifacts / "study_pause.png"))
        end = read_episode_end(store.folder("F01"), practice)
        assert end["termination"] == "stop" and end["practice"] is True
        page.wait_for_selector("#instruction-modal:not(.hidden)", timeout=120_000)
        assert page.is_hidden("#pause")
        real = store.current("F01")
        assert real != practice and real in store.order
        assert "Practice" not in page.inner_text("#modal-title") and page.inner_text("#ep-head").startswith("Episode 1 of 1")
        page.keyboard.press("Enter")  # a double Enter carried over from the last episode: nothing starts
        page.keyboard.press("Enter")
        page.wait_for_timeout(1500)
        assert page.is_visible("#instruction-modal") and not (store.folder("F01") / f"{real}.csv").exists()
        _start(page)
        _hold(page, store, "F01", "d", 5)
        page.keyboard.press("Enter")
        page.click("#confirm-yes")
        page.wait_for_selector("#message:not(.hidden)", timeout=120_000)
        assert "finished all 1 episodes" in page.inner_text("#message-text")
        page.close()
    summary = score_study(store.out, print_summary=False)
    assert summary["skipped"]["practice"] == 1
    assert [r["participants"] for r in summary["human"].values()] == [1]
    assert sum(r["episodes"] for r in summary["human"].values()) == 1


def test_held_keys_drive_at_the_configured_speeds_in_the_browser(browser, headings, tmp_path):
    """W and A held in the page drive the body through physics at the configured speeds, checked on
    the server's clock with slack for a loaded machine (the 5 % figure is checked on a
    deterministic clock in test_study_session_clock.py)."""
    store, server = _serve(tmp_path, headings["free"], linear_speed=0.5, angular_speed_deg=60.0)
    with server as url:
        page = browser.new_page()
        _login(page, url, "S01")
        page.click("#agree")
        _start(page)
        eid = store.current("S01")
        _hold(page, store, "S01", "w", 50)
        _hold(page, store, "S01", "a", 36)
        page.close()
    rows = read_rows(store.folder("S01") / f"{eid}.csv")
    assert not any(r.collided for r in rows)
    # t is the measured driving time: it only grows, and over the drive it advances as the server's wall clock does
    assert_t_is_driving_time(rows)

    def run(action):  # the last row before the key went down, the held rows, the first idle row after
        held = [i for i, r in enumerate(rows) if r.action == action]
        assert held == list(range(held[0], held[-1] + 1)), [r.action for r in rows]  # one press: one unbroken run
        assert held[-1] + 1 < len(rows) and rows[held[-1] + 1].action == "idle", [r.action for r in rows]
        return rows[max(held[0] - 1, 0)], len(held), rows[held[-1] + 1]

    # at least half the configured speed per held row (rows are >= 50 ms apart), never faster than it over
    # the driving time from the last row before the key went down to the first idle row after it came up
    # (slack: the first step may simulate back to the tick before, at most 0.25 s, and the braking)
    start, n, end = run("forward")
    along = (end.x - start.x) * math.cos(start.yaw) + (end.y - start.y) * math.sin(start.yaw)
    assert along >= 0.5 * 0.5 * 0.05 * n, (along, n)
    assert math.hypot(end.x - start.x, end.y - start.y) <= 0.5 * (end.t - start.t + 0.25) + 0.1, (start, end)
    start, n, end = run("left")
    turned = math.degrees(math.remainder(end.yaw - start.yaw, math.tau))
    assert 0.5 * 60 * 0.05 * n <= turned <= 60 * (end.t - start.t + 0.25) + 3, (turned, n, end.t - start.t)


def test_collision_cue_and_debug_only_frame_rate(browser, headings, tmp_path, artifacts):
    store, server = _serve(tmp_path, headings["wall"], collision_mode="telhop")
    with server as url:
        context = browser.new_context()  # one browser profile: the debug page resumes with the stored secret
        page = context.new_page()
        _login(page, url, "C01")
        page.click("#agree")
        _start(page)
        assert page.is_hidden("#fps-wrap")  # no frame-rate counter for participants
        eid = store.current("C01")
        page.wait_for_timeout(500)
        assert page.evaluate("window.vlnverseStudy.hits()") == 0
        page.keyboard.down("w")
        page.wait_for_function("window.vlnverseStudy.hits() > 0", timeout=120_000)
        page.screenshot(path=str(artifacts / "study_collision.png"))
        page.keyboard.up("w")
        rows = read_rows(store.folder("C01") / f"{eid}.csv", strict=True)
        assert any(r.collided for r in rows)
        page.close()
        debug = context.new_page()
        _login(debug, url + "/?debug=1", "C01")
        _start(debug)
        assert debug.is_visible("#fps-wrap")
        _hold(debug, store, "C01", "a", 10)
        # the counter shows the frames of the last second, refreshed every 500 ms: wait for a refresh
        debug.wait_for_function("Number(document.getElementById('fps').textContent) > 0", timeout=120_000)
        debug.close()


@pytest.mark.parametrize("fate", ["delete", "keep"])
def test_withdraw_ends_the_session_and_refuses_the_id(browser, study_episodes, tmp_path, fate):
    store, server = _serve(tmp_path, study_episodes, withdraw_data=fate, episodes_per_participant=2)
    with server as url:
        page = browser.new_page()
        _login(page, url, "W01")
        page.wait_for_selector("#consent:not(.hidden)")
        assert ("is deleted" if fate == "delete" else "is kept") in page.inner_text("#consent-text")
        page.click("#agree")
        _start(page)
        eid = store.current("W01")
        _hold(page, store, "W01", "a", 5)
        assert (store.folder("W01") / f"{eid}.csv").is_file()
        page.click("#withdraw")
        assert ("deleted" if fate == "delete" else "kept") in page.inner_text("#withdraw-text")
        page.click("#withdraw-yes")
        page.wait_for_selector("#message:not(.hidden)", timeout=120_000)
        assert "withdrawn" in page.inner_text("#message-title")
        record = json.loads((store.folder("W01") / "assignment.json").read_text())
        assert record["withdrawn_at"] > 0
        assert (store.folder("W01") / f"{eid}.csv").is_file() == (fate == "keep")
        assert sorted(p.name for p in store.folder("W01").iterdir())[0] == "assignment.json"
        again = browser.new_page()  # the id is refused, with the words any unknown id gets
        _login(again, url, "W01")
        again.wait_for_selector("#message:not(.hidden)")
        assert again.inner_text("#message-text") == NEUTRAL_REFUSAL
        again.close()
        page.close()


def test_bad_practice_and_withdraw_settings_name_the_field(study_episodes, tmp_path):
    from vlnverse.core.config import from_dict

    with pytest.raises(ConfigError, match=r"practice_episodes: unknown episode id\(s\) \['nope'\]"):
        StudyStore(tmp_path / "a", StudyConfig(practice_episodes=["nope"]), study_episodes)
    with pytest.raises(ConfigError, match="practice_episodes.*leave no episode"):
        StudyStore(tmp_path / "b", StudyConfig(practice_episodes=3), study_episodes)
    with pytest.raises(ConfigError, match="withdraw_data"):
        from_dict(StudyConfig, {"withdraw_data": "archive"})
    with pytest.raises(ConfigError, match="practice_episodes"):
        from_dict(StudyConfig, {"practice_episodes": -1})
    ids = [e for e in StudyStore(tmp_path / "c", StudyConfig(), study_episodes).order]
    store = StudyStore(tmp_path / "d", StudyConfig(practice_episodes=[ids[2]]), study_episodes)
    assert store.practice == [ids[2]] and ids[2] not in store.order
    assert store.current("X1") == ids[2] and store.progress("X1") == (0, 2)
