"""How well an HNR policy predicts the view ahead (``vlnverse bench lookahead``), and the
teacher that records what a checkpoint's policy reads."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.nn import functional as F

from ...core.errors import ConfigError
from .cloud import UNSEEN
from .geometry import view_at_angle
from .grid_encoders import cloud_encoder_spec, encoder_file, make_grid_encoder
from .policy import HNRPolicy
from .teacher import HNRTeacher

@torch.no_grad()
def lookahead_cosines(policy: HNRPolicy, store: Any) -> dict[str, list]:
    """Per teacher step of a ``StepStore`` (collected by ``HNRTeacher``) where the oracle moves to a
    candidate and a next step exists: ``rendered`` (the cosine between ``policy``'s rendered view of
    that candidate at step t and the encoder's feature of the real front view at t + 1), ``copy``
    (the cosine of the current panorama's feature in that direction to the same real view),
    ``opacity`` (the rendered view's), ``episode`` (the store's episode index), ``depth_ahead`` (the
    mean depth of the real view's seen cells, metres; ``UNSEEN`` when none is seen), and diagnostics
    with the mean μ of all these real views: ``mean_view`` (the cosine of μ to each real view) and
    ``rendered_centred`` / ``copy_centred`` (the cosines after subtracting μ from both sides)."""
    policy.eval()
    out: dict[str, list] = {"rendered": [], "copy": [], "opacity": [], "episode": [], "depth_ahead": [], "mean_view": [],
                            "rendered_centred": [], "copy_centred": []}
    vectors: dict[str, list] = {"real": [], "rendered": [], "copy": []}
    for i in range(len(store)):
        ep = store.episode(i)
        t = int(ep["length"])
        as_t = lambda name: torch.from_numpy(np.asarray(ep[name], dtype=np.float32))[None]  # noqa: E731
        feats, cands, depth, pose = as_t("view_feats"), as_t("candidates"), as_t("view_depth"), as_t("world_pose")
        grid = as_t("view_grid") if policy.cloud_grid else None
        views = policy.cloud_target(feats, grid)  # (1, T, V, F): the encoder's feature of each real view
        target = ep["target"].astype(int)
        k = cands.shape[2]
        mem = policy.new_memory(1, "cpu")
        for s in range(t):
            rendered, opacity, _ = policy.render_lookaheads(feats[:, s], cands[:, s], depth[:, s], pose[:, s], mem,
                                                            grid[:, s] if grid is not None else None)
            if s + 1 < t and target[s] < k:
                real = views[0, s + 1, 0]
                copy = view_at_angle(views[:, s], cands[:, s, target[s]:target[s] + 1, 0])[0, 0]
                for name, v in (("real", real), ("rendered", rendered[0, target[s]]), ("copy", copy)):
                    vectors[name].append(v)
                out["rendered"].append(float(F.cosine_similarity(rendered[0, target[s]], real, dim=0)))
                out["copy"].append(float(F.cosine_similarity(copy, real, dim=0)))
                out["opacity"].append(float(opacity[0, target[s]]))
                out["episode"].append(i)
                ahead = depth[0, s + 1, 0]
                seen = ahead[ahead > 0]
                out["depth_ahead"].append(float(seen.mean()) if len(seen) else UNSEEN)
    if vectors["real"]:
        real, rendered, copy = (torch.stack(vectors[k]) for k in ("real", "rendered", "copy"))
        mu = real.mean(0, keepdim=True)
        out["mean_view"] = F.cosine_similarity(mu, real, dim=-1).tolist()
        out["rendered_centred"] = F.cosine_similarity(rendered - mu, real - mu, dim=-1).tolist()
        out["copy_centred"] = F.cosine_similarity(copy - mu, real - mu, dim=-1).tolist()
    return out


def lookahead_similarity(policy: HNRPolicy, store: Any) -> dict[str, Any]:
    """How well ``policy`` (``hnr`` or ``gama``) predicts the view ahead over the teacher steps of a
    store (held-out homes for a fair figure): the means of ``lookahead_cosines``' rendered and
    copy-baseline cosines."""
    got = lookahead_cosines(policy, store)
    n = len(got["rendered"])
    return {"steps": n, "rendered_cos": round(float(np.mean(got["rendered"])), 4) if n else None,
            "copy_baseline_cos": round(float(np.mean(got["copy"])), 4) if n else None}


def checkpoint_teacher(policy: HNRPolicy, data: dict[str, Any], folder: Any, *, file: Any = None) -> HNRTeacher:
    """The ``HNRTeacher`` that records what ``policy`` (rebuilt from the checkpoint dict ``data``)
    reads: its own waypoint predictor (written from the checkpoint to ``folder/predictor.pt``), its
    cloud grid, and for a pretrained cloud encoder the file its config names, whose trunk must
    equal the checkpoint's (else a one-line ``ConfigError`` naming ``file``)."""
    from pathlib import Path

    from ..checkpoint import named_path
    from ..waypoints.model import save_predictor

    path = Path(folder) / "predictor.pt"
    if not path.is_file():
        path.parent.mkdir(parents=True, exist_ok=True)
        save_predictor(path, policy.predictor)
    params = {**dict(data.get("policy_params") or {}), "waypoint_predictor": str(path), "cloud_grid": policy.cloud_grid}
    if policy.cloud_encoder is not None:
        given = params.get("cloud_encoder")
        key = "path" if isinstance(given, dict) and given.get("type") == "pretrained" else "weights"
        if isinstance(given, dict) and isinstance(given.get(key), str):  # relative to the run: beside the checkpoint
            params["cloud_encoder"] = {**given, key: named_path(given[key], file)}
        enc = cloud_encoder_spec(params.get("cloud_encoder"))
        field = f"policy.params.cloud_encoder.{key}"
        if not encoder_file(enc) or not Path(encoder_file(enc)).is_file():
            raise ConfigError(f"its cloud encoder's file {encoder_file(enc)!r} is not here", file=file, field=field,
                              expected="the encoder file the checkpoint was trained with, at that path")
        trunk = make_grid_encoder(enc, policy.predictor.params["image_size"],
                                  policy.predictor.params["max_depth"]).trunk.state_dict()
        mine = policy.cloud_encoder.trunk.state_dict()
        if trunk.keys() != mine.keys() or any(not torch.equal(trunk[k], mine[k]) for k in mine):
            raise ConfigError(f"the cloud encoder file {encoder_file(enc)} holds other weights than the checkpoint's trunk",
                              file=file, field=field, expected="the encoder file the checkpoint was trained with")
    else:
        params["cloud_encoder"] = "predictor"
    return type(policy).teacher_spec(params)
