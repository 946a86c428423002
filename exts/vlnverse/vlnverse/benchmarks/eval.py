"""``vlnverse bench eval``: evaluation throughput of the shortest-path oracle with RGB-D sensors.

Figures, keyed by collision mode (``strict``, ``telhop``, ``graph``), best of ``--repeat`` passes
over the same episodes: ``episodes_per_min`` and ``agent_steps_per_s`` (an agent step = the
agent's decision + the mode's motion + a 224² RGB and 224² depth observation, as in a real
run; no report pictures). Episodes: ``fine_grained`` on the first ``val_unseen`` scene of the
shipped splits (``--seed`` seeds their generation), else on a generated home. SR is reported
too, as a sanity check that the timed runs are real navigation.

``learned_policy.step_profile``: the shares of a serial step of the CMA checkpoint (64×64 RGB-D,
Tel-Hop) spent rendering, teleporting, in the policy and in the rest (``step_profile``).
``learned_policy``: batched evaluation (``vlnverse eval --envs N``) against the serial runner in
one run: the shipped CMA checkpoint at 64×64 RGB-D under Tel-Hop on the same 24 episodes (the
first two ``val_unseen`` scenes, worded in the instruction language the checkpoint was trained on, as
are the step profile's and the oracle's; every timed run starts with empty scene caches, as a new
process), through ``run_eval`` with
``envs=1`` and ``envs=--envs`` (default 4), alternating ``--repeat`` times, best of each:
``episodes_per_s`` of both, ``speedup`` (batched / serial), ``records_identical`` (every
episode's record equal apart from ``duration_s``), ``policy_forward`` (of the best batched run:
the ``share`` of its wall time the driver spent in the batched policy forward,
``Agent.act_batch``, that time in ms per episode step, and the driver's CPU time in it per
episode step, which leaves out the time the environment processes held the cores; to set
against the serial step profile's ``policy``) and the machine's load average.
"""
from __future__ import annotations

import time
import warnings
from dataclasses import dataclass

import numpy as np

EPISODES = 6
MODES = ("strict", "telhop", "graph")
#: the learned policy measured (a shipped checkpoint's name)
LEARNED_CHECKPOINT = "cma_fine_grained"


def checkpoint_language(name: str) -> dict:
    """The task overrides that word episodes in the instruction language checkpoint ``name`` was
    trained on (``{}``: version 1), so the policy reads the wording it learned."""
    from vlnverse.learn.checkpoint import read_checkpoint, resolve_checkpoint, training_language
    from vlnverse.tasks.instructions.languages import language_overrides

    return language_overrides(training_language(read_checkpoint(resolve_checkpoint(name))))


def _context(seed: int, body):
    from vlnverse.tasks.base import context_from_description, load_scene_context

    try:
        from vlnverse.scenes.splits import resolve_scenes

        path = resolve_scenes("val_unseen")[0]
        return load_scene_context(path, body), str(path.name)
    except Exception:  # noqa: BLE001 - no shipped scenes: fall back to a generated home
        from vlnverse.scenes.procgen import generate_home

        return context_from_description(generate_home(seed), body), f"procgen.generate_home({seed})"


