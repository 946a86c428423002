"""Results a researcher can trust, against the local scripted OpenAI-compatible server: episodes
the endpoint never answered are *not evaluated* (left out of the metrics, counted, re-run on
resume, a non-zero exit), the circuit breaker, a response cache that keeps only usable answers
and knows the endpoint, caps on stalls and huge answers, and a summary naming who answered."""
from __future__ import annotations

import json
from pathlib import Path

import pytest


from eval_scenes import named_corridor_loader  # noqa: E402
from mllm_server import message_text, openai_server  # noqa: E402
from vlnverse.eval.config import load_eval_config  # noqa: E402
from vlnverse.eval.mllm.cache import build_scene_cache  # noqa: E402
from vlnverse.eval.folder import EPISODES_FILE  # noqa: E402
from vlnverse.eval.runner import not_evaluated_line, run_eval  # noqa: E402
from vlnverse.sim.body import load_body  # noqa: E402
from vlnverse.tasks.episode import Episode, Goal, Instruction, save_episodes  # noqa: E402

SIZE = 32
EPISODES = 4


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """One corridor scene, its view cache and EPISODES episodes (walk 1..4 places, then stop)."""
    root = tmp_path_factory.mktemp("mllm_outcomes")
    ctx = named_corridor_loader(root / "corridor_a.usda", load_body("r2r_ce"), 0.05)
    build_scene_cache(ctx.with_render_options({"objects": "meshes"}), root / "views", size=SIZE)  # the MLLM default
    path = ctx.planner.shortest_path((1.3, 1.5), (9.0, 1.5))
    episodes = [Episode(f"ep-{i}", "corridor_a", str(root / "corridor_a.usda"), "test", "fine_grained",
                        [1.3, 1.5, 0.0], 0.0, [Goal([9.0, 1.5, 0.0])], [[*p, 0.0] for p in path.waypoints],
                        path.length, [Instruction(f"walk {i + 1} places along the corridor and stop")])
                for i in range(EPISODES)]
    save_episodes(root / "episodes.jsonl", episodes)
    return root


@pytest.fixture(autouse=True)
def env(setup, monkeypatch, tmp_path):
    monkeypatch.setenv("VLNVERSE_VIEW_CACHE", str(setup / "views"))
    monkeypatch.setenv("VLNVERSE_CACHE", str(tmp_path / "user_cache"))


def walker(body, n):
    """Move to marker 1 until the instruction's number of steps is in the history, then STOP."""
    last = message_text(body["messages"][-1])
    want = int(last.split("Instruction: walk ")[1].split(" ")[0]) if "Instruction: walk " in last else 1
    return {"text": "Action: STOP" if last.count("\nStep ") >= want else "Action: 1"}


def _run(setup: Path, url: str, out: Path, concurrency: int | None = None, agent_params: dict | None = None,
         **params) -> tuple[dict, list[dict]]:
    model = {"model": "nav-vlm", "base_url": url, "api_key_env": None, "cache": False, "max_retries": 0,
             "timeout": 20, **params}
    conc = "" if concurrency is None else f", concurrency: {concurrency}"
    agent = {"view_size": SIZE, "image_dir": str(setup / "images"), **(agent_params or {})}
    (out.parent / f"{out.name}.yaml").write_text(
        f"agent: {{name: navgpt, params: {json.dumps(agent)}}}\n"
        f"model: {{name: openai{conc}, params: {json.dumps(model)}}}\n"
        f"task: fine_grained\nepisodes: {setup / 'episodes.jsonl'}\ncollision_mode: graph\nbackend: viewpoints\n"
        f"max_steps: 8\nout: {out}\nreport: {{enabled: false}}\n")
    cfg = load_eval_config(out.parent / f"{out.name}.yaml")
    summary = run_eval(cfg, progress=False, print_summary=False, scene_loader=named_corridor_loader)
    return summary, [json.loads(line) for line in (out / EPISODES_FILE).read_text().splitlines()]


