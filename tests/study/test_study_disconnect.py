"""In headless Chromium: when the study server goes away the page says so in an overlay, its
controls (Withdraw, Start, ...) are disabled, and it reconnects by itself when the server is back
(the session secret in the browser's storage resumes the episode); the destructive Withdraw is
styled so and is not the dialog's default button."""
from __future__ import annotations

import pytest

pytest.importorskip("fastapi", reason="the study extra is not installed (pip install -e '.[study]')")

from vlnverse.study.assign import StudyStore
from vlnverse.study.config import StudyConfig
from vlnverse.study.server import BackgroundServer, create_app


def test_connection_drop_overlay_disabled_controls_and_reconnect(browser, study_episodes, tmp_path, artifacts):
    out = tmp_path / "study"
    config = StudyConfig(seed=1, episodes_per_participant=1, withdraw_data="delete")
    first = BackgroundServer(create_app(StudyStore(out, config, study_episodes)))
    port = int(first.url.rsplit(":", 1)[1])
    context = browser.new_context()
    page = context.new_page()
    with first as url:
        page.goto(url)
        page.fill("#pid", "D01")
        page.click("#login-button")
        page.click("#agree")
        page.wait_for_selector("#instruction-modal:not(.hidden)")
        page.click("#modal-go")
        page.wait_for_function("document.getElementById('status').textContent === 'driving'")
        page.wait_for_selector("#loading", state="hidden")  # the first frame took the spinner away
        # the withdraw dialog: Cancel is the default (focused, plain), Withdraw is the red destructive one
        page.click("#withdraw")
        assert page.evaluate("document.activeElement.id") == "withdraw-no"
        assert "danger" in page.get_attribute("#withdraw-yes", "class")
        assert "deleted" in page.inner_text("#withdraw-text") and "delete" in page.inner_text("#withdraw-yes")
        page.click("#withdraw-no")
        assert page.is_hidden("#offline") and page.is_enabled("#withdraw")
    # the server stopped: the overlay says so and the controls are off
    page.wait_for_selector("#offline:not(.hidden)")
    assert "Connection lost" in page.inner_text("#offline-title")
    for control in ("#withdraw", "#modal-go", "#confirm-yes", "#withdraw-yes"):
        assert page.is_disabled(control), control
    page.wait_for_function("document.getElementById('offline-status').textContent.includes('attempt')")
    page.screenshot(path=str(artifacts / "study_offline.png"))
    page.evaluate("document.getElementById('withdraw').click()")  # even a scripted click does nothing
    assert page.is_hidden("#withdraw-modal")
    # the server is back on the same port: the page reconnects by itself and offers to resume
    store = StudyStore(out, config)
    with BackgroundServer(create_app(store), port=port):
        page.wait_for_selector("#offline", state="hidden", timeout=60_000)
        page.wait_for_selector("#modal-resume:not(.hidden)")
        assert page.is_enabled("#withdraw")
        page.wait_for_function("!document.getElementById('modal-go').disabled")
        page.click("#modal-go")
        page.wait_for_function("document.getElementById('status').textContent === 'driving'")
        assert not store.withdrawn("D01") and store.participants() == ["D01"]
    context.close()
