"""The study web app (FastAPI + WebSocket): ``vlnverse study serve --episodes FILE --out DIR``.

``GET /`` serves the page (plain HTML/JS in ``static/``); ``/ws`` is the participant's socket.
The page's first message is ``hello`` with ``pid`` and either ``secret`` (the session secret
its storage kept), ``resume_code`` (a one-time code from the experimenter page, for another
device) or neither (a new participant: only an id that never consented). A socket is refused
before the handshake when its ``Origin`` is not the server's own (or an ``allowed_origins``
entry), and with one neutral ``refused`` message (:data:`NEUTRAL_REFUSAL`) whenever the id
cannot be authenticated, whatever the reason. On ``consent`` the server draws the episodes and
issues the secret (``session``); every later message carries it, else the socket is closed.
Messages from the page (JSON): ``consent``, ``start`` (begin or resume the current episode after
its instruction pop-up), ``keys`` (the set of held keys), ``finish`` (Enter, once confirmed),
``end`` (give up an interrupted episode), ``withdraw`` (with ``confirm: true``). From the server:
``welcome``, ``session``, ``episode``, ``episode_end``, ``complete``, ``refused``, ``withdrawn``,
``error`` (JSON) and frames (binary: one byte, 1 when the body touched something since the
previous frame, then a JPEG). One socket per participant: a second tab is refused with a
message. When the socket drops the driver pauses (the CSV ends at the last pose); reconnecting
offers to resume or end the episode.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from html import escape
from pathlib import Path
from typing import Any

from fastapi import Request, WebSocket  # module level: FastAPI resolves endpoint annotations from here

from .assign import StudyStore
from .log import PARTICIPANT_ID
from .session import KEYS, ParticipantDriver, episode_message

log = logging.getLogger(__name__)
STATIC = Path(__file__).parent / "static"


def message_page(title: str, message: str, status: int = 404) -> Any:
    """A small HTML page for errors (unknown episode, run folder or path), never a stack trace."""
    from fastapi.responses import HTMLResponse

    return HTMLResponse(
        f"<!doctype html><html><head><meta charset='utf-8'><title>{escape(title)}</title>"
        f"<link rel='stylesheet' href='/static/style.css'></head><body><main class='card'>"
        f"<h1>{escape(title)}</h1><p>{escape(message)}</p><p><a href='/'>Back to the start page</a></p>"
        f"</main></body></html>", status_code=status)


def add_error_pages(app: Any) -> None:
    """Serve unknown paths and HTTP errors as :func:`message_page`."""
    from starlette.exceptions import HTTPException as StarletteHTTPException

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request, exc):  # noqa: ANN001
        if request.url.path.startswith("/api/"):
            from fastapi.responses import JSONResponse

            return JSONResponse({"error": str(exc.detail)}, status_code=exc.status_code)
        title = "Not found" if exc.status_code == 404 else f"Error {exc.status_code}"
        detail = exc.detail if exc.detail and exc.detail != "Not Found" else f"There is nothing at {request.url.path}."
        return message_page(title, str(detail), exc.status_code)


#: The one answer to a participant connection that is not authenticated: the same words whether
#: the id is unknown, withdrawn, connected elsewhere, or the secret is missing or wrong.
NEUTRAL_REFUSAL = ("This participant id cannot be opened here. If it is yours, please ask the experimenter "
                   "(they can give you a resume code).")
#: How long a new connection may take to say ``hello`` (s).
HELLO_TIMEOUT_S = 30.0
#: Resume codes (experimenter page): lifetime (s), wrong tries before the code is void, characters.
RESUME_CODE_TTL_S = 15 * 60
RESUME_CODE_TRIES = 5
RESUME_ALPHABET = "ABCDEFGHJKLMNPQRSTUVWXYZ23456789"


def _sha(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class StudyServer:
    """State shared by the sockets: the store, the participants connected now and their drivers,
    the resume codes the experimenter issued and the origins a page may connect from."""

    def __init__(self, store: StudyStore, allowed_origins: Any = ()):
        self.store = store
        self.allowed_origins = {o.rstrip("/").lower() for o in allowed_origins or ()}
        self.connected: set[str] = set()  # authenticated, and ids being consented to right now
        self.drivers: dict[str, ParticipantDriver] = {}
        self.sockets: dict[str, Any] = {}  # pid -> the participant's socket (the experimenter can end it)
        self.ended: set[str] = set()  # sessions the experimenter ended; refused until resumed
        self.resume_codes: dict[str, tuple[str, float, int]] = {}  # pid -> (sha256, expiry, tries left)
        self._lock = asyncio.Lock()

    def episode_message(self, pid: str) -> dict:
        """The participant's next message: their current episode (resumed or new), or ``complete``."""
        return episode_message(self.store, pid)

    def origin_allowed(self, ws: Any) -> bool:
        """A browser's socket must come from this server's own page: its ``Origin`` names the host
        the request was sent to (``Host``), or one of ``allowed_origins`` (a reverse proxy's
        public address). Clients that send no ``Origin`` (not browsers) are authenticated by the
        session secret alone."""
        from urllib.parse import urlsplit

        origin = ws.headers.get("origin")
        if origin is None:
            return True
        origin = origin.rstrip("/").lower()
        if origin in self.allowed_origins:
            return True
        parts = urlsplit(origin)
        host = ws.headers.get("host", "").lower()
        return bool(host) and parts.scheme in ("http", "https") and parts.netloc == host

    # ------------------------------------------------------------------ resume codes

    def new_resume_code(self, pid: str) -> str:
        """A one-time code with which ``pid`` opens their session on another device (shown on
        the experimenter page; ``RESUME_CODE_TTL_S``, ``RESUME_CODE_TRIES`` wrong tries)."""
        import secrets

        code = "".join(secrets.choice(RESUME_ALPHABET) for _ in range(8))
        self.resume_codes[pid] = (_sha(code), time.monotonic() + RESUME_CODE_TTL_S, RESUME_CODE_TRIES)
        return f"{code[:4]}-{code[4:]}"

    def use_resume_code(self, pid: str, code: Any) -> bool:
        """Whether ``code`` is ``pid``'s live resume code (used up when it is)."""
        import hmac
        import re

        given = _sha(re.sub(r"[^A-Z0-9]", "", str(code).upper()))
        digest, expiry, tries = self.resume_codes.get(pid, ("-" * 64, 0.0, 0))
        ok = hmac.compare_digest(given.encode(), digest.encode()) and time.monotonic() < expiry
        if pid in self.resume_codes:
            if ok or tries <= 1 or time.monotonic() >= expiry:
                del self.resume_codes[pid]
            else:
                self.resume_codes[pid] = (digest, expiry, tries - 1)
        return ok

    # ------------------------------------------------------------------ the participant's socket

    def authenticate(self, pid: str, hello: dict) -> tuple[bool, str | None, bool]:
        """(accepted, the session secret or None for a new participant, whether the secret is new)
        for a ``hello``: with ``secret`` (the page's storage), ``resume_code`` (from the
        experimenter), or neither (only for an id that has not consented: a new participant)."""
        record = self.store.record(pid) or {}
        consented = bool(record.get("consented_at")) and not record.get("withdrawn_at")
        if hello.get("secret"):
            ok = self.store.check_secret(pid, hello["secret"])
            return ok, hello["secret"] if ok else None, False
        if hello.get("resume_code"):
            ok = self.use_resume_code(pid, hello["resume_code"]) and consented
            return ok, self.store.issue_secret(pid) if ok else None, ok
        new = not record.get("consented_at") and not record.get("withdrawn_at") and pid not in self.connected
        return new, None, False

    async def refuse(self, ws: Any, message: str, code: int) -> None:
        """Send ``refused`` with ``message`` and close."""
        with contextlib.suppress(Exception):
            await ws.send_json({"type": "refused", "message": message})
            await ws.close(code=code)

    async def handle(self, ws: Any) -> None:
        """Serve one participant's socket until it closes (the protocol: module docstring)."""
        import hmac

        from starlette.websockets import WebSocketDisconnect

        client = ws.client.host if ws.client else "?"
        if not self.origin_allowed(ws):
            log.warning("participant connection from %s refused: Origin %s is not this server's", client,
                        ws.headers.get("origin"))
            await ws.close(code=1008)  # before accepting: the handshake is refused (HTTP 403)
            return
        await ws.accept()
        try:
            hello = json.loads(await asyncio.wait_for(ws.receive_text(), HELLO_TIMEOUT_S))
        except (asyncio.TimeoutError, WebSocketDisconnect, RuntimeError, ValueError, KeyError):
            await self.refuse(ws, "No participant id was sent.", 4400)
            return
        pid = hello.get("pid") if isinstance(hello, dict) else None
        if not isinstance(hello, dict) or hello.get("type") != "hello" or not isinstance(pid, str) \
                or not PARTICIPANT_ID.match(pid):
            await self.refuse(ws, "Enter a participant id of 1-40 letters, digits, '_' or '-'.", 4400)
            return
        async with self._lock:
            ok, secret, issued = self.authenticate(pid, hello)
            refusal = None
            if not ok:
                log.warning("participant connection for %s from %s refused: %s", pid, client,
                            "wrong session secret" if hello.get("secret") else
                            "wrong resume code" if hello.get("resume_code") else "no session secret")
                refusal = (NEUTRAL_REFUSAL, 4401)
            elif pid in self.connected:
                refusal = (f"Participant {pid} is already connected in another tab or window. Close this tab "
                           "and continue there.", 4409)
            elif pid in self.ended:
                refusal = ("The experimenter has paused your session. Please wait until they resume it, then "
                           "reload.", 4403)
            else:
                self.connected.add(pid)
                self.sockets[pid] = ws
        if refusal is not None:
            await self.refuse(ws, *refusal)
            return
        loop = asyncio.get_running_loop()
        outbox: asyncio.Queue = asyncio.Queue()
        latest: dict[str, Any] = {"frame": None}
        wake = asyncio.Event()
        driver: ParticipantDriver | None = None

        def put_frame(data: bytes) -> None:  # keep only the newest frame: a slow client never queues frames
            latest["frame"] = data
            wake.set()

        def put_event(event: dict) -> None:
            outbox.put_nowait(event)
            wake.set()

        def on_frame(data: bytes) -> None:  # driver thread: the first byte is the contact state (collision cue)
            loop.call_soon_threadsafe(put_frame, (b"\x01" if driver.contact else b"\x00") + data)

        def on_event(event: dict) -> None:
            loop.call_soon_threadsafe(put_event, event)

        def attach() -> ParticipantDriver:  # only a consented participant gets a simulator
            current = self.drivers.get(pid)
            if current is None or not current.alive:
                current = self.drivers[pid] = ParticipantDriver(self.store, pid, on_frame=on_frame, on_event=on_event)
            else:
                current.on_frame, current.on_event = on_frame, on_event
            return current

        async def sender() -> None:
            while True:
                await wake.wait()
                wake.clear()
                while not outbox.empty():
                    event = outbox.get_nowait()
                    await ws.send_json(event)
                    if event["type"] == "episode_end":
                        await ws.send_json(self.episode_message(pid))
                frame, latest["frame"] = latest["frame"], None
                if frame is not None:
                    await ws.send_bytes(frame)

        if secret is not None:
            driver = attach()
        task = asyncio.create_task(sender())
        try:
            cfg = self.store.config
            welcome = {"type": "welcome", "participant": pid, "title": cfg.title, "consent": cfg.consent_shown(),
                       "consented": secret is not None, "allow_backward": cfg.allow_backward,
                       "pause_s": cfg.pause_s, "withdraw_data": cfg.withdraw_data}
            if secret is not None:
                welcome["done"], welcome["total"] = self.store.progress(pid)
            if issued:
                welcome["secret"] = secret  # a resume code: the page keeps the new secret
            put_event(welcome)
            while True:
                msg = json.loads(await ws.receive_text())
                kind = msg.get("type") if isinstance(msg, dict) else None
                if secret is None:  # before consent nothing but consent is accepted
                    if kind == "consent":
                        self.store.consent(pid)
                        secret = self.store.issue_secret(pid)
                        driver = attach()
                        put_event({"type": "session", "secret": secret})
                        put_event(self.episode_message(pid))
                    continue
                given = msg.get("secret") if isinstance(msg, dict) else None
                if not isinstance(given, str) or not hmac.compare_digest(given.encode(), secret.encode()):
                    log.warning("participant %s: a message without the session secret: connection closed", pid)
                    await self.refuse(ws, NEUTRAL_REFUSAL, 4401)
                    break
                if kind == "next":
                    put_event(self.episode_message(pid))
                elif kind == "start":
                    eid = self.store.current(pid)
                    if eid is not None:
                        driver.start(eid)
                elif kind == "keys":
                    driver.keys = frozenset(k for k in msg.get("keys", []) if k in KEYS)
                elif kind in ("finish", "end"):
                    eid = self.store.current(pid)
                    if eid is not None:
                        driver.finish(eid, "stop" if kind == "finish" else "ended")
                elif kind == "withdraw":
                    if msg.get("confirm") is not True:  # the page's dialog confirms; nothing else withdraws
                        put_event({"type": "withdraw_unconfirmed"})
                        continue
                    await self.withdraw(pid)
                    await ws.send_json({"type": "withdrawn", "deleted": self.store.config.withdraw_data == "delete"})
                    await ws.close(code=4403)
                    break
        except (WebSocketDisconnect, RuntimeError, ValueError, AttributeError):
            pass
        finally:
            if driver is not None:
                driver.pause()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
            async with self._lock:
                self.connected.discard(pid)
                if self.sockets.get(pid) is ws:
                    del self.sockets[pid]

    def overview(self) -> list[dict]:
        """Every participant who consented, for the experimenter: connected, withdrawn, ended by
        the experimenter, progress and the current episode."""
        out = []
        for pid in self.store.participants():
            record = self.store.record(pid) or {}
            done, total = self.store.progress(pid)
            driver = self.drivers.get(pid)
            out.append({"participant": pid, "connected": pid in self.connected, "consented": True,
                        "withdrawn": bool(record.get("withdrawn_at")), "ended_by_experimenter": pid in self.ended,
                        "done": done, "total": total, "current": self.store.current(pid),
                        "simulator": bool(driver is not None and driver.alive)})
        return out

    async def end_session(self, pid: str) -> bool:
        """The experimenter ends ``pid``'s session: driving stops (the CSV keeps every row), the
        page says so, and the id is refused until :meth:`resume_session`. Whether it was connected."""
        self.ended.add(pid)
        driver = self.drivers.get(pid)
        if driver is not None:
            driver.pause()
        ws = self.sockets.get(pid)
        if ws is None:
            return False
        await self.refuse(ws, "The experimenter has paused your session. Please wait until they resume it, "
                              "then reload the page.", 4403)
        return True

    def resume_session(self, pid: str) -> None:
        """Let ``pid`` connect again (their interrupted episode is offered to resume)."""
        self.ended.discard(pid)

    async def withdraw(self, pid: str) -> None:
        """End ``pid``'s session (simulator closed, log closed) and mark them withdrawn (their
        logs deleted with ``withdraw_data: delete``)."""
        driver = self.drivers.pop(pid, None)
        if driver is not None:
            driver.keys = frozenset()
            driver.close()
            await asyncio.get_running_loop().run_in_executor(None, driver.join, 10.0)
        self.store.withdraw(pid)
        self.resume_codes.pop(pid, None)
        log.warning("participant %s withdrew (data %s)", pid,
                    "deleted" if self.store.config.withdraw_data == "delete" else "kept")

    async def experimenter_withdraw(self, pid: str) -> bool:
        """The experimenter withdraws ``pid`` (their page says so); whether they were connected."""
        ws = self.sockets.get(pid)
        await self.withdraw(pid)
        if ws is None:
            return False
        with contextlib.suppress(Exception):
            await ws.send_json({"type": "withdrawn", "deleted": self.store.config.withdraw_data == "delete"})
            await ws.close(code=4403)
        return True

    def close(self) -> None:
        """Close every participant's simulator."""
        for driver in self.drivers.values():
            driver.close()
        for driver in self.drivers.values():
            driver.join(5.0)


