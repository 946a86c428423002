"""A config's instruction ``language`` (issue 57): what eval and train generate is worded in it, a
run's protocol records it, caches of version-2 episodes are keyed by the wording's revision, and
bad values are refused in one line."""
from __future__ import annotations

import json

import pytest

from vlnverse.cli import main
from vlnverse.core.errors import ConfigError
from vlnverse.eval.config import load_eval_config
from vlnverse.eval.runner import run_eval
from vlnverse.paths import tasks_dir
from vlnverse.tasks.episode import load_episodes
from vlnverse.tasks.instructions.languages import LANGUAGES, wording_key
from vlnverse.tasks.instructions.route_v2 import WORDING_REVISION

ORACLE = tasks_dir() / "eval" / "oracle_fine_grained_telhop.yaml"


def _eval_config(tmp_path, *sets):
    return load_eval_config(ORACLE, ["episodes.generate.scenes=[home_0014]", "episodes.generate.episodes_per_scene=2",
                                     "split=null", "limit=1", "report.enabled=false",
                                     "sensors=[{name: depth, kind: depth, width: 32, height: 32}]",
                                     f"out={tmp_path / 'run'}", *sets])


@pytest.mark.parametrize("language, version", [("v1", None), ("v2", 2)])
def test_eval_generates_its_episodes_in_the_configs_language_and_records_it(tmp_path, language, version):
    summary = run_eval(_eval_config(tmp_path, f"language={language}"), progress=False, print_summary=False)
    episodes = load_episodes(tmp_path / "run" / "input_episodes.jsonl")
    assert {(e.info.get("language") or {}).get("version") for e in episodes} == {version}
    recorded = summary["protocol"].get("instruction_language")
    assert recorded == (None if version is None else [{"families": [0, 1], "version": 2}])
    assert summary["overall"]["means"]["SR"] == 1.0          # the oracle still follows the same paths


def test_language_names_and_the_wording_key():
    assert LANGUAGES["v1"] == {} and LANGUAGES["v2"] == {"params.instruction_version": 2}
    assert wording_key(LANGUAGES["v2-split"]) == {"wording": WORDING_REVISION}
    assert wording_key(LANGUAGES["v1"]) == {} and wording_key(None) == {}


def test_generated_training_episodes_are_cached_per_language(tmp_path):
    from vlnverse.learn.cache import generated_episodes
    from vlnverse.run.setup import GenerateSpec

    gen = GenerateSpec(scenes=["home_0014"], episodes_per_scene=1, seed=3)
    plain = generated_episodes(gen, task="fine_grained", cache_dir=tmp_path, progress=False)
    worded = generated_episodes(gen, task="fine_grained", cache_dir=tmp_path, progress=False,
                                overrides=LANGUAGES["v2"])
    assert [e.reference_path for e in plain] == [e.reference_path for e in worded]   # the same paths ...
    assert plain[0].instructions != worded[0].instructions                            # ... in other words
    folders = sorted(p for p in (tmp_path / "datasets").iterdir())
    keys = [json.loads((f / "done.json").read_text()) for f in folders]
    assert len(folders) == 2 and {k.get("wording") for k in keys} == {None, WORDING_REVISION}


@pytest.mark.parametrize("sets, field, expected", [
    (["language=v3"], "language", "v1 or v2 or v2-split"),
    (["benchmark=proc-v1", "split=val_unseen_language", "language=v2"], "split", "val_unseen_language with language v2-split"),
])
def test_bad_language_settings_are_refused_in_one_line(tmp_path, sets, field, expected):
    with pytest.raises(ConfigError) as err:
        _eval_config(tmp_path, *sets)
    assert err.value.field == field and expected in str(err.value) and "\n" not in str(err.value)


def test_a_benchmarks_language_shift_split_is_a_valid_eval_split(tmp_path):
    cfg = _eval_config(tmp_path, "benchmark=proc-v1", "split=val_unseen_language", "language=v2-split")
    assert cfg.check_benchmark().name == "proc-v1"


