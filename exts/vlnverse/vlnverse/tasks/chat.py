"""The toolkit's one chat-completions client, on the standard library (``http.client``).

``post_json`` is the HTTP exchange every chat client of the toolkit goes through: the LLM stage
of instruction generation and the dialogue oracle (``ChatClient``, here), and the MLLM agents'
chat models (``vlnverse.eval.mllm.models``: OpenAI-compatible servers, Ollama). Guards: a
``timeout`` per network wait and an optional ``deadline`` for the whole exchange (a watchdog
closes the socket of a server dripping bytes), answers over ``max_response_bytes`` are refused
(read in chunks), redirects are followed only within the same origin (never sending the key
elsewhere), credentials inside the URL are never sent. Failures raise :class:`HTTPFailure`
with a ``kind``: ``timeout``, ``unreachable``, ``status`` (a non-200 answer: ``status``,
``retry_after``, the start of its body), ``oversized``, ``refused`` (scheme, credentials in the
URL, cross-origin redirect, too many redirects).
"""
from __future__ import annotations

import contextvars
import http.client
import json
import socket
import threading
import time
import urllib.parse
from dataclasses import dataclass, field

from ..core.errors import VLNVerseError
from ..core.io import redact_url

#: Consecutive failures per endpoint for the run in progress (the shared circuit breaker of
#: ``ChatClient``; set by ``vlnverse.tasks.instructions.llm.collect_llm_warnings``).
SHARED_FAILURES: contextvars.ContextVar[dict | None] = contextvars.ContextVar("vlnverse_llm_failures", default=None)


class LLMError(VLNVerseError):
    """The chat endpoint could not be reached or answered something unusable."""


