"""Tensor files that load without running code: policy checkpoints, waypoint predictors, encoder weights.

A file is a `safetensors <https://github.com/huggingface/safetensors>`_ file: an 8-byte header
length, a JSON header (each tensor's dtype, shape and byte range; ``__metadata__``), then raw
tensor bytes. Reading it parses JSON and copies bytes; nothing in the file is executed. A vlnverse
file keeps its metadata as one JSON document under the header's ``__metadata__["vlnverse"]``:
``format`` (what the file holds), ``format_version``, ``tensors_sha256`` (see ``tensors_digest``)
and ``tree``: the saved nested dict with each tensor replaced by ``{"__tensor__": NAME}`` (dicts
with non-string keys, e.g. an optimizer's state, as ``{"__items__": [[key, value], ...]}``).

Older vlnverse versions wrote ``torch.save`` pickles; ``sniff`` recognises them by their first
bytes and zip member names, without unpickling, and readers refuse them with a hint to
``vlnverse checkpoint convert OLD NEW --trust``. Only that command (with ``--trust``) unpickles.
This module imports torch only inside the functions that build tensors.
"""
from __future__ import annotations

import hashlib
import json
import struct
import zipfile
from pathlib import Path
from typing import Any

from ..core.errors import ConfigError
from ..core.io import atomic_path

META_KEY = "vlnverse"
#: the sentence every refusal of a pickle file ends with
CONVERT_HINT = "convert a file you trust with 'vlnverse checkpoint convert OLD NEW --trust'"
_MAX_HEADER = 100_000_000


def sniff(path: str | Path) -> str:
    """What ``path`` is, from its first bytes (and zip member names) only: ``safetensors``,
    ``torch-zip`` (``torch.save``'s zip with a ``data.pkl``), ``pickle`` (a raw pickle, e.g. the
    legacy ``torch.save`` format), ``zip`` (another zip) or ``unknown``. Nothing is unpickled."""
    path = Path(path)
    with open(path, "rb") as fh:
        head = fh.read(9)
    if head[:4] == b"PK\x03\x04":
        try:
            with zipfile.ZipFile(path) as zf:  # reads the central directory only
                names = zf.namelist()
        except (zipfile.BadZipFile, OSError):
            return "torch-zip"  # a damaged zip of that shape is still not something to unpickle
        return "torch-zip" if any(n == "data.pkl" or n.endswith("/data.pkl") for n in names) else "zip"
    if len(head) >= 2 and head[0] == 0x80 and 2 <= head[1] <= 5:
        return "pickle"
    if len(head) == 9 and head[8:9] == b"{":
        return "safetensors"
    return "unknown"


