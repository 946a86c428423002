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
from typing import Any, Callable, TypeVar

import yaml

from .errors import ConfigError

C = TypeVar("C")


#: Limits on what a config file may hold (documented in docs/reliability.md): YAML aliases per
#: document, values after expanding every alias, and the file's size.
MAX_YAML_ALIASES = 100
MAX_YAML_VALUES = 100_000
MAX_CONFIG_BYTES = 1_000_000


class LimitedSafeLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that refuses more than ``MAX_YAML_ALIASES`` aliases (alias bombs)."""

    def compose_node(self, parent, index):  # noqa: D102 - PyYAML hook
        if self.check_event(yaml.AliasEvent):
            self.alias_count = getattr(self, "alias_count", 0) + 1
            if self.alias_count > MAX_YAML_ALIASES:
                mark = self.peek_event().start_mark
                raise yaml.constructor.ConstructorError(None, None, f"more than {MAX_YAML_ALIASES} aliases", mark)
        return super().compose_node(parent, index)


def _expanded_size(value: Any, limit: int) -> int:
    """Number of values in ``value`` with every shared (aliased) part counted each time it is
    used, stopping past ``limit``."""
    memo: dict[int, int] = {}

    def size(v: Any) -> int:
        if isinstance(v, (dict, list, tuple)):
            if id(v) in memo:
                return memo[id(v)]
            items = list(v.keys()) + list(v.values()) if isinstance(v, dict) else v
            total = 1
            for item in items:
                total += size(item)
                if total > limit:
                    break
            memo[id(v)] = total
            return total
        return 1

    return size(value)


def safe_yaml(text: str, *, file: Any = None, field: str | None = None, line_numbers: bool = True) -> Any:
    """Parse YAML ``text`` with ``LimitedSafeLoader``; alias bombs, oversized documents and
    syntax errors raise a one-line ``ConfigError`` naming ``file`` (and the line)."""
    if len(text) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{len(text)} characters", file=file, field=field,
                          expected=f"at most {MAX_CONFIG_BYTES} characters")
    try:
        data = yaml.load(text, Loader=LimitedSafeLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None and file is not None and line_numbers else None
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise ConfigError(f"malformed YAML: {short(problem, 120)}", file=file, field=field, line=line) from None
    except RecursionError:
        raise ConfigError("malformed YAML: nested too deeply", file=file, field=field) from None
    if _expanded_size(data, MAX_YAML_VALUES) > MAX_YAML_VALUES:
        raise ConfigError(f"expands to more than {MAX_YAML_VALUES} values (aliases)", file=file, field=field,
                          expected="a plain config")
    return data


def short(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters (never expanding a huge or shared value whole):
    what error messages quote of a bad value."""
    import reprlib

    r = reprlib.Repr()
    r.maxlevel, r.maxdict, r.maxlist, r.maxtuple, r.maxset = 2, 4, 4, 4, 4
    r.maxstring, r.maxlong, r.maxother = limit, limit, limit
    text = value if isinstance(value, str) and not value else r.repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def load_json(path: str | Path, *, expected: str) -> Any:
    """The JSON value in file ``path``; a ``ConfigError`` naming the file (and the line of a syntax
    error) when it is missing, malformed or not UTF-8 (``expected`` says what it should be)."""
    import json

    path = Path(path)
    if not path.is_file():
        raise ConfigError("file not found", file=path, expected=expected)
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"malformed JSON: {exc.msg}", file=path, line=exc.lineno) from None
    except UnicodeDecodeError:
        raise ConfigError("not UTF-8 text", file=path, expected=expected) from None


