"""A plug-in MLLM agent from the command line (issue 56): one file outside the package defines an
agent that keeps its chat model under an attribute name of its own (``self.brain``) and names it in
``Agent.chat_models``; ``vlnverse eval`` against the scripted server still puts it under the
run-wide request limit (``model.concurrency``, across worker processes), makes the episode
threads share one circuit breaker, and names it in ``summary.json``.

The runner reaches the model through the hook alone: were it to look for attribute names (or
ignore the hook), the two worker processes below would send two requests at once and the two
episode threads would each open a breaker of their own (four failed requests, not at most three).
"""
from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from eval_scenes import corridor_scene
from mllm_server import message_text, openai_server

PACKAGE_ROOT = Path(__file__).resolve().parents[2] / "exts" / "vlnverse"
SCENES = ("corridor_a", "corridor_b")
PER_SCENE = 4

PLUGIN = '''
"""A user's MLLM agent: walks to the first neighbouring viewpoint until its model says STOP."""
from vlnverse.run.agents import Agent, register_agent
from vlnverse.run.rollout import NotEvaluated
from vlnverse.sim.types import DiscreteAction


@register_agent("brainy")
class Brainy(Agent):
    def __init__(self, *, model=None, **kwargs):
        super().__init__(**kwargs)
        self.brain = model  # not `model`, `captioner` or `assistant`: found through chat_models() alone

    def chat_models(self):
        return {"navigator": self.brain}

    def act(self, observations, state):
        prompt = f"Instruction: {state.episode.instruction_text}\\nSteps so far: {state.step}"
        gen = self.brain.generate([{"role": "user", "content": prompt}])
        self.outputs.append({"step": state.step, "generation": {"requests": gen.requests, "calls": 1,
                                                                 "cache_hits": int(gen.cached)},
                             "attempts": [{"raw": gen.text, "served_model": gen.served_model}]})
        if gen.endpoint_failure:
            raise NotEvaluated(gen.error_kind, gen.error or "")
        if "STOP" in gen.text or not state.neighbours:
            return DiscreteAction.STOP
        return state.neighbours[0][0]
'''


def walker(body, n):
    """``Action: 1`` until the instruction's number of steps is reached, then STOP."""
    text = message_text(body["messages"][-1])
    want = int(text.split("Instruction: walk ")[1].split(" ")[0])
    steps = int(text.split("Steps so far: ")[1].split()[0])
    return {"text": "Action: STOP" if steps >= want else "Action: 1", "sleep": 0.05}


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    """Two corridor homes, their view cache, PER_SCENE episodes each, and the plug-in file."""
    from vlnverse.eval.mllm.cache import build_scene_cache
    from vlnverse.scenes.usd_io import write_usd
    from vlnverse.sim.body import load_body
    from vlnverse.tasks.base import load_scene_context
    from vlnverse.tasks.episode import Episode, Goal, Instruction, save_episodes

    root = tmp_path_factory.mktemp("plugin_mllm")
    body = load_body("r2r_ce")
    episodes = []
    for stem, gap in zip(SCENES, (1.0, 1.3)):
        desc = corridor_scene(gap)
        desc.scene_id = stem
        scene = write_usd(desc, root / f"{stem}.usda")
        ctx = load_scene_context(scene, body, 0.05)
        build_scene_cache(ctx, root / "views", size=16)
        path = ctx.planner.shortest_path((1.3, 1.5), (9.0, 1.5))
        episodes += [Episode(f"{stem}-{i}", ctx.scene_id, str(scene), "test", "fine_grained", [1.3, 1.5, 0.0], 0.0,
                             [Goal([9.0, 1.5, 0.0])], [[*p, 0.0] for p in path.waypoints], path.length,
                             [Instruction(f"walk {i + 1} places along the corridor and stop")])
                     for i in range(PER_SCENE)]
    save_episodes(root / "episodes.jsonl", episodes)
    (root / "brainy_agent.py").write_text(textwrap.dedent(PLUGIN))
    return root


