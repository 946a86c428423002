"""Chat models for zero-shot MLLM agents, registered in ``MODELS``: ``openai`` (any
OpenAI-compatible server: vLLM, hosted APIs), ``ollama``, ``transformers`` (a local VLM) and
``scripted`` (canned answers, for tests and dry runs).

Every model answers ``generate(messages, images=())`` with a :class:`Generation` and never
raises for a failed request: an unreachable server, a timeout, HTTP 429/5xx after the retries,
a rejected request, a body that is not a chat completion or an empty answer come back as
``Generation.error_kind``; the kinds in :data:`ENDPOINT_ERRORS` mean the model never answered
(the runner does not evaluate such an episode). After ``max_consecutive_failures`` endpoint
failures in a row the model stops sending (its ``breaker``, the toolkit's one
``vlnverse.tasks.chat.CircuitBreaker``; ``circuit_open`` says why). The HTTP models send through
the toolkit's one chat client, ``vlnverse.tasks.chat.ChatClient`` (retries, back-off, failure
kinds). A
:class:`ResponseCache` keyed by the full request (endpoint, model, messages, image hashes,
sampling parameters) makes a rerun free: a hit sends no request; callers store only answers
they could use (:meth:`ChatModel.remember`). The API key is read from the environment variable
the config names and lives only inside the HTTP client; it is scrubbed from every error text,
so it never reaches a log, a cache file or a report.
"""
from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import contextlib
import threading
import time
from urllib.parse import urlsplit
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar, Sequence

from ..core.cache_key import content_key
from ..core.errors import ConfigError
from ..core.params import param
from ..core.io import endpoint_host, write_json_atomic
from ..tasks.chat import FAILURE_KINDS, ChatClient, ChatFailure, ChatReply, CircuitBreaker, chat_reply
from .models import register_model

log = logging.getLogger(__name__)

#: Error kinds meaning the endpoint gave no answer: the episode is *not evaluated* (excluded from
#: the metrics, re-run on resume). ``auth``: HTTP 401/403; ``rejected``: another 4xx;
#: ``non_text``: a 200 body that is not a chat completion with text (text/plain, null content,
#: no choices); ``oversized``: a body over ``max_response_bytes``; ``circuit_open`` /
#: ``run_timeout``: not sent (the circuit breaker is open, the run's time is spent).
ENDPOINT_ERRORS = FAILURE_KINDS + ("model_error", "circuit_open", "run_timeout")
#: Error kinds a generation can end with (besides ``None``); ``empty`` is the model's own answer.
ERROR_KINDS = ENDPOINT_ERRORS + ("empty",)