class HTTPFailure(LLMError):
    """One failed exchange: ``kind`` (see the module), ``status`` and ``retry_after`` (seconds,
    from the answer's ``Retry-After``) of a non-200 answer."""

    def __init__(self, kind: str, message: str, *, status: int | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.kind, self.status, self.retry_after = kind, status, retry_after


@dataclass
class Answer:
    """A 200 answer: its body and content type."""

    body: bytes
    content_type: str


def post_json(url: str, payload: dict, *, api_key: str | None = None, timeout: float = 30.0,
              deadline: float | None = 60.0, max_response_bytes: int = 2_000_000, max_redirects: int = 3) -> Answer:
    """POST ``payload`` as JSON to ``url``; the 200 answer's body, else ``HTTPFailure``.
    ``timeout``: seconds per network wait; ``deadline``: seconds for the whole exchange (None: none)."""
    start = time.monotonic()
    data = json.dumps(payload).encode("utf-8")
    origin = _origin(url)

    def late() -> bool:
        return deadline is not None and time.monotonic() - start >= deadline

    for _ in range(max_redirects + 1):
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise HTTPFailure("refused", f"unsupported URL scheme '{parts.scheme}'")
        if parts.username or parts.password:
            raise HTTPFailure("refused", "credentials inside the URL are not sent (use VLNVERSE_LLM_API_KEY)")
        remaining = None if deadline is None else deadline - (time.monotonic() - start)
        if remaining is not None and remaining <= 0:
            raise HTTPFailure("timeout", f"no answer within the {deadline:g} s deadline")
        conn_cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
        conn = conn_cls(parts.hostname, parts.port, timeout=timeout if remaining is None else min(timeout, remaining))
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        # a watchdog closes the socket at the deadline, whatever the server drips
        watchdog = None
        if remaining is not None:
            watchdog = threading.Timer(remaining, _abort, args=(conn,))
            watchdog.daemon = True
            watchdog.start()
        try:
            conn.request("POST", (parts.path or "/") + (f"?{parts.query}" if parts.query else ""), body=data,
                         headers=headers)
            response = conn.getresponse()
            if response.status in (301, 302, 307, 308):
                target = urllib.parse.urljoin(url, response.getheader("Location") or "")
                if _origin(target) != origin:
                    raise HTTPFailure("refused", f"redirect to another origin ({redact_url(target)}) refused")
                url = target
                continue
            if response.status != 200:
                text = response.read(2000).decode("utf-8", "replace").strip()
                raise HTTPFailure("status", f"HTTP {response.status} {response.reason}" + (f": {text}" if text else ""),
                                  status=response.status, retry_after=_seconds(response.getheader("Retry-After")))
            length = response.getheader("Content-Length")
            if length is not None and length.isdigit() and int(length) > max_response_bytes:
                raise HTTPFailure("oversized", f"answer of {int(length)} bytes refused (limit {max_response_bytes})")
            chunks, size = [], 0
            while True:
                chunk = response.read1(65536)
                if not chunk:
                    break
                size += len(chunk)
                if size > max_response_bytes:
                    raise HTTPFailure("oversized", f"answer over {max_response_bytes} bytes refused")
                if late():
                    raise HTTPFailure("timeout", f"no complete answer within the {deadline:g} s deadline")
                chunks.append(chunk)
            if late():  # the watchdog closed the socket
                raise HTTPFailure("timeout", f"no complete answer within the {deadline:g} s deadline")
            if length is not None and length.isdigit() and size < int(length):
                raise HTTPFailure("unreachable", f"answer cut off after {size} of {length} bytes")
            return Answer(b"".join(chunks), str(response.getheader("Content-Type") or ""))
        except (OSError, http.client.HTTPException) as exc:
            if late():
                raise HTTPFailure("timeout", f"no complete answer within the {deadline:g} s deadline") from None
            kind = "timeout" if isinstance(exc, (TimeoutError, socket.timeout)) else "unreachable"
            raise HTTPFailure(kind, f"{type(exc).__name__}: {str(exc)[:200]}") from None
        finally:
            if watchdog is not None:
                watchdog.cancel()
            conn.close()
    raise HTTPFailure("refused", f"more than {max_redirects} redirects")


def _seconds(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urllib.parse.urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), port


def _abort(conn: http.client.HTTPConnection) -> None:
    sock = conn.sock
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


@dataclass
class ChatClient:
    """Minimal OpenAI-compatible chat client over ``post_json``: ``POST {url}/chat/completions``.

    ``url`` is the API base (``http://host:8000/v1``) or the full ``…/chat/completions`` URL.
    ``timeout`` per network wait, ``deadline`` seconds for the whole request, ``max_response_bytes``
    and same-origin redirects as ``post_json``; after ``max_failures`` consecutive failures the
    circuit opens: further requests fail at once without touching the network. Messages never
    show a key from the URL.
    """

    url: str
    model: str = "default"
    api_key: str | None = None
    timeout: float = 30.0
    temperature: float = 0.7
    deadline: float = 60.0
    max_response_bytes: int = 2_000_000
    max_failures: int = 5
    max_redirects: int = 3
    _own_failures: int = field(default=0, init=False, repr=False)

    @property
    def consecutive_failures(self) -> int:
        """Failures in a row of this endpoint: shared by every client of the same endpoint inside
        one ``collect_llm_warnings`` block (a dataset run), so the circuit stays open across scenes."""
        shared = SHARED_FAILURES.get()
        return shared.get(self.endpoint, 0) if shared is not None else self._own_failures

    @consecutive_failures.setter
    def consecutive_failures(self, value: int) -> None:
        shared = SHARED_FAILURES.get()
        if shared is not None:
            shared[self.endpoint] = value
        else:
            self._own_failures = value

    @property
    def endpoint(self) -> str:
        """The full chat-completions URL."""
        base = self.url.rstrip("/")
        return base if base.endswith("/chat/completions") else base + "/chat/completions"

    @property
    def circuit_open(self) -> bool:
        """True after ``max_failures`` consecutive failures (no more requests are sent)."""
        return self.consecutive_failures >= self.max_failures

    def complete(self, messages: list[dict], *, seed: int | None = None) -> str:
        """The assistant message text for ``messages``; raises ``LLMError`` on any failure."""
        where = redact_url(self.endpoint)
        if self.circuit_open:
            raise LLMError(f"chat endpoint {where}: not contacted after {self.consecutive_failures} consecutive "
                           "failures (circuit open)")
        body = {"model": self.model, "messages": messages, "temperature": self.temperature}
        if seed is not None:
            body["seed"] = int(seed)
        try:
            raw = post_json(self.endpoint, body, api_key=self.api_key, timeout=self.timeout, deadline=self.deadline,
                            max_response_bytes=self.max_response_bytes, max_redirects=self.max_redirects).body
            data = json.loads(raw.decode("utf-8"))
            content = data["choices"][0]["message"]["content"]
            if not isinstance(content, str):
                raise ValueError(f"message content is {type(content).__name__}, not text")
        except LLMError as exc:
            self.consecutive_failures += 1
            raise LLMError(f"chat endpoint {where}: {exc}") from None
        except (OSError, ValueError, KeyError, IndexError, TypeError) as exc:
            self.consecutive_failures += 1
            raise LLMError(f"chat endpoint {where}: {type(exc).__name__}: {str(exc)[:200]}") from None
        self.consecutive_failures = 0
        return content.strip()