def run(args) -> dict:
    """Measure the figures listed in the module docstring (``args``: ``EvalBenchOptions`` or its
    flags); returns a JSON-ready dict."""
    from tqdm import tqdm

    from vlnverse.run.agents import make_agent
    from vlnverse.run.modes import make_mode
    from vlnverse.run.episodes import RunSettings
    from vlnverse.run.rollout import run_episode
    from vlnverse.sim import make_simulator
    from vlnverse.core.body import load_body
    from vlnverse.sim.sensors import CameraSpec
    from vlnverse.tasks.base import TASKS, load_task_config, load_task_types

    options = EvalBenchOptions.from_args(args)
    load_task_types()
    language = checkpoint_language(LEARNED_CHECKPOINT)  # read once: the task config and the learned block
    task_cfg = load_task_config("fine_grained", language)
    body = load_body(task_cfg.body)
    ctx, scene = _context(options.seed, body)
    episodes = TASKS.get("fine_grained")(task_cfg).generate(ctx, np.random.default_rng(options.seed), EPISODES, "bench")
    sensors = [CameraSpec("rgb", "rgb", 224, 224, 90.0), CameraSpec("depth", "depth", 224, 224, 90.0)]
    sim = make_simulator(ctx.desc, body, sensors=sensors)
    settings = RunSettings(task_cfg.max_steps, task_cfg.success_distance, body, task_cfg.map_resolution, "fine_grained")
    agent = make_agent("oracle")
    out: dict = {"scene": scene, "episodes": len(episodes), "sensors": "rgb 224x224 + depth 224x224",
                 "episodes_per_min": {}, "agent_steps_per_s": {}, "SR": {}}
    try:
        for name in tqdm(MODES, desc="bench eval", unit="mode"):
            params = {"planner": ctx.planner} if name in ("telhop", "graph") else {}
            if name == "graph":
                params["navgraph"] = ctx.navgraph.graph
            mode = make_mode(name, sim, **params)
            best = None
            for _ in range(max(1, options.repeat)):
                t0 = time.perf_counter()
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore", RuntimeWarning)
                    records = [run_episode(ep, ctx, sim, mode, agent, settings) for ep in episodes]
                elapsed = time.perf_counter() - t0
                if best is None or elapsed < best[0]:
                    best = (elapsed, records)
            elapsed, records = best
            steps = sum(r["steps"] for r in records)
            out["episodes_per_min"][name] = round(60.0 * len(records) / elapsed, 2)
            out["agent_steps_per_s"][name] = round(steps / elapsed, 1)
            out["SR"][name] = round(float(np.mean([r["metrics"]["SR"] for r in records])), 3)
    finally:
        sim.close()
    out["learned_policy"] = {"step_profile": step_profile(ctx, body, episodes, settings), **learned_policy(options, language)}
    return out


def step_profile(ctx, body, episodes, settings) -> dict:
    """Where a serial evaluation step of the CMA checkpoint (64×64 RGB-D, Tel-Hop) goes: the
    shares of ``render`` (the simulator's observations), ``physics_teleport`` (``teleport``: the
    destination's collision check and placement), ``policy`` (``agent.act``: frames to tensors,
    the forward, the pick) and ``bookkeeping`` (the rest: the mode's target poses, the rollout's
    state and records, scoring), over ``episodes`` run once each."""
    import os

    from vlnverse.run.agents import make_agent
    from vlnverse.run.rollout import Rollout, scene_mode
    from vlnverse.sim import make_simulator
    from vlnverse.sim.sensors import CameraSpec

    sensors = [CameraSpec("rgb", "rgb", 64, 64, 90.0), CameraSpec("depth", "depth", 64, 64, 90.0)]
    sim = make_simulator(ctx.desc, body, sensors=sensors)
    spent = {"render": 0.0, "physics_teleport": 0.0, "policy": 0.0}

    def timed(name: str, fn):
        def call(*a, **k):
            t0 = time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                spent[name] += time.perf_counter() - t0
        return call

    sim.get_observations = timed("render", sim.get_observations)
    sim.teleport = timed("physics_teleport", sim.teleport)
    agent = make_agent("policy", {"checkpoint": LEARNED_CHECKPOINT})
    act = timed("policy", agent.act)
    mode = scene_mode("telhop", sim, ctx)
    steps = 0
    try:
        t0 = time.perf_counter()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            for episode in episodes:
                rollout = Rollout(episode, ctx, sim, mode, settings, agent=agent)
                rollout.reset()
                while not rollout.done:
                    rollout.step(act(rollout.observations, rollout.state))
                    steps += 1
                rollout.record()
        total = time.perf_counter() - t0
    finally:
        sim.close()
    spent["bookkeeping"] = total - sum(spent.values())
    return {"steps": steps, "ms_per_step": round(1000 * total / steps, 2),
            "share": {k: round(v / total, 3) for k, v in spent.items()},
            "load_average": [round(v, 2) for v in os.getloadavg()]}


LEARNED_EPISODES = 24
LEARNED_ENVS = 4
LEARNED_SENSORS = ("[{name: rgb, kind: rgb, width: 64, height: 64}, "
                   "{name: depth, kind: depth, width: 64, height: 64}]")


@dataclass(frozen=True)
class EvalBenchOptions:
    """The settings of a ``bench eval`` run: ``repeat`` repetitions per figure (the best is kept),
    ``seed`` (episodes), ``envs`` environments of the batched learned-policy run."""

    repeat: int = 3
    seed: int = 0
    envs: int = LEARNED_ENVS

    @classmethod
    def from_args(cls, args) -> "EvalBenchOptions":
        """The options of ``args`` (``vlnverse bench eval``'s flags); a bad ``--envs`` is a one-line
        ``ConfigError`` naming it."""
        from vlnverse.benchmarks.train.options import check_int_flags, options_from_args

        options = options_from_args(cls, args)
        check_int_flags((("--envs", options.envs, 1),))
        return options


