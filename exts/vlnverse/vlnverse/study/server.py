"""The study web app (FastAPI + WebSocket): ``vlnverse study serve --episodes FILE --out DIR``.

``GET /`` serves the page (plain HTML/JS in ``static/``); ``/ws?pid=ID`` is the participant's
socket. Messages from the page (JSON): ``consent``, ``start`` (begin or resume the current
episode after its instruction pop-up), ``keys`` (the set of held keys), ``finish`` (Enter, once
confirmed), ``end`` (give up an interrupted episode), ``withdraw``. From the server: ``welcome``,
``episode``, ``episode_end``, ``complete``, ``refused``, ``withdrawn``, ``error`` (JSON) and frames
(binary: one byte, 1 when the body touched something since the previous frame, then a JPEG).
One socket per participant: a second tab is refused with a message. When the socket drops the
driver pauses (the CSV ends at the last pose); reconnecting offers to resume or end the episode.
"""
from __future__ import annotations

import asyncio
import contextlib
import json
import logging
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


class StudyServer:
    """State shared by the sockets: the store, the participants connected now and their drivers."""

    def __init__(self, store: StudyStore):
        self.store = store
        self.connected: set[str] = set()
        self.drivers: dict[str, ParticipantDriver] = {}
        self.sockets: dict[str, Any] = {}  # pid -> the participant's socket (the experimenter can end it)
        self.ended: set[str] = set()  # sessions the experimenter ended; refused until resumed
        self._lock = asyncio.Lock()

    def episode_message(self, pid: str) -> dict:
        """The participant's next message: their current episode (resumed or new), or ``complete``."""
        return episode_message(self.store, pid)

    async def handle(self, ws: Any) -> None:
        """Serve one participant's socket until it closes."""
        from starlette.websockets import WebSocketDisconnect

        await ws.accept()
        pid = ws.query_params.get("pid", "")
        if not PARTICIPANT_ID.match(pid):
            await ws.send_json({"type": "refused", "message": "Enter a participant id of 1-40 letters, digits, '_' or '-'."})
            await ws.close(code=4400)
            return
        if self.store.withdrawn(pid):
            log.warning("participant %s withdrew earlier: connection refused", pid)
            await ws.send_json({"type": "refused", "message": f"Participant id {pid} was withdrawn from this study "
                                                              "and cannot be used again. Please ask the experimenter."})
            await ws.close(code=4403)
            return
        if pid in self.ended:
            await ws.send_json({"type": "refused", "message": "The experimenter has paused your session. "
                                                              "Please wait until they resume it, then reload."})
            await ws.close(code=4403)
            return
        async with self._lock:
            if pid in self.connected:
                await ws.send_json({"type": "refused", "message": f"Participant {pid} is already connected in another "
                                                                  "tab or window. Close this tab and continue there."})
                await ws.close(code=4409)
                return
            self.connected.add(pid)
            self.sockets[pid] = ws
        loop = asyncio.get_running_loop()
        outbox: asyncio.Queue = asyncio.Queue()
        latest: dict[str, Any] = {"frame": None}
        wake = asyncio.Event()

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

        driver = self.drivers.get(pid)
        if driver is None or not driver.alive:
            driver = self.drivers[pid] = ParticipantDriver(self.store, pid, on_frame=on_frame, on_event=on_event)
        else:
            driver.on_frame, driver.on_event = on_frame, on_event

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

        task = asyncio.create_task(sender())
        try:
            record = self.store.assignment(pid)
            done, total = self.store.progress(pid)
            cfg = self.store.config
            await ws.send_json({"type": "welcome", "participant": pid, "title": cfg.title,
                                "consent": cfg.consent_shown(), "consented": bool(record.get("consented_at")),
                                "done": done, "total": total, "allow_backward": cfg.allow_backward,
                                "pause_s": cfg.pause_s, "withdraw_data": cfg.withdraw_data})
            while True:
                msg = json.loads(await ws.receive_text())
                kind = msg.get("type")
                if kind == "consent":
                    self.store.consent(pid)
                    put_event(self.episode_message(pid))
                elif kind == "next":
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
                    await self.withdraw(pid, driver)
                    await ws.send_json({"type": "withdrawn", "deleted": self.store.config.withdraw_data == "delete"})
                    await ws.close(code=4403)
                    break
        except (WebSocketDisconnect, RuntimeError, json.JSONDecodeError):
            pass
        finally:
            driver.pause()
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
            async with self._lock:
                self.connected.discard(pid)
                if self.sockets.get(pid) is ws:
                    del self.sockets[pid]

    def overview(self) -> list[dict]:
        """Every participant for the experimenter: connected, consented, withdrawn, ended by the
        experimenter, progress and the current episode."""
        out = []
        for pid in self.store.participants():
            record = self.store.assignment(pid)
            done, total = self.store.progress(pid)
            driver = self.drivers.get(pid)
            out.append({"participant": pid, "connected": pid in self.connected, "consented": bool(record.get("consented_at")),
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
        with contextlib.suppress(Exception):
            await ws.send_json({"type": "refused", "message": "The experimenter has paused your session. Please "
                                                              "wait until they resume it, then reload the page."})
            await ws.close(code=4403)
        return True

    def resume_session(self, pid: str) -> None:
        """Let ``pid`` connect again (their interrupted episode is offered to resume)."""
        self.ended.discard(pid)

    async def withdraw(self, pid: str, driver: ParticipantDriver) -> None:
        """End ``pid``'s session (simulator closed, log closed) and mark them withdrawn."""
        driver.keys = frozenset()
        driver.close()
        await asyncio.get_running_loop().run_in_executor(None, driver.join, 10.0)
        self.drivers.pop(pid, None)
        self.store.withdraw(pid)
        log.warning("participant %s withdrew (data %s)", pid,
                    "deleted" if self.store.config.withdraw_data == "delete" else "kept")

    def close(self) -> None:
        """Close every participant's simulator."""
        for driver in self.drivers.values():
            driver.close()
        for driver in self.drivers.values():
            driver.join(5.0)


def create_app(store: StudyStore, token: str | None = None) -> Any:
    """The FastAPI app of a study. ``token`` guards the experimenter pages (``/experimenter``,
    ``/api/experimenter/*``; a new random one when None, in ``app.state.token``): a request
    without it, or with a wrong one, is refused (403) and logged. Participants' pages never list
    participant ids."""
    import secrets

    from fastapi import FastAPI, HTTPException
    from fastapi.responses import FileResponse, JSONResponse
    from fastapi.staticfiles import StaticFiles

    server = StudyServer(store)
    token = token or secrets.token_urlsafe(12)

    @contextlib.asynccontextmanager
    async def lifespan(app):  # noqa: ANN001
        yield
        server.close()

    app = FastAPI(title=store.config.title, lifespan=lifespan, docs_url=None, redoc_url=None)
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

    def experimenter(request: Request) -> None:
        given = request.headers.get("x-experimenter-token") or request.query_params.get("token") or ""
        if not secrets.compare_digest(given.encode(), token.encode()):
            log.warning("experimenter page %s refused for %s: %s experimenter token", request.url.path,
                        request.client.host if request.client else "?", "wrong" if given else "no")
            raise HTTPException(403, "This page needs the experimenter token printed by 'vlnverse study serve'.")

    @app.get("/experimenter")
    async def experimenter_page(request: Request):
        experimenter(request)
        return FileResponse(STATIC / "experimenter.html")

    @app.get("/api/experimenter/status")
    async def experimenter_status(request: Request):
        experimenter(request)
        return JSONResponse({"title": store.config.title, "episodes": len(store.order),
                             "participants": server.overview()})

    @app.post("/api/experimenter/end")
    async def experimenter_end(request: Request, pid: str):
        experimenter(request)
        check = PARTICIPANT_ID.match(pid)
        if not check:
            raise HTTPException(400, "not a participant id")
        log.info("experimenter ended the session of %s", pid)
        return JSONResponse({"participant": pid, "was_connected": await server.end_session(pid)})

    @app.post("/api/experimenter/resume")
    async def experimenter_resume(request: Request, pid: str):
        experimenter(request)
        log.info("experimenter resumed the session of %s", pid)
        server.resume_session(pid)
        return JSONResponse({"participant": pid})

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


def serve(store: StudyStore, host: str = "127.0.0.1", port: int = 8765, token: str | None = None) -> None:
    """Run the study app until interrupted (prints the participants' and the experimenter's URLs)."""
    import uvicorn

    app = create_app(store, token)
    shown = shown_host(host)
    print(f"vlnverse study: {len(store.order)} episodes, writing to {store.out}\n"
          f"participants: open http://{shown}:{port}/ in a browser (Ctrl+C stops)\n"
          f"experimenter: http://{shown}:{port}/experimenter?token={app.state.token}", flush=True)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    uvicorn.run(app, host=host, port=port, log_level="warning", ws_ping_interval=5, ws_ping_timeout=10)


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
