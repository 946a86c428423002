"""Lab-server mode: the real address for ``--host 0.0.0.0``, the experimenter token (a wrong one is
refused and logged), no participant ids on participants' pages, and the experimenter page in
Chromium (who is connected, progress, end and resume a session)."""
from __future__ import annotations

import json
import logging
import re
import urllib.error
import urllib.request

import pytest

pytest.importorskip("fastapi", reason="the study extra is not installed (pip install -e '.[study]')")

from vlnverse.study.assign import StudyStore
from vlnverse.study.config import StudyConfig
from vlnverse.study.server import NEUTRAL_REFUSAL, BackgroundServer, create_app, lan_address, shown_host

TOKEN = "lab-token-123"


def _get(url: str, headers: dict | None = None, method: str = "GET") -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, headers=headers or {}, method=method), timeout=60) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


@pytest.fixture()
def lab(tmp_path, study_episodes):
    store = StudyStore(tmp_path / "study", StudyConfig(seed=2, episodes_per_participant=2), study_episodes)
    app = create_app(store, token=TOKEN)
    with BackgroundServer(app) as url:
        yield store, app, url


def test_lab_address_is_this_machines_real_address(tmp_path, study_episodes):
    address = shown_host("0.0.0.0")
    assert address == lan_address() and address not in ("0.0.0.0", "localhost", "")
    assert shown_host("127.0.0.1") == "localhost" and shown_host("10.1.2.3") == "10.1.2.3"
    # a server listening on every interface answers at the printed address
    store = StudyStore(tmp_path / "study", StudyConfig(), study_episodes)
    server = BackgroundServer(create_app(store, token=TOKEN), host="0.0.0.0")
    port = server.url.rsplit(":", 1)[1]
    with server:
        status, body = _get(f"http://{address}:{port}/api/status")
    assert status == 200 and json.loads(body)["episodes"] == 3


def test_serve_prints_the_participant_and_experimenter_urls(tmp_path, study_episodes, monkeypatch, capsys):
    import uvicorn

    from vlnverse.study import server as server_module

    monkeypatch.setattr(uvicorn.Server, "run", lambda self, sockets=None: None)  # print only, do not block
    store = StudyStore(tmp_path / "study", StudyConfig(), study_episodes)
    sock = server_module.bind_socket("0.0.0.0", 0)
    with sock:
        server_module.serve(store, "0.0.0.0", token=TOKEN, sock=sock)
        port = sock.getsockname()[1]
    out = capsys.readouterr().out
    assert f"http://{lan_address()}:{port}/ " in out
    assert f"http://{lan_address()}:{port}/experimenter?token={TOKEN}" in out


def test_experimenter_pages_need_the_token_and_a_wrong_one_is_logged(lab, caplog):
    store, app, url = lab
    caplog.set_level(logging.WARNING, logger="vlnverse.study.server")
    for path in ("/experimenter", "/experimenter?token=wrong", f"/api/experimenter/status?token={TOKEN}"):
        status, body = _get(url + path)
        assert status == 403, path
        assert b"experimenter token" in body
    assert _get(url + "/api/experimenter/end?pid=A1", method="POST")[0] == 403
    refused = [r.getMessage() for r in caplog.records if "refused" in r.getMessage()]
    assert len(refused) == 4 and "wrong experimenter token" in refused[1] and "no experimenter token" in refused[0]
    from http.cookiejar import CookieJar

    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(CookieJar()))
    with opener.open(url + f"/experimenter?token={TOKEN}", timeout=60) as r:  # redirected, the token in a cookie
        assert r.status == 200 and r.url == url + "/experimenter"
    status, body = _get(url + "/api/experimenter/status", {"X-Experimenter-Token": TOKEN})
    assert status == 200 and json.loads(body)["participants"] == []


def test_participant_pages_never_list_participant_ids(browser, lab):
    store, app, url = lab
    store.consent("SECRET1")
    store.consent("SECRET2")
    status, body = _get(url + "/api/status")
    assert status == 200 and b"SECRET" not in body
    page = browser.new_page()
    page.goto(url)
    page.fill("#pid", "P01")
    page.click("#login-button")
    page.wait_for_selector("#consent:not(.hidden)")
    assert "SECRET" not in page.content()
    for path in ("/static/study.js", "/static/study.html"):
        assert b"/api/experimenter" not in _get(url + path)[1]  # no call that could list ids
    page.close()