def learned_policy(options: EvalBenchOptions, language: dict | None = None) -> dict:
    """Batched vs serial evaluation of the shipped CMA checkpoint (see the module docstring);
    ``language``: its ``checkpoint_language`` when the caller has it."""
    import json
    import os
    import shutil
    import tempfile
    from pathlib import Path

    from vlnverse.benchmarks.scale import _fresh_process_state
    from vlnverse.eval.config import load_eval_config
    from vlnverse.eval.folder import EPISODES_FILE
    from vlnverse.eval.runner import run_eval
    from vlnverse.learn.agent import PolicyAgent
    from vlnverse.paths import tasks_dir

    language = checkpoint_language(LEARNED_CHECKPOINT) if language is None else language
    episodes = LEARNED_EPISODES
    envs = options.envs
    base = tasks_dir() / "eval" / "oracle_fine_grained_telhop.yaml"
    per_scene = max(1, -(-episodes // 2))
    work = Path(tempfile.mkdtemp(prefix="vlnverse-bench-eval-"))
    batch_forward = PolicyAgent.act_batch

    def run(n: int, out: Path) -> tuple[float, dict, list]:
        """Evaluate with ``n`` slots; (wall seconds, records, [wall, CPU] seconds in the batched forward)."""
        shutil.rmtree(out, ignore_errors=True)
        _fresh_process_state()  # the serial run loads its scenes as the environments' processes do
        cfg = load_eval_config(base, ["agent.name=policy", f"agent.params={{checkpoint: {LEARNED_CHECKPOINT}}}",
                                      f"episodes={work / 'episodes.jsonl'}", f"limit={episodes}",
                                      f"sensors={LEARNED_SENSORS}", "report.enabled=false", f"seed={options.seed}",
                                      f"out={out}"])
        forward = [0.0, 0.0]  # wall, this thread's CPU

        def act_batch(self, *a, **k):
            t, c = time.perf_counter(), time.thread_time()
            try:
                return batch_forward(self, *a, **k)
            finally:
                forward[0] += time.perf_counter() - t
                forward[1] += time.thread_time() - c

        PolicyAgent.act_batch = act_batch
        t0 = time.perf_counter()
        try:
            run_eval(cfg, progress=False, print_summary=False, envs=n)
        finally:
            PolicyAgent.act_batch = batch_forward
        elapsed = time.perf_counter() - t0
        records = [json.loads(line) for line in (out / EPISODES_FILE).read_text().splitlines() if line.strip()]
        return elapsed, {r["episode_id"]: {k: v for k, v in r.items() if k != "duration_s"} for r in records}, forward

    try:
        from vlnverse.run.episodes import generate_episodes
        from vlnverse.tasks.episode import save_episodes

        eps = generate_episodes("fine_grained", "val_unseen", per_scene, options.seed, work / "dataset", max_scenes=2,
                                progress=False, overrides=language)
        save_episodes(work / "episodes.jsonl", eps[:episodes])
        run(envs, work / "warm")  # the fork server and each scene's maps, once, outside the timed runs
        best = {"serial": None, "batched": None}
        records, forward = {}, [0.0, 0.0]
        for _ in range(max(1, options.repeat)):
            for name, n in (("serial", 1), ("batched", envs)):
                elapsed, records[name], spent = run(n, work / name)
                if best[name] is None or elapsed < best[name]:
                    best[name] = elapsed
                    forward = spent if name == "batched" else forward
        n_eps = len(records["serial"])
        steps = sum(r["steps"] for r in records["serial"].values())
        rate = {name: round(n_eps / best[name], 3) for name in best}
        return {"checkpoint": LEARNED_CHECKPOINT, "sensors": "rgb 64x64 + depth 64x64", "collision_mode": "telhop",
                "episodes": n_eps, "envs": envs, "episodes_per_s": rate,
                "speedup": round(rate["batched"] / rate["serial"], 2),
                "records_identical": records["serial"] == records["batched"], "steps": steps,
                "policy_forward": {"share": round(forward[0] / best["batched"], 3),
                                   "ms_per_episode_step": round(1000 * forward[0] / steps, 2),
                                   "cpu_ms_per_episode_step": round(1000 * forward[1] / steps, 2)},
                "load_average": [round(v, 2) for v in os.getloadavg()], "cpu_count": os.cpu_count()}
    finally:
        shutil.rmtree(work, ignore_errors=True)