def test_outage_is_not_evaluated_then_resumed(setup, tmp_path):
    state = {"down": True}

    def reply(body, n):
        return {"status": 500} if state["down"] else walker(body, n)

    with openai_server(reply) as (url, reqs):
        summary, records = _run(setup, url, tmp_path / "run", max_consecutive_failures=0)
        assert len(reqs) == EPISODES  # one failed request per episode, then the episode ends
        overall = summary["overall"]
        assert overall["episodes"] == 0 and overall["means"] == {}  # no SR 0 / nDTW 33.8 % for an agent never answered
        assert overall["not_evaluated"] == {"episodes": EPISODES, "by_reason": {"server_error": EPISODES},
                                            "by_component": {"navigator": {"server_error": EPISODES}}}
        assert [r["outcome"] for r in records] == ["not_evaluated"] * EPISODES
        line = not_evaluated_line(summary, tmp_path / "run")
        assert line.startswith(f"{EPISODES} of {EPISODES} episode(s) not evaluated") and f"{EPISODES} server_error" in line
        state["down"] = False  # the server recovers: the same out= evaluates the outage episodes
        summary, records = _run(setup, url, tmp_path / "run", max_consecutive_failures=0)
    assert len(reqs) > EPISODES  # requests were sent this time
    assert summary["overall"]["episodes"] == EPISODES and summary["overall"]["not_evaluated"]["episodes"] == 0
    assert summary["overall"]["terminations"] == {"stop": EPISODES} and "nDTW" in summary["overall"]["means"]
    assert [r["outcome"] for r in records] == ["evaluated"] * EPISODES and len(records) == EPISODES
    assert not_evaluated_line(summary, tmp_path / "run") is None


def test_circuit_breaker_stops_sending(setup, tmp_path):
    with openai_server(lambda body, n: {"status": 503}) as (url, reqs):
        summary, records = _run(setup, url, tmp_path / "run", max_consecutive_failures=2)
    assert len(reqs) == 2  # two failures in a row, then nothing is sent
    assert summary["overall"]["not_evaluated"]["by_reason"] == {"server_error": 2, "circuit_open": 2}
    assert "circuit breaker open after 2" in records[-1]["not_evaluated"]["error"]


def test_one_circuit_breaker_for_the_episode_threads(setup, tmp_path):
    with openai_server(lambda body, n: {"status": 503, "sleep": 0.2}) as (url, reqs):
        summary, _ = _run(setup, url, tmp_path / "run", concurrency=2, max_consecutive_failures=2)
    # two threads, one breaker: it opens after two failures in all (one per thread would take four)
    assert len(reqs) <= 3 and summary["overall"]["not_evaluated"]["by_reason"].get("circuit_open", 0) >= 1
    assert summary["overall"]["not_evaluated"]["episodes"] == EPISODES


@pytest.mark.parametrize("spec, kind", [
    ({"raw": "<html>Not the API</html>", "content_type": "text/plain"}, "non_text"),  # a misrouted base_url
    ({"text": None}, "non_text"),  # null content
    ({"json": {"object": "chat.completion", "choices": []}}, "non_text"),  # missing choices
    ({"status": 401, "text": "bad key"}, "auth"),
    ({"raw": "x" * (1 << 16)}, "oversized"),  # over max_response_bytes below
])
def test_non_answers_are_not_evaluated(setup, tmp_path, spec, kind):
    with openai_server(lambda body, n: spec) as (url, reqs):
        summary, records = _run(setup, url, tmp_path / "run", max_consecutive_failures=0, max_response_bytes=4096)
    assert len(reqs) == EPISODES  # never retried
    assert summary["overall"]["not_evaluated"]["by_reason"] == {kind: EPISODES}
    assert summary["overall"]["episodes"] == 0


def test_cli_exits_non_zero_with_one_line(setup, tmp_path, monkeypatch, capsys):
    from vlnverse.cli import main
    from vlnverse.eval import runner

    with openai_server(lambda body, n: {"status": 502}) as (url, reqs):
        summary, _ = _run(setup, url, tmp_path / "run", max_consecutive_failures=0)
    monkeypatch.setattr(runner, "run_eval", lambda cfg, **kw: summary)
    status = main(["eval", str(tmp_path / "run.yaml"), "--no-progress"])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 3 and len(err) == 1
    assert err[0].startswith(f"vlnverse: {EPISODES} of {EPISODES} episode(s) not evaluated") and "server_error" in err[0]


def test_refusals_are_not_cached_and_the_fix_is_asked(setup, tmp_path):
    state = {"fixed": False}

    def reply(body, n):
        return walker(body, n) if state["fixed"] else {"text": "I'm sorry, I cannot help with navigation."}

    cache = str(tmp_path / "responses")
    with openai_server(reply) as (url, reqs):
        refused, records = _run(setup, url, tmp_path / "refused", cache=cache)
        # refusals are the model's answers: evaluated (failed), every step invalid
        assert refused["overall"]["episodes"] == EPISODES and refused["overall"]["means"]["SR"] == 0.0
        assert all(r["invalid_actions"] == 8 for r in records)
        # the error analysis: never moved, never stopped
        assert refused["overall"]["first_errors"]["counts"]["out_of_steps"] == EPISODES
        assert not list(Path(cache).rglob("*.json"))  # nothing usable, nothing cached
        # within the run the same prompt was asked again every time, never replayed
        assert all(not a["cached"] for r in records for s in r["agent_outputs"] for a in s["attempts"])
        state["fixed"] = True
        sent = len(reqs)
        fixed, _ = _run(setup, url, tmp_path / "fixed", cache=cache)
        assert len(reqs) > sent and fixed["overall"]["terminations"] == {"stop": EPISODES}
        assert fixed["model"]["cache_hits"] == 0
        sent = len(reqs)
        again, _ = _run(setup, url, tmp_path / "again", cache=cache)  # now every answer is cached
        assert len(reqs) == sent and again["model"]["cache_hits"] > 0 and again["model"]["requests"] == 0
        refreshed, _ = _run(setup, url, tmp_path / "refresh", cache=cache, cache_refresh=True)
        assert len(reqs) > sent and refreshed["model"]["cache_hits"] == 0
        assert again["overall"]["means"] == fixed["overall"]["means"] == refreshed["overall"]["means"]
        with openai_server(walker) as (url2, reqs2):  # another endpoint, same model name: not the same answers
            other, _ = _run(setup, url2, tmp_path / "other", cache=cache)
        assert len(reqs2) > 0 and other["model"]["cache_hits"] == 0