def _eval(root: Path, url: str, out: str, *args: str, **model_params) -> tuple[subprocess.CompletedProcess, dict]:
    params = {"model": "brain-vlm", "base_url": url, "api_key_env": None, "cache": False, "max_retries": 0,
              "timeout": 30, **model_params}
    (root / f"{out}.yaml").write_text(textwrap.dedent(f"""
        agent: {{name: brainy}}
        model: {{name: openai, params: {json.dumps(params)}}}
        plugins: [brainy_agent]
        task: fine_grained
        episodes: {root / 'episodes.jsonl'}
        collision_mode: graph
        backend: viewpoints
        max_steps: 8
        report: {{enabled: false}}
        out: {root / out}
        """))
    env = dict(os.environ, VLNVERSE_VIEW_CACHE=str(root / "views"), VLNVERSE_CACHE=str(root / "user_cache"))
    env["PYTHONPATH"] = os.pathsep.join([str(root), str(PACKAGE_ROOT), env.get("PYTHONPATH", "")])
    run = subprocess.run([sys.executable, "-m", "vlnverse", "eval", str(root / f"{out}.yaml"), "--no-progress", *args],
                         cwd=root, env=env, capture_output=True, text=True, timeout=600)
    summary = (root / out / "summary.json")
    return run, json.loads(summary.read_text()) if summary.is_file() else {}


def test_a_plugin_agents_model_counts_against_the_run_wide_request_limit(workspace):
    meet = threading.Barrier(2, timeout=5)

    def reply(body, n):
        if n < 2:  # the first two requests wait for each other: two in flight if nothing holds the second back
            with contextlib.suppress(threading.BrokenBarrierError):
                meet.wait()
        return walker(body, n)

    with openai_server(reply) as (url, reqs):
        run, summary = _eval(workspace, url, "limited", "--workers", "2", "model.concurrency=1")
    assert run.returncode == 0, run.stderr[-3000:]
    assert reqs.max_in_flight == 1  # two worker processes, one endpoint slot
    overall = summary["overall"]
    assert overall["episodes"] == len(SCENES) * PER_SCENE and overall["not_evaluated"]["episodes"] == 0
    assert len(reqs) == sum(i + 2 for i in range(PER_SCENE)) * len(SCENES)  # i + 1 moves and a STOP per episode
    model = summary["model"]
    assert (model["agent"], model["model"], model["model_name"]) == ("brainy", "openai", "brain-vlm")
    assert model["endpoint_host"] == url.split("/")[2] and model["requests"] == len(reqs)
    assert model["served_models"] == {"brain-vlm": len(reqs)}


def test_a_plugin_agents_episode_threads_share_one_circuit_breaker(workspace):
    with openai_server(lambda body, n: {"status": 503, "sleep": 0.2}) as (url, reqs):
        run, summary = _eval(workspace, url, "outage", "--workers", "1", "model.concurrency=2",
                             "model.params.max_consecutive_failures=2")
    assert run.returncode == 3, run.stderr[-3000:]  # episodes not evaluated
    # two threads per scene, one breaker for the run's first scene: open after two failures in all
    # (a breaker per thread would let four through)
    assert len(reqs) <= 3
    skipped = summary["overall"]["not_evaluated"]
    assert skipped["episodes"] == len(SCENES) * PER_SCENE
    assert skipped["by_reason"] == {"server_error": len(reqs), "circuit_open": len(SCENES) * PER_SCENE - len(reqs)}
    records = [json.loads(line) for line in (workspace / "outage" / "episodes.jsonl").read_text().splitlines()]
    opened = [r["not_evaluated"]["error"] for r in records if r["not_evaluated"]["kind"] == "circuit_open"]
    assert opened and all("circuit breaker open after 2 endpoint failures in a row" in e for e in opened)
