"""Checkpoints: policy type and parameters, vocabulary, sensor rig, training config, code version,
training provenance, weights, and (for resuming) optimizer state and data position.

A checkpoint is a safetensors file (``tensorfile``): the tensors (weights, optimizer state) as
raw bytes, everything else as JSON metadata with the tensors' sha256; reading it runs no code
from the file. Written atomically. The metadata names no folder of the machine it was written on:
every path in it is relative to the training run's folder (``portable_paths``), and
``provenance.files`` holds the sha256 of each file it names. Pickle checkpoints of earlier versions are refused with the
hint to ``vlnverse checkpoint convert OLD NEW --trust``."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch

from ..core.errors import ConfigError
from . import code_version
from .tensorfile import read_tensor_file, write_tensor_file
from .vocab import Vocabulary

FORMAT = "vlnverse-policy-checkpoint"
#: 1: torch.save pickle (refused; ``vlnverse checkpoint convert``); 2: safetensors + JSON metadata
FORMAT_VERSION = 2


def checkpoint_dict(policy: Any, *, config: dict[str, Any], extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """What a checkpoint of ``policy`` (a ``VLNPolicy``) holds."""
    return {"format": FORMAT, "format_version": FORMAT_VERSION, "code_version": code_version(),
            "policy": policy.name, "policy_params": config["policy"].get("params", {}),
            "vocab": policy.vocab.to_dict(), "sensors": policy.sensors, "config": config,
            "state_dict": dict(policy.state_dict()),
            **policy.checkpoint_extras(), **(extra or {})}


#: entries holding tensors or words, never paths (not walked by ``portable_paths``)
NOT_PATHS = ("state_dict", "raw_state", "optimizer", "vocab", "tensors_sha256")


def _names_path(value: str, relative_too: bool) -> bool:
    if not value or "\n" in value:
        return False
    if os.path.isabs(value):
        return True
    return relative_too and ("/" in value or bool(Path(value).suffix)) and Path(value).exists()


def portable_paths(value: Any, run: str | Path, files: dict[str, str], *, relative_too: bool = False) -> Any:
    """``value`` (JSON) with each path it names made relative to ``run`` (POSIX), and the sha256 of
    each named file recorded in ``files`` under its new name. A path is an absolute string; with
    ``relative_too`` also a relative one that names something from the working folder (a config
    as given on the command line)."""
    if isinstance(value, dict):
        return {k: v if k in NOT_PATHS else portable_paths(v, run, files, relative_too=relative_too)
                for k, v in value.items()}
    if isinstance(value, list):
        return [portable_paths(v, run, files, relative_too=relative_too) for v in value]
    if isinstance(value, str) and _names_path(value, relative_too):
        path = Path(os.path.abspath(value))
        relative = Path(os.path.relpath(path, os.path.abspath(run))).as_posix()
        if path.is_file():
            from ..core.cache_key import sha256_file

            files[relative] = sha256_file(path)
        return relative
    return value


def content_key(value: Any, run: str | Path, files: dict[str, str] | None = None, *, relative_too: bool = False) -> Any:
    """``value`` with each path it names (``portable_paths`` relative to ``run``) replaced by
    ``sha256:<hex>`` of its file, ``files`` (a checkpoint's ``provenance.files``) hashing those not
    on this machine: what two runs name, compared by content wherever the runs lay."""
    known = dict(files or {})
    value = portable_paths(value, run, known, relative_too=relative_too)

    def swap(v: Any) -> Any:
        if isinstance(v, dict):
            return {k: swap(x) for k, x in v.items()}
        if isinstance(v, list):
            return [swap(x) for x in v]
        return f"sha256:{known[v]}" if isinstance(v, str) and v in known else v
    return swap(value)


def named_path(value: str, checkpoint: str | Path | None) -> str:
    """A path a checkpoint names (relative to its run folder, where ``vlnverse train`` writes it)
    as found from here: beside the ``checkpoint`` file when it is there, else as written."""
    if checkpoint is None or os.path.isabs(value):
        return value
    beside = os.path.normpath(Path(checkpoint).parent / value)
    return beside if os.path.exists(beside) else value


def _run_folder(data: dict[str, Any], path: str | Path) -> Path:
    """The training run's folder: the config's absolute ``out`` (a checkpoint written before paths
    were made relative), else the folder the checkpoint is written to."""
    out = (data.get("config") or {}).get("out")
    return Path(out) if isinstance(out, str) and os.path.isabs(out) else Path(path).absolute().parent


def write_checkpoint_dict(path: str | Path, data: dict[str, Any], *, run: str | Path | None = None) -> Path:
    """Write a checkpoint dict (``checkpoint_dict``, or one converted from an old file) atomically,
    its paths relative to ``run`` (the training run's folder, whose config paths are read from the
    working folder; default ``_run_folder``) with their files' sha256 in ``provenance.files``."""
    data = {k: v for k, v in data.items() if k != "tensors_sha256"}  # that of a file read: the new file records its own
    files = dict((data.get("provenance") or {}).get("files") or {})
    data = portable_paths(data, run if run is not None else _run_folder(data, path), files, relative_too=run is not None)
    if files:
        data["provenance"] = {**(data.get("provenance") or {}), "files": dict(sorted(files.items()))}
    return write_tensor_file(path, {**data, "format": FORMAT, "format_version": FORMAT_VERSION},
                             fmt=FORMAT, version=FORMAT_VERSION)


def save_checkpoint(path: str | Path, policy: Any, *, config: dict[str, Any], extra: dict[str, Any] | None = None,
                    run: str | Path | None = None) -> Path:
    """Write ``policy`` (a ``VLNPolicy``) and its metadata to ``path`` (paths relative to ``run``,
    the training run's folder: ``write_checkpoint_dict``)."""
    return write_checkpoint_dict(path, checkpoint_dict(policy, config=config, extra=extra), run=run)


def shipped_checkpoints() -> dict[str, Path]:
    """The checkpoints shipped beside their training recipes: ``tasks/train/<name>.pt`` by name."""
    from ..paths import tasks_dir

    return {p.stem: p for p in sorted((tasks_dir() / "train").glob("*.pt"))}


def resolve_checkpoint(checkpoint: str | Path) -> Path:
    """A checkpoint path as given, or the name of a shipped checkpoint (``cma_fine_grained``)."""
    path = Path(checkpoint)
    if path.exists() or path.suffix or len(path.parts) > 1:
        return path
    shipped = shipped_checkpoints()
    if str(checkpoint) in shipped:
        return shipped[str(checkpoint)]
    raise ConfigError(f"no file or shipped checkpoint '{checkpoint}'", field="agent.params.checkpoint",
                      expected=f"a checkpoint file or one of the shipped {sorted(shipped)}")


def read_checkpoint(path: str | Path, *, expected_policy: str | None = None) -> dict[str, Any]:
    """A checkpoint's dict (plus ``tensors_sha256``); a missing, pickled, corrupt, tampered or
    newer-format file, or one of another policy type, is a one-line ``ConfigError``."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError("checkpoint not found", file=path, field="checkpoint", expected="a file written by vlnverse train")
    data, meta = read_tensor_file(path, fmt=FORMAT, version=FORMAT_VERSION, field="checkpoint", what="policy checkpoint")
    data["tensors_sha256"] = meta.get("tensors_sha256")
    if not isinstance(data.get("state_dict"), dict) or not isinstance(data.get("policy"), str):
        raise ConfigError("not a vlnverse policy checkpoint (no policy or weights)", file=path, field="checkpoint")
    if expected_policy is not None and data["policy"] != expected_policy:
        raise ConfigError(f"checkpoint holds a '{data['policy']}' policy", file=path, field="policy.name",
                          expected=f"'{expected_policy}' (the config's policy), or a {data['policy']} config")
    return data


def policy_from_checkpoint(data: dict[str, Any], *, path: Any = None, device: Any = "cpu") -> Any:
    """Rebuild the policy of a checkpoint dict and load its weights (weights files of the config
    are not needed: the checkpoint holds every parameter)."""
    from .policies import POLICIES, build_policy

    name = data["policy"]
    if name not in POLICIES:
        plugins = (data.get("config") or {}).get("plugins") or []
        raise ConfigError(f"checkpoint holds a '{name}' policy, which no loaded module registers", file=path,
                          field="plugins", expected=f"plugins={plugins} (the plug-in the policy was trained with)"
                          if plugins else f"one of {POLICIES.names()}, or the plug-in that registers '{name}'")
    params = POLICIES.get(name).params_from_checkpoint(dict(data["policy_params"]), data, path)
    policy = build_policy(data["policy"], params, Vocabulary.from_dict(data["vocab"]), data["sensors"])
    try:
        policy.load_state_dict(data["state_dict"])
    except RuntimeError as exc:
        raise ConfigError(f"weights do not fit the policy: {str(exc).splitlines()[0]}", file=path, field="state_dict") from None
    policy.max_instruction_length = int(data["config"].get("max_instruction_length", 80))
    return policy.to(device)


#: what a checkpoint needs for resuming only (dropped by ``export_checkpoint``; ``raw_state``: the
#: trained weights behind ``il.ema``'s average, which is the ``state_dict`` a user evaluates)
RESUME_ONLY = ("optimizer", "position", "global_step", "best", "raw_state")


def training_language(data: dict[str, Any]) -> str:
    """The instruction language of a checkpoint's training episodes (its config's ``language``;
    checkpoints from before the field were trained on ``v1``)."""
    return (data.get("config") or {}).get("language", "v1")


def export_checkpoint(src: str | Path, dst: str | Path, *, recipe: str | Path | None = None) -> dict[str, Any]:
    """Write ``src`` without its resume-only entries (``RESUME_ONLY``: the optimizer state is
    about as large as the weights): the file a user evaluates or ships. Checked by loading the
    policy; returns the sizes. With ``recipe`` (a training config, path or name) the checkpoint
    must be that recipe's model (``as_recipe``); its config then names files as the recipe does."""
    data = read_checkpoint(src)
    policy_from_checkpoint(data, path=src)  # the weights fit their policy
    slim = {k: v for k, v in data.items() if k not in RESUME_ONLY}
    exported = {"tensors_sha256": data.get("tensors_sha256"), **{k: data[k] for k in ("best", "position") if k in data}}
    if recipe is not None:
        slim, exported["recipe"] = as_recipe(slim, recipe, path=src)
    slim["provenance"] = {**(data.get("provenance") or {}), "exported_from": exported}
    write_checkpoint_dict(dst, slim)
    policy_from_checkpoint(read_checkpoint(dst), path=dst)  # the written file loads as it is
    return {"src": str(src), "dst": str(dst), "src_bytes": Path(src).stat().st_size, "dst_bytes": Path(dst).stat().st_size}