def experimenter_cookie(token: str) -> str:
    """The name of the cookie holding a study's experimenter token (one per token, so two
    studies served from one host keep theirs apart)."""
    return f"vlnverse_experimenter_{_sha(token)[:10]}"


def create_app(store: StudyStore, token: str | None = None, allowed_origins: Any = ()) -> Any:
    """The FastAPI app of a study. ``token`` guards the experimenter pages (``/experimenter``,
    ``/api/experimenter/*``; a new random one when None, in ``app.state.token``): the first
    visit of ``/experimenter?token=...`` moves it into an HttpOnly, SameSite=Strict cookie and
    redirects to the clean URL; scripts may send ``X-Experimenter-Token``. A request without it,
    or with a wrong one, is refused (403) and logged. ``allowed_origins``: origins besides the
    server's own that participants' pages may connect from (a reverse proxy's public URL).
    Participants' pages never list participant ids; there is no ``/openapi.json`` or ``/docs``."""
    import secrets

    from fastapi import FastAPI, HTTPException
    from fastapi.responses import FileResponse, JSONResponse, RedirectResponse
    from fastapi.staticfiles import StaticFiles

    server = StudyServer(store, allowed_origins)
    token = token or secrets.token_urlsafe(12)
    cookie = experimenter_cookie(token)

    @contextlib.asynccontextmanager
    async def lifespan(app):  # noqa: ANN001
        yield
        server.close()

    app = FastAPI(title=store.config.title, lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.server = server
    app.state.token = token
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    add_error_pages(app)

    @app.get("/")
    async def index():
        return FileResponse(STATIC / "study.html")

    @app.get("/api/status")
    async def status():  # public: counts only, never participant ids
        return JSONResponse({"episodes": len(store.order), "connected": len(server.connected)})

    def valid(given: str) -> bool:
        return secrets.compare_digest(given.encode(), token.encode())

    def refuse_experimenter(request: Request, given: str) -> None:
        log.warning("experimenter page %s refused for %s: %s experimenter token", request.url.path,
                    request.client.host if request.client else "?", "wrong" if given else "no")
        raise HTTPException(403, "This page needs the experimenter token printed by 'vlnverse study serve'.")

    def experimenter(request: Request) -> None:
        given = request.headers.get("x-experimenter-token") or request.cookies.get(cookie) or ""
        if not valid(given):
            refuse_experimenter(request, given)

    @app.get("/experimenter")
    async def experimenter_page(request: Request):
        given = request.query_params.get("token")
        if given is not None:  # the printed link: the token goes into a cookie, the URL is cleaned
            if not valid(given):
                refuse_experimenter(request, given)
            response = RedirectResponse("/experimenter", status_code=303)
            response.set_cookie(cookie, token, httponly=True, samesite="strict", path="/",
                                secure=request.url.scheme == "https")
            response.headers["Referrer-Policy"] = "no-referrer"
            return response
        experimenter(request)
        return FileResponse(STATIC / "experimenter.html", headers={"Cache-Control": "no-store"})

    @app.get("/api/experimenter/status")
    async def experimenter_status(request: Request):
        experimenter(request)
        return JSONResponse({"title": store.config.title, "episodes": len(store.order),
                             "withdraw_data": store.config.withdraw_data, "participants": server.overview()})

    def known(pid: str) -> None:
        if not PARTICIPANT_ID.match(pid) or pid not in store.participants():
            raise HTTPException(404, "no participant with that id has consented")

    @app.post("/api/experimenter/end")
    async def experimenter_end(request: Request, pid: str):
        experimenter(request)
        if not PARTICIPANT_ID.match(pid):
            raise HTTPException(400, "not a participant id")
        log.info("experimenter ended the session of %s", pid)
        return JSONResponse({"participant": pid, "was_connected": await server.end_session(pid)})

    @app.post("/api/experimenter/resume")
    async def experimenter_resume(request: Request, pid: str):
        experimenter(request)
        log.info("experimenter resumed the session of %s", pid)
        server.resume_session(pid)
        return JSONResponse({"participant": pid})

    @app.post("/api/experimenter/resume-code")
    async def experimenter_resume_code(request: Request, pid: str):
        experimenter(request)
        known(pid)
        if store.withdrawn(pid):
            raise HTTPException(409, "the participant withdrew")
        log.info("experimenter issued a resume code for %s", pid)
        return JSONResponse({"participant": pid, "code": server.new_resume_code(pid),
                             "expires_s": RESUME_CODE_TTL_S})

    @app.post("/api/experimenter/withdraw")
    async def experimenter_withdraw(request: Request, pid: str, confirm: str = ""):
        experimenter(request)
        known(pid)
        if confirm != "yes":
            raise HTTPException(400, "withdrawing needs confirm=yes")
        if store.withdrawn(pid):
            raise HTTPException(409, "the participant withdrew already")
        log.warning("experimenter withdrew %s", pid)
        return JSONResponse({"participant": pid, "was_connected": await server.experimenter_withdraw(pid),
                             "deleted": store.config.withdraw_data == "delete"})

    @app.websocket("/ws")
    async def socket(ws: WebSocket):
        await server.handle(ws)

    return app


def lan_address() -> str:
    """This machine's address on its network (the one a route to the outside would use; no packet
    is sent), else its host name's address."""
    import socket

    with contextlib.suppress(OSError):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("10.254.254.254", 1))
            address = s.getsockname()[0]
            if address and not address.startswith("0."):
                return address
    with contextlib.suppress(OSError):
        return socket.gethostbyname(socket.gethostname())
    return "127.0.0.1"


