"""The feature cache: a frozen visual trunk's outputs stored instead of pixels.

When every visual encoder of a policy has a frozen trunk (``{type: pretrained, frozen: true}``,
``{type: cnn, weights: PATH, frozen: true}`` or a frozen ResNet), IL reads the trunks' spatial
features (C, 4×4, float16) from a ``StepStore`` derived from the observation cache instead of
running the trunks on every frame of every epoch; the encoders' ``fc`` (trainable or not) still
runs on them, so training computes what the policy computes on pixels.

A feature store lives in ``<cache dir>/features/<key hash>``; its key holds the observation
cache's key, the sha256 of each trunk's tensors (for a pretrained file: its weights) and the code
version, so a changed encoder, observation cache or code builds a new one; a store that is
missing, interrupted or lost a chunk is rebuilt, and the log says why.
"""
from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch

from ..core.precision import timed_rate
from ..core.cache_key import content_key
from .cache import CACHE_VERSION
from .store import StepStore


def feature_name(key: str) -> str:
    """Store field (and frames key) of the ``key`` (rgb / depth) trunk's cached spatial features."""
    return f"feature_{key}"


def _encoders(policy: Any) -> dict[str, Any]:
    return {k: e for k, e in (("rgb", getattr(policy, "rgb", None)), ("depth", getattr(policy, "depth", None)))
            if e is not None}


def trunk_parameters(enc: Any) -> list:
    """The encoder's parameters outside its ``fc`` (what the feature cache stands in for)."""
    return [p for n, p in enc.named_parameters() if not n.startswith("fc.")]


def frozen_trunks(policy: Any) -> bool:
    """Whether the policy has visual encoders and every one's trunk is frozen."""
    encs = _encoders(policy)
    return bool(encs) and all(hasattr(e, "spatial_features") and not any(p.requires_grad for p in trunk_parameters(e))
                              for e in encs.values())


def trunk_sha256(enc: Any) -> str:
    """sha256 of a trunk's class and tensors (names, shapes, values), ``fc`` excluded."""
    h = hashlib.sha256(type(enc).__name__.encode())
    for name, t in sorted(enc.state_dict().items()):
        if name.startswith("fc."):
            continue
        arr = t.detach().cpu().contiguous().numpy()
        h.update(f"|{name}|{arr.dtype}|{arr.shape}|".encode())
        h.update(arr.tobytes())
    return h.hexdigest()


def feature_key(obs: StepStore, policy: Any) -> dict[str, Any]:
    """The feature store's key (JSON-ready)."""
    from . import code_version

    obs_key = content_key("obs", CACHE_VERSION, obs.manifest.get("key"))
    return {"obs_key_sha256": obs_key, "obs_steps": obs.num_steps,
            "trunks": {k: trunk_sha256(e) for k, e in _encoders(policy).items()}, "code_version": code_version()}


def feature_store(obs: StepStore, policy: Any, *, base_dir: str | Path | None = None, device: Any = "cpu",
                  chunk_frames: int = 512, batch_steps: int = 256, report: Callable[[str], None] = print,
                  build: bool = True) -> tuple[StepStore, dict[str, Any]]:
    """The feature store of ``obs`` for ``policy``'s frozen trunks (built when missing or stale);
    returns it and its stats (``status``: reused / built / rebuilt, ``steps``, ``bytes``,
    ``steps_per_s`` when built). ``build=False``: one that cannot be reused is an error (``teacher_cache``)."""
    from .cache import keyed_store

    key = feature_key(obs, policy)
    root, store, status = keyed_store(base_dir, "features", key, what="feature", build=build, report=report)
    if status == "reused":
        stats = {"status": "reused", "path": str(root), "steps": store.num_steps, "bytes": store.size_bytes()}
        report(f"feature cache: reusing {root} ({stats['steps']} steps, {stats['bytes'] / 1e6:.1f} MB)")
        return store, stats
    encs = _encoders(policy)
    names = {s["kind"]: s["name"] for s in obs.manifest["sensors"]}
    t0 = time.perf_counter()
    was_training = policy.training
    policy.eval()
    sensors, steps_done = [], 0
    store = None
    with torch.no_grad():
        for i in range(len(obs)):
            ep = obs.episode(i)
            feats: dict[str, np.ndarray] = {}
            for k, enc in encs.items():
                parts = []
                for s in range(0, ep["length"], batch_steps):
                    frames = {names[k]: torch.from_numpy(np.ascontiguousarray(ep[names[k]][s:s + batch_steps])).to(device)}
                    parts.append(enc.spatial_features(policy.encoder_input(k, frames)).cpu().numpy().astype(np.float16))
                feats[feature_name(k)] = np.concatenate(parts)
            if store is None:
                sensors = [{"name": n, "kind": "feature", "shape": list(a.shape[1:])} for n, a in feats.items()]
                store = StepStore.create(root, key=key, sensors=sensors, chunk_frames=chunk_frames,
                                         extra_fields=obs.extra_fields or None)
            extra = list(obs.extra_fields)
            steps = [{**{n: a[t] for n, a in feats.items()}, "label": ep["label"][t], "executed": ep["executed"][t],
                      "pose": ep["pose"][t], **{f: ep[f][t] for f in extra}} for t in range(ep["length"])]
            store.add_episode(ep["episode_id"], ep["instruction"], steps)
            steps_done += ep["length"]
    if store is None:
        store = StepStore.create(root, key=key, sensors=[], chunk_frames=chunk_frames)
    store.close()
    policy.train(was_training)
    seconds, steps_per_s = timed_rate(steps_done, time.perf_counter() - t0, digits=1)
    stats = {"status": status, "path": str(root), "steps": store.num_steps, "bytes": store.size_bytes(),
             "seconds": seconds, "steps_per_s": steps_per_s,
             "pixel_bytes": obs.size_bytes()}
    report(f"feature cache: {status} {root}: {stats['steps']} steps, {stats['bytes'] / 1e6:.1f} MB "
           f"(pixels {stats['pixel_bytes'] / 1e6:.1f} MB), {stats['steps_per_s']} steps/s")
    return store, stats
