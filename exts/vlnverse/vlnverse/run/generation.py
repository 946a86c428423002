"""What ``summary.json`` says of the chat models an agent talks to: the ``generation`` block
(from the step logs of the records) and the ``model`` block (who answered).

Both read only the episode records and the agent's :meth:`~vlnverse.run.agents.Agent.chat_models`
hook: an agent's step log entry (``agent_outputs[i]``) that holds a ``generation`` dict
(requests, cache hits, tokens, latency, calls, re-prompts, error kind) counts, whatever the agent.
"""
from __future__ import annotations

from collections import Counter
from typing import Any

import numpy as np

from ..core.io import endpoint_host


def generation_summary(records: list[dict]) -> dict[str, Any] | None:
    """Per-step generation figures of MLLM episodes: steps, generation errors by kind, re-prompts,
    requests, cache hits, tokens, mean latency per model call and observation access time.
    None when no record holds MLLM step logs."""
    steps = [o for r in records for o in (r.get("agent_outputs") or [])
             if isinstance(o, dict) and isinstance(o.get("generation"), dict)]
    if not steps:
        return None
    gens = [s["generation"] for s in steps]
    errors: dict[str, int] = {}
    for g in gens:
        if g.get("error_kind"):
            errors[g["error_kind"]] = errors.get(g["error_kind"], 0) + 1
    calls = sum(g.get("calls", 0) for g in gens)
    access = [s["observation"]["access_ms"] for s in steps if isinstance(s.get("observation"), dict)]
    return {"steps": len(steps), "generation_errors": dict(sorted(errors.items())),
            "consultations": sum(1 for s in steps if isinstance(s.get("assistant"), dict) and "guidance" in s["assistant"]),
            "assistant_unavailable": sum(1 for s in steps if isinstance(s.get("assistant"), dict)
                                         and "unavailable" in s["assistant"]),
            "reprompts": sum(g.get("reprompts", 0) for g in gens), "revisions": sum(1 for g in gens if g.get("revised")),
            "requests": sum(g.get("requests", 0) for g in gens), "cache_hits": sum(g.get("cache_hits", 0) for g in gens),
            "prompt_tokens": sum(g.get("prompt_tokens", 0) for g in gens),
            "completion_tokens": sum(g.get("completion_tokens", 0) for g in gens),
            "mean_latency_ms": round(sum(g.get("latency_ms", 0.0) for g in gens) / calls, 2) if calls else None,
            "mean_obs_access_ms": round(float(np.mean(access)), 3) if access else None}


def model_identity(agent: Any, agent_name: str, records: list[dict]) -> dict[str, Any]:
    """Who answered: the agent, its prompt version, its ``navigator`` chat model (kind,
    configured name, the models the endpoint says served the answers, the endpoint host: never a
    key or a path), requests and cache hits over ``records``; every other role of
    :meth:`~vlnverse.run.agents.Agent.chat_models` (``assistant``, ``captioner``...) as a block of
    its own. An agent without a navigator chat model (a learned policy): ``model`` None."""
    models = agent.chat_models()
    navigator = models.get("navigator")
    out: dict[str, Any] = {"agent": agent_name}
    if navigator is None:
        return {**out, "model": None}
    served: Counter = Counter()
    versions: set[str] = set()
    for r in records:
        for step in r.get("agent_outputs") or []:
            if not isinstance(step, dict):
                continue
            if step.get("prompt_version"):
                versions.add(str(step["prompt_version"]))
            for attempt in step.get("attempts") or []:
                if isinstance(attempt, dict) and attempt.get("served_model"):
                    served[str(attempt["served_model"])] += 1
    gen = generation_summary(records) or {}
    out.update({"prompt_version": sorted(versions) if len(versions) > 1 else (next(iter(versions), None)
                                                                             or agent.prompt_version),
                "model": navigator.kind, "model_name": navigator.model, "served_models": dict(sorted(served.items())),
                "endpoint_host": endpoint_host(navigator.endpoint),
                "requests": gen.get("requests", 0), "cache_hits": gen.get("cache_hits", 0)})
    for role, model in models.items():
        if role != "navigator":
            out[role] = {"model": model.kind, "model_name": model.model, "endpoint_host": endpoint_host(model.endpoint),
                         **({"consultations": gen.get("consultations", 0)} if role == "assistant" else {})}
    return out
