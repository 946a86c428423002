"""A local fake OpenAI-compatible chat endpoint for the LLM tests (127.0.0.1 only, never the internet)."""
from __future__ import annotations

import contextlib
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Callable, Iterator


@contextlib.contextmanager
def chat_endpoint(reply: Callable[[dict], str], path: str = "/v1") -> Iterator[tuple[str, list[dict]]]:
    """Serve ``POST`` chat completions answered by ``reply(request_body)``; yields the base URL and
    the list of received requests (``{"path", "body", "auth"}``), shut down on exit."""
    requests: list[dict] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 (http.server naming)
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            requests.append({"path": self.path, "body": body, "auth": self.headers.get("Authorization")})
            data = json.dumps({"choices": [{"message": {"role": "assistant", "content": reply(body)}}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}{path}", requests
    finally:
        server.shutdown()
        server.server_close()