#: values a recipe gives for a file made or found at training time (the weights hold what it gave)
RECIPE_FILE_VALUES = ("auto",)


def as_recipe(data: dict[str, Any], recipe: str | Path, *, path: Any = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """``data`` (a checkpoint dict) with the model part of its config (``TrainConfig.model_key``:
    policy, sensor rig, instruction length) replaced by that of training config ``recipe``, and
    what was replaced: ``{"name", "replaced": {field: value as trained}}``. They may differ only
    where the recipe names a file made at training time (``RECIPE_FILE_VALUES``, e.g. a waypoint
    predictor ``auto`` that the run resolved to a cache path); any other difference is a
    ``ConfigError`` naming the field, the recipe's value and the checkpoint's; so is a checkpoint
    trained on another instruction language than the recipe's (``language``, default v1)."""
    from ..core.io import to_jsonable
    from .config import load_train_config, resolve_train_config_path

    recipe_path = resolve_train_config_path(str(recipe))
    recipe_config = load_train_config(recipe_path)
    want = to_jsonable(recipe_config.model_key())
    have = {k: (data.get("config") or {}).get(k) for k in want}
    replaced: dict[str, Any] = {}

    def walk(a: Any, b: Any, field: str) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            for key in sorted(set(a) | set(b)):
                walk(a.get(key), b.get(key), f"{field}.{key}" if field else key)
        elif a != b:
            if a in RECIPE_FILE_VALUES and isinstance(b, str):
                replaced[field] = b
            else:
                raise ConfigError(f"the checkpoint is not the model of recipe {recipe_path}: {field} is {b!r} "
                                  f"there", file=path, field=field, expected=repr(a))
    walk(want, have, "")
    trained_in = training_language(data)
    if trained_in != recipe_config.language:
        raise ConfigError(f"the checkpoint was trained on instruction language {trained_in!r}, recipe {recipe_path} "
                          f"words its episodes in {recipe_config.language!r}", file=path, field="language",
                          expected=repr(recipe_config.language))
    out = {**data, "config": {**data["config"], **want}}
    if "policy" in want:
        out["policy_params"] = dict(want["policy"].get("params") or {})
    return out, {"name": Path(recipe_path).stem, "replaced": replaced}


def swap_predictor(src: str | Path, predictor: str | Path, dst: str | Path) -> dict[str, Any]:
    """Write ``src`` (a waypoint policy's checkpoint: VLN-BERT, HNR, GAMA) with its frozen waypoint
    predictor replaced by ``predictor`` (a ``vlnverse waypoints train`` file, e.g. one fitted on another
    body's panoramas); the navigator's weights are kept, the resume state dropped. Checked by loading
    the policy; a checkpoint without a predictor, or a predictor whose features do not fit the
    navigator, is a one-line ``ConfigError``."""
    from .waypoints.model import predictor_from_dict, read_predictor

    data = read_checkpoint(src)
    if not isinstance(data.get("waypoint_predictor"), dict) or not any(k.startswith("predictor.") for k in data["state_dict"]):
        raise ConfigError(f"a '{data['policy']}' checkpoint holds no waypoint predictor", file=src, field="waypoint_predictor",
                          expected="a checkpoint of a waypoint policy (vlnbert, hnr, gama)")
    model = predictor_from_dict(read_predictor(predictor), file=predictor)
    before = dict(data["waypoint_predictor"].get("params") or {})
    state = {k: v for k, v in data["state_dict"].items() if not k.startswith("predictor.")}
    state.update({f"predictor.{k}": v for k, v in model.state_dict().items()})
    named = os.path.abspath(predictor)  # recorded relative to dst's folder, with its sha256
    params = {**(data["config"].get("policy") or {}).get("params", {}), "waypoint_predictor": named}
    out = {k: v for k, v in data.items() if k not in RESUME_ONLY}
    out.update(state_dict=state, policy_params=params, waypoint_predictor={"params": dict(model.params), "source": named},
               config={**data["config"], "policy": {**data["config"]["policy"], "params": params}},
               provenance={**(data.get("provenance") or {}), "predictor_swapped": {
                   "from_tensors_sha256": data.get("tensors_sha256"), "predictor": named}})
    try:
        policy_from_checkpoint(out, path=predictor)
    except ConfigError as exc:
        raise ConfigError(f"the predictor does not fit the navigator of {src}: {exc}", file=predictor,
                          field="waypoint_predictor", expected=f"a predictor with the features of {src}'s") from None
    write_checkpoint_dict(dst, out)
    changed = sorted(k for k in model.params if model.params[k] != before.get(k))
    return {"src": str(src), "predictor": str(predictor), "dst": str(dst), "changed_predictor_params": changed}


def resolve_device(name: str) -> "torch.device":
    """``auto`` → cuda when available else cpu; ``cuda`` without a GPU is a ``ConfigError``."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError("CUDA is not available on this machine", field="device", expected="auto or cpu")
    return torch.device(name)


def device_info(device: Any) -> dict[str, Any]:
    """What a run's results record of the device it ran on: ``device`` (cpu / cuda:N), ``name``
    (the GPU's, or the CPU's), the torch and CUDA versions (CUDA None without a GPU), torch's CPU
    threads, and ``cpu`` (model name) with ``cpu_capability`` (the vector kernels torch dispatches
    to, e.g. AVX2 or AVX512): CPU training is exact on one machine, not across these."""
    device = torch.device(device)
    cuda = device.type == "cuda"
    cpu = cpu_name()
    return {"device": str(device), "name": torch.cuda.get_device_name(device) if cuda else cpu,
            "torch": torch.__version__, "cuda": torch.version.cuda if cuda else None,
            "torch_threads": torch.get_num_threads(), "cpu": cpu,
            "cpu_capability": torch.backends.cpu.get_cpu_capability()}


def cpu_name() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux), else the platform's processor or machine."""
    import platform

    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").splitlines():
            if line.lower().startswith("model name") and ":" in line:
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def convert_legacy(old: str | Path, new: str | Path, *, trust: bool, warn: Any = print) -> dict[str, Any]:
    """Convert a ``torch.save`` pickle of an earlier vlnverse (policy checkpoint, waypoint
    predictor, or a plain state dict of encoder weights) to a safetensors file. Unpickling can run
    whatever code the old file holds, so this refuses to run without ``trust``; with it, torch's
    restricted unpickler (``weights_only=True``) is tried first and only a file it refuses is fully
    unpickled, after a warning line to ``warn``. Returns what was written (``kind``, ``path``, ``tensors_sha256``)."""
    from .tensorfile import sniff

    old, new = Path(old), Path(new)
    if not old.is_file():
        raise ConfigError("file not found", file=old, field="OLD")
    kind = sniff(old)
    if kind not in ("torch-zip", "pickle"):
        raise ConfigError(f"not a pickle file ({kind}): nothing to convert", file=old, field="OLD",
                          expected="a torch.save file of an earlier vlnverse")
    if not trust:
        raise ConfigError("converting unpickles the file, which runs any code it holds: only for a file you trust",
                          file=old, field="--trust", expected="--trust to convert a file from a source you trust")
    try:  # torch's restricted unpickler first: tensors and plain containers, no code runs
        data = torch.load(old, map_location="cpu", weights_only=True)
    except Exception:  # noqa: BLE001 - anything the restricted unpickler refuses
        warn(f"warning: unpickling {old}: this runs any code the file holds (--trust given)")
        try:
            data = torch.load(old, map_location="cpu", weights_only=False)
        except Exception as exc:  # noqa: BLE001 - any unpickling failure
            raise ConfigError(f"not a readable torch file ({type(exc).__name__})", file=old, field="OLD") from None
    try:
        return _write_converted(data, old, new)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"cannot be converted: {exc}", file=old, field="OLD") from None


