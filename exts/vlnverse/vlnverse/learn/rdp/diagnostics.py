"""RDP diagnostics: does the denoiser follow its condition (``condition_check``)?"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from ...sim.types import wrap_angle

if TYPE_CHECKING:
    from .policy import RDPPolicy


def heading_error_deg(pred: torch.Tensor, label: torch.Tensor) -> np.ndarray:
    """Absolute angle (degrees, 0..180) between the (dx, dy) directions of two (N, 3) action rows."""
    diff = (torch.atan2(pred[:, 1], pred[:, 0]) - torch.atan2(label[:, 1], label[:, 0])).double().numpy()
    return np.abs(np.degrees(wrap_angle(diff)))


def condition_check(policy: "RDPPolicy", store: Any, *, episodes: int = 96, batch: int = 16, seed: int = 0,
                    turn_deg: float = 30.0) -> dict[str, Any]:
    """Does the denoiser follow its condition? Teacher-forced on the first ``episodes`` episodes of a
    store of RDP teacher labels (the observation or feature cache of a run): for every state the
    teacher moves from, the heading error (degrees) of the sampled first action against the
    label, with the true conditions and with the conditions shuffled across the batch's states
    (from the same initial noise): a denoiser that ignores its condition scores the same on both. Reported over all such states,
    the turning ones (label bearing beyond ``turn_deg``) and the episodes' first steps: medians
    and the share within ``turn_deg``."""
    from ..batching import EpisodeBatches

    data = EpisodeBatches([store], policy.vocab, policy.max_instruction_length, store.manifest["sensors"])
    gen = torch.Generator().manual_seed(seed)
    err: dict[str, list] = {"true": [], "shuffled": []}
    turning, first = [], []
    was_training = policy.training
    policy.eval()
    with torch.no_grad():
        for start in range(0, min(len(data), episodes), batch):
            b = data.batch(np.arange(start, min(start + batch, len(data), episodes)), 1.0, "cpu")
            cond = policy.batch_conditions(b)
            moving = (b["weights"] > 0) & (b["labels"] == 1)
            c, label = cond[moving], b["extras"]["actions"][moving][:, 0]
            turning.append(np.abs(np.degrees(torch.atan2(label[:, 1], label[:, 0]).double().numpy())) > turn_deg)
            first.append(torch.nonzero(moving)[:, 1].numpy() == 0)
            shuffled = c[torch.randperm(len(c), generator=gen)]
            noise = gen.get_state()  # both samples start from the same noise: only the condition differs
            err["true"].append(heading_error_deg(policy.sample(c, gen)[:, 0], label))
            gen.set_state(noise)
            err["shuffled"].append(heading_error_deg(policy.sample(shuffled, gen)[:, 0], label))
    policy.train(was_training)
    masks = {"all": None, "turning": np.concatenate(turning), "first_step": np.concatenate(first)}
    out: dict[str, Any] = {"episodes": min(len(data), episodes), "turn_deg": turn_deg}
    for group, mask in masks.items():
        row = {}
        for cond_kind, parts in err.items():
            e = np.concatenate(parts) if mask is None else np.concatenate(parts)[mask]
            row["states"] = int(len(e))
            row[f"median_{cond_kind}"] = round(float(np.median(e)), 1) if len(e) else None
            row[f"within_{cond_kind}"] = round(float((e < turn_deg).mean()), 3) if len(e) else None
        out[group] = row
    return out
