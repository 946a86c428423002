"""Checkpoints: policy type and parameters, vocabulary, sensor rig, training config, code version,
weights, and (for resuming) optimizer state and data position. Written atomically."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from ..core.errors import ConfigError
from ..core.io import atomic_path
from . import code_version
from .vocab import Vocabulary

FORMAT = "vlnverse-policy-checkpoint"
FORMAT_VERSION = 1


def save_checkpoint(path: str | Path, policy: Any, *, config: dict[str, Any], extra: dict[str, Any] | None = None) -> Path:
    """Write ``policy`` (a ``VLNPolicy``) and its metadata to ``path``."""
    data = {"format": FORMAT, "format_version": FORMAT_VERSION, "code_version": code_version(),
            "policy": policy.name, "policy_params": config["policy"].get("params", {}),
            "vocab": policy.vocab.to_dict(), "sensors": policy.sensors, "config": config,
            "state_dict": {k: v.detach().cpu() for k, v in policy.state_dict().items()},
            **(policy.checkpoint_extras() if hasattr(policy, "checkpoint_extras") else {}), **(extra or {})}
    with atomic_path(path) as tmp:
        torch.save(data, tmp)
    return Path(path)


def read_checkpoint(path: str | Path, *, expected_policy: str | None = None) -> dict[str, Any]:
    """Load a checkpoint's dict; a missing/corrupt file or a different policy type is a ``ConfigError``."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError("checkpoint not found", file=path, field="checkpoint", expected="a file written by vlnverse train")
    try:
        data = torch.load(path, map_location="cpu", weights_only=False)
    except Exception as exc:  # noqa: BLE001 - any unpickling failure means "not a checkpoint"
        raise ConfigError(f"not a readable checkpoint ({type(exc).__name__})", file=path, field="checkpoint") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise ConfigError("not a vlnverse policy checkpoint", file=path, field="checkpoint")
    if data.get("format_version") != FORMAT_VERSION:
        raise ConfigError(f"checkpoint format {data.get('format_version')}", file=path, field="format_version",
                          expected=str(FORMAT_VERSION))
    if expected_policy is not None and data["policy"] != expected_policy:
        raise ConfigError(f"checkpoint holds a '{data['policy']}' policy", file=path, field="policy.name",
                          expected=f"'{expected_policy}' (the config's policy), or a {data['policy']} config")
    return data


def policy_from_checkpoint(data: dict[str, Any], *, path: Any = None, device: Any = "cpu") -> Any:
    """Rebuild the policy of a checkpoint dict and load its weights (weights files of the config
    are not needed: the checkpoint holds every parameter)."""
    from .policies import POLICIES, build_policy

    params = {k: v for k, v in dict(data["policy_params"]).items()}
    rebuild = getattr(POLICIES.get(data["policy"]), "params_from_checkpoint", None)
    if rebuild is not None:  # e.g. VLN-BERT: its waypoint predictor travels inside the checkpoint
        params = rebuild(params, data, path)
    for enc, prefix in (("rgb_encoder", "rgb"), ("depth_encoder", "depth")):  # pretrained files: training time only
        if isinstance(params.get(enc), dict) and params[enc].get("type") == "pretrained":
            from .encoder import arch_of

            params[enc] = {"type": "cnn", "frozen": bool(params[enc].get("frozen", True)),
                           **arch_of(data["state_dict"], prefix)}
        elif isinstance(params.get(enc), dict):
            params[enc] = {k: v for k, v in params[enc].items() if k != "weights"}
    if isinstance(params.get("instruction_encoder"), dict):
        params["instruction_encoder"] = {k: v for k, v in params["instruction_encoder"].items() if k != "embeddings"}
    policy = build_policy(data["policy"], params, Vocabulary.from_dict(data["vocab"]), data["sensors"])
    try:
        policy.load_state_dict(data["state_dict"])
    except RuntimeError as exc:
        raise ConfigError(f"weights do not fit the policy: {str(exc).splitlines()[0]}", file=path, field="state_dict") from None
    policy.max_instruction_length = int(data["config"].get("max_instruction_length", 80))
    return policy.to(device)


def resolve_device(name: str) -> "torch.device":
    """``auto`` → cuda when available else cpu; ``cuda`` without a GPU is a ``ConfigError``."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError("CUDA is not available on this machine", field="device", expected="auto or cpu")
    return torch.device(name)
