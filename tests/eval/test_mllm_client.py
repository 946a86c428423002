"""The MLLM chat models over a real local HTTP server (the openai client path, no patching)."""
from __future__ import annotations

import base64
import io
import json
import socket
from pathlib import Path

import numpy as np
import pytest


from mllm_server import message_text, openai_server  # noqa: E402
from vlnverse.core.errors import ConfigError  # noqa: E402
from vlnverse.run.models import make_model  # noqa: E402

KEY = "sk-test-9f3b2c7d1e5a4b6c8d0e"
IMAGE = (np.arange(16 * 16 * 3) % 251).astype(np.uint8).reshape(16, 16, 3)
HELLO = [{"role": "system", "content": "You navigate."}, {"role": "user", "content": "Where now?"}]


@pytest.fixture
def key_env(monkeypatch):
    monkeypatch.setenv("VLNV_TEST_KEY", KEY)
    return "VLNV_TEST_KEY"


def _model(url, key_env, cache, **kw):
    cache = cache if isinstance(cache, bool) or cache == "refresh" else str(cache) if cache else False
    params = {"model": "test-vlm", "base_url": url, "api_key_env": key_env, "cache": cache, "backoff": 0.01,
              "max_retries": 2, "timeout": 5.0, **kw}
    return make_model("openai", params)


def test_answer_image_key_and_tokens(tmp_path, key_env):
    with openai_server(lambda body, n: {"text": "Action: 2"}) as (url, reqs):
        model = _model(url, key_env, tmp_path / "cache", price_per_1k_input=1.0, price_per_1k_output=2.0)
        gen = model.generate(HELLO, [IMAGE])
    assert gen.ok and gen.text == "Action: 2" and gen.requests == 1 and not gen.cached
    assert (gen.prompt_tokens, gen.completion_tokens) == (100, 7)
    req = reqs[0]
    assert req["path"] == "/v1/chat/completions" and req["auth"] == f"Bearer {KEY}"
    body = req["body"]
    assert body["model"] == "test-vlm" and body["temperature"] == 0.0 and body["max_tokens"] == 512
    parts = body["messages"][1]["content"]
    assert parts[0] == {"type": "text", "text": "Where now?"}
    url_ = parts[1]["image_url"]["url"]
    assert url_.startswith("data:image/png;base64,")
    from PIL import Image

    decoded = np.asarray(Image.open(io.BytesIO(base64.b64decode(url_.split(",", 1)[1]))))
    assert np.array_equal(decoded, IMAGE)
    usage = model.usage_summary()
    assert usage["requests"] == 1 and usage["cost"] == pytest.approx(0.1 + 0.014)


def test_cache_makes_a_rerun_free_and_holds_no_key(tmp_path, key_env):
    with openai_server(lambda body, n: {"text": f"Action: {n + 1}"}) as (url, reqs):
        first = _model(url, key_env, tmp_path / "cache").generate(HELLO, [IMAGE])
        again = _model(url, key_env, tmp_path / "cache")  # a new process would build a new model
        second = again.generate(HELLO, [IMAGE])
        assert len(reqs) == 1 and second.cached and second.text == first.text == "Action: 1"
        assert again.usage_summary()["cache_hits"] == 1 and again.usage_summary()["requests"] == 0
        other = again.generate(HELLO, [IMAGE[::-1]])  # another image is another request
        assert len(reqs) == 2 and other.text == "Action: 2"
        hotter = _model(url, key_env, tmp_path / "cache", temperature=0.7).generate(HELLO, [IMAGE])
        assert len(reqs) == 3 and not hotter.cached
    files = list((tmp_path / "cache").rglob("*.json"))
    assert len(files) == 3
    assert all(KEY not in f.read_text() for f in files)


def test_429_is_retried_with_backoff(tmp_path, key_env):
    def reply(body, n):
        return {"status": 429, "headers": {"Retry-After": "0"}} if n < 2 else {"text": "Action: STOP"}

    with openai_server(reply) as (url, reqs):
        gen = _model(url, key_env, False).generate(HELLO)
    assert gen.ok and gen.text == "Action: STOP" and gen.requests == 3 and len(reqs) == 3


def test_persistent_5xx_is_a_recorded_error(tmp_path, key_env):
    with openai_server(lambda body, n: {"status": 503}) as (url, reqs):
        model = _model(url, key_env, tmp_path / "cache")
        gen = model.generate(HELLO)
    assert not gen.ok and gen.error_kind == "server_error" and gen.requests == 3 and len(reqs) == 3
    assert model.usage_summary()["errors"] == {"server_error": 1}
    assert not list((tmp_path / "cache").rglob("*.json"))  # failures are not cached


def test_rejected_image_is_not_retried(key_env):
    with openai_server(lambda body, n: {"status": 400, "text": "image could not be decoded"}) as (url, reqs):
        gen = _model(url, key_env, False).generate(HELLO, [IMAGE])
    assert gen.error_kind == "rejected" and len(reqs) == 1 and "decoded" in gen.error


