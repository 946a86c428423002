"""The study on a lab network: participants authenticated by a session secret (forged or missing
secrets, resume codes, Origin), no assignment before consent, the experimenter's token in a
cookie, no API listing; a real server on 127.0.0.1 driven on the websocket directly (the
``websockets`` client)."""
from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from http.cookiejar import CookieJar
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the study extra is not installed (pip install -e '.[study]')")

from websockets.exceptions import ConnectionClosed, InvalidStatus
from websockets.sync.client import connect

from vlnverse.study.assign import StudyStore
from vlnverse.study.config import StudyConfig
from vlnverse.study.server import NEUTRAL_REFUSAL, BackgroundServer, create_app, experimenter_cookie

TOKEN = "lab-token-xyz"


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):  # noqa: ANN002, ANN003
        return None


class Client:
    """HTTP (with a cookie jar, redirects not followed) and websockets to a server at ``url``."""

    def __init__(self, url: str, app):
        self.url, self.app = url, app
        self.cookies = CookieJar()
        self._http = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(self.cookies), _NoRedirect)

    def request(self, method: str, path: str, headers: dict | None = None):
        """(status, headers, body text)."""
        req = urllib.request.Request(self.url + path, method=method, headers=headers or {})
        try:
            with self._http.open(req, timeout=60) as r:
                return r.status, r.headers, r.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.headers, exc.read().decode()

    def websocket_connect(self, path: str, headers: dict | None = None):
        origin = (headers or {}).get("origin")
        return connect(self.url.replace("http", "ws") + path, origin=origin, open_timeout=30, max_size=None)


@pytest.fixture()
def lab(tmp_path, study_episodes):
    store = StudyStore(tmp_path / "study", StudyConfig(seed=2, episodes_per_participant=2, withdraw_data="delete"),
                       study_episodes)
    app = create_app(store, token=TOKEN, allowed_origins=["https://study.lab.example"])
    with BackgroundServer(app) as url:
        yield store, app, Client(url, app)


def _send(ws, obj: dict) -> None:
    ws.send(json.dumps(obj))


def _text(ws) -> dict:
    """The next JSON message (frames skipped)."""
    while True:
        msg = ws.recv(timeout=120)
        if isinstance(msg, str):
            return json.loads(msg)


def _until(ws, kind: str) -> dict:
    while True:
        msg = _text(ws)
        if msg["type"] == kind:
            return msg


def _hello(client, **hello) -> tuple[dict, int | None]:
    """Open a socket, say hello; (first message, close code or None when still open)."""
    with client.websocket_connect("/ws") as ws:
        _send(ws, {"type": "hello", **hello})
        first = _text(ws)
        try:
            ws.recv(timeout=5)
            code = None
        except ConnectionClosed as exc:
            code = exc.rcvd.code if exc.rcvd else None
        except TimeoutError:
            code = None
        return first, code


def _consent(ws, pid: str) -> str:
    """Say hello as a new participant ``pid`` on ``ws`` and consent; returns the session secret."""
    _send(ws, {"type": "hello", "pid": pid})
    assert _text(ws)["consented"] is False
    _send(ws, {"type": "consent"})
    return _until(ws, "session")["secret"]


def _consent_and_drive(client, store, pid) -> str:
    """A participant consents, drives a few rows and closes the tab; returns their secret."""
    with client.websocket_connect("/ws") as ws:
        secret = _consent(ws, pid)
        assert len(secret) >= 32
        _until(ws, "episode")
        _send(ws, {"type": "start", "secret": secret})
        _until(ws, "ready")
        _send(ws, {"type": "keys", "keys": ["left"], "secret": secret})
        eid = store.current(pid)
        csv = store.folder(pid) / f"{eid}.csv"
        while not csv.is_file() or len(csv.read_text().splitlines()) < 6:
            ws.recv(timeout=120)
        _send(ws, {"type": "keys", "keys": [], "secret": secret})
    _gone(client, pid)
    return secret


