"""One parameters dataclass per task type, validated when the task config is loaded."""
from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import yaml

import vlnverse.tasks
from vlnverse.core.errors import ConfigError
from vlnverse.tasks.base import TASKS, NoParams, TaskConfig, load_task_config, load_task_types


def _plain(value):
    return list(value) if isinstance(value, tuple) else value


def _first_number_field(params_cls) -> dataclasses.Field:
    return next(f for f in dataclasses.fields(params_cls) if f.init and type(f.default) in (int, float))


def test_every_shipped_task_type_reads_its_params_from_its_config():
    """Each shipped task type (one default config each, ``tasks/types/<type>/config.yaml``) has its
    own parameters dataclass, and the task built from its config holds the YAML's values, defaults
    for the rest, and an override."""
    shipped = {p.parent.name: p for p in (Path(vlnverse.tasks.__file__).parent / "types").glob("*/config.yaml")}
    built_in = {n for n in load_task_types() if TASKS.get(n).__module__.startswith("vlnverse.tasks.types.")}
    assert set(shipped) == built_in and len(shipped) == 8
    for name in sorted(shipped):
        cls = TASKS.get(name)
        assert cls.config_file == shipped[name].resolve(), name
        assert cls.Params is not NoParams and dataclasses.is_dataclass(cls.Params), name
        raw = yaml.safe_load(shipped[name].read_text(encoding="utf-8")).get("params") or {}
        fields = {f.name: f for f in dataclasses.fields(cls.Params) if f.init}
        assert set(raw) <= set(fields), name
        got = dataclasses.asdict(cls(load_task_config(name)).params)
        for key, f in fields.items():
            want = raw[key] if key in raw else (f.default if f.default is not dataclasses.MISSING else f.default_factory())
            assert _plain(got[key]) == _plain(want), (name, key)
        number = _first_number_field(cls.Params)   # a value no YAML or default holds reaches the task
        value = number.default + 1 if type(number.default) is int else number.default * 1.5
        task = cls(load_task_config(name, {f"params.{number.name}": value}))
        assert getattr(task.params, number.name) == value and type(getattr(task.params, number.name)) is type(value), name


def test_bad_params_are_rejected_on_load_naming_the_file_and_field(tmp_path):
    path = tmp_path / "fg.yaml"
    path.write_text("task_type: fine_grained\nparams: {landmark_radius: -1.0}\n")
    with pytest.raises(ConfigError) as err:
        load_task_config(path)
    assert str(err.value).startswith(f"{path}: params.landmark_radius:") and "> 0" in str(err.value)
    path.write_text("task_type: long_horizon\nparams: {max_subgoals: 3, leg_max_gedesic: 4}\n")
    with pytest.raises(ConfigError, match=r"params\.leg_max_gedesic: unknown field") as err:
        load_task_config(path)
    assert str(path) in str(err.value) and "leg_max_geodesic" in str(err.value)
    with pytest.raises(ConfigError, match=r"params\.categories: got 'chair'"):
        load_task_config("object_goal", {"params.categories": "chair"})
    # defaults come from the dataclass, typed: an int where a float is expected is converted
    params = TASKS.get("long_horizon").parse_params(TaskConfig("long_horizon", params={"leg_min_geodesic": 3}))
    assert params.leg_min_geodesic == 3.0 and isinstance(params.leg_min_geodesic, float) and params.max_subgoals == 3
