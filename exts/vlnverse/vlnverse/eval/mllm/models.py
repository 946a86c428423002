"""Chat models for zero-shot MLLM agents, registered in ``MODELS``: ``openai`` (any
OpenAI-compatible server: vLLM, hosted APIs), ``ollama``, ``transformers`` (a local VLM) and
``scripted`` (canned answers, for tests and dry runs).

Every model answers ``generate(messages, images=())`` with a :class:`Generation` and never
raises for a failed request: an unreachable server, a timeout, HTTP 429/5xx after the retries,
a rejected request or an empty answer come back as ``Generation.error_kind``. A
:class:`ResponseCache` keyed by the full request (model, messages, image hashes, sampling
parameters) makes a rerun free: a hit sends no request. The API key is read from the
environment variable the config names and lives only inside the HTTP client; it is scrubbed
from every error text, so it never reaches a log, a cache file or a report.
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
from collections import Counter
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from ...core.errors import ConfigError
from ...core.io import write_json_atomic
from ..models import register_model

log = logging.getLogger(__name__)

#: Error kinds a generation can end with (besides ``None``).
ERROR_KINDS = ("unreachable", "timeout", "rate_limit", "server_error", "rejected", "empty", "non_text", "model_error")


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

    @property
    def ok(self) -> bool:
        """True when the model produced text."""
        return self.error_kind is None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict (latency rounded to 0.1 ms)."""
        out = asdict(self)
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

    @staticmethod
    def key(request: dict[str, Any]) -> str:
        """Hex SHA-256 of the canonical JSON of ``request``."""
        return hashlib.sha256(json.dumps(request, sort_keys=True, separators=(",", ":")).encode()).hexdigest()

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


class ChatModel:
    """Base class: request keys, the response cache, usage accounting and a concurrency limit.

    ``params`` (``temperature``, ``max_tokens``, ``seed``...) are the sampling parameters sent
    with every request and part of the cache key. ``cache`` is a folder (``True``: the default
    ``<VLNVERSE_CACHE>/mllm_responses``; ``False``/``None``: no cache). ``max_concurrency``
    bounds simultaneous requests from threads sharing this model.
    """

    kind = "base"

    def __init__(self, *, model: str = "", cache: Any = True, max_concurrency: int = 4,
                 temperature: float = 0.0, max_tokens: int = 512, seed: int | None = 0,
                 price_per_1k_input: float = 0.0, price_per_1k_output: float = 0.0):
        if max_concurrency < 1:
            raise ConfigError(f"got {max_concurrency}", field="model.params.max_concurrency", expected="an integer >= 1")
        self.model = str(model)
        self.params: dict[str, Any] = {"temperature": float(temperature), "max_tokens": int(max_tokens)}
        if seed is not None:
            self.params["seed"] = int(seed)
        self.prices = (float(price_per_1k_input), float(price_per_1k_output))
        if cache is True:
            from ...paths import cache_dir

            cache = cache_dir() / "mllm_responses"
        self.cache = ResponseCache(cache) if cache else None
        self._slots = threading.BoundedSemaphore(int(max_concurrency))
        #: a run-wide limit on requests in flight (``model.concurrency``, set by the runner:
        #: ``vlnverse.core.parallel.SharedLimit``), taken around every request that leaves the cache
        self.request_limit: Any = None
        self._lock = threading.Lock()
        self.usage: Counter = Counter()
        self._secrets: list[str] = []

    # -- the public call ----------------------------------------------------------------------

    def request_key(self, messages: Sequence[dict[str, str]], image_hashes: Sequence[str]) -> dict[str, Any]:
        """Everything that determines an answer (no key, no server address)."""
        return {"kind": self.kind, "model": self.model, "messages": [dict(m) for m in messages],
                "images": list(image_hashes), "params": self.params}

    def generate(self, messages: Sequence[dict[str, str]], images: Sequence[Any] = ()) -> Generation:
        """Answer the chat ``messages`` (``{"role", "content"}``); ``images`` (PNG bytes or arrays)
        go with the last user message. Served from the cache when the same request was answered."""
        encoded = [png_bytes(im) for im in images]
        request = self.request_key(messages, [image_sha256(b) for b in encoded])
        key = ResponseCache.key(request) if self.cache else ""
        if self.cache:
            hit = self.cache.get(key)
            if hit is not None and isinstance(hit.get("text"), str):
                self._count(cache_hits=1)
                return Generation(text=hit["text"], prompt_tokens=int(hit.get("prompt_tokens", 0)),
                                  completion_tokens=int(hit.get("completion_tokens", 0)), cached=True)
        t0 = time.perf_counter()
        with self._slots, (self.request_limit or contextlib.nullcontext()):
            try:
                gen = self._complete(list(messages), encoded)
            except Exception as exc:  # noqa: BLE001 - a model failure is a recorded step, never a crashed run
                gen = Generation(error_kind="model_error", error=f"{type(exc).__name__}: {exc}", requests=1)
        gen.latency_s = time.perf_counter() - t0
        if gen.error is not None:
            gen.error = self.scrub(gen.error)[:500]
        if gen.error_kind is None and not gen.text.strip():
            gen.error_kind, gen.error = "empty", "the model returned no text"
        self._count(requests=gen.requests, prompt_tokens=gen.prompt_tokens, completion_tokens=gen.completion_tokens,
                    latency_ms=int(round(1000 * gen.latency_s)), answered=int(gen.ok),
                    **({f"error_{gen.error_kind}": 1} if gen.error_kind else {}))
        if self.cache and gen.ok:
            self.cache.put(key, {"request": {k: v for k, v in request.items() if k != "messages"},
                                 "text": gen.text, "prompt_tokens": gen.prompt_tokens,
                                 "completion_tokens": gen.completion_tokens})
        return gen

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