def read_header(path: str | Path, *, field: str, what: str) -> tuple[dict[str, Any], dict[str, Any] | None, int]:
    """The tensor table (name → dtype, shape, data_offsets), the vlnverse metadata (None when the
    file has none: a plain safetensors file) and the data section's offset, without reading tensor
    bytes. A pickle, a non-safetensors or a truncated file is a one-line ``ConfigError``."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{what} not found", file=path, field=field)
    kind = sniff(path)
    if kind in ("torch-zip", "pickle"):
        raise ConfigError(f"a pickle file (torch.save, as earlier vlnverse versions wrote): not loaded, since "
                          f"unpickling can run code; {CONVERT_HINT}", file=path, field=field)
    if kind != "safetensors":
        raise ConfigError(f"not a readable {what} (not a safetensors file)", file=path, field=field,
                          expected=f"a {what} written by vlnverse")
    size = path.stat().st_size
    with open(path, "rb") as fh:
        (n,) = struct.unpack("<Q", fh.read(8))
        if n > min(size - 8, _MAX_HEADER):
            raise ConfigError(f"not a readable {what} (truncated: its header needs {n} bytes, the file has {size - 8})",
                              file=path, field=field)
        raw = fh.read(n)
    try:
        header = json.loads(raw.decode("utf-8"))
        meta_text = (header.pop("__metadata__", None) or {}).get(META_KEY)
        meta = json.loads(meta_text) if meta_text is not None else None
    except (UnicodeDecodeError, ValueError, AttributeError) as exc:
        raise ConfigError(f"not a readable {what} (bad header: {type(exc).__name__})", file=path, field=field) from None
    if not isinstance(header, dict) or (meta is not None and not isinstance(meta, dict)):
        raise ConfigError(f"not a readable {what} (bad header)", file=path, field=field)
    end = max((int(t["data_offsets"][1]) for t in header.values()), default=0)
    if 8 + n + end > size:
        raise ConfigError(f"not a readable {what} (truncated: {size} bytes, its header describes {8 + n + end})",
                          file=path, field=field)
    return header, meta, 8 + n


def tensors_digest(header: dict[str, Any], data: bytes | memoryview) -> str:
    """sha256 over the tensors in name order: name, dtype, shape and raw bytes of each (the data
    section ``data`` addressed by ``header``); independent of the metadata and of the byte layout."""
    digest = hashlib.sha256()
    for name in sorted(header):
        t = header[name]
        begin, end = (int(x) for x in t["data_offsets"])
        digest.update(json.dumps([name, t["dtype"], list(t["shape"]), end - begin]).encode())
        digest.update(data[begin:end])
    return digest.hexdigest()


def check_format(meta: dict[str, Any] | None, *, path: Any, field: str, fmt: str, version: int, what: str) -> None:
    """Raise a ``ConfigError`` unless ``meta`` is the metadata of a ``fmt`` file this code reads
    (a newer ``format_version`` names both versions)."""
    if meta is None or meta.get("format") != fmt:
        holds = f" (it holds a {meta.get('format')})" if isinstance(meta, dict) and meta.get("format") else ""
        raise ConfigError(f"not a vlnverse {what}{holds}", file=path, field=field, expected=f"a {what} written by vlnverse")
    got = meta.get("format_version")
    if not isinstance(got, int) or got > version:
        raise ConfigError(f"{what} format version {got} is newer than this vlnverse reads ({version})", file=path,
                          field="format_version", expected=f"format version {version}, or a newer vlnverse")
    if got < version:
        raise ConfigError(f"{what} format version {got} is older than this vlnverse reads ({version})", file=path,
                          field="format_version", expected=f"format version {version}")


# -------------------------------------------------------------------------------------------- trees


def _json_leaf(x: Any) -> Any:
    from ..core.io import to_jsonable

    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    out = to_jsonable(x, decimals=None)
    if out is x or not isinstance(out, (bool, int, float, str, list, dict, type(None))):
        raise TypeError(f"cannot store a {type(x).__name__} in a tensor file's metadata")
    return out


def split_tensors(tree: Any) -> tuple[Any, dict[str, Any]]:
    """(JSON tree with tensor placeholders, {name: tensor}); a tensor's name is its path (``/``-joined keys)."""
    import torch

    tensors: dict[str, Any] = {}

    def enc(x: Any, path: str) -> Any:
        if isinstance(x, torch.Tensor):
            if path in tensors:
                raise ValueError(f"two tensors would be named {path!r}")
            tensors[path] = x.detach().cpu().contiguous().clone()  # own storage: safetensors refuses shared memory
            return {"__tensor__": path}
        sub = (lambda k: f"{path}/{k}" if path else str(k))
        if isinstance(x, dict):
            if all(isinstance(k, str) for k in x) and not {"__tensor__", "__items__"} & set(x):
                return {k: enc(v, sub(k)) for k, v in x.items()}
            return {"__items__": [[_json_leaf(k), enc(v, sub(k))] for k, v in x.items()]}
        if isinstance(x, (list, tuple)):
            return [enc(v, sub(i)) for i, v in enumerate(x)]
        return _json_leaf(x)

    return enc(tree, ""), tensors


def join_tensors(tree: Any, tensors: dict[str, Any]) -> Any:
    """The inverse of ``split_tensors`` (tuples come back as lists)."""
    if isinstance(tree, dict):
        if set(tree) == {"__tensor__"}:
            return tensors[tree["__tensor__"]]
        if set(tree) == {"__items__"}:
            return {k: join_tensors(v, tensors) for k, v in tree["__items__"]}
        return {k: join_tensors(v, tensors) for k, v in tree.items()}
    if isinstance(tree, list):
        return [join_tensors(v, tensors) for v in tree]
    return tree