def test_summary_names_who_answered(setup, tmp_path):
    with openai_server(lambda body, n: {**walker(body, n), "served": "Qwen2.5-VL-7B-Instruct-AWQ"}) as (url, reqs):
        summary, _ = _run(setup, url.replace("127.0.0.1", "user:pw@127.0.0.1"), tmp_path / "run")
    model = summary["model"]
    host = url.split("/")[2]
    assert model == {"agent": "navgpt", "prompt_version": "vln-mme-3", "model": "openai", "model_name": "nav-vlm",
                     "served_models": {"Qwen2.5-VL-7B-Instruct-AWQ": len(reqs)}, "endpoint_host": host,
                     "requests": len(reqs), "cache_hits": 0}
    assert "pw" not in json.dumps(summary)


def test_huge_answers_are_cut(setup, tmp_path):
    big = "Action: 1 " + "blah " * 20000  # 100 kB of text, under the body cap

    def reply(body, n):
        answer = walker(body, n)
        return {"text": answer["text"] + " " + big} if answer["text"] == "Action: 1" else answer

    with openai_server(reply) as (url, reqs):
        summary, records = _run(setup, url, tmp_path / "run", max_answer_chars=2000)
    attempts = [a for r in records for s in r["agent_outputs"] for a in s["attempts"]]
    assert summary["overall"]["terminations"] == {"stop": EPISODES}
    assert max(len(a["raw"]) for a in attempts) == 2000 and sum(1 for a in attempts if a.get("truncated")) > 0
    assert (tmp_path / "run" / EPISODES_FILE).stat().st_size < 30 * 2000 * EPISODES


# ---------------------------------------------------------------------------------------------
# issue 55: partial runs are flagged with their bound, and an assistant outage excludes nothing


def looper(body, n):
    """A navigator that goes back and forth (so it looks stuck) until it gets guidance, then stops."""
    last = message_text(body["messages"][-1])
    if "Assistant's guidance:" in last:
        return {"text": "Action: STOP"}
    back = [ln for ln in last.splitlines() if ln.strip().startswith("Back: [")]
    return {"text": f"Action: {back[0].split('[')[1].split(':')[0] if back else '1'}"}


def _assistant(url: str) -> dict:
    return {"assistant": {"name": "openai", "params": {"model": "guide-llm", "base_url": url, "api_key_env": None,
                                                       "cache": False, "max_retries": 0}}}


def test_assistant_outage_keeps_every_episode_evaluated_and_flags_the_row(setup, tmp_path, monkeypatch, capsys):
    """Navigator healthy, assistant answering 500: no episode is left out (the failing ones would
    be exactly those that consult it); each consultation step records the outage, the navigator
    goes on without guidance, the row is flagged and the closing line names the assistant."""
    from vlnverse.cli import main
    from vlnverse.eval import runner
    from vlnverse.eval.runner import assistant_line
    from vlnverse.run.summary import print_table

    with openai_server(looper) as (nav, nav_reqs), openai_server(lambda b, n: {"status": 500}) as (helper, help_reqs):
        summary, records = _run(setup, nav, tmp_path / "run", agent_params=_assistant(helper),
                                max_consecutive_failures=0)
    overall = summary["overall"]
    assert overall["episodes"] == EPISODES and overall["not_evaluated"]["episodes"] == 0 and "partial" not in overall
    down = [s for r in records for s in r["agent_outputs"] if "assistant" in s]
    kinds = [s["assistant"]["unavailable"]["kind"] for s in down]
    # the assistant's own circuit breaker opens after 3 failures: later consultations send nothing
    assert len(down) > 3 and len(help_reqs) == 3 and kinds == ["server_error"] * 3 + ["circuit_open"] * (len(down) - 3)
    assert all("Assistant's guidance" not in s["prompt"] for r in records for s in r["agent_outputs"])
    assert overall["not_evaluated"]["by_component"] == {"assistant": {"circuit_open": len(down) - 3, "server_error": 3}}
    assert overall["generation"]["assistant_unavailable"] == len(down) and overall["generation"]["consultations"] == 0
    print_table([(("fine_grained", "navgpt", "graph"), overall)])
    table = capsys.readouterr().out
    assert f"the assistant was unavailable at {len(down)} step(s)" in table and "all episodes evaluated" in table
    line = assistant_line(summary)
    monkeypatch.setattr(runner, "run_eval", lambda cfg, **kw: summary)
    assert main(["eval", str(tmp_path / "run.yaml"), "--no-progress"]) == 0  # complete, but flagged
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"vlnverse: {line}"] and "assistant" in err[0] and "model endpoint" not in err[0]


