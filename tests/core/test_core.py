"""Core building blocks: configs validated on load, registries, atomic writes, body presets."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from vlnverse.core.config import from_dict, load_config, load_yaml, parse_overrides, require
from vlnverse.core.errors import ConfigError, UnknownNameError
from vlnverse.core.io import atomic_dir, atomic_path, write_json_atomic
from vlnverse.core.registry import Registry
from vlnverse.sim.body import AgentBody, list_bodies, load_body


@dataclasses.dataclass
class Inner:
    size: float = 1.0

    def validate(self) -> None:
        require(self.size > 0, "size", f"got {self.size}", "a positive number")


@dataclasses.dataclass
class Outer:
    name: str
    inner: Inner = dataclasses.field(default_factory=Inner)
    tags: list[str] = dataclasses.field(default_factory=list)
    seed: int | None = None


def test_malformed_yaml_names_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: ok\ninner:\n  size: [1, 2\n")
    with pytest.raises(ConfigError) as err:
        load_yaml(bad)
    assert str(bad) in str(err.value)
    assert err.value.line is not None and err.value.line >= 3


def test_nested_validation_names_file_and_dotted_field(tmp_path: Path) -> None:
    path = tmp_path / "cfg.yaml"
    path.write_text("name: a\ninner:\n  size: -2\n")
    with pytest.raises(ConfigError) as err:
        load_config(Outer, path)
    msg = str(err.value)
    assert str(path) in msg and "inner.size" in msg and "positive" in msg


def test_unknown_and_mistyped_fields_are_rejected() -> None:
    with pytest.raises(ConfigError, match="unknown field"):
        from_dict(Outer, {"name": "a", "colour": 1})
    with pytest.raises(ConfigError, match="tags"):
        from_dict(Outer, {"name": "a", "tags": "notalist"})
    with pytest.raises(ConfigError, match="missing required"):
        from_dict(Outer, {})
    cfg = from_dict(Outer, {"name": "a", "inner": {"size": 3}, "seed": None})
    assert cfg.inner.size == 3.0 and isinstance(cfg.inner.size, float) and cfg.seed is None


def test_overrides_parse_as_yaml_scalars(tmp_path: Path) -> None:
    path = tmp_path / "cfg.yaml"
    path.write_text("name: a\n")
    cfg = load_config(Outer, path, parse_overrides(["inner.size=0.5", "seed=7"]))
    assert cfg.inner.size == 0.5 and cfg.seed == 7
    with pytest.raises(ConfigError):
        parse_overrides(["novalue"])


def test_registry_decorator_returns_class_and_lists_names() -> None:
    reg: Registry[type] = Registry("agent")

    @reg.register("b")
    class B:
        pass

    @reg.register("a")
    class A:
        pass

    assert B.__name__ == "B" and reg.get("b") is B and reg.names() == ["a", "b"]
    with pytest.raises(UnknownNameError) as err:
        reg.get("c")
    assert "registered: a, b" in str(err.value)
    with pytest.raises(ValueError):
        reg.register("a")(B)


def test_atomic_path_leaves_nothing_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "out.json"
    with pytest.raises(RuntimeError):
        with atomic_path(target) as tmp:
            tmp.write_text("half")
            raise RuntimeError("boom")
    assert list(tmp_path.iterdir()) == []
    write_json_atomic(target, {"b": 1, "a": float("nan")})
    assert target.read_text() == '{\n  "a": null,\n  "b": 1\n}\n'


def test_atomic_dir_replaces_only_on_success(tmp_path: Path) -> None:
    out = tmp_path / "data"
    with atomic_dir(out) as tmp:
        (tmp / "x.txt").write_text("1")
    assert (out / "x.txt").read_text() == "1"
    with pytest.raises(KeyboardInterrupt):
        with atomic_dir(out) as tmp:
            (tmp / "y.txt").write_text("2")
            raise KeyboardInterrupt
    assert sorted(p.name for p in out.iterdir()) == ["x.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["data"]


def test_atomic_dir_keeps_a_folder_another_process_finished_meanwhile(tmp_path: Path, monkeypatch) -> None:
    """With ``keep``, a complete folder that appeared while the block ran stays (a reader of it keeps
    its files) and the block's copy is dropped; an incomplete one is replaced; a folder moved into
    place between the check and the rename (``os.replace`` refuses a non-empty target) is kept."""
    import os

    out = tmp_path / "data"
    complete = lambda p: (p / "done.json").is_file()  # noqa: E731
    with atomic_dir(out, keep=complete) as tmp:
        (tmp / "mine.txt").write_text("mine")
        out.mkdir()
        (out / "theirs.txt").write_text("theirs")
        (out / "done.json").write_text("{}")
    assert sorted(p.name for p in out.iterdir()) == ["done.json", "theirs.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["data"]
    with atomic_dir(out, keep=lambda p: (p / "mine.txt").is_file()) as tmp:  # theirs is not what this block makes
        (tmp / "mine.txt").write_text("mine")
    assert sorted(p.name for p in out.iterdir()) == ["mine.txt"]
    real_replace = os.replace

    def raced(src, dst):  # another process renames its complete folder into place first
        Path(dst).mkdir()
        (Path(dst) / "done.json").write_text("{}")
        return real_replace(src, dst)

    monkeypatch.setattr(os, "replace", raced)
    late = tmp_path / "late"
    with atomic_dir(late, keep=complete) as tmp:
        (tmp / "mine.txt").write_text("mine")
    assert sorted(p.name for p in late.iterdir()) == ["done.json"]
    with pytest.raises(OSError):
        with atomic_dir(tmp_path / "nokeep") as tmp:
            (tmp / "mine.txt").write_text("mine")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "late", "nokeep"]


def test_body_presets_load_and_validate(tmp_path: Path) -> None:
    assert {"r2r_ce", "stretch", "turtlebot4"} <= set(list_bodies())
    r2r = load_body("r2r_ce")
    assert (r2r.height, r2r.radius) == (0.88, 0.18)
    stretch = load_body("stretch")
    assert (stretch.height, stretch.radius) == (1.41, 0.17)
    assert load_body("turtlebot4").holonomic is False
    with pytest.raises(UnknownNameError, match="r2r_ce"):
        load_body("nope")
    bad = tmp_path / "bad.yaml"
    bad.write_text("radius: -0.1\n")
    with pytest.raises(ConfigError) as err:
        load_body(bad)
    assert "radius" in str(err.value) and str(bad) in str(err.value)
    bad.write_text("height: 0.5\ncamera_height: 1.5\n")
    with pytest.raises(ConfigError, match="camera_height"):
        load_body(bad)
    assert isinstance(r2r, AgentBody)


def test_atomic_outputs_get_umask_permissions(tmp_path: Path) -> None:
    import os
    import stat

    mask = os.umask(0o022)
    try:
        write_json_atomic(tmp_path / "a.json", {})
        with atomic_dir(tmp_path / "d"):
            pass
    finally:
        os.umask(mask)
    assert stat.S_IMODE((tmp_path / "a.json").stat().st_mode) == 0o644
    assert stat.S_IMODE((tmp_path / "d").stat().st_mode) == 0o755


def test_wrap_angle_range_and_array_form() -> None:
    import math

    import numpy as np

    from vlnverse.core.geometry import wrap_angle

    assert wrap_angle(3 * math.pi) == math.pi and wrap_angle(-math.pi) == math.pi
    assert wrap_angle(2 * math.pi + 0.25) == pytest.approx(0.25)
    assert wrap_angle(-3 * math.pi / 2) == pytest.approx(math.pi / 2)
    out = wrap_angle(np.array([0.0, -math.pi, 7.0, -7.0]))
    assert np.allclose(out, [0.0, math.pi, 7.0 - 2 * math.pi, -7.0 + 2 * math.pi])


def test_lazy_registry_entry_imports_its_module_on_first_get(tmp_path, monkeypatch):
    import sys

    from vlnverse.core.registry import Registry

    reg = Registry("widget")
    (tmp_path / "lazy_widgets_mod.py").write_text(
        "from registry_under_test import REG\n@REG.register('lazy')\nclass Lazy:\n    pass\n")
    holder = type(sys)("registry_under_test")
    holder.REG = reg
    monkeypatch.setitem(sys.modules, "registry_under_test", holder)
    monkeypatch.syspath_prepend(str(tmp_path))
    reg.register_lazy("lazy", "lazy_widgets_mod")
    assert "lazy" in reg and reg.names() == ["lazy"] and len(reg) == 1
    assert "lazy_widgets_mod" not in sys.modules  # nothing imported yet
    assert reg.get("lazy").__name__ == "Lazy" and "lazy_widgets_mod" in sys.modules
    monkeypatch.delitem(sys.modules, "lazy_widgets_mod")
    with pytest.raises(ValueError, match="already registered"):
        reg.register_lazy("lazy", "elsewhere")