@dataclass
class Generation:
    """One model answer (or its failure) with its cost."""

    text: str = ""
    error_kind: str | None = None
    error: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    requests: int = 0
    cached: bool = False
    served_model: str | None = None
    truncated: bool = False
    #: (cache key, entry) to store once the caller found the answer usable (``ChatModel.remember``)
    pending: Any = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        """True when the model produced text."""
        return self.error_kind is None

    @property
    def endpoint_failure(self) -> bool:
        """True when the endpoint gave no answer (:data:`ENDPOINT_ERRORS`)."""
        return self.error_kind in ENDPOINT_ERRORS

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (latency rounded to 0.1 ms)."""
        out = asdict(self)
        out.pop("pending")
        out["latency_s"] = round(self.latency_s, 4)
        return out


def png_bytes(image: Any) -> bytes:
    """PNG bytes of ``image`` (PNG bytes are returned as they are; arrays and PIL images are encoded)."""
    if isinstance(image, (bytes, bytearray)):
        return bytes(image)
    import io

    import numpy as np
    from PIL import Image

    pil = image if isinstance(image, Image.Image) else Image.fromarray(np.asarray(image, dtype=np.uint8))
    buf = io.BytesIO()
    pil.save(buf, format="PNG")
    return buf.getvalue()


def image_sha256(data: bytes) -> str:
    """Hex SHA-256 of encoded image bytes (the cache key and the logged image name)."""
    return hashlib.sha256(data).hexdigest()


class ResponseCache:
    """Answers on disk, one JSON file per request key (``<root>/<key[:2]>/<key>.json``), written atomically.

    Only successful answers are stored (a failure is retried on the next run); a file holds the
    key's request summary (model, params, image hashes), the text and the token counts.
    """

    def __init__(self, root: str | Path):
        self.root = Path(root)

    #: format version of the stored answers (part of every key)
    VERSION = 1

    @staticmethod
    def key(request: dict[str, Any]) -> str:
        """The request's content key (``vlnverse.core.cache_key.content_key``)."""
        return content_key("mllm_responses", ResponseCache.VERSION, request)

    def _path(self, key: str) -> Path:
        return self.root / key[:2] / f"{key}.json"

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored entry for ``key``, or None (an unreadable file counts as a miss)."""
        path = self._path(key)
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            return None

    def put(self, key: str, entry: dict[str, Any]) -> None:
        """Store ``entry`` under ``key``."""
        write_json_atomic(self._path(key), entry, indent=None)


@dataclass(kw_only=True)
class ChatModelParams:
    """``model.params`` every chat model takes (see :class:`ChatModel`), with their ranges."""

    cache: Any = True
    max_concurrency: int = param(4, low=1, high=4096)
    temperature: float = param(0.0)
    max_tokens: int = param(512, low=1, high=10_000_000)
    seed: int | None = param(0)
    price_per_1k_input: float = param(0.0, low=0.0)
    price_per_1k_output: float = param(0.0, low=0.0)
    cache_refresh: bool = False
    max_consecutive_failures: int = param(3, low=0, high=1_000_000)
    run_timeout: float | None = param(None, low=1e-3)
    max_answer_chars: int = param(16384, low=64, high=1 << 30)


class ChatModel:
    """Base class: request keys, the response cache, usage accounting, a concurrency limit, the
    circuit breaker and the run's time budget.

    ``params`` (``temperature``, ``max_tokens``, ``seed``...) are the sampling parameters sent
    with every request and part of the cache key. ``cache`` is a folder (``True``: the default
    ``<VLNVERSE_CACHE>/mllm_responses``; ``"refresh"``: the default folder, every request re-asked
    and its entry rewritten; ``False``/``None``: no cache); ``cache_refresh`` refreshes a named
    folder. ``max_concurrency`` bounds simultaneous requests from threads sharing this model.
    ``max_consecutive_failures`` (default 3; 0: off) endpoint failures in a row open the circuit
    breaker: later calls fail at once with ``circuit_open``. ``run_timeout`` (s, default off)
    ends sending that long after the first call (``run_timeout``). ``max_answer_chars`` (default
    16384) cuts a longer answer before it is parsed, logged or cached (``truncated``).
    """

    kind = "base"
    #: the ``model.params`` it takes, with their ranges (checked by ``make_model``)
    Params: ClassVar[type] = ChatModelParams
    #: seconds one agent step's calls may take, retries included (None: no limit; see :meth:`step`)
    step_timeout: float | None = None

    def __init__(self, *, model: str = "", cache: Any = True, max_concurrency: int = 4,
                 temperature: float = 0.0, max_tokens: int = 512, seed: int | None = 0,
                 price_per_1k_input: float = 0.0, price_per_1k_output: float = 0.0,
                 cache_refresh: bool = False, max_consecutive_failures: int = 3, run_timeout: float | None = None,
                 max_answer_chars: int = 16384):
        self.model = str(model)
        self.params: dict[str, Any] = {"temperature": float(temperature), "max_tokens": int(max_tokens)}
        if seed is not None:
            self.params["seed"] = int(seed)
        self.prices = (float(price_per_1k_input), float(price_per_1k_output))
        if cache == "refresh":
            cache, cache_refresh = True, True
        if cache is True:
            from ..paths import cache_dir

            cache = cache_dir() / "mllm_responses"
        self.cache = ResponseCache(cache) if cache else None
        self.cache_refresh = bool(cache_refresh)
        self.max_consecutive_failures = int(max_consecutive_failures)
        self.run_timeout = float(run_timeout) if run_timeout is not None else None
        self.max_answer_chars = int(max_answer_chars)
        #: endpoint failures in a row (the agents of one run share one per role: ``eval.agents.join_run``)
        self.breaker = CircuitBreaker(self.max_consecutive_failures, "model.params.max_consecutive_failures")
        self._t_first: float | None = None
        self._slots = threading.BoundedSemaphore(int(max_concurrency))
        #: a run-wide limit on requests in flight (``model.concurrency``, set by the runner through
        #: ``eval.agents.join_run``: a ``SharedLimit``), taken around every request that leaves the cache
        self.request_limit: Any = None
        self._lock = threading.Lock()
        self._local = threading.local()  # the calling thread's step deadline (``step``)
        self.usage: Counter = Counter()
        self.served_models: Counter = Counter()
        self._secrets: list[str] = []

    # -- identity -----------------------------------------------------------------------------

    @property
    def endpoint(self) -> str:
        """Where answers come from, without credentials (part of the cache key)."""
        return self.kind

    def describe(self) -> dict[str, Any]:
        """Model kind, configured and served model names, endpoint host (never a key), calls and cache hits."""
        return {"kind": self.kind, "model": self.model, "served_models": sorted(self.served_models),
                "endpoint_host": endpoint_host(self.endpoint), "requests": self.usage["requests"],
                "cache_hits": self.usage["cache_hits"]}

    # -- the public call ----------------------------------------------------------------------

    def request_key(self, messages: Sequence[dict[str, str]], image_hashes: Sequence[str]) -> dict[str, Any]:
        """Everything that determines an answer: endpoint (no key), model, messages, images, sampling."""
        return {"kind": self.kind, "endpoint": self.endpoint, "model": self.model,
                "messages": [dict(m) for m in messages], "images": list(image_hashes), "params": self.params}

    @contextlib.contextmanager
    def step(self, seconds: float | None) -> Any:
        """Within the block, this thread's calls (retries and back-off included) end by ``seconds``
        from now (None: no step limit)."""
        old = getattr(self._local, "deadline", None)
        self._local.deadline = None if seconds is None else time.monotonic() + float(seconds)
        try:
            yield
        finally:
            self._local.deadline = old

    def remaining(self) -> float | None:
        """Seconds left before this thread's step deadline (None: no deadline)."""
        deadline = getattr(self._local, "deadline", None)
        return None if deadline is None else deadline - time.monotonic()

    def generate(self, messages: Sequence[dict[str, str]], images: Sequence[Any] = (), *,
                 store: bool = True) -> Generation:
        """Answer the chat ``messages`` (``{"role", "content"}``); ``images`` (PNG bytes or arrays)
        go with the last user message. Served from the cache when the same request was answered
        (unless refreshing). ``store=False``: an answer is cached only by :meth:`remember`."""
        encoded = [png_bytes(im) for im in images]
        request = self.request_key(messages, [image_sha256(b) for b in encoded])
        key = ResponseCache.key(request) if self.cache else ""
        if self.cache and not self.cache_refresh:
            hit = self.cache.get(key)
            if hit is not None and isinstance(hit.get("text"), str):
                self._count(cache_hits=1)
                return Generation(text=hit["text"], prompt_tokens=int(hit.get("prompt_tokens", 0)),
                                  completion_tokens=int(hit.get("completion_tokens", 0)), cached=True,
                                  served_model=hit.get("served_model"))
        refused = self._refusal()
        if refused is not None:
            self._count(**{f"error_{refused.error_kind}": 1})
            return refused
        t0 = time.perf_counter()
        with self._slots, (self.request_limit or contextlib.nullcontext()):
            try:
                gen = self._complete(list(messages), encoded)
            except Exception as exc:  # noqa: BLE001 - a model failure is a recorded step, never a crashed run
                gen = Generation(error_kind="model_error", error=f"{type(exc).__name__}: {exc}", requests=1)
        gen.latency_s = time.perf_counter() - t0
        if gen.error is not None:
            gen.error = self.scrub(gen.error)[:500]
        if gen.error_kind is None and len(gen.text) > self.max_answer_chars:
            gen.text, gen.truncated = gen.text[:self.max_answer_chars], True
        if gen.error_kind is None and not gen.text.strip():
            gen.error_kind, gen.error = "empty", "the model returned no text"
        self._breaker(gen)
        self._count(requests=gen.requests, prompt_tokens=gen.prompt_tokens, completion_tokens=gen.completion_tokens,
                    latency_ms=int(round(1000 * gen.latency_s)), answered=int(gen.ok),
                    **({f"error_{gen.error_kind}": 1} if gen.error_kind else {}))
        if gen.served_model:
            with self._lock:
                self.served_models[gen.served_model] += 1
        if self.cache and gen.ok:
            gen.pending = (key, {"request": {k: v for k, v in request.items() if k != "messages"}, "text": gen.text,
                                 "prompt_tokens": gen.prompt_tokens, "completion_tokens": gen.completion_tokens,
                                 "served_model": gen.served_model})
            if store:
                self.remember(gen)
        return gen

    def remember(self, gen: Generation) -> None:
        """Cache ``gen``'s answer (a fresh, successful one; no-op otherwise): callers do it once
        the answer proved usable, so refusals and garbage are asked again next time."""
        if self.cache and gen.pending is not None:
            self.cache.put(*gen.pending)
            gen.pending = None

    def _refusal(self) -> Generation | None:
        """A failure without a request when the breaker is open or the run's time is spent."""
        if self.circuit_open is not None:
            return Generation(error_kind="circuit_open", error=self.circuit_open)
        now = time.monotonic()
        with self._lock:
            if self._t_first is None:
                self._t_first = now
        if self.run_timeout is not None and now - self._t_first > self.run_timeout:
            return Generation(error_kind="run_timeout", error=f"the run's model time ({self.run_timeout:g} s, "
                                                              "model.params.run_timeout) is spent")
        left = self.remaining()
        if left is not None and left <= 0:
            return Generation(error_kind="timeout", error="the step's time (model.params.step_timeout) is spent")
        return None

    @property
    def circuit_open(self) -> str | None:
        """Why the circuit breaker is open (None: closed)."""
        return self.breaker.reason

    def _breaker(self, gen: Generation) -> None:
        """Count endpoint failures in a row; open the breaker at ``max_consecutive_failures``."""
        if self.breaker.record(gen.endpoint_failure, gen.error_kind):
            log.error("%s: %s", self.model, self.breaker.reason)

    def _complete(self, messages: list[dict[str, str]], images: list[bytes]) -> Generation:
        """Send one request (with retries); subclasses implement it."""
        raise NotImplementedError

    # -- accounting ---------------------------------------------------------------------------

    def _count(self, **amounts: int) -> None:
        with self._lock:
            self.usage.update({k: v for k, v in amounts.items() if v})

    def usage_summary(self) -> dict[str, Any]:
        """Requests sent, cache hits, tokens, errors by kind, mean latency (ms) and cost."""
        u = self.usage
        cost = u["prompt_tokens"] / 1000 * self.prices[0] + u["completion_tokens"] / 1000 * self.prices[1]
        calls = u["answered"] + sum(v for k, v in u.items() if k.startswith("error_"))
        return {"requests": u["requests"], "cache_hits": u["cache_hits"], "prompt_tokens": u["prompt_tokens"],
                "completion_tokens": u["completion_tokens"],
                "errors": {k[6:]: v for k, v in sorted(u.items()) if k.startswith("error_")},
                "mean_latency_ms": round(u["latency_ms"] / calls, 1) if calls else None, "cost": round(cost, 6)}

    def scrub(self, text: str) -> str:
        """``text`` with every secret (API key) replaced by ``***``."""
        for secret in self._secrets:
            if secret:
                text = text.replace(secret, "***")
        return text