def attach_request_limit(agent: Any, limit: Any) -> None:
    """Make every chat model of ``agent`` (its ``model`` and ``captioner``) take ``limit``
    (a context manager, e.g. a ``SharedLimit``) around each request it sends."""
    for model in (getattr(agent, "model", None), getattr(agent, "captioner", None)):
        if isinstance(model, ChatModel):
            model.request_limit = limit


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


@register_model("openai")
class OpenAIChatModel(ChatModel):
    """A chat model behind any OpenAI-compatible endpoint, on the official ``openai`` client.

    ``base_url`` (e.g. ``http://localhost:8000/v1`` for vLLM; None: the client's default),
    ``model``, ``api_key_env`` (the environment variable holding the key; null for a keyless
    server), ``timeout`` (s per request), ``max_retries`` with exponential ``backoff`` (s;
    a server's ``Retry-After`` is honoured up to ``max_backoff``) on 429, 5xx, timeouts and
    connection errors; other 4xx (a rejected image, a bad request) are not retried.
    """

    kind = "openai"

    def __init__(self, *, model: str, base_url: str | None = None, api_key_env: str | None = "OPENAI_API_KEY",
                 timeout: float = 60.0, max_retries: int = 3, backoff: float = 1.0, max_backoff: float = 30.0,
                 image_detail: str | None = None, **kwargs: Any):
        super().__init__(model=model, **kwargs)
        try:
            import openai
        except ImportError:
            raise ConfigError("the 'openai' package is not installed", field="model.name",
                              expected="pip install 'vlnverse[mllm]'") from None
        if timeout <= 0 or max_retries < 0 or backoff < 0:
            raise ConfigError(f"got timeout={timeout}, max_retries={max_retries}, backoff={backoff}",
                              field="model.params", expected="timeout > 0, max_retries >= 0, backoff >= 0")
        key = _read_key(api_key_env)
        self._secrets.append(key)
        self.base_url = base_url
        self.max_retries, self.backoff, self.max_backoff = int(max_retries), float(backoff), float(max_backoff)
        self.image_detail = image_detail
        self._openai = openai
        # retries are ours (counted, logged per step), so the client's own are off
        self.client = openai.OpenAI(base_url=base_url, api_key=key, timeout=float(timeout), max_retries=0)

    def _wait(self, attempt: int, exc: Exception) -> float:
        delay = self.backoff * (2 ** attempt)
        response = getattr(exc, "response", None)
        retry_after = response.headers.get("retry-after") if response is not None else None
        try:
            if retry_after is not None:
                delay = max(delay, float(retry_after))
        except ValueError:
            pass
        return min(delay, self.max_backoff)

    def _request(self, messages: list[dict[str, str]], images: list[bytes]) -> tuple[Any, int, int]:
        """One chat-completions request: (content, prompt tokens, completion tokens)."""
        resp = self.client.chat.completions.create(model=self.model, messages=openai_messages(messages, images, self.image_detail),
                                                   **self.params)
        usage = getattr(resp, "usage", None)
        choice = resp.choices[0] if getattr(resp, "choices", None) else None
        return (getattr(getattr(choice, "message", None), "content", None),
                int(getattr(usage, "prompt_tokens", 0) or 0), int(getattr(usage, "completion_tokens", 0) or 0))

    def _complete(self, messages: list[dict[str, str]], images: list[bytes]) -> Generation:
        oa = self._openai
        requests = 0
        last_kind, last_error, last_exc = "unreachable", "", None
        for attempt in range(self.max_retries + 1):
            requests += 1
            try:
                content, n_in, n_out = self._request(messages, images)
            except oa.APITimeoutError as exc:
                last_kind, last_error, last_exc = "timeout", str(exc), exc
            except oa.APIConnectionError as exc:
                last_kind, last_error, last_exc = "unreachable", f"{exc} ({self.base_url})", exc
            except oa.RateLimitError as exc:
                last_kind, last_error, last_exc = "rate_limit", str(exc), exc
            except oa.APIStatusError as exc:
                if exc.status_code >= 500:
                    last_kind, last_error, last_exc = "server_error", str(exc), exc
                else:  # 4xx: the request itself is wrong (e.g. an image the server rejects)
                    return Generation(error_kind="rejected", error=str(exc), requests=requests)
            else:
                gen = Generation(requests=requests, prompt_tokens=n_in, completion_tokens=n_out)
                if not isinstance(content, str):
                    gen.error_kind, gen.error = "non_text", f"answer content is {type(content).__name__}, not text"
                else:
                    gen.text = content
                return gen
            if attempt < self.max_retries:
                delay = self._wait(attempt, last_exc or Exception())
                log.info("%s request failed (%s), retry %d in %.2f s", self.model, last_kind, attempt + 1, delay)
                time.sleep(delay)
        return Generation(error_kind=last_kind, error=last_error, requests=requests)