def test_slow_reply_past_the_timeout(key_env):
    import threading

    released = threading.Event()

    def reply(body, n):
        if n == 0:  # the first request is answered only once the test is done with it
            released.wait(60)
        return {"text": "Action: 1"}

    with openai_server(reply) as (url, reqs):
        try:
            slow = _model(url, key_env, False, timeout=3.0, max_retries=0).generate(HELLO)
            assert slow.error_kind == "timeout" and slow.requests == 1  # cut off: no answer came
            # answered at once: a generous timeout (it only ends a hang) keeps a loaded machine from cutting it off
            retried = _model(url, key_env, False, timeout=60.0, max_retries=1).generate(HELLO)
        finally:
            released.set()
    assert retried.ok and retried.requests == 1  # the second request is answered at once


def test_unreachable_endpoint(key_env):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    gen = _model(f"http://127.0.0.1:{port}/v1", key_env, False, max_retries=1).generate(HELLO)
    assert gen.error_kind == "unreachable" and gen.requests == 2 and KEY not in gen.error


def test_empty_and_non_text_answers(key_env):
    with openai_server(lambda body, n: {"text": "" if n == 0 else None}) as (url, reqs):
        model = _model(url, key_env, False)
        assert model.generate(HELLO).error_kind == "empty"
        assert model.generate(HELLO).error_kind == "non_text"


def test_missing_key_variable_is_a_config_error(monkeypatch):
    monkeypatch.delenv("VLNV_NO_SUCH_KEY", raising=False)
    with pytest.raises(ConfigError, match="api_key_env.*VLNV_NO_SUCH_KEY is not set"):
        make_model("openai", {"model": "m", "base_url": "http://127.0.0.1:9/v1", "api_key_env": "VLNV_NO_SUCH_KEY"})


def test_ollama_native_and_openai_compatible(tmp_path):
    with openai_server(lambda body, n: {"text": "Action: 3"}) as (url, reqs):
        native = make_model("ollama", {"model": "llava", "api": "native", "base_url": url[:-3], "cache": False})
        gen = native.generate(HELLO, [IMAGE])
        assert gen.ok and gen.text == "Action: 3" and (gen.prompt_tokens, gen.completion_tokens) == (11, 3)
        body = reqs[0]["body"]
        assert reqs[0]["path"] == "/api/chat" and body["stream"] is False
        assert base64.b64decode(body["messages"][1]["images"][0])[:4] == b"\x89PNG"
        compat = make_model("ollama", {"model": "llava", "base_url": url, "cache": False})
        assert compat.generate(HELLO).text == "Action: 3" and reqs[1]["path"] == "/v1/chat/completions"


def test_transformers_model_fails_clearly_without_weights(tmp_path):
    with pytest.raises(ConfigError, match="model.params.path.*nothing is downloaded"):
        make_model("transformers", {"path": str(tmp_path / "no-model")})
    (tmp_path / "vlm").mkdir()
    (tmp_path / "vlm" / "config.json").write_text("{}")
    try:
        import transformers  # noqa: F401
    except ImportError:
        with pytest.raises(ConfigError, match="'transformers' package is not installed"):
            make_model("transformers", {"path": str(tmp_path / "vlm")})
    else:  # an empty config is no loadable model: a clear error, no download
        with pytest.raises(Exception):
            make_model("transformers", {"path": str(tmp_path / "vlm")})


def test_scripted_model_answers_in_turn():
    model = make_model("scripted", {"answers": ["Action: 1", "Action: STOP"]})
    assert [model.generate(HELLO).text for _ in range(3)] == ["Action: 1", "Action: STOP", "Action: STOP"]
    cyc = make_model("scripted", {"answers": ["a", "b"], "cycle": True})
    assert [cyc.generate(HELLO).text for _ in range(3)] == ["a", "b", "a"]
    assert message_text({"content": [{"type": "text", "text": "x"}]}) == "x"


