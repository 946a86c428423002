"""Plug-in parameters: each plug-in kind (task type, collision mode, agent, model) declares a
``Params`` dataclass; a numeric field's allowed range is part of the field (``param(default,
low=..., high=...)``: metadata ``range``), so a plug-in defined anywhere brings its own limits.

``parse_params(Params, data, owner=...)`` turns a config's ``params`` mapping into a ``Params``
object: an unknown key, a wrong type, a value outside its range (or not finite) or a failed
``Params.validate()`` raises ``ConfigError`` naming the file and ``<prefix>.<key>``. It reads
nothing but ``data`` (no I/O); checks of the environment belong in a plug-in's ``preflight``.
"""
from __future__ import annotations

import dataclasses
import math
from typing import Any

from .config import from_dict
from .errors import ConfigError

#: the metadata key of a field's allowed (low, high) range
RANGE = "range"


def param(default: Any = dataclasses.MISSING, *, low: float = -math.inf, high: float = math.inf,
          **kwargs: Any) -> Any:
    """A ``Params`` field whose value must lie in ``[low, high]`` (and be finite)."""
    return dataclasses.field(default=default, metadata={RANGE: (low, high)}, **kwargs)


def param_range(f: dataclasses.Field) -> tuple[float, float]:
    """A field's allowed range (``(-inf, inf)`` when it declares none: then only finiteness is checked)."""
    return tuple(f.metadata.get(RANGE, (-math.inf, math.inf)))


def check_ranges(params: Any, *, file: Any = None, prefix: str = "params") -> None:
    """Every numeric field of the dataclass ``params`` finite and within its declared range."""
    for f in dataclasses.fields(params):
        value = getattr(params, f.name)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        lo, hi = param_range(f)
        if not (math.isfinite(value) and lo <= value <= hi):
            span = (f"in [{lo:g}, {hi:g}]" if math.isfinite(lo) and math.isfinite(hi) else f">= {lo:g}"
                    if math.isfinite(lo) else f"<= {hi:g}" if math.isfinite(hi) else "finite")
            raise ConfigError(f"got {value}", file=file, field=f"{prefix}.{f.name}" if prefix else f.name,
                              expected=f"a number {span}")


def parse_params(cls: type, data: dict | None, *, owner: str, file: Any = None, prefix: str = "params") -> Any:
    """``data`` as a checked ``cls`` (see the module); ``owner`` names the plug-in in errors."""
    data = dict(data or {})
    known = {f.name for f in dataclasses.fields(cls) if f.init}
    for key in data:
        if key not in known:
            raise ConfigError(f"unknown field(s) ['{key}'] for {owner}", file=file, field=f"{prefix}.{key}",
                              expected=f"one of {sorted(known)}" if known else "no parameters")
    parsed = from_dict(cls, data, file=file, prefix=prefix)
    check_ranges(parsed, file=file, prefix=prefix)
    return parsed
