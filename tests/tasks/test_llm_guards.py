"""The LLM stage cannot be poisoned and the client cannot be hung, flooded or made to leak its key
(issue 10, defects 4, 5 and 8). Every endpoint here is a local server on 127.0.0.1."""
from __future__ import annotations

import contextlib
import json
import time
from http.server import BaseHTTPRequestHandler
from typing import Callable

import pytest

from mllm_server import openai_server
from test_instructions import _template_instruction, graph  # noqa: F401 - the scene-graph fixture
from vlnverse.tasks.instructions.llm import ChatClient, LLMError, LLMSynthesizer, collect_llm_warnings


def _chat_body(content) -> bytes:
    return json.dumps({"choices": [{"message": {"role": "assistant", "content": content}}]}).encode()


@contextlib.contextmanager
def raw_server(handle: Callable[[BaseHTTPRequestHandler], None]):
    """The tests' one fake chat server, every POST answered by ``handle(handler)`` over HTTP/1.1;
    yields (base URL, requests)."""
    with openai_server(lambda body, n: {"handle": handle}, path="", protocol="HTTP/1.1") as served:
        yield served


def _send(h, status=200, body=b"", headers=None):
    h.send_response(status)
    for k, v in (headers or {"Content-Type": "application/json"}).items():
        h.send_header(k, v)
    h.send_header("Content-Length", str(len(body)))
    h.end_headers()
    h.wfile.write(body)


@pytest.mark.parametrize("content", [
    "I'm sorry, but I can't help with that request.",
    "As an AI language model, I cannot rewrite instructions.",
    "<!DOCTYPE html><html><body><h1>502 Bad Gateway</h1></body></html>",
    "null", "unknown", "Go.",
    "Walk to the kitchen.",  # names the room but not the target
])
def test_poisoned_rewrites_are_rejected(graph, content):  # noqa: F811
    instr, verifier = _template_instruction(graph)
    with raw_server(lambda h: _send(h, body=_chat_body(content))) as (url, _):
        llm = LLMSynthesizer(ChatClient(url + "/v1"), verifier)
        with collect_llm_warnings() as warnings:
            out = llm.rewrite(instr, seed=1)
    assert out is instr  # the verified template is kept
    assert warnings["llm_rejected"] == llm.max_tries


@pytest.mark.parametrize("reply", [
    lambda h: _send(h, body=_chat_body(None)),  # null content
    lambda h: _send(h, body=b"<html><body>login</body></html>", headers={"Content-Type": "text/html"}),
    lambda h: _send(h, 429, b'{"error": "rate limited"}'),
    lambda h: _send(h, 500, b"oops"),
])
def test_unusable_answers_fall_back_with_a_counted_warning(graph, reply):  # noqa: F811
    instr, verifier = _template_instruction(graph)
    with raw_server(reply) as (url, _):
        llm = LLMSynthesizer(ChatClient(url + "/v1"), verifier)
        with collect_llm_warnings() as warnings:
            assert llm.rewrite(instr, seed=1) is instr
    assert warnings["llm_errors"] == 1


def test_a_good_rewrite_naming_every_entity_is_kept(graph):  # noqa: F811
    instr, verifier = _template_instruction(graph)
    good = "Please pick up the red mug sitting on the dining table in the kitchen."
    with raw_server(lambda h: _send(h, body=_chat_body(good))) as (url, _):
        assert LLMSynthesizer(ChatClient(url + "/v1"), verifier).rewrite(instr, seed=1).text == good


def test_a_dripping_server_is_cut_off_at_the_deadline():
    def drip(h):
        h.send_response(200)
        h.send_header("Content-Length", "1000")
        h.end_headers()
        for _ in range(100):
            h.wfile.write(b" ")
            h.wfile.flush()
            time.sleep(0.2)

    with raw_server(drip) as (url, _):
        client = ChatClient(url, timeout=5.0, deadline=1.0)
        with pytest.raises(LLMError, match="deadline"):  # not a read timeout: bytes keep dripping for 20 s
            client.complete([{"role": "user", "content": "hi"}])


def test_a_huge_answer_is_refused_without_reading_it():
    def huge_declared(h):
        h.send_response(200)
        h.send_header("Content-Length", str(300 * 2 ** 20))
        h.end_headers()
        h.wfile.write(b"x" * 65536)

    def huge_chunked(h):
        h.send_response(200)
        h.send_header("Transfer-Encoding", "chunked")
        h.end_headers()
        chunk = b"x" * 65536
        for _ in range(64):
            h.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))

    for handle in (huge_declared, huge_chunked):
        with raw_server(handle) as (url, _):
            with pytest.raises(LLMError, match="refused"):
                ChatClient(url, max_response_bytes=100_000).complete([{"role": "user", "content": "hi"}])


def test_the_circuit_opens_after_repeated_failures():
    with raw_server(lambda h: _send(h, 500, b"down")) as (url, seen):
        client = ChatClient(url, max_failures=3)
        for _ in range(3):
            with pytest.raises(LLMError, match="HTTP 500"):
                client.complete([{"role": "user", "content": "hi"}])
        with pytest.raises(LLMError, match="circuit open"):
            client.complete([{"role": "user", "content": "hi"}])
        assert len(seen) == 3 and client.circuit_open