def test_concurrency_limit_and_no_key_in_logs(key_env, caplog):
    import logging
    import threading

    active, peak = [0], [0]
    lock = threading.Lock()
    first_two = threading.Barrier(2)

    def reply(body, n):
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        import time

        if n < 2:  # the first two requests wait for each other: two in flight at once however busy the machine is
            first_two.wait(timeout=60)
        time.sleep(0.15)
        with lock:
            active[0] -= 1
        return {"status": 503} if n == 0 else {"text": "Action: 1"}

    caplog.set_level(logging.DEBUG)
    with openai_server(reply) as (url, reqs):
        model = _model(url, key_env, False, max_concurrency=2)
        threads = [threading.Thread(target=model.generate, args=(HELLO,)) for _ in range(5)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert len(reqs) == 6 and peak[0] == 2  # 5 calls + one retry, never more than 2 at once
    assert model.usage_summary()["requests"] == 6
    assert "retry 1" in caplog.text and KEY not in caplog.text
    assert KEY not in repr(model.client) and model.client.api_key == KEY  # the client holds it, never shows it


def test_step_timeout_bounds_retries_against_a_hung_server(key_env):
    with openai_server(lambda body, n: {"text": "Action: 1", "sleep": 3.0}) as (url, reqs):
        model = _model(url, key_env, False, timeout=0.4, max_retries=10, step_timeout=1.0)
        gen = model.generate(HELLO)
    # without step_timeout: 11 requests of 0.4 s; with it, at most 1.0 / 0.4 -> 3
    assert gen.error_kind == "timeout" and 1 <= gen.requests <= 3 and len(reqs) == gen.requests


def test_run_timeout_and_circuit_breaker_send_nothing(key_env):
    import time

    with openai_server(lambda body, n: {"text": "Action: 1"} if n == 0 else {"status": 500}) as (url, reqs):
        model = _model(url, key_env, False, max_retries=0, run_timeout=0.3)
        assert model.generate(HELLO).ok
        time.sleep(0.4)
        late = model.generate(HELLO)
        assert late.error_kind == "run_timeout" and late.requests == 0 and len(reqs) == 1
        breaker = _model(url, key_env, False, max_retries=0, max_consecutive_failures=2)
        kinds = [breaker.generate(HELLO).error_kind for _ in range(4)]
    assert kinds == ["server_error", "server_error", "circuit_open", "circuit_open"] and len(reqs) == 3
    assert "max_consecutive_failures" in breaker.circuit_open


def test_auth_errors_are_not_retried_and_not_answers(key_env):
    with openai_server(lambda body, n: {"status": 403, "text": "forbidden"}) as (url, reqs):
        gen = _model(url, key_env, False).generate(HELLO)
    assert gen.error_kind == "auth" and gen.endpoint_failure and len(reqs) == 1


def test_only_remembered_answers_are_cached_and_refresh_re_asks(tmp_path, key_env):
    with openai_server(lambda body, n: {"text": f"answer {n}"}) as (url, reqs):
        model = _model(url, key_env, tmp_path / "cache")
        first = model.generate(HELLO, store=False)
        again = model.generate(HELLO, store=False)  # not remembered: asked again
        assert (first.text, again.text, len(reqs)) == ("answer 0", "answer 1", 2) and not again.cached
        model.remember(again)
        assert model.generate(HELLO).text == "answer 1" and len(reqs) == 2
        fresh = _model(url, key_env, tmp_path / "cache", cache_refresh=True).generate(HELLO)
        assert fresh.text == "answer 2" and not fresh.cached and len(reqs) == 3
        assert _model(url, key_env, tmp_path / "cache").generate(HELLO).text == "answer 2"  # the refreshed entry
    entry = json.loads(next((tmp_path / "cache").rglob("*.json")).read_text())
    assert entry["request"]["endpoint"] == url and entry["served_model"] == "test-vlm"


def test_bad_caps_are_config_errors(key_env):
    for field, value in (("max_consecutive_failures", -1), ("run_timeout", 0), ("step_timeout", -2),
                         ("max_answer_chars", 10), ("max_response_bytes", 10)):
        with pytest.raises(ConfigError, match=f"model.params.{field}"):
            _model("http://127.0.0.1:9/v1", key_env, False, **{field: value})


def test_cache_refresh_by_name_uses_the_default_folder(tmp_path, key_env, monkeypatch):
    monkeypatch.setenv("VLNVERSE_CACHE", str(tmp_path / "user"))
    with openai_server(lambda body, n: {"text": f"answer {n}"}) as (url, reqs):
        assert _model(url, key_env, True).generate(HELLO).text == "answer 0"
        refreshed = _model(url, key_env, "refresh")
        assert refreshed.cache.root == tmp_path / "user" / "mllm_responses" and refreshed.cache_refresh
        assert refreshed.generate(HELLO).text == "answer 1" and len(reqs) == 2
        assert _model(url, key_env, True).generate(HELLO).text == "answer 1"


def test_the_chat_models_share_the_toolkit_client_guards(key_env):
    """The MLLM models go through ``vlnverse.tasks.chat.post_json`` like the LLM stage: a redirect
    to another origin is refused (the key is never sent there) and credentials in the URL are not sent."""
    def redirect(h):
        h.send_response(307)
        h.send_header("Location", "http://203.0.113.9:1/v1/chat/completions")
        h.send_header("Content-Length", "0")
        h.end_headers()

    with openai_server(lambda body, n: {"handle": redirect}) as (url, reqs):
        gen = _model(url, key_env, False).generate(HELLO)
    assert gen.error_kind == "rejected" and "another origin" in gen.error and len(reqs) == 1
    with openai_server(lambda body, n: {"text": "Action: 1"}) as (url, reqs):
        model = _model(url.replace("127.0.0.1", "me:secret@127.0.0.1"), key_env, False)
        assert model.generate(HELLO).text == "Action: 1" and reqs[0]["auth"] == f"Bearer {KEY}"
    assert "secret" not in model.endpoint