def shown_host(host: str) -> str:
    """The address to print for a server listening on ``host``: the real one for 0.0.0.0 / ::."""
    if host in ("0.0.0.0", "::", ""):
        return lan_address()
    return "localhost" if host in ("127.0.0.1", "::1") else host


def bind_socket(host: str, port: int) -> Any:
    """A listening TCP socket on ``host``:``port`` (port 0: any free one), bound before anything
    is printed or written; a bad port, a bad host or a port in use is one ``ConfigError`` line."""
    import errno
    import socket

    from ..core.errors import ConfigError

    if isinstance(port, bool) or not isinstance(port, int) or not 0 <= port <= 65535:
        raise ConfigError(f"got {port}", field="--port", expected="a port number 0..65535 (0: any free port)")
    try:
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (socket.gaierror, UnicodeError) as exc:
        raise ConfigError(f"cannot resolve {host!r} ({getattr(exc, 'strerror', None) or exc})", field="--host",
                          expected="an address of this machine, e.g. 127.0.0.1, or 0.0.0.0 for every interface") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(f"port {port} on {host} is in use (another server?)", field="--port",
                              expected="a free port, e.g. --port 0 for any") from None
        if exc.errno == errno.EADDRNOTAVAIL:
            raise ConfigError(f"{host!r} is not an address of this machine", field="--host",
                              expected="an address of this machine, e.g. 127.0.0.1, or 0.0.0.0") from None
        if exc.errno == errno.EACCES:
            raise ConfigError(f"port {port} needs administrator rights", field="--port",
                              expected="a port above 1023") from None
        raise ConfigError(f"cannot listen on {host}:{port} ({exc.strerror or exc})", field="--host") from None
    sock.set_inheritable(True)
    return sock


