"""The study page driven in a real headless Chromium against the server on localhost."""
from __future__ import annotations

import math

import numpy as np
import pytest

pytest.importorskip("fastapi", reason="the study extra is not installed (pip install -e '.[study]')")

from vlnverse.study.assign import StudyStore
from vlnverse.study.config import StudyConfig
from vlnverse.study.log import read_episode_end, read_rows
from vlnverse.study.server import BackgroundServer, create_app

CONSENT = "TEST CONSENT: you agree to drive a robot. Only your id is stored."


@pytest.fixture(scope="module")
def study(tmp_path_factory, study_episodes):
    out = tmp_path_factory.mktemp("study")
    store = StudyStore(out, StudyConfig(consent_text=CONSENT, episodes_per_participant=2, seed=3), study_episodes)
    with BackgroundServer(create_app(store)) as url:
        yield store, url


def _login(page, url, pid):
    page.goto(url)
    page.fill("#pid", pid)
    page.click("#login-button")


def _start_driving(page):
    page.wait_for_selector("#instruction-modal:not(.hidden)", timeout=20_000)
    page.click("#modal-go")
    page.wait_for_function("document.getElementById('status').textContent === 'driving'", timeout=60_000)


def _hold(page, key, seconds):
    page.keyboard.down(key)
    page.wait_for_timeout(int(seconds * 1000))
    page.keyboard.up(key)
    page.wait_for_timeout(300)


def _csv(store, pid, eid):
    return read_rows(store.folder(pid) / f"{eid}.csv")


def test_consent_popup_drive_log_refuse_and_resume(browser, study, artifacts):
    store, url = study
    pid = "T01"
    page = browser.new_page()
    _login(page, url, pid)
    page.wait_for_selector("#consent:not(.hidden)")
    assert CONSENT in page.inner_text("#consent-text")
    page.screenshot(path=str(artifacts / "study_consent.png"))
    page.click("#agree")
    page.wait_for_selector("#instruction-modal:not(.hidden)")
    eid = store.current(pid)
    assert store.episodes[eid].instruction_text in page.inner_text("#modal-instruction")
    page.screenshot(path=str(artifacts / "study_instruction.png"))
    _start_driving(page)

    # A held for 1 s turns left (counter-clockwise) at 60 deg/s; Q tilts the camera up
    before = _csv(store, pid, eid)[-1]
    _hold(page, "a", 1.0)
    _hold(page, "q", 0.2)
    after = _csv(store, pid, eid)[-1]
    turned = math.degrees(math.remainder(after.yaw - before.yaw, math.tau))
    assert 35 <= turned <= 80, turned
    assert after.pitch > before.pitch + math.radians(10), (before, after)
    assert math.hypot(after.x - before.x, after.y - before.y) < 0.1, (before, after)

    start = _csv(store, pid, eid)[-1]
    # W held for 3 s: the agent moves along its heading at 0.5 m/s, one row per 50 ms
    _hold(page, "w", 3.0)
    rows = [r for r in _csv(store, pid, eid) if r.t >= start.t]
    forward = [r for r in rows if r.action == "forward"]
    # 3 s / 50 ms = 60 rows; the window the server sees the key held shrinks by the browser's key
    # latency under load, so the count is bounded loosely and the 50 ms spacing is checked below
    assert 45 <= len(forward) <= 68, len(forward)
    wall = np.diff([r.wall_time for r in rows if r.wall_time >= forward[0].wall_time])
    assert abs(np.median(wall) - 0.05) <= 0.01, np.round(wall, 3)
    assert np.mean(np.abs(wall - 0.05) <= 0.010) >= 0.7, np.round(wall, 3)  # shared CI cores: most, not all
    assert np.allclose(np.diff([r.t for r in rows]), 0.05, atol=1e-3)  # the driving clock has no gaps
    end = rows[-1]
    moved = np.array([end.x - start.x, end.y - start.y])
    along = moved @ [math.cos(start.yaw), math.sin(start.yaw)]
    assert along > 0.2 or any(r.collided for r in forward), (moved, start.yaw)
    free = [(a, b) for a, b in zip(rows, rows[1:]) if b.action == "forward" and not b.collided]
    assert len(free) > 10  # driving straight: no turning on the ticks without contact
    assert max(abs(math.remainder(b.yaw - a.yaw, math.tau)) for a, b in free) < math.radians(1)
    page.screenshot(path=str(artifacts / "study_driving.png"))

    # a second tab for the same participant is refused with a message
    second = browser.new_page()
    _login(second, url, pid)
    second.wait_for_selector("#message:not(.hidden)")
    assert "already connected" in second.inner_text("#message-text")
    second.screenshot(path=str(artifacts / "study_refused.png"))
    second.close()

    # closing the tab loses nothing; reopening offers to resume at the last pose
    logged = _csv(store, pid, eid)
    page.close()
    page = browser.new_page()
    _login(page, url, pid)
    page.wait_for_selector("#modal-resume:not(.hidden)", timeout=20_000)
    page.screenshot(path=str(artifacts / "study_resume.png"))
    assert read_episode_end(store.folder(pid), eid) is None
    _start_driving(page)
    _hold(page, "w", 0.5)
    resumed = _csv(store, pid, eid)
    assert resumed[:len(logged)] == logged
    first_new = resumed[len(logged)]
    assert math.hypot(first_new.x - logged[-1].x, first_new.y - logged[-1].y) < 0.05
    assert abs(first_new.pitch - logged[-1].pitch) < 1e-3
    assert first_new.t == pytest.approx(logged[-1].t + 0.05, abs=1e-3)

    # Enter asks "Are you at the goal?"; confirming ends the episode (a STOP) and the next one's instruction pops up
    page.keyboard.press("Enter")
    page.click("#confirm-yes")
    page.wait_for_function(f"document.getElementById('modal-instruction').textContent.length > 0 && "
                           f"!document.getElementById('instruction-modal').classList.contains('hidden')")
    assert read_episode_end(store.folder(pid), eid)["termination"] == "stop"
    assert store.current(pid) != eid
    page.close()


def test_held_key_is_rate_limited_not_queued(browser, study):
    store, url = study
    pid = "T02"
    page = browser.new_page()
    _login(page, url, pid)
    page.click("#agree")
    _start_driving(page)
    eid = store.current(pid)
    before = _csv(store, pid, eid)[-1]
    # a flood of key-repeat events for 1 s: the speed stays the controller's, nothing is queued
    page.keyboard.down("w")
    for _ in range(100):
        page.keyboard.down("w")
        page.wait_for_timeout(10)
    page.keyboard.up("w")
    page.wait_for_timeout(400)
    rows = _csv(store, pid, eid)
    after = rows[-1]
    elapsed = sum(1 for r in rows if r.action == "forward") * 0.05
    assert math.hypot(after.x - before.x, after.y - before.y) <= 0.5 * elapsed + 0.05
    assert rows[-1].action == "idle" and rows[-2].action == "idle"  # stopped as soon as the key was released
    page.close()


def test_unknown_path_and_bad_participant_id(browser, study):
    _, url = study
    page = browser.new_page()
    response = page.goto(url + "/episode/does-not-exist")
    assert response.status == 404
    assert "Not found" in page.inner_text("h1") and "Traceback" not in page.content()
    _login(page, url, "bad id!")
    assert "letters, digits" in page.inner_text("#login-error")
    page.close()