def _write_converted(data: Any, old: Path, new: Path) -> dict[str, Any]:
    from .tensorfile import STATE_DICT_FORMAT, STATE_DICT_VERSION, file_info, load_state_dict_file, write_tensor_file
    from .waypoints import FORMAT as WP_FORMAT, FORMAT_VERSION as WP_VERSION, read_predictor

    fmt = data.get("format") if isinstance(data, dict) else None
    if fmt == FORMAT:
        write_checkpoint_dict(new, data)
        read_checkpoint(new)
        out = {"kind": "policy checkpoint"}
    elif fmt == WP_FORMAT:
        write_tensor_file(new, {k: v for k, v in data.items() if k not in ("format", "format_version")},
                          fmt=WP_FORMAT, version=WP_VERSION)
        read_predictor(new)
        out = {"kind": "waypoint predictor"}
    elif isinstance(data, dict) and data and all(isinstance(k, str) and torch.is_tensor(v) for k, v in data.items()):
        write_tensor_file(new, dict(data), fmt=STATE_DICT_FORMAT, version=STATE_DICT_VERSION)
        load_state_dict_file(new, field="NEW")
        out = {"kind": "state dict"}
    else:
        raise ConfigError("holds neither a vlnverse checkpoint, a waypoint predictor nor a state dict of tensors",
                          file=old, field="OLD")
    return {"path": str(new), **out, "tensors_sha256": file_info(new)["tensors_sha256"]}
