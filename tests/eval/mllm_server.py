"""The one local OpenAI chat-completions server of the tests (127.0.0.1 only, never the internet):
the MLLM agents' client (tests/eval), the instruction pipeline's LLM stage and the dialogue oracle
(tests/tasks, which put this folder on ``sys.path``).

``reply(body, n)`` gets the request JSON and its 0-based count and returns the answer text (a str)
or a dict: ``text`` (the
answer; ``None`` sends a null content), ``status`` (HTTP status, default 200), ``sleep`` (seconds
to wait before answering), ``headers`` (extra response headers), ``prompt_tokens`` (default
100 + n), ``served`` (the model name the answer names; default the requested one), ``raw``
(a body sent as it is, str or bytes, instead of a chat completion) with ``content_type``
(default application/json), ``json`` (a JSON body sent instead of a chat completion), ``handle``
(``handle(handler)`` writes the whole response itself: dripping bytes, chunked bodies, redirects).
Also answers Ollama's native ``/api/chat``. The request list's ``max_in_flight`` is the
most requests the server was answering at once.
"""
from __future__ import annotations

import contextlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Iterator


def message_text(message: dict) -> str:
    """The text of a chat message whose content is a string or a list of parts."""
    content = message["content"]
    if isinstance(content, str):
        return content
    return "\n".join(p.get("text", "") for p in content if p.get("type") == "text")


class RequestLog(list):
    """The received requests, plus ``in_flight`` / ``max_in_flight`` (requests being answered)."""

    in_flight = 0
    max_in_flight = 0


@contextlib.contextmanager
def openai_server(reply: Callable[[dict, int], dict | str], path: str = "/v1",
                  protocol: str = "HTTP/1.0") -> Iterator[tuple[str, list[dict]]]:
    """Serve chat completions; yields (base URL ending in ``path``, list of received requests,
    each ``{"path", "body", "auth"}``). ``protocol``: the HTTP version of the answers."""
    requests = RequestLog()
    lock = threading.Lock()

    class Handler(BaseHTTPRequestHandler):
        protocol_version = protocol

        def do_POST(self):  # noqa: N802 (http.server naming)
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"null")
            with lock:
                n = len(requests)
                requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
                requests.in_flight += 1
                requests.max_in_flight = max(requests.max_in_flight, requests.in_flight)
            try:
                spec = reply(body, n)
                spec = {"text": spec} if isinstance(spec, str) else spec
                time.sleep(spec.get("sleep", 0.0))
            finally:
                with lock:
                    requests.in_flight -= 1
            if "handle" in spec:
                try:
                    spec["handle"](self)
                except (BrokenPipeError, ConnectionResetError):  # the client gave up (deadline, size cap)
                    pass
                return
            status = spec.get("status", 200)
            if "raw" in spec:
                data = spec["raw"].encode() if isinstance(spec["raw"], str) else spec["raw"]
            elif "json" in spec:
                data = json.dumps(spec["json"]).encode()
            elif status != 200:
                data = json.dumps({"error": {"message": spec.get("text") or f"status {status}", "type": "test"}}).encode()
            elif self.path.endswith("/api/chat"):
                data = json.dumps({"message": {"role": "assistant", "content": spec.get("text")},
                                   "prompt_eval_count": 11, "eval_count": 3}).encode()
            else:
                data = json.dumps({"id": f"c{n}", "object": "chat.completion", "created": 0,
                                   "model": spec.get("served", body.get("model")),
                                   "choices": [{"index": 0, "finish_reason": "stop",
                                                "message": {"role": "assistant", "content": spec.get("text")}}],
                                   "usage": {"prompt_tokens": spec.get("prompt_tokens", 100 + n), "completion_tokens": 7,
                                             "total_tokens": spec.get("prompt_tokens", 100 + n) + 7}}).encode()
            try:
                self.send_response(status)
                for k, v in spec.get("headers", {}).items():
                    self.send_header(k, v)
                self.send_header("Content-Type", spec.get("content_type", "application/json"))
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout test)
                pass

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}{path}", requests
    finally:
        server.shutdown()
        server.server_close()
