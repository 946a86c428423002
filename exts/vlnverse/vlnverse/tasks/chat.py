"""The toolkit's one chat client and one circuit breaker, on the standard library (``http.client``).

:class:`ChatClient` is every chat client of the toolkit: the LLM stage of instruction generation
and the dialogue oracle call :meth:`ChatClient.complete` (text in, text out, ``LLMError`` on any
failure); the MLLM agents' chat models (``vlnverse.run.chat_models``: OpenAI-compatible
servers, Ollama) send through :meth:`ChatClient.send` (retries with back-off, failures by kind)
and keep their own :class:`CircuitBreaker`, the same type the client's ``complete`` uses.

``post_json`` is the HTTP exchange underneath. Guards: a ``timeout`` per network wait and an
optional ``deadline`` for the whole exchange (a watchdog closes the socket of a server dripping
bytes), answers over ``max_response_bytes`` are refused (read in chunks), redirects are followed
only within the same origin (never sending the key elsewhere), credentials inside the URL are
never sent. Failures raise :class:`HTTPFailure` with a ``kind``: ``timeout``, ``unreachable``,
``status`` (a non-200 answer: ``status``, ``retry_after``, the start of its body), ``oversized``,
``refused`` (scheme, credentials in the URL, cross-origin redirect, too many redirects).
"""
from __future__ import annotations

import contextvars
import http.client
import json
import logging
import socket
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

from ..core.errors import VLNVerseError
from ..core.io import redact_url

log = logging.getLogger(__name__)

#: The circuit breaker of each endpoint for the run in progress: every ``ChatClient`` of one
#: endpoint inside the block shares it (set by ``vlnverse.tasks.instructions.llm.collect_llm_warnings``).
SHARED_BREAKERS: contextvars.ContextVar[dict | None] = contextvars.ContextVar("vlnverse_llm_breakers", default=None)

#: Why a request of :meth:`ChatClient.send` got no usable answer (``ChatFailure.kind``):
#: ``auth`` is HTTP 401/403, ``rejected`` another 4xx or a refused URL / redirect, ``non_text`` a
#: 200 body that is not JSON, ``oversized`` a body over ``max_response_bytes``. 429
#: (``rate_limit``), 5xx (``server_error``), ``timeout`` and ``unreachable`` are retried.
FAILURE_KINDS = ("unreachable", "timeout", "rate_limit", "server_error", "auth", "rejected", "non_text", "oversized")


class LLMError(VLNVerseError):
    """The chat endpoint could not be reached or answered something unusable."""


