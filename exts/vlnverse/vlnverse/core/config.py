"""Declarative configs: dataclasses loaded from YAML and validated on load.

``load_config(MyConfig, "file.yaml")`` reads YAML (a syntax error names the line), rejects
unknown keys, converts nested dataclasses, and calls the config's ``validate()`` so every
error names the file and the dotted field.
"""
from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

import yaml

from .errors import ConfigError

C = TypeVar("C")


def load_yaml(path: str | Path) -> Any:
    """Read a YAML file; a missing file or a syntax error raises ``ConfigError`` with the line."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError("file not found", file=path)
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError(f"malformed YAML: {problem}", file=path, line=line) from None


def _convert(value: Any, hint: Any, *, file: Any, field: str) -> Any:
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        last: ConfigError | None = None
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _convert(value, arg, file=file, field=field)
            except ConfigError as exc:
                last = exc
        raise last or ConfigError("invalid value", file=file, field=field)
    if dataclasses.is_dataclass(hint):
        if isinstance(value, hint):
            return value
        if not isinstance(value, dict):
            raise ConfigError(f"got {type(value).__name__}", file=file, field=field, expected="a mapping")
        return from_dict(hint, value, file=file, prefix=field)
    if origin in (list, tuple):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"got {value!r}", file=file, field=field, expected="a list")
        inner = args[0] if args else Any
        items = [_convert(v, inner, file=file, field=f"{field}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"got {value!r}", file=file, field=field, expected="a mapping")
        return dict(value)
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"got {value!r}", file=file, field=field, expected="a number")
        return float(value)
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"got {value!r}", file=file, field=field, expected="an integer")
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"got {value!r}", file=file, field=field, expected="true or false")
        return value
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"got {value!r}", file=file, field=field, expected="a string")
        return value
    return value


def from_dict(cls: type[C], data: dict, *, file: Any = None, prefix: str = "") -> C:
    """Build dataclass ``cls`` from ``data``; unknown keys, wrong types and ``validate()`` failures
    raise ``ConfigError`` naming ``file`` and the dotted field."""
    if not isinstance(data, dict):
        raise ConfigError(f"got {type(data).__name__}", file=file, field=prefix or None, expected="a mapping")
    hints = typing.get_type_hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ConfigError(f"unknown field(s) {unknown}", file=file, field=prefix or None,
                          expected=f"one of {sorted(fields)}")
    kwargs = {}
    for name, value in data.items():
        dotted = f"{prefix}.{name}" if prefix else name
        kwargs[name] = _convert(value, hints[name], file=file, field=dotted)
    missing = [n for n, f in fields.items() if n not in kwargs and f.default is dataclasses.MISSING
               and f.default_factory is dataclasses.MISSING]
    if missing:
        raise ConfigError(f"missing required field(s) {missing}", file=file, field=prefix or None)
    obj = cls(**kwargs)
    validate(obj, file=file, prefix=prefix)
    return obj


def validate(obj: Any, *, file: Any = None, prefix: str = "") -> None:
    """Call ``obj.validate()`` and re-raise its ``ConfigError`` with the file and field prefix."""
    check = getattr(obj, "validate", None)
    if check is None:
        return
    try:
        check()
    except ConfigError as exc:
        field = ".".join(p for p in (prefix, exc.field) if p) or None
        raise ConfigError(exc.problem, file=exc.file or file, field=field, expected=exc.expected,
                          line=exc.line) from None


def load_config(cls: type[C], path: str | Path, overrides: dict | None = None) -> C:
    """Load YAML file ``path`` into dataclass ``cls`` (with optional dotted-key overrides)."""
    data = load_yaml(path) or {}
    for key, value in (overrides or {}).items():
        set_dotted(data, key, value)
    return from_dict(cls, data, file=path)


def set_dotted(data: dict, key: str, value: Any) -> None:
    """Set ``data['a']['b'] = value`` for ``key == 'a.b'``, creating mappings as needed."""
    parts = key.split(".")
    node = data
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """Parse CLI overrides ``key.sub=value`` (values parsed as YAML scalars)."""
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"override '{item}' has no '='", expected="key=value")
        key, raw = item.split("=", 1)
        out[key.strip()] = yaml.safe_load(raw)
    return out


def require(condition: bool, field: str, problem: str, expected: Any = None) -> None:
    """Raise ``ConfigError(problem, field=field, expected=expected)`` unless ``condition``."""
    if not condition:
        raise ConfigError(problem, field=field, expected=expected)