# -------------------------------------------------------------------------------------------- write / read


def _safetensors() -> Any:
    try:
        import safetensors.torch
    except ModuleNotFoundError:
        raise ConfigError("reading and writing checkpoints needs the safetensors package", field="safetensors",
                          expected="pip install 'vlnverse[learn]'") from None
    return safetensors


def _serialize(tensors: dict[str, Any], meta: dict[str, Any] | None) -> bytes:
    save = _safetensors().torch.save

    return save(tensors, metadata={META_KEY: json.dumps(meta, sort_keys=True)} if meta is not None else None)


def _digest_of_bytes(blob: bytes) -> str:
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    header.pop("__metadata__", None)
    return tensors_digest(header, memoryview(blob)[8 + n:])


def write_tensor_file(path: str | Path, tree: dict[str, Any], *, fmt: str, version: int) -> Path:
    """Write ``tree`` (a dict whose leaves are JSON values or tensors) atomically as a ``fmt``
    file, with the tensors' sha256 in its metadata."""
    body, tensors = split_tensors(tree)
    meta = {"format": fmt, "format_version": version, "tree": body}
    meta["tensors_sha256"] = _digest_of_bytes(_serialize(tensors, None))
    blob = _serialize(tensors, meta)
    with atomic_path(path) as tmp:
        tmp.write_bytes(blob)
    return Path(path)


def _load_tensors(path: Path, blob: bytes, *, field: str, what: str) -> dict[str, Any]:
    st = _safetensors()
    SafetensorError, load = st.SafetensorError, st.torch.load

    try:
        return load(blob)
    except (SafetensorError, ValueError, TypeError) as exc:
        raise ConfigError(f"not a readable {what} ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__})",
                          file=path, field=field) from None


def read_tensor_file(path: str | Path, *, fmt: str, version: int, field: str, what: str
                     ) -> tuple[dict[str, Any], dict[str, Any]]:
    """(tree, metadata) of a ``fmt`` file: checks its format and version, then the tensors' sha256
    (a mismatch is a ``ConfigError``), then loads the tensors (torch, CPU) into the tree."""
    path = Path(path)
    header, meta, offset = read_header(path, field=field, what=what)
    check_format(meta, path=path, field=field, fmt=fmt, version=version, what=what)
    blob = path.read_bytes()
    check_digest(path, header, meta, memoryview(blob)[offset:], field=field, what=what, required=True)
    tensors = _load_tensors(path, blob, field=field, what=what)
    try:
        return join_tensors(meta["tree"], tensors), meta
    except (KeyError, TypeError, ValueError) as exc:
        raise ConfigError(f"not a readable {what} (its metadata names a missing tensor: {exc})", file=path,
                          field=field) from None


def check_digest(path: Path, header: dict, meta: dict | None, data: Any, *, field: str, what: str,
                 required: bool = False) -> None:
    """Raise a ``ConfigError`` when ``meta`` records a ``tensors_sha256`` that the tensors do not
    have, or (``required``) records none."""
    want = (meta or {}).get("tensors_sha256")
    if want is None:
        if required:
            raise ConfigError(f"{what} records no tensors_sha256", file=path, field=field,
                              expected=f"a {what} written by vlnverse")
        return
    got = tensors_digest(header, data)
    if got != want:
        raise ConfigError(f"{what} tensors fail their checksum: the file was altered or damaged "
                          f"(sha256 {got[:16]}..., its metadata says {str(want)[:16]}...)", file=path, field=field)


