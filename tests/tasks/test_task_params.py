"""One parameters dataclass per task type, validated when the task config is loaded."""
from __future__ import annotations

import dataclasses

import pytest

from vlnverse.core.errors import ConfigError
from vlnverse.paths import tasks_dir
from vlnverse.tasks.base import TASKS, NoParams, TaskConfig, load_task_config, load_task_types


def test_every_task_type_declares_a_params_dataclass_and_the_shipped_configs_load():
    built_in = [n for n in load_task_types() if TASKS.get(n).__module__.startswith("vlnverse.tasks.types.")]
    assert len(built_in) >= 8
    for name in built_in:  # (other tests register toy task types of their own)
        cls = TASKS.get(name)
        assert dataclasses.is_dataclass(cls.Params) and cls.Params is not NoParams, name
        config = load_task_config(name)
        params = cls.parse_params(config)
        assert isinstance(params, cls.Params)
        assert isinstance(cls(config).params, cls.Params)
    assert {p.stem for p in tasks_dir().glob("*.yaml")} <= set(load_task_types())


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