@register_model("ollama")
class OllamaModel(OpenAIChatModel):
    """A model served by Ollama: its OpenAI-compatible API (``api: openai``, default, at
    ``base_url`` ``http://localhost:11434/v1``) or its native ``/api/chat`` (``api: native``,
    ``base_url`` ``http://localhost:11434``; images as base64 strings of the message)."""

    kind = "ollama"

    def __init__(self, *, model: str, api: str = "openai", base_url: str | None = None, **kwargs: Any):
        if api not in ("openai", "native"):
            raise ConfigError(f"got {api!r}", field="model.params.api", expected="'openai' or 'native'")
        self.api = api
        default = "http://localhost:11434/v1" if api == "openai" else "http://localhost:11434"
        kwargs.setdefault("api_key_env", None)
        super().__init__(model=model, base_url=base_url or default, **kwargs)

    def _request(self, messages: list[dict[str, str]], images: list[bytes]) -> tuple[Any, int, int]:
        """Native ``/api/chat`` through the same client (its retries and errors), else the OpenAI API."""
        if self.api == "openai":
            return super()._request(messages, images)
        msgs = [dict(m) for m in messages]
        if images:
            last = max(i for i, m in enumerate(msgs) if m["role"] == "user")
            msgs[last]["images"] = [base64.b64encode(b).decode("ascii") for b in images]
        body = {"model": self.model, "messages": msgs, "stream": False,
                "options": {"temperature": self.params["temperature"], "num_predict": self.params["max_tokens"],
                            **({"seed": self.params["seed"]} if "seed" in self.params else {})}}
        data = self.client.post("/api/chat", body=body, cast_to=object)
        if not isinstance(data, dict):
            return None, 0, 0
        return ((data.get("message") or {}).get("content"), int(data.get("prompt_eval_count", 0) or 0),
                int(data.get("eval_count", 0) or 0))


@register_model("transformers")
def transformers_vlm(**params: Any) -> ChatModel:
    """A Hugging Face vision-language model loaded from a local folder (never downloaded):
    :class:`vlnverse.learn.vlm.TransformersVLM`, which lives in the learning layer (the only one
    that imports torch) and is imported only when this model is built."""
    from ...learn.vlm import TransformersVLM

    return TransformersVLM(**params)


@register_model("scripted")
class ScriptedModel(ChatModel):
    """Canned answers, no network: ``answers`` are returned in turn (``cycle``: start over at the
    end, else repeat the last), or ``respond(messages, images) -> str`` decides. For tests and
    dry runs of an agent's prompting, parsing and logging. No response cache by default."""

    kind = "scripted"

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
        return Generation(text=text, prompt_tokens=words, completion_tokens=len(text.split()), requests=1)