def _gone(client, pid: str) -> None:
    """Wait until the server saw ``pid``'s socket close and its driver paused (its log closed)."""
    deadline = time.monotonic() + 60
    server = client.app.state.server
    while pid in server.connected or (pid in server.drivers and server.drivers[pid]._logging):
        assert time.monotonic() < deadline
        time.sleep(0.02)


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_forged_withdraw_drive_and_resume_are_refused_and_leave_the_files_alone(lab):
    store, app, client = lab
    secret = _consent_and_drive(client, store, "VICTIM1")
    before = _files(store.folder("VICTIM1"))
    assert any(name.endswith(".csv") for name in before)
    # no secret, a forged one, a guessed resume code: one neutral refusal, whatever the id
    answers = [_hello(client, pid="VICTIM1"), _hello(client, pid="VICTIM1", secret="forged-" + secret[7:]),
               _hello(client, pid="VICTIM1", resume_code="ABCD-EFGH"),
               _hello(client, pid="NOBODY9", secret="anything"), _hello(client, pid="NOBODY9", resume_code="ABCD-EFGH")]
    for first, code in answers:
        assert first == {"type": "refused", "message": NEUTRAL_REFUSAL} and code == 4401, (first, code)
    # a connection as a new id can neither withdraw, drive nor resume anyone before consenting
    with client.websocket_connect("/ws") as ws:
        _send(ws, {"type": "hello", "pid": "ATTACK1"})
        _text(ws)
        for kind in ("withdraw", "start", "finish", "end", "next"):
            _send(ws, {"type": kind, "pid": "VICTIM1", "confirm": True, "secret": secret})
        _send(ws, {"type": "keys", "keys": ["forward"], "pid": "VICTIM1"})
    # the victim's own session: a message without the secret closes it, a withdraw without confirmation does nothing
    with client.websocket_connect("/ws") as ws:
        _send(ws, {"type": "hello", "pid": "VICTIM1", "secret": secret})
        welcome = _text(ws)
        assert welcome["consented"] is True and "secret" not in welcome
        _send(ws, {"type": "withdraw", "confirm": True})  # no secret in the message
        assert _until(ws, "refused")["message"] == NEUTRAL_REFUSAL
    with client.websocket_connect("/ws") as ws:
        _send(ws, {"type": "hello", "pid": "VICTIM1", "secret": secret})
        _text(ws)
        _send(ws, {"type": "withdraw", "secret": secret})
        assert _until(ws, "withdraw_unconfirmed")
    _gone(client, "VICTIM1")
    assert _files(store.folder("VICTIM1")) == before  # byte for byte
    assert not store.withdrawn("VICTIM1") and "ATTACK1" not in store.participants()
    # the victim's confirmed withdraw deletes their data; the id is then refused neutrally
    with client.websocket_connect("/ws") as ws:
        _send(ws, {"type": "hello", "pid": "VICTIM1", "secret": secret})
        _text(ws)
        _send(ws, {"type": "withdraw", "confirm": True, "secret": secret})
        assert _until(ws, "withdrawn")["deleted"] is True
    assert sorted(p.name for p in store.folder("VICTIM1").iterdir()) == ["assignment.json"]
    assert _hello(client, pid="VICTIM1", secret=secret) == ({"type": "refused", "message": NEUTRAL_REFUSAL}, 4401)
    assert _hello(client, pid="VICTIM1") == ({"type": "refused", "message": NEUTRAL_REFUSAL}, 4401)


def test_an_unconsented_id_gets_no_assignment_and_is_not_listed(lab):
    store, app, client = lab
    with client.websocket_connect("/ws") as ws:
        _send(ws, {"type": "hello", "pid": "TYPO1"})
        welcome = _text(ws)
        assert welcome["consented"] is False and "total" not in welcome
        _send(ws, {"type": "next"})
        _send(ws, {"type": "start"})
    assert not (store.out / "participants" / "TYPO1").exists()
    assert store.participants() == [] and set(store._counts().values()) == {0}
    status = json.loads(client.request("GET", "/api/experimenter/status", {"X-Experimenter-Token": TOKEN})[2])
    assert status["participants"] == []
    # the same id may still be taken by the person it was meant for
    with client.websocket_connect("/ws") as ws:
        _send(ws, {"type": "hello", "pid": "TYPO1"})
        _text(ws)
        _send(ws, {"type": "consent"})
        _until(ws, "episode")
    assert store.participants() == ["TYPO1"] and sum(store._counts().values()) == 2