class HTTPFailure(LLMError):
    """One failed exchange: ``kind`` (see the module), ``status`` and ``retry_after`` (seconds,
    from the answer's ``Retry-After``) of a non-200 answer."""

    def __init__(self, kind: str, message: str, *, status: int | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.kind, self.status, self.retry_after = kind, status, retry_after


class ChatFailure(LLMError):
    """A request of :meth:`ChatClient.send` that got no usable answer: ``kind`` (one of
    :data:`FAILURE_KINDS`) and the number of ``requests`` sent, retries included."""

    def __init__(self, kind: str, message: str, *, requests: int = 0):
        super().__init__(message)
        self.kind, self.requests = kind, requests


class CircuitBreaker:
    """Endpoint failures in a row, opening at ``limit`` (0: never); once open it stays open and
    :attr:`reason` says why (``circuit_open`` of its holders). Thread-safe: the chat models of a
    run's episode threads share one, the ``ChatClient`` s of one endpoint inside
    ``collect_llm_warnings`` share one. ``setting`` names the limit in the reason."""

    def __init__(self, limit: int, setting: str = "max_failures"):
        self.limit = int(limit)
        self.setting = setting
        self.in_row = 0
        self.reason: str | None = None
        self._lock = threading.Lock()

    def record(self, failed: bool, kind: str | None = None) -> bool:
        """Count one call (``failed``: the endpoint gave no answer, ``kind`` why); True when
        this call opened the breaker."""
        with self._lock:
            if not failed:
                self.in_row = 0
                return False
            self.in_row += 1
            if self.limit and self.in_row >= self.limit and self.reason is None:
                self.reason = (f"circuit breaker open after {self.in_row} endpoint failures in a row "
                               f"(last: {kind}; {self.setting})")
                return True
            return False


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
class ChatReply:
    """An OpenAI chat completion read leniently: the message ``content`` (None or another type
    when the server sent no text), token counts and the model the server names."""

    content: Any
    prompt_tokens: int = 0
    completion_tokens: int = 0
    served_model: str | None = None


def chat_reply(data: Any) -> ChatReply:
    """The :class:`ChatReply` of an OpenAI chat-completions JSON answer; ``ChatFailure``
    (``non_text``) when it has no choices."""
    choices = data.get("choices") if isinstance(data, dict) else None
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        raise ChatFailure("non_text", "the answer has no choices", requests=1)
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    message = choices[0].get("message")
    return ChatReply(message.get("content") if isinstance(message, dict) else None,
                     int(usage.get("prompt_tokens", 0) or 0), int(usage.get("completion_tokens", 0) or 0),
                     data.get("model") if isinstance(data.get("model"), str) else None)


@dataclass
class ChatClient:
    """The toolkit's chat client over ``post_json``: ``POST {url}/chat/completions`` (or another
    path below ``url``, :meth:`send`).

    ``url`` is the API base (``http://host:8000/v1``) or the full ``…/chat/completions`` URL.
    ``timeout`` per network wait, ``deadline`` seconds for one exchange (None: none),
    ``max_response_bytes`` and same-origin redirects as ``post_json``. ``max_retries`` (default
    0) more tries on 429, 5xx, timeouts and connection errors, after ``backoff · 2^attempt``
    seconds (at least the server's ``Retry-After``, at most ``max_backoff``). :meth:`complete`
    goes through the circuit :attr:`breaker`: after ``max_failures`` (0: never) failed calls in
    a row further calls fail at once without touching the network. Messages never show a key
    from the URL.
    """

    url: str
    model: str = "default"
    api_key: str | None = field(default=None, repr=False)  # never in a repr, a log or a traceback
    timeout: float = 30.0
    temperature: float = 0.7
    deadline: float | None = 60.0
    max_response_bytes: int = 2_000_000
    max_failures: int = 5
    max_redirects: int = 3
    max_retries: int = 0
    backoff: float = 1.0
    max_backoff: float = 10.0
    _own_breaker: CircuitBreaker | None = field(default=None, init=False, repr=False)

    @property
    def endpoint(self) -> str:
        """The full chat-completions URL."""
        base = self.url.rstrip("/")
        return base if base.endswith("/chat/completions") else base + "/chat/completions"

    @property
    def breaker(self) -> CircuitBreaker:
        """This endpoint's breaker: inside one ``collect_llm_warnings`` block (a dataset run)
        shared by every client of the endpoint, so the circuit stays open across scenes."""
        shared = SHARED_BREAKERS.get()
        if shared is not None:
            return shared.setdefault(self.endpoint, CircuitBreaker(self.max_failures, "ChatClient.max_failures"))
        if self._own_breaker is None:
            self._own_breaker = CircuitBreaker(self.max_failures, "ChatClient.max_failures")
        return self._own_breaker

    @property
    def circuit_open(self) -> str | None:
        """Why the breaker is open (None: closed)."""
        return self.breaker.reason

    def _wait(self, attempt: int, retry_after: float | None) -> float:
        delay = self.backoff * (2 ** attempt)
        if retry_after is not None:
            delay = max(delay, retry_after)
        return min(delay, self.max_backoff)

    def send(self, body: dict, *, url: str | None = None, until: float | None = None,
             spent: str = "the request's time is spent") -> tuple[Any, int]:
        """POST ``body`` to ``url`` (default :attr:`endpoint`), retried as the class says, and
        return (the JSON answer, requests sent). ``until``: ``time.monotonic()`` by which every
        try and back-off ends (``spent`` is the message when it passes). Raises
        :class:`ChatFailure`; the breaker is the caller's."""
        url = url or self.endpoint
        requests = 0
        kind, error, retry_after = "unreachable", "", None
        for attempt in range(self.max_retries + 1):
            left = None if until is None else until - time.monotonic()
            if left is not None and left <= 0.01:
                kind, error = "timeout", spent
                break
            requests += 1
            try:
                answer = post_json(url, body, api_key=self.api_key,
                                   timeout=self.timeout if left is None else min(self.timeout, left),
                                   deadline=left if self.deadline is None else
                                   (self.deadline if left is None else min(self.deadline, left)),
                                   max_response_bytes=self.max_response_bytes, max_redirects=self.max_redirects)
            except HTTPFailure as exc:
                retry_after = exc.retry_after
                if exc.kind == "status" and exc.status is not None and exc.status < 500 and exc.status != 429:
                    # 4xx: the request or the credentials are wrong: asking again will not help
                    raise ChatFailure("auth" if exc.status in (401, 403) else "rejected", str(exc),
                                      requests=requests) from None
                if exc.kind in ("oversized", "refused"):
                    raise ChatFailure("oversized" if exc.kind == "oversized" else "rejected", str(exc),
                                      requests=requests) from None
                kind = {"timeout": "timeout", "unreachable": "unreachable"}.get(exc.kind) or \
                    ("rate_limit" if exc.status == 429 else "server_error")
                error = f"{exc} ({redact_url(self.url)})" if kind == "unreachable" else str(exc)
            else:
                try:
                    return json.loads(answer.body), requests
                except ValueError:
                    raise ChatFailure("non_text", f"the endpoint answered {answer.content_type or 'no content type'} "
                                                  f"({len(answer.body)} bytes), not a chat completion: check the "
                                                  f"endpoint URL ({redact_url(self.url)})", requests=requests) from None
            if attempt < self.max_retries:
                delay = self._wait(attempt, retry_after)
                if until is not None and time.monotonic() + delay >= until:
                    break  # no time left for another try
                log.info("%s request failed (%s), retry %d in %.2f s", self.model, kind, attempt + 1, delay)
                time.sleep(delay)
        raise ChatFailure(kind, error, requests=requests)

    def complete(self, messages: list[dict], *, seed: int | None = None) -> str:
        """The assistant message text for ``messages``; raises ``LLMError`` on any failure."""
        where = redact_url(self.endpoint)
        breaker = self.breaker
        if breaker.reason is not None:
            raise LLMError(f"chat endpoint {where}: not contacted, circuit open: {breaker.reason}")
        body = {"model": self.model, "messages": messages, "temperature": self.temperature}
        if seed is not None:
            body["seed"] = int(seed)
        try:
            data, _ = self.send(body)
            content = chat_reply(data).content
            if not isinstance(content, str):
                raise ChatFailure("non_text", f"message content is {type(content).__name__}, not text")
        except ChatFailure as exc:
            breaker.record(True, exc.kind)
            raise LLMError(f"chat endpoint {where}: {exc}") from None
        breaker.record(False)
        return content.strip()