def load_state_dict_file(path: str | Path, *, field: str) -> dict[str, Any]:
    """Weights for one module (``rgb_encoder.weights`` etc.): a safetensors file of a state dict,
    plain (e.g. exported elsewhere) or written by ``vlnverse checkpoint convert`` (then checksummed).
    A pickle is refused with the convert hint."""
    path = Path(path)
    header, meta, offset = read_header(path, field=field, what="weights file")
    blob = path.read_bytes()
    check_digest(path, header, meta, memoryview(blob)[offset:], field=field, what="weights file")
    tensors = _load_tensors(path, blob, field=field, what="weights file")
    if meta is not None and meta.get("format") != STATE_DICT_FORMAT:
        raise ConfigError(f"holds a {meta.get('format')}, not a state dict", file=path, field=field,
                          expected="the weights of this module (a safetensors state dict)")
    return tensors


STATE_DICT_FORMAT = "vlnverse-state-dict"
STATE_DICT_VERSION = 1


# -------------------------------------------------------------------------------------------- info


def _shapes_numel(shape: list[int]) -> int:
    out = 1
    for d in shape:
        out *= int(d)
    return out


def file_info(path: str | Path) -> dict[str, Any]:
    """What ``vlnverse checkpoint info`` prints: the metadata (vocabulary as its size), the sensor
    rig, tensor counts / elements / bytes per top-level group, and whether the checksum holds.
    Reads JSON and hashes bytes; builds no model and imports no torch."""
    path = Path(path)
    header, meta, offset = read_header(path, field="checkpoint", what="tensor file")
    with open(path, "rb") as fh:
        fh.seek(offset)
        data = fh.read()
    groups: dict[str, dict[str, int]] = {}
    for name, t in header.items():
        g = groups.setdefault(name.split("/", 1)[0] if "/" in name else "(top level)",
                              {"tensors": 0, "elements": 0, "bytes": 0})
        g["tensors"] += 1
        g["elements"] += _shapes_numel(t["shape"])
        g["bytes"] += int(t["data_offsets"][1]) - int(t["data_offsets"][0])
    digest = tensors_digest(header, data)
    want = (meta or {}).get("tensors_sha256")
    info: dict[str, Any] = {
        "file": str(path), "bytes": path.stat().st_size,
        "format": (meta or {}).get("format", "safetensors without vlnverse metadata"),
        "format_version": (meta or {}).get("format_version"),
        "checksum": "absent" if want is None else ("ok" if want == digest else "MISMATCH"),
        "tensors_sha256": digest, **({"recorded_sha256": want} if want is not None and want != digest else {}),
        "tensors": len(header), "groups": dict(sorted(groups.items())),
    }
    tree = (meta or {}).get("tree")
    if isinstance(tree, dict):
        for key, value in tree.items():
            if key in ("format", "format_version") or isinstance(value, dict) and "__tensor__" in value:
                continue
            if key == "vocab" and isinstance(value, dict):
                info["vocabulary_size"] = len(value.get("words") or []) + 2  # with PAD and UNK
                continue
            if _holds_tensors(value):
                continue
            info[key] = value
    return info


def _holds_tensors(value: Any) -> bool:
    if isinstance(value, dict):
        return "__tensor__" in value or any(_holds_tensors(v) for v in value.values())
    if isinstance(value, list):
        return any(_holds_tensors(v) for v in value)
    return False


def format_info(info: dict[str, Any]) -> str:
    """``file_info`` as text: one ``key: value`` line per entry (the config by its main keys)."""
    lines = []
    for key, value in info.items():
        if key == "groups":
            for g, s in value.items():
                lines.append(f"tensors[{g}]: {s['tensors']} tensors, {s['elements']} elements, {s['bytes']} bytes")
        elif key == "sensors" and isinstance(value, list):
            rig = ", ".join(f"{s.get('name')} {s.get('kind')} {'x'.join(str(d) for d in s.get('shape', []))}"
                            for s in value if isinstance(s, dict))
            lines.append(f"sensors: [{rig}]")
        elif key == "config" and isinstance(value, dict):
            keep = {k: value[k] for k in ("task", "mode", "train", "init", "collision_mode", "seed", "out", "render") if k in value}
            lines.append(f"config: {json.dumps(keep, sort_keys=True)} (and {len(value) - len(keep)} more keys)")
        elif isinstance(value, (dict, list)):
            lines.append(f"{key}: {json.dumps(value, sort_keys=True)}")
        else:
            lines.append(f"{key}: {value}")
    return "\n".join(lines)