def test_a_resume_code_opens_the_session_on_another_device_once(lab):
    store, app, client = lab
    with client.websocket_connect("/ws") as ws:
        old = _consent(ws, "MOVE1")
    headers = {"X-Experimenter-Token": TOKEN}
    assert client.request("POST", "/api/experimenter/resume-code?pid=NOPE1", headers)[0] == 404
    assert client.request("POST", "/api/experimenter/resume-code?pid=MOVE1")[0] == 403
    code = json.loads(client.request("POST", "/api/experimenter/resume-code?pid=MOVE1", headers)[2])["code"]
    assert _hello(client, pid="OTHER1", resume_code=code)[0]["message"] == NEUTRAL_REFUSAL  # another id's code
    with client.websocket_connect("/ws") as ws:
        _send(ws, {"type": "hello", "pid": "MOVE1", "resume_code": code.lower().replace("-", "")})
        welcome = _text(ws)
        assert welcome["consented"] is True and welcome["secret"] != old
        new = welcome["secret"]
    assert _hello(client, pid="MOVE1", resume_code=code)[0]["message"] == NEUTRAL_REFUSAL  # used up
    assert _hello(client, pid="MOVE1", secret=old)[0]["message"] == NEUTRAL_REFUSAL  # the old device's secret
    assert _hello(client, pid="MOVE1", secret=new)[0]["type"] == "welcome"
    # wrong tries void a code
    code = json.loads(client.request("POST", "/api/experimenter/resume-code?pid=MOVE1", headers)[2])["code"]
    for _ in range(5):
        _hello(client, pid="MOVE1", resume_code="ZZZZ-ZZZZ")
    assert _hello(client, pid="MOVE1", resume_code=code)[0]["message"] == NEUTRAL_REFUSAL


def test_websocket_origin_must_be_the_servers_own_or_allowed(lab):
    store, app, client = lab
    own = client.url
    for origin in ("http://evil.example", own + ".evil.example", own.replace("http:", "ftp:"), "null"):
        with pytest.raises(InvalidStatus) as refused:
            with client.websocket_connect("/ws", headers={"origin": origin}) as ws:
                _send(ws, {"type": "hello", "pid": "O1"})
                _text(ws)
        assert refused.value.response.status_code == 403, origin
    assert "O1" not in store.participants()
    for origin in (own, "https://study.lab.example"):
        with client.websocket_connect("/ws", headers={"origin": origin}) as ws:
            _send(ws, {"type": "hello", "pid": "O1"})
            assert _text(ws)["type"] == "welcome"


def test_experimenter_token_moves_into_an_httponly_cookie_and_no_api_listing(lab):
    store, app, client = lab
    for path in ("/openapi.json", "/docs", "/redoc"):
        assert client.request("GET", path)[0] == 404, path
    assert client.request("GET", "/experimenter?token=wrong")[0] == 403
    status, headers, _ = client.request("GET", f"/experimenter?token={TOKEN}")
    assert status == 303 and headers["location"] == "/experimenter"
    cookie = headers["set-cookie"]
    assert cookie.startswith(f"{experimenter_cookie(TOKEN)}={TOKEN}")
    assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/" in cookie
    status, _, page = client.request("GET", "/experimenter")  # the cookie, not the URL, carries the token now
    assert status == 200 and TOKEN not in page
    assert client.request("GET", "/api/experimenter/status")[0] == 200
    client.cookies.clear()
    assert client.request("GET", "/experimenter")[0] == 403
    assert client.request("GET", f"/api/experimenter/status?token={TOKEN}")[0] == 403  # never in an API URL


def test_experimenter_withdraw_needs_confirmation(lab):
    store, app, client = lab
    with client.websocket_connect("/ws") as ws:
        _consent(ws, "GONE1")
        _until(ws, "episode")
        headers = {"X-Experimenter-Token": TOKEN}
        assert client.request("POST", "/api/experimenter/withdraw?pid=GONE1", headers)[0] == 400
        assert not store.withdrawn("GONE1")
        answer = json.loads(client.request("POST", "/api/experimenter/withdraw?pid=GONE1&confirm=yes", headers)[2])
        assert answer == {"participant": "GONE1", "was_connected": True, "deleted": True}
        assert _until(ws, "withdrawn")["deleted"] is True
    assert store.withdrawn("GONE1")