def _read_key(api_key_env: str | None) -> str:
    """The API key from the environment variable ``api_key_env`` (``EMPTY`` when none is named)."""
    if not api_key_env:
        return "EMPTY"  # local servers (vLLM, Ollama) accept any key
    key = os.environ.get(str(api_key_env))
    if not key:
        raise ConfigError(f"environment variable {api_key_env} is not set", field="model.params.api_key_env",
                          expected="the name of a set variable holding the API key, or null for a keyless server")
    return key


def data_url(png: bytes) -> str:
    """A ``data:image/png;base64,...`` URL (how OpenAI-compatible servers take inline images)."""
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def openai_messages(messages: list[dict[str, str]], images: list[bytes], detail: str | None = None) -> list[dict]:
    """Chat messages in the OpenAI format, the images as data-URL parts of the last user message."""
    out = [{"role": m["role"], "content": m["content"]} for m in messages]
    if images:
        last = max(i for i, m in enumerate(out) if m["role"] == "user")
        parts: list[dict[str, Any]] = [{"type": "text", "text": out[last]["content"]}]
        for png in images:
            url: dict[str, Any] = {"url": data_url(png)}
            if detail:
                url["detail"] = detail
            parts.append({"type": "image_url", "image_url": url})
        out[last] = {"role": "user", "content": parts}
    return out