def check_tls(certfile: str | None, keyfile: str | None) -> None:
    """``ConfigError`` naming ``--certfile``/``--keyfile`` unless both are absent, or both given
    and a loadable certificate chain and key."""
    import ssl

    from ..core.errors import ConfigError

    if certfile is None and keyfile is None:
        return
    if not certfile or not keyfile:
        raise ConfigError("given alone", field="--keyfile" if keyfile else "--certfile",
                          expected="both --certfile and --keyfile (a PEM certificate and its private key)")
    for name, path in (("--certfile", certfile), ("--keyfile", keyfile)):
        if not Path(path).is_file():
            raise ConfigError("not found", file=path, field=name, expected="a PEM file")
    try:
        ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER).load_cert_chain(certfile, keyfile)
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise ConfigError(f"not a certificate and key that match ({exc})", file=certfile, field="--certfile",
                          expected="a PEM certificate chain and its private key (--keyfile)") from None


def serve(store: StudyStore, host: str = "127.0.0.1", port: int = 8765, token: str | None = None, *,
          sock: Any = None, certfile: str | None = None, keyfile: str | None = None,
          allowed_origins: Any = ()) -> None:
    """Run the study app until interrupted on ``sock`` (else a socket bound here: :func:`bind_socket`);
    prints the participants' and the experimenter's URLs once it listens. ``certfile``/``keyfile``
    serve HTTPS (and secure websockets) directly."""
    import uvicorn

    sock = sock if sock is not None else bind_socket(host, port)
    port = sock.getsockname()[1]
    app = create_app(store, token, allowed_origins=allowed_origins)
    scheme = "https" if certfile else "http"
    base = f"{scheme}://{shown_host(host)}:{port}"
    print(f"vlnverse study: {len(store.order)} episodes, writing to {store.out}\n"
          f"participants: open {base}/ in a browser (Ctrl+C stops)\n"
          f"experimenter: {base}/experimenter?token={app.state.token}", flush=True)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = uvicorn.Config(app, log_level="warning", ws_ping_interval=5, ws_ping_timeout=10,
                            ssl_certfile=certfile, ssl_keyfile=keyfile)
    uvicorn.Server(config).run(sockets=[sock])


class BackgroundServer:
    """Run an ASGI ``app`` with uvicorn in a daemon thread (tests, benchmarks); a context manager
    that yields the base URL and stops the server on exit."""

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0):
        import socket

        import uvicorn

        if port == 0:
            with socket.socket() as s:
                s.bind((host, 0))
                port = s.getsockname()[1]
        self.url = f"http://{host}:{port}"
        self._server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning"))
        self._thread = None

    def __enter__(self) -> str:
        import threading
        import time

        self._thread = threading.Thread(target=self._server.run, name="uvicorn", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"the server at {self.url} did not start")
            time.sleep(0.05)
        return self.url

    def __exit__(self, *exc: Any) -> None:
        self._server.should_exit = True
        self._thread.join(15)