def test_partial_row_shows_sr_over_the_evaluated_beside_the_bound(setup, tmp_path, capsys):
    """The navigator's endpoint fails on one episode of four: SR over the three evaluated ones is
    flagged, beside the bound that counts the missing one as a failure; the reason names the navigator."""
    from vlnverse.eval.roam_table import table_rows
    from vlnverse.eval.runner import not_evaluated_line
    from vlnverse.run.summary import print_table

    def reply(body, n):  # ahead (east, toward the goal) for as many places as told, then STOP
        last = message_text(body["messages"][-1])
        if "walk 3 places" in last:
            return {"status": 500}
        want = 2 * int(last.split("Instruction: walk ")[1].split(" ")[0])
        front = [ln for ln in last.splitlines() if ln.strip().startswith("Front: [")]
        if last.count("\nStep ") >= want or not front:
            return {"text": "Action: STOP"}
        return {"text": f"Action: {front[0].split('[')[1].split(':')[0]}"}

    with openai_server(reply) as (url, _):
        summary, records = _run(setup, url, tmp_path / "run", max_consecutive_failures=0)
    overall = summary["overall"]
    evaluated = [r for r in records if r["outcome"] == "evaluated"]
    assert overall["episodes"] == 3 and len(evaluated) == 3
    sr = sum(r["metrics"]["SR"] for r in evaluated) / 3
    assert sr > 0 and overall["means"]["SR"] == pytest.approx(sr)
    assert overall["partial"]["evaluated"] == 3 and overall["partial"]["total"] == 4
    assert overall["partial"]["bounds"]["SR"] == pytest.approx(sr * 3 / 4)
    assert overall["not_evaluated"]["by_component"] == {"navigator": {"server_error": 1}}
    print_table([(("fine_grained", "navgpt", "graph"), overall)])
    table = capsys.readouterr().out
    assert f"{100 * sr:.1f}*" in table and f"{100 * sr * 3 / 4:.1f}" in table and "SR all %" in table
    assert "partial, 3 of 4 episodes evaluated" in table and "the navigator model gave no answer in 1 episode(s)" in table
    line = not_evaluated_line(summary, tmp_path / "run")
    assert line.startswith("1 of 4 episode(s) not evaluated: the navigator model gave no answer")
    assert f"{100 * sr * 3 / 4:.1f}% counting them as failures" in line
    # the VLN-NF table flags a partial row the same way (its rates over the evaluated, the bound beside)
    fake = {"overall": {"means": {"RD_SR": 0.5, "REV_SPL": 0.2}, "partial": {"evaluated": 2, "total": 4,
                                                                         "bounds": {"RD_SR": 0.25, "REV_SPL": 0.1}}}}
    row = table_rows({"ROAM": fake})[0]
    assert "50.0%* (all: 25.0%)" in row and "20.0%* (all: 10.0%)" in row


def test_captioner_outage_names_the_captioner(setup, tmp_path):
    from vlnverse.eval.runner import not_evaluated_line

    caption = {"caption_model": {"name": "openai", "params": {"model": "cap", "base_url": None, "api_key_env": None,
                                                              "cache": False, "max_retries": 0,
                                                              "max_consecutive_failures": 0}}}
    with openai_server(walker) as (nav, nav_reqs), openai_server(lambda b, n: {"status": 503}) as (cap, _):
        caption["caption_model"]["params"]["base_url"] = cap
        summary, records = _run(setup, nav, tmp_path / "run", agent_params=caption)
    assert len(nav_reqs) == 0 and summary["overall"]["episodes"] == 0
    assert summary["overall"]["not_evaluated"]["by_component"] == {"captioner": {"server_error": EPISODES}}
    assert all(r["not_evaluated"]["component"] == "captioner" for r in records)
    assert "the captioner model gave no answer in 4 episode(s) (4 server_error)" in not_evaluated_line(summary, "x")