def load_yaml(path: str | Path) -> Any:
    """Read a YAML file; a missing file, a folder, bad bytes or a syntax error raises
    ``ConfigError`` with the file (and line)."""
    path = Path(path)
    if path.is_dir():
        raise ConfigError("is a folder", file=path, expected="a YAML file")
    if not path.is_file():
        raise ConfigError("file not found", file=path)
    if path.stat().st_size > MAX_CONFIG_BYTES:
        raise ConfigError(f"{path.stat().st_size} bytes", file=path, expected=f"at most {MAX_CONFIG_BYTES} bytes")
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"not UTF-8 text (byte {exc.start})", file=path, expected="a UTF-8 YAML file") from None
    return safe_yaml(text, file=path)


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
            raise ConfigError(f"got {short(value)}", file=file, field=field, expected="a list")
        inner = args[0] if args else Any
        items = [_convert(v, inner, file=file, field=f"{field}[{i}]") for i, v in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"got {short(value)}", file=file, field=field, expected="a mapping")
        return dict(value)
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"got {short(value)}", file=file, field=field, expected="a number")
        return float(value)
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"got {short(value)}", file=file, field=field, expected="an integer")
        return value
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"got {short(value)}", file=file, field=field, expected="true or false")
        return value
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"got {short(value)}", file=file, field=field, expected="a string")
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


def load_config(cls: type[C], path: str | Path, overrides: dict | None = None, *,
                defaults: Callable[[dict], None] | None = None) -> C:
    """Load YAML file ``path`` into dataclass ``cls`` (with optional dotted-key overrides);
    ``defaults(data)`` may fill fields the file and overrides left unset (defaults that depend on
    other fields) before the dataclass is built."""
    data = load_yaml(path) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"got {type(data).__name__}", file=path, expected="a mapping of fields")
    for key, value in (overrides or {}).items():
        set_dotted(data, key, value, file=path)
    if defaults is not None:
        defaults(data)
    return from_dict(cls, data, file=path)


def set_dotted(data: dict, key: str, value: Any, *, file: Any = None) -> None:
    """Set ``data['a']['b'] = value`` for ``key == 'a.b'``, creating mappings as needed; a numeric
    part indexes a list (``sensors.0.width``). Stepping into a value that is neither raises a
    ``ConfigError`` naming the dotted key."""
    parts = key.split(".")
    if not all(parts):
        raise ConfigError("empty part in the dotted key", file=file, field=key, expected="key.sub=value")
    node: Any = data
    for depth, part in enumerate(parts):
        last = depth == len(parts) - 1
        where = ".".join(parts[:depth]) or "the config"
        if isinstance(node, dict):
            if last:
                node[part] = value
            else:
                if node.get(part) is None:
                    node[part] = {}
                node = node[part]
        elif isinstance(node, list):
            if not part.isdigit() or int(part) >= len(node):
                raise ConfigError(f"'{where}' is a list of {len(node)}", file=file, field=key,
                                  expected=f"an index 0..{len(node) - 1} after '{where}.'")
            if last:
                node[int(part)] = value
            else:
                node = node[int(part)]
        else:
            raise ConfigError(f"'{where}' is {short(node)}, not a mapping or list", file=file, field=key,
                              expected="a dotted key into mappings or list indices")


def parse_overrides(items: list[str], *, file: Any = None) -> dict[str, Any]:
    """Parse CLI overrides ``key.sub=value`` (values parsed as YAML, with the config limits) of
    the config ``file`` (named in errors)."""
    out: dict[str, Any] = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"override {short(item)} has no '='", file=file, expected="key=value")
        key, raw = item.split("=", 1)
        key = key.strip()
        if not key:
            raise ConfigError(f"override {short(item)} has no key", file=file, expected="key=value")
        out[key] = safe_yaml(raw, file=file, field=key, line_numbers=False)  # the value is not in the file
    return out


def check_seed(seed: Any, field: str = "--seed", *, file: Any = None) -> int:
    """``seed`` if it is an integer in ``0..2**63-1`` (what numpy's ``SeedSequence`` takes), else a
    ``ConfigError`` naming ``field``."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed < 2 ** 63:
        raise ConfigError(f"got {short(seed)}", file=file, field=field, expected="an integer in 0..2**63-1")
    return seed


def require(condition: bool, field: str, problem: str, expected: Any = None) -> None:
    """Raise ``ConfigError(problem, field=field, expected=expected)`` unless ``condition``."""
    if not condition:
        raise ConfigError(problem, field=field, expected=expected)