def test_the_key_never_follows_a_redirect_to_another_origin():
    with raw_server(lambda h: _send(h, body=_chat_body("stolen"))) as (evil, evil_seen):
        with raw_server(lambda h: _send(h, 302, headers={"Location": evil + "/v1/chat/completions"})) as (url, seen):
            with pytest.raises(LLMError, match="another origin") as err:
                ChatClient(url + "/v1", api_key="sk-SECRET").complete([{"role": "user", "content": "hi"}])
    assert seen[0]["auth"] == "Bearer sk-SECRET" and evil_seen == []
    assert "SECRET" not in str(err.value)


def test_a_same_origin_redirect_is_followed():
    def handle(h):
        if h.path.startswith("/old"):
            _send(h, 307, headers={"Location": "/v1/chat/completions"})
        else:
            _send(h, body=_chat_body("fine"))

    with raw_server(handle) as (url, seen):
        assert ChatClient(url + "/old", api_key="k").complete([{"role": "user", "content": "hi"}]) == "fine"
    assert [s["path"] for s in seen] == ["/old/chat/completions", "/v1/chat/completions"]


def test_a_key_in_the_url_is_never_written(tmp_path):
    """The dataset summary records the task config, with the URL's key and userinfo stripped."""
    from vlnverse.tasks.dataset import generate_dataset

    with raw_server(lambda h: _send(h, 503, b"busy")) as (url, _):
        llm_url = url.replace("http://", "http://me:sk-USERINFO@") + "/v1?api_key=sk-QUERY&org=lab"
        summary = generate_dataset("coarse_grained", "home_0014", 1, 0, tmp_path / "ds", progress=False,
                                   overrides={"params.llm_url": llm_url})
    text = "".join(p.read_text(errors="replace") for p in (tmp_path / "ds").rglob("*") if p.is_file()
                   and p.suffix in (".json", ".jsonl"))
    assert "sk-QUERY" not in text and "sk-USERINFO" not in text
    assert summary["config"]["params"]["llm_url"].endswith("/v1?api_key=REDACTED&org=lab")
    assert summary["warnings"]["llm_errors"] >= 1  # every fallback is counted


def test_a_dialogue_dataset_keeps_no_key_from_the_oracle_url(tmp_path):
    from vlnverse.tasks.dataset import generate_dataset
    from vlnverse.tasks.episode import load_episodes

    url = "http://me:sk-USERINFO@127.0.0.1:9/v1?api_key=sk-QUERY"
    generate_dataset("dialogue", "home_0014", 1, 0, tmp_path / "ds", progress=False,
                     overrides={"params.oracle": "llm", "params.oracle_url": url})
    text = "".join(p.read_text() for p in (tmp_path / "ds").glob("*.json*"))
    assert "sk-QUERY" not in text and "sk-USERINFO" not in text
    (episode,) = load_episodes(tmp_path / "ds")
    assert episode.info["oracle"]["url"] == "http://127.0.0.1:9/v1?api_key=REDACTED"


def test_the_circuit_stays_open_across_clients_of_one_run():
    with raw_server(lambda h: _send(h, 429, b"slow down")) as (url, seen):
        with collect_llm_warnings():
            for _ in range(4):  # one client per scene, as the task generators make them
                with pytest.raises(LLMError):
                    ChatClient(url, max_failures=2).complete([{"role": "user", "content": "hi"}])
        assert len(seen) == 2
        with pytest.raises(LLMError, match="HTTP 429"):  # a new run starts closed
            ChatClient(url, max_failures=2).complete([{"role": "user", "content": "hi"}])


def test_one_circuit_breaker_type_with_one_meaning():
    """The LLM stage's client and the MLLM chat models count endpoint failures on the same
    ``CircuitBreaker`` type (issue 56); ``circuit_open`` is None while closed and the reason once
    open, naming the setting; the HTTP chat models send through the one ``ChatClient``."""
    from vlnverse.run.models import make_model
    from vlnverse.tasks.chat import CircuitBreaker

    hi = [{"role": "user", "content": "hi"}]
    with raw_server(lambda h: _send(h, 500, b"down")) as (url, seen):
        client = ChatClient(url, max_failures=2)
        model = make_model("openai", {"model": "m", "base_url": url, "api_key_env": None, "cache": False,
                                      "max_retries": 0, "max_consecutive_failures": 2})
        assert client.circuit_open is None and model.circuit_open is None
        for _ in range(2):
            with pytest.raises(LLMError, match="HTTP 500"):
                client.complete(hi)
            assert model.generate(hi).error_kind == "server_error"
        assert model.generate(hi).error_kind == "circuit_open" and len(seen) == 4
    assert type(client.breaker) is type(model.breaker) is CircuitBreaker and isinstance(model.client, ChatClient)
    assert client.circuit_open == ("circuit breaker open after 2 endpoint failures in a row "
                                   "(last: server_error; ChatClient.max_failures)")
    assert model.circuit_open == ("circuit breaker open after 2 endpoint failures in a row "
                                  "(last: server_error; model.params.max_consecutive_failures)")