def test_experimenter_page_shows_progress_and_ends_and_resumes_a_session(browser, lab, artifacts):
    store, app, url = lab
    pages = {}
    for pid in ("A1", "B2"):
        page = browser.new_page()
        page.goto(url)
        page.fill("#pid", pid)
        page.click("#login-button")
        page.click("#agree")
        page.wait_for_selector("#instruction-modal:not(.hidden)", timeout=120_000)
        pages[pid] = page
    pages["A1"].click("#modal-go")
    pages["A1"].wait_for_function("document.getElementById('status').textContent === 'driving'", timeout=120_000)
    eid = store.current("A1")
    pages["A1"].keyboard.press("Enter")
    pages["A1"].click("#confirm-yes")  # A1 finishes one episode: progress 1 / 2

    boss = browser.new_page(viewport={"width": 1200, "height": 700})
    boss.goto(f"{url}/experimenter?token={TOKEN}")
    row = lambda pid: boss.locator(f"tr[data-participant='{pid}']")  # noqa: E731
    boss.wait_for_function("document.querySelector(\"tr[data-participant='A1'] td.progress\")?.textContent === '1 / 2'",
                           timeout=120_000)
    assert row("B2").locator("td.progress").inner_text() == "0 / 2"
    assert row("A1").locator("td").nth(1).inner_text() == "yes" and row("B2").locator("td").nth(1).inner_text() == "yes"
    boss.screenshot(path=str(artifacts / "study_experimenter.png"))

    # end B2's session (after a confirmation): their page says so, the id is refused until resumed
    row("B2").locator("button", has_text="End session").click()
    boss.wait_for_selector("#ask:not(.hidden)")
    assert "End this session?" in boss.inner_text("#ask-title")
    boss.click("#ask-no")  # cancelled: nothing happens
    boss.wait_for_timeout(500)
    assert pages["B2"].is_hidden("#message") and "B2" not in app.state.server.ended
    row("B2").locator("button", has_text="End session").click()
    assert "danger" in boss.get_attribute("#ask-yes", "class")
    boss.click("#ask-yes")
    pages["B2"].wait_for_selector("#message:not(.hidden)", timeout=120_000)
    assert "experimenter has paused your session" in pages["B2"].inner_text("#message-text")
    boss.wait_for_function("document.querySelector(\"tr[data-participant='B2'] td.state\")?.textContent === 'ended by you'",
                           timeout=120_000)
    boss.wait_for_function(  # the closed connection reaches the page after the state: wait for it
        "document.querySelector(\"tr[data-participant='B2']\")?.querySelectorAll('td')[1]?.textContent === 'no'",
        timeout=120_000)
    again = browser.new_page()  # another device: the id alone is refused, neutrally
    again.goto(url)
    again.fill("#pid", "B2")
    again.click("#login-button")
    again.wait_for_selector("#message:not(.hidden)")
    assert again.inner_text("#message-text") == NEUTRAL_REFUSAL
    row("B2").locator("button", has_text="Resume").first.click()
    boss.wait_for_function("document.querySelector(\"tr[data-participant='B2'] td.state\")?.textContent !== 'ended by you'",
                           timeout=120_000)
    row("B2").locator("button", has_text="Resume code").click()  # a one-time code moves B2 to this device
    boss.wait_for_selector("#code:not(.hidden)")
    code = boss.inner_text("#code-value")
    assert re.fullmatch(r"[A-Z2-9]{4}-[A-Z2-9]{4}", code), code
    boss.click("#code-close")
    again.goto(url)
    again.fill("#pid", "B2")
    again.click("#show-code")
    again.fill("#resume-code", code)
    again.click("#login-button")
    again.wait_for_selector("#instruction-modal:not(.hidden)", timeout=120_000)
    assert store.current("B2") is not None
    for page in (*pages.values(), again, boss):
        page.close()
    assert eid != store.current("A1")
