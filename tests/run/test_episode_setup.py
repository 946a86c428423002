"""``run.setup.EpisodeSetup``: the one definition of what episodes are played under, which eval and
train configs extend (their YAML files keep the fields at the top level)."""
from __future__ import annotations

import dataclasses

import pytest

from vlnverse.core.errors import ConfigError
from vlnverse.eval.config import EvalConfig, load_eval_config
from vlnverse.learn.config import TrainConfig, load_train_config
from vlnverse.paths import repo_root
from vlnverse.run.setup import EpisodeSetup

SETUP_FIELDS = ["task", "collision_mode", "mode_params", "sensors", "body", "max_steps", "success_distance", "backend",
                "render", "language"]


def test_eval_and_train_configs_are_episode_setups_with_their_own_defaults():
    assert [f.name for f in dataclasses.fields(EpisodeSetup)] == SETUP_FIELDS
    for cls in (EvalConfig, TrainConfig):
        assert issubclass(cls, EpisodeSetup)
        names = [f.name for f in dataclasses.fields(cls)]
        assert names[:len(SETUP_FIELDS)] == SETUP_FIELDS and len(set(names)) == len(names)
    assert EpisodeSetup(task="fine_grained").collision_mode == "strict"
    train = TrainConfig(policy={"name": "cma"})  # a discrete policy's defaults: Tel-Hop, 64² RGB-D
    assert train.collision_mode == "telhop" and [(s.width, s.height) for s in train.sensors] == [(64, 64), (64, 64)]
    assert [(s.width, s.height) for s in EvalConfig(agent={"name": "oracle"}, task="x").sensors] == [(224, 224)] * 2


def test_the_setup_of_a_shipped_config_is_its_fields_copied():
    cfg = load_train_config(repo_root() / "tasks" / "train" / "cma_fine_grained.yaml")
    setup = EpisodeSetup.of(cfg)
    assert type(setup) is EpisodeSetup
    assert {n: getattr(setup, n) for n in SETUP_FIELDS} == {n: getattr(cfg, n) for n in SETUP_FIELDS}
    assert setup.sensors is not cfg.sensors and setup.render is not cfg.render  # copies
    assert EpisodeSetup.of(cfg, task="object_goal").task == "object_goal" and cfg.task == "fine_grained"
    assert setup.sensor_specs() == [s.to_spec() for s in cfg.sensors]
    ev = load_eval_config(repo_root() / "tasks" / "eval" / "oracle_fine_grained_telhop.yaml",
                          ["mode_params.telhop.resolve_tolerance=0.2"])
    assert EpisodeSetup.of(ev).selected_mode_params() == {"resolve_tolerance": 0.2}


@pytest.mark.parametrize("text,field", [("max_steps: -1", "max_steps"), ("collision_mode: sideways", "collision_mode"),
                                        ("sensors: [{name: rgb, kind: rgb, width: 0}]", "sensors[0].width"),
                                        ("render: {quality: shiny}", "render.quality")])
def test_a_bad_setup_field_in_a_config_file_names_the_file_and_the_field(tmp_path, text, field):
    for kind, head, load in (("eval", "agent: {name: oracle}\nepisodes: e.jsonl\n", load_eval_config),
                             ("train", "policy: {name: cma}\ntrain: e.jsonl\n", load_train_config)):
        path = tmp_path / f"{kind}.yaml"
        path.write_text(head + "task: fine_grained\n" + text + "\n")
        with pytest.raises(ConfigError) as err:
            load(path)
        assert str(err.value).startswith(f"{path}: {field}:"), (kind, str(err.value))