@dataclass(kw_only=True)
class OpenAIParams(ChatModelParams):
    """``model.params`` of ``openai`` (see :class:`OpenAIChatModel`)."""

    model: str
    base_url: str | None = None
    api_key_env: str | None = "OPENAI_API_KEY"
    timeout: float = param(30.0, low=1e-3, high=86_400.0)
    max_retries: int = param(2, low=0, high=100)
    backoff: float = param(1.0, low=0.0, high=3600.0)
    max_backoff: float = param(10.0, low=0.0, high=3600.0)
    step_timeout: float | None = param(120.0, low=1e-3)
    max_response_bytes: int = param(4 << 20, low=1024, high=1 << 34)
    image_detail: str | None = None


@register_model("openai")
class OpenAIChatModel(ChatModel):
    """A chat model behind any OpenAI-compatible endpoint, sending through the toolkit's one chat
    client (``vlnverse.tasks.chat.ChatClient``, :attr:`client`).

    ``base_url`` (e.g. ``http://localhost:8000/v1`` for vLLM; None: ``OPENAI_BASE_URL``, else
    ``https://api.openai.com/v1``), ``model``, ``api_key_env`` (the environment variable holding
    the key; null for a keyless server), ``timeout`` (s per network wait, default 30),
    ``max_retries`` (default 2) with exponential ``backoff`` (s; a server's ``Retry-After`` is
    honoured up to ``max_backoff``, default 10) on 429, 5xx, timeouts and connection errors;
    401/403 (``auth``) and other 4xx (``rejected``) are not retried. ``step_timeout`` (s,
    default 120) bounds one agent step's calls, retries and back-off included;
    ``max_response_bytes`` (default 4 MiB) bounds the body read (a longer one is ``oversized``).
    Worst case against a hung server with the defaults: min(120, 3 × 30 + 1 + 2) = 93 s per
    step, and the circuit breaker stops sending after 3 such steps.
    """

    kind = "openai"
    Params = OpenAIParams
    #: the request path below ``base_url``
    path = "/chat/completions"

    def __init__(self, *, model: str, base_url: str | None = None, api_key_env: str | None = "OPENAI_API_KEY",
                 timeout: float = 30.0, max_retries: int = 2, backoff: float = 1.0, max_backoff: float = 10.0,
                 step_timeout: float | None = 120.0, max_response_bytes: int = 4 << 20,
                 image_detail: str | None = None, **kwargs: Any):
        super().__init__(model=model, **kwargs)
        key = _read_key(api_key_env)
        self._secrets.append(key)
        self.base_url = base_url
        self.step_timeout = float(step_timeout) if step_timeout is not None else None
        self.image_detail = image_detail
        self._base = (base_url or os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1").rstrip("/")
        #: the HTTP client (holds the key; its own breaker is unused: this model's ``breaker`` counts)
        self.client = ChatClient(self.endpoint, model=self.model, api_key=key, timeout=float(timeout), deadline=None,
                                 max_response_bytes=int(max_response_bytes), max_retries=int(max_retries),
                                 backoff=float(backoff), max_backoff=float(max_backoff))

    @property
    def endpoint(self) -> str:
        """The base URL without user, password, query or trailing slash (where requests go)."""
        parts = urlsplit(self._base)
        host = parts.hostname or ""
        return f"{parts.scheme}://{host}{f':{parts.port}' if parts.port else ''}{parts.path.rstrip('/')}"

    def _send(self, path: str, body: dict, until: float | None) -> tuple[Any, int]:
        """(JSON answer, requests sent) of ``body`` to ``base_url + path``, retried by the client."""
        spent = f"the step's time is spent ({self.step_timeout:g} s, model.params.step_timeout)" \
            if self.step_timeout is not None else "the step's time is spent"
        return self.client.send(body, url=self.endpoint + path, until=until, spent=spent)

    def _request(self, messages: list[dict[str, str]], images: list[bytes], until: float | None) -> tuple[ChatReply, int]:
        """One chat-completions call (with the client's retries): the reply and requests sent."""
        data, requests = self._send(self.path, {"model": self.model, "messages": openai_messages(messages, images, self.image_detail),
                                                **self.params}, until)
        try:
            return chat_reply(data), requests
        except ChatFailure as exc:
            exc.requests = requests
            raise

    def _complete(self, messages: list[dict[str, str]], images: list[bytes]) -> Generation:
        t0 = time.monotonic()
        deadlines = [d for d in (None if self.step_timeout is None else t0 + self.step_timeout,
                                 None if self.remaining() is None else t0 + self.remaining()) if d is not None]
        try:
            reply, requests = self._request(messages, images, min(deadlines) if deadlines else None)
        except ChatFailure as exc:
            return Generation(error_kind=exc.kind, error=str(exc), requests=exc.requests)
        gen = Generation(requests=requests, prompt_tokens=reply.prompt_tokens, completion_tokens=reply.completion_tokens,
                         served_model=reply.served_model)
        if not isinstance(reply.content, str):
            gen.error_kind, gen.error = "non_text", f"answer content is {type(reply.content).__name__}, not text"
        else:
            gen.text = reply.content
        return gen


@dataclass(kw_only=True)
class OllamaParams(OpenAIParams):
    """``model.params`` of ``ollama``: those of ``openai``, ``api`` and no key by default."""

    api: str = "openai"
    api_key_env: str | None = None

    def validate(self) -> None:
        """``api`` names one of Ollama's two APIs."""
        if self.api not in ("openai", "native"):
            raise ConfigError(f"got {self.api!r}", field="api", expected="'openai' or 'native'")


@register_model("ollama")
class OllamaModel(OpenAIChatModel):
    """A model served by Ollama: its OpenAI-compatible API (``api: openai``, default, at
    ``base_url`` ``http://localhost:11434/v1``) or its native ``/api/chat`` (``api: native``,
    ``base_url`` ``http://localhost:11434``; images as base64 strings of the message)."""

    kind = "ollama"
    Params = OllamaParams

    def __init__(self, *, model: str, api: str = "openai", base_url: str | None = None, **kwargs: Any):
        self.api = api
        default = "http://localhost:11434/v1" if api == "openai" else "http://localhost:11434"
        kwargs.setdefault("api_key_env", None)
        super().__init__(model=model, base_url=base_url or default, **kwargs)

    def _request(self, messages: list[dict[str, str]], images: list[bytes], until: float | None) -> tuple[ChatReply, int]:
        """Native ``/api/chat`` through the same client (its retries and errors), else the OpenAI API."""
        if self.api == "openai":
            return super()._request(messages, images, until)
        msgs = [dict(m) for m in messages]
        if images:
            last = max(i for i, m in enumerate(msgs) if m["role"] == "user")
            msgs[last]["images"] = [base64.b64encode(b).decode("ascii") for b in images]
        body = {"model": self.model, "messages": msgs, "stream": False,
                "options": {"temperature": self.params["temperature"], "num_predict": self.params["max_tokens"],
                            **({"seed": self.params["seed"]} if "seed" in self.params else {})}}
        data, requests = self._send("/api/chat", body, until)
        if not isinstance(data, dict) or not isinstance(data.get("message"), dict):
            raise ChatFailure("non_text", "the answer has no message", requests=requests)
        return ChatReply(data["message"].get("content"), int(data.get("prompt_eval_count", 0) or 0),
                         int(data.get("eval_count", 0) or 0),
                         data.get("model") if isinstance(data.get("model"), str) else None), requests


@dataclass(kw_only=True)
class ScriptedParams(ChatModelParams):
    """``model.params`` of ``scripted`` (no response cache by default)."""

    answers: list[str] = field(default_factory=lambda: ["Action: STOP"])
    cycle: bool = False
    respond: Any = None
    cache: Any = False


@register_model("scripted")
class ScriptedModel(ChatModel):
    """Canned answers, no network: ``answers`` are returned in turn (``cycle``: start over at the
    end, else repeat the last), or ``respond(messages, images) -> str`` decides. For tests and
    dry runs of an agent's prompting, parsing and logging. No response cache by default."""

    kind = "scripted"
    Params = ScriptedParams

    def __init__(self, *, answers: Sequence[str] = ("Action: STOP",), cycle: bool = False,
                 respond: Callable[[list[dict[str, str]], list[bytes]], str] | None = None, cache: Any = False,
                 **kwargs: Any):
        super().__init__(model="scripted", cache=cache, **kwargs)
        if not answers and respond is None:
            raise ConfigError("no answers", field="model.params.answers", expected="a non-empty list of strings")
        self.answers = [str(a) for a in answers]
        self.cycle = bool(cycle)
        self.respond = respond
        self.calls = 0

    def _complete(self, messages: list[dict[str, str]], images: list[bytes]) -> Generation:
        if self.respond is not None:
            text = self.respond(messages, images)
        else:
            i = self.calls % len(self.answers) if self.cycle else min(self.calls, len(self.answers) - 1)
            text = self.answers[i]
        self.calls += 1
        words = sum(len(m["content"].split()) for m in messages)
        return Generation(text=text, prompt_tokens=words, completion_tokens=len(text.split()), requests=1,
                          served_model="scripted")