def test_train_refuses_a_language_with_a_task_mix(tmp_path, capsys):
    from vlnverse.paths import tasks_dir as tdir

    assert main(["train", str(tdir() / "train" / "gama_multitask.yaml"), "language=v2", f"out={tmp_path}/t"]) == 2
    err = capsys.readouterr().err
    assert "language" in err and "task mix" in err, err


def _worded(task_type, language):
    from vlnverse.tasks.episode import Episode, Goal, Instruction

    info = {} if language is None else {"language": language}
    return Episode("e", "s", "s.usd", "train", task_type, [0.0, 0.0, 0.0], 0.0, [Goal([1.0, 0.0, 0.0])],
                   [[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]], 1.0, [Instruction("go")], info=info)


def test_training_episodes_must_be_worded_in_the_configs_language():
    from vlnverse.tasks.instructions.languages import check_training_language, language_of

    v1, v2 = _worded("fine_grained", None), _worded("fine_grained", {"version": 2, "families": [0, 1]})
    split = _worded("fine_grained", {"version": 2, "families": [0]})
    assert [language_of(e) for e in ([v1], [v2], [split], [v1, v2])] == ["v1", "v2", "v2-split", None]
    check_training_language([v2], "v2", field="language")
    with pytest.raises(ConfigError, match=r"worded in v2, the config says 'v1'.*expected language: v2"):
        check_training_language([v2], "v1", field="language", file="train.jsonl")
    with pytest.raises(ConfigError, match=r"worded in v1, the config says 'v2'"):
        check_training_language([v1], "v2", field="language")
    with pytest.raises(ConfigError, match=r"worded in several languages"):
        check_training_language([v1, v2], "v2", field="language")
    check_training_language([_worded("coarse_grained", None)], "v2", field="language")   # records no wording


@pytest.mark.parametrize("language", ["v1", "v2"])
def test_a_policy_evaluated_on_another_language_than_its_training_says_so_once(tmp_path, caplog, language):
    """The shipped checkpoint records its training language; an eval on fine-grained episodes
    worded otherwise warns once, naming both and the setting that fixes it; in its own language
    it says nothing."""
    pytest.importorskip("torch")
    import logging

    from vlnverse.learn.checkpoint import read_checkpoint, resolve_checkpoint

    trained = read_checkpoint(resolve_checkpoint("gama_fine_grained"))["config"].get("language", "v1")
    cfg = _eval_config(tmp_path, f"language={language}", "agent.name=policy", "agent.params={checkpoint: gama_fine_grained}",
                       "max_steps=2")
    with caplog.at_level(logging.WARNING, logger="vlnverse.eval.runner"):
        run_eval(cfg, progress=False, print_summary=False)
    notes = [r.getMessage() for r in caplog.records if "instruction language" in r.getMessage()]
    if language == trained:
        assert notes == []
    else:
        assert len(notes) == 1 and f"trained on instruction language {trained}" in notes[0]
        assert f"worded in {language}" in notes[0] and f"language: {trained}" in notes[0]


def test_the_shipped_configs_evaluate_each_shipped_checkpoint_in_its_training_language():
    """``tasks/eval/<name>.yaml`` and the quickstart word their episodes as the shipped checkpoint
    they run was trained (its recorded ``language``, the recipe's)."""
    pytest.importorskip("torch")
    from vlnverse.core.config import load_config
    from vlnverse.eval.quickstart import QuickstartConfig
    from vlnverse.learn.checkpoint import read_checkpoint, resolve_checkpoint

    def trained(name):
        return read_checkpoint(resolve_checkpoint(name))["config"].get("language", "v1")

    for name in ("cma_fine_grained", "gama_fine_grained"):
        cfg = load_eval_config(tasks_dir() / "eval" / f"{name}.yaml")
        assert cfg.agent.params["checkpoint"] == name and cfg.language == trained(name), name
    qs = load_config(QuickstartConfig, tasks_dir() / "eval" / "quickstart.yaml")
    shipped = [a.params["checkpoint"] for a in qs.agents if a.name == "policy"]
    assert shipped and all(qs.language == trained(name) for name in shipped)
