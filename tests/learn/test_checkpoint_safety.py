"""Checkpoints load without running code from the file: safetensors + JSON metadata with a sha256
of the tensors; pickles are refused (marker files prove nothing ran), tampered, foreign and newer
files are one-line errors through ``vlnverse eval`` and ``vlnverse train mode=dagger init=...``;
``vlnverse checkpoint info|convert``."""
from __future__ import annotations

import json
import os
import pickle
import struct
from pathlib import Path

import pytest

from learn_helpers import make_episodes, small_config

torch = pytest.importorskip("torch")

RIG16 = [{"name": "rgb", "kind": "rgb", "width": 16, "height": 16},
         {"name": "depth", "kind": "depth", "width": 16, "height": 16}]


class MarkerPayload:
    """Unpickling this creates ``marker`` (what a malicious checkpoint would do with os.system)."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return (open, (self.marker, "w"))


@pytest.fixture(scope="module")
def saved(corridor, episodes_file, tmp_path_factory):
    """A seq2seq policy (untrained, seeded), its config and a checkpoint of it."""
    from vlnverse.learn.checkpoint import save_checkpoint
    from vlnverse.learn.policies import build_policy
    from vlnverse.learn.store import sensor_layout
    from vlnverse.learn.vocab import Vocabulary

    root = tmp_path_factory.mktemp("ckpt")
    cfg = small_config(root / "run", episodes_file, policy="seq2seq", sensors=RIG16)
    torch.manual_seed(0)
    vocab = Vocabulary.build(e.instruction_text for e in make_episodes(corridor))
    policy = build_policy("seq2seq", cfg.policy.params, vocab, sensor_layout(cfg.sensor_specs()))
    policy.max_instruction_length = cfg.max_instruction_length
    path = save_checkpoint(root / "good.pt", policy, config=cfg.to_dict(), extra={"global_step": 7})
    return {"cfg": cfg, "policy": policy, "path": path, "root": root}


def _rewrite_metadata(src: Path, dst: Path, change) -> Path:
    """Copy a checkpoint with its vlnverse metadata changed by ``change(meta)`` (tensors and checksum kept)."""
    from safetensors.torch import load_file, save_file

    n = struct.unpack("<Q", src.read_bytes()[:8])[0]
    meta = json.loads(json.loads(src.read_bytes()[8:8 + n])["__metadata__"]["vlnverse"])
    change(meta)
    save_file(load_file(src), dst, metadata={"vlnverse": json.dumps(meta)})
    return dst


def _tampered(src: Path, dst: Path) -> Path:
    """A copy with one byte of the tensor data changed."""
    blob = bytearray(src.read_bytes())
    n = struct.unpack("<Q", blob[:8])[0]
    i = 8 + n + (len(blob) - 8 - n) // 2
    blob[i] ^= 0x40
    dst.write_bytes(bytes(blob))
    return dst


def _eval_cli(checkpoint: Path, out: Path, capsys) -> tuple[int, str]:
    from vlnverse.cli import main

    code = main(["eval", "oracle_fine_grained_telhop", "agent.name=policy", f"agent.params.checkpoint={checkpoint}",
                 f"out={out}"])
    return code, capsys.readouterr().err.strip()


def _dagger_cli(init: Path, out: Path, capsys, config: str = "seq2seq_fine_grained") -> tuple[int, str]:
    from vlnverse.cli import main

    code = main(["train", config, "mode=dagger", f"init={init}", f"out={out}", "--no-progress"])
    return code, capsys.readouterr().err.strip()


def _both(path: Path, tmp_path: Path, capsys, config: str = "seq2seq_fine_grained") -> list[str]:
    """The one-line errors of ``vlnverse eval`` and ``vlnverse train mode=dagger`` on ``path``; neither
    command writes its output folder."""
    errors = []
    for name, run in (("eval", _eval_cli), ("train", lambda p, o, c: _dagger_cli(p, o, c, config))):
        code, err = run(path, tmp_path / f"{name}_{path.stem}", capsys)
        assert code == 2 and "\n" not in err and str(path) in err, (name, err)
        if name == "train":
            assert not (tmp_path / f"{name}_{path.stem}").exists()  # refused before the run folder is made
        errors.append(err)
    return errors


def test_pickle_checkpoints_are_refused_before_anything_runs(tmp_path, capsys):
    from vlnverse.learn.checkpoint import FORMAT
    from vlnverse.learn.tensorfile import sniff

    marker = tmp_path / "marker"
    zipped, raw = tmp_path / "evil.pt", tmp_path / "evil_legacy.pt"
    torch.save({"format": FORMAT, "format_version": 1, "x": MarkerPayload(marker)}, zipped)
    raw.write_bytes(pickle.dumps({"format": FORMAT, "x": MarkerPayload(marker)}, protocol=2))
    assert (sniff(zipped), sniff(raw)) == ("torch-zip", "pickle")
    for path in (zipped, raw):
        for err in _both(path, tmp_path, capsys):
            assert "a pickle file" in err and "not loaded, since unpickling can run code" in err and "vlnverse checkpoint convert OLD NEW --trust" in err
        assert not marker.exists()
    from vlnverse.cli import main

    assert main(["checkpoint", "info", str(zipped)]) == 2 and not marker.exists()
    assert main(["checkpoint", "convert", str(zipped), str(tmp_path / "new.pt")]) == 2
    assert "--trust" in capsys.readouterr().err and not marker.exists() and not (tmp_path / "new.pt").exists()
    # the files are really dangerous: unpickling one (what --trust does) creates the marker
    assert main(["checkpoint", "convert", str(zipped), str(tmp_path / "new.pt"), "--trust"]) == 2
    err = capsys.readouterr().err
    assert marker.exists() and "runs any code" in err and not (tmp_path / "new.pt").exists()


def test_tampered_tensor_fails_the_checksum(saved, tmp_path, capsys):
    from vlnverse.cli import main

    bad = _tampered(saved["path"], tmp_path / "tampered.pt")
    for err in _both(bad, tmp_path, capsys):
        assert "fail their checksum" in err and "altered or damaged" in err
    assert main(["checkpoint", "info", str(bad), "--json"]) == 1
    out, err = capsys.readouterr()
    info = json.loads(out)
    assert info["checksum"] == "MISMATCH" and info["recorded_sha256"] != info["tensors_sha256"]
    assert "fail their checksum" in err
    from vlnverse.core.errors import ConfigError
    from vlnverse.learn.checkpoint import read_checkpoint

    unsummed = _rewrite_metadata(saved["path"], tmp_path / "unsummed.pt", lambda m: m.pop("tensors_sha256"))
    with pytest.raises(ConfigError, match="records no tensors_sha256"):
        read_checkpoint(unsummed)


def test_truncated_and_foreign_files_are_one_line_errors(saved, tmp_path, capsys):
    blob = saved["path"].read_bytes()
    cut = tmp_path / "cut.pt"
    cut.write_bytes(blob[:len(blob) - 100])
    err = _both(cut, tmp_path, capsys)[0]
    assert "not a readable policy checkpoint (truncated" in err
    junk = tmp_path / "junk.pt"
    junk.write_text("hello")
    assert "not a safetensors file" in _both(junk, tmp_path, capsys)[0]


def test_metadata_of_another_policy_type_or_kind(saved, tmp_path, capsys, corridor):
    from vlnverse.learn.waypoints import WaypointPredictor, save_predictor

    # the config's policy is cma; the file holds a seq2seq policy
    code, err = _dagger_cli(saved["path"], tmp_path / "t", capsys, config="cma_fine_grained")
    assert code == 2 and "checkpoint holds a 'seq2seq' policy" in err and "'cma' (the config's policy)" in err
    # metadata claiming another policy type than its tensors: the weights do not fit
    liar = _rewrite_metadata(saved["path"], tmp_path / "liar.pt", lambda m: m["tree"].update(policy="cma"))
    code, err = _eval_cli(liar, tmp_path / "e1", capsys)
    assert code == 2 and "\n" not in err and "weights do not fit the policy" in err
    # a file of another kind: a waypoint predictor given as a policy checkpoint
    wp = save_predictor(tmp_path / "predictor.pt", WaypointPredictor(image_size=16))
    for err in _both(wp, tmp_path, capsys):
        assert "not a vlnverse policy checkpoint (it holds a vlnverse-waypoint-predictor)" in err


def test_newer_format_version_names_both_versions(saved, tmp_path, capsys):
    newer = _rewrite_metadata(saved["path"], tmp_path / "newer.pt", lambda m: m.update(format_version=3))
    for err in _both(newer, tmp_path, capsys):
        assert "format_version: policy checkpoint format version 3 is newer than this vlnverse reads (2)" in err


def test_saved_reloaded_and_converted_checkpoints_act_identically(saved, corridor, tmp_path, capsys):
    from test_trainer import _actions

    from vlnverse.cli import main
    from vlnverse.run.agents import make_agent
    from vlnverse.learn.agent import PolicyAgent
    from vlnverse.learn.checkpoint import checkpoint_dict, read_checkpoint

    data = read_checkpoint(saved["path"])
    assert data["global_step"] == 7 and data["sensors"] == saved["policy"].sensors
    assert all(torch.equal(v, data["state_dict"][k]) for k, v in saved["policy"].state_dict().items())
    episodes = make_episodes(corridor)[:2]
    expected = _actions(PolicyAgent(policy=saved["policy"]), corridor, episodes)
    assert _actions(make_agent("policy", {"checkpoint": str(saved["path"])}), corridor, episodes) == expected
    # a checkpoint of an earlier version (torch.save of the same dict): refused, then converted with --trust
    # (the file that runs code on unpickling is converted only after the warning: the test above)
    old = tmp_path / "old.pt"
    torch.save({**checkpoint_dict(saved["policy"], config=saved["cfg"].to_dict()), "format_version": 1}, old)
    with pytest.raises(Exception, match="vlnverse checkpoint convert OLD NEW --trust"):
        make_agent("policy", {"checkpoint": str(old)})
    assert main(["checkpoint", "convert", str(old), str(tmp_path / "converted.pt"), "--trust"]) == 0
    out, err = capsys.readouterr()  # tensors and plain containers: torch's restricted unpickler, no warning
    assert json.loads(out)["kind"] == "policy checkpoint" and "warning: unpickling" not in err
    converted = make_agent("policy", {"checkpoint": str(tmp_path / "converted.pt")})
    assert _actions(converted, corridor, episodes) == expected


def test_checkpoint_info_prints_metadata_rig_sizes_and_checksum(saved, capsys):
    from vlnverse.cli import main

    assert main(["checkpoint", "info", str(saved["path"]), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    n_params = sum(p.numel() for p in saved["policy"].state_dict().values())
    assert info["checksum"] == "ok" and info["format"] == "vlnverse-policy-checkpoint" and info["format_version"] == 2
    assert info["policy"] == "seq2seq" and info["groups"]["state_dict"]["elements"] == n_params
    assert info["sensors"] == [{"name": "rgb", "kind": "rgb", "shape": [16, 16, 3]},
                               {"name": "depth", "kind": "depth", "shape": [16, 16]}]
    assert info["vocabulary_size"] == len(saved["policy"].vocab) and info["bytes"] == saved["path"].stat().st_size
    assert main(["checkpoint", "info", str(saved["path"])]) == 0
    text = capsys.readouterr().out
    assert "checksum: ok" in text and "sensors: [rgb rgb 16x16x3, depth depth 16x16]" in text
    assert f"tensors[state_dict]: {len(saved['policy'].state_dict())} tensors, {n_params} elements" in text


def test_encoder_weights_must_be_safetensors(tmp_path, capsys):
    from vlnverse.core.errors import ConfigError
    from vlnverse.learn.checkpoint import convert_legacy
    from vlnverse.learn.policies import CNNEncoder

    donor = CNNEncoder(3, out_dim=16)
    torch.save(donor.state_dict(), tmp_path / "rgb.pth")
    with pytest.raises(ConfigError, match="rgb_encoder.weights: a pickle file"):
        CNNEncoder(3, out_dim=16, weights=str(tmp_path / "rgb.pth"), field="rgb_encoder")
    assert convert_legacy(tmp_path / "rgb.pth", tmp_path / "rgb.safetensors", trust=True, warn=lambda s: None
                          )["kind"] == "state dict"
    enc = CNNEncoder(3, out_dim=16, weights=str(tmp_path / "rgb.safetensors"), field="rgb_encoder")
    assert torch.equal(enc.fc[1].weight, donor.fc[1].weight)
    _tampered(tmp_path / "rgb.safetensors", tmp_path / "bad.safetensors")
    with pytest.raises(ConfigError, match="fail their checksum"):
        CNNEncoder(3, out_dim=16, weights=str(tmp_path / "bad.safetensors"), field="rgb_encoder")
    with pytest.raises(ConfigError, match="rgb_encoder.weights: weights do not fit"):
        CNNEncoder(3, out_dim=32, weights=str(tmp_path / "rgb.safetensors"), field="rgb_encoder")


def test_export_drops_the_resume_state_and_keeps_what_evaluation_needs(saved, tmp_path):
    """``vlnverse checkpoint export``: no optimizer / position / step, the same weights and metadata."""
    import torch

    from vlnverse.cli import main
    from vlnverse.learn.checkpoint import RESUME_ONLY, policy_from_checkpoint, read_checkpoint, save_checkpoint

    opt = torch.optim.Adam(saved["policy"].parameters())
    full = save_checkpoint(tmp_path / "full.pt", saved["policy"], config=saved["cfg"].to_dict(),
                           extra={"optimizer": opt.state_dict(), "global_step": 3, "position": {"epoch": 1}})
    assert main(["checkpoint", "export", str(full), str(tmp_path / "slim.pt")]) == 0
    slim, data = read_checkpoint(tmp_path / "slim.pt"), read_checkpoint(full)
    assert not set(RESUME_ONLY) & set(slim) and {"optimizer", "global_step", "position"} <= set(data)
    assert slim["provenance"]["exported_from"]["tensors_sha256"] == data["tensors_sha256"]
    assert slim["vocab"] == data["vocab"] and slim["sensors"] == data["sensors"] and slim["config"] == data["config"]
    a, b = policy_from_checkpoint(slim), policy_from_checkpoint(data)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values()))
    assert main(["checkpoint", "export", str(tmp_path / "missing.pt"), str(tmp_path / "x.pt")]) == 2
    assert not (tmp_path / "x.pt").exists()


@pytest.mark.parametrize("name,policy", [("cma_fine_grained", "cma"), ("gama_fine_grained", "gama")])
def test_the_shipped_checkpoint_is_the_model_of_its_recipe(name, policy):
    """``tasks/train/<name>.pt`` has the policy, parameters, rig and instruction length of
    ``tasks/train/<name>.yaml`` (so ``mode=dagger init=`` accepts it), by name too."""
    from vlnverse.core.io import to_jsonable
    from vlnverse.learn.checkpoint import read_checkpoint, resolve_checkpoint, shipped_checkpoints
    from vlnverse.learn.config import load_train_config, resolve_train_config_path

    assert name in shipped_checkpoints()
    data = read_checkpoint(resolve_checkpoint(name), expected_policy=policy)
    recipe = to_jsonable(load_train_config(resolve_train_config_path(name)).model_key())
    assert {k: data["config"].get(k) for k in recipe} == recipe
    assert data["config"].get("language", "v1") == load_train_config(resolve_train_config_path(name)).language
    assert not {"optimizer", "position"} & set(data)  # exported: nothing only resuming needs


def test_export_as_recipe_names_files_as_the_recipe_and_refuses_another_model(tmp_path, capsys):
    """``checkpoint export --recipe``: a waypoint predictor the run resolved to a cache path is
    written as the recipe's ``auto`` (the path kept in provenance, the weights unchanged); a
    parameter the recipe does not have, or another instruction language than the recipe's, is a
    one-line error naming the field, and nothing is written."""
    from vlnverse.cli import main
    from vlnverse.learn.checkpoint import read_checkpoint, resolve_checkpoint, write_checkpoint_dict

    data = read_checkpoint(resolve_checkpoint("gama_fine_grained"))
    trained = {**data, "config": {**data["config"], "language": "v2", "policy": {"name": "gama", "params": {
        **data["config"]["policy"]["params"], "waypoint_predictor": "seeds/s1/waypoints/predictor.pt"}}}}
    write_checkpoint_dict(tmp_path / "trained.pt", trained)
    assert main(["checkpoint", "export", str(tmp_path / "trained.pt"), str(tmp_path / "out.pt"),
                 "--recipe", "gama_fine_grained"]) == 0
    out = read_checkpoint(tmp_path / "out.pt")
    assert out["config"]["policy"]["params"]["waypoint_predictor"] == "auto"
    assert out["policy_params"]["waypoint_predictor"] == "auto"
    assert out["provenance"]["exported_from"]["recipe"] == {
        "name": "gama_fine_grained", "replaced": {"policy.params.waypoint_predictor": "seeds/s1/waypoints/predictor.pt"}}
    assert out["tensors_sha256"] == data["tensors_sha256"]
    wider = {**data, "config": {**data["config"], "policy": {"name": "gama", "params": {
        **data["config"]["policy"]["params"], "hidden_size": 32}}}}
    write_checkpoint_dict(tmp_path / "wider.pt", wider)
    capsys.readouterr()
    assert main(["checkpoint", "export", str(tmp_path / "wider.pt"), str(tmp_path / "w.pt"),
                 "--recipe", "gama_fine_grained"]) == 2
    err = capsys.readouterr().err
    assert "policy.params.hidden_size" in err and "expected 64" in err and not (tmp_path / "w.pt").exists()
    assert main(["checkpoint", "export", str(tmp_path / "trained.pt"), str(tmp_path / "h.pt"),
                 "--recipe", "hnr_fine_grained"]) == 2
    assert "policy.name is 'gama' there" in capsys.readouterr().err and not (tmp_path / "h.pt").exists()
    other_language = {**trained, "config": {**trained["config"], "language": "v1"}}
    write_checkpoint_dict(tmp_path / "v1.pt", other_language)
    assert main(["checkpoint", "export", str(tmp_path / "v1.pt"), str(tmp_path / "l.pt"),
                 "--recipe", "gama_fine_grained"]) == 2
    err = capsys.readouterr().err
    assert "instruction language 'v1'" in err and "expected 'v2'" in err and not (tmp_path / "l.pt").exists()


def _strings(value):
    if isinstance(value, dict):
        for k, v in value.items():
            yield str(k)
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, str):
        yield value


def test_no_shipped_checkpoint_names_a_folder_of_the_machine_it_was_trained_on():
    """Every string of every shipped checkpoint's metadata, and every word of it, is no absolute
    path; the weights are the ones trained (``checkpoint info``'s tensor digest)."""
    import re

    from vlnverse.learn.checkpoint import NOT_PATHS, read_checkpoint, shipped_checkpoints

    assert shipped_checkpoints()
    for name, path in shipped_checkpoints().items():
        data = read_checkpoint(path)
        meta = {k: v for k, v in data.items() if k not in NOT_PATHS}
        words = [w for s in _strings(meta) for w in re.split(r"[\s\"'(),;=]+", s)]
        assert not [w for w in words if w.startswith("/") or re.match(r"^[A-Za-z]:[\\/]", w)], name
        assert meta["config"]["out"] == "."
    assert {name: read_checkpoint(path)["tensors_sha256"] for name, path in shipped_checkpoints().items()} == {
        "cma_fine_grained": "262f1a115a454d5e914a1daaa1ffd72f03460e7ca2448fc045063679c2d84d83",
        "gama_fine_grained": "cf250dfbd42d5c836999638ce40997791e55f1e13d03189e06b6b4ce5b5739e0"}


def test_checkpoints_name_paths_relative_to_the_run_with_their_files_hashes(saved, tmp_path):
    """A checkpoint written for a run folder names the config's paths (absolute, or relative to the
    working folder) relative to that folder, and records each named file's sha256; one written
    before (absolute paths, as the shipped checkpoint was) is rewritten relative to its ``out`` on export."""
    import hashlib

    from vlnverse.learn.checkpoint import FORMAT, FORMAT_VERSION, checkpoint_dict, export_checkpoint, read_checkpoint, save_checkpoint
    from vlnverse.learn.tensorfile import write_tensor_file

    episodes = tmp_path / "data" / "train.jsonl"
    episodes.parent.mkdir()
    episodes.write_text("{}\n")
    digest = hashlib.sha256(b"{}\n").hexdigest()
    run = tmp_path / "runs" / "a"
    config = {**saved["cfg"].to_dict(), "out": str(run), "train": {"path": str(episodes)}, "val": {},
              "cache": {"dir": "/nowhere/cache"}}
    path = save_checkpoint(run / "last.pt", saved["policy"], config=config, run=run,
                           extra={"provenance": {"init": str(episodes)}})
    data = read_checkpoint(path)
    assert data["config"]["out"] == "." and data["config"]["train"]["path"] == "../../data/train.jsonl"
    cache = data["config"]["cache"]["dir"]  # a folder that is not here: relative too, no hash
    assert not cache.startswith("/") and os.path.normpath(run / cache) == "/nowhere/cache"
    assert data["provenance"]["init"] == "../../data/train.jsonl"
    assert data["provenance"]["files"] == {"../../data/train.jsonl": digest}
    legacy = write_tensor_file(tmp_path / "legacy.pt", checkpoint_dict(saved["policy"], config=config),  # absolute paths
                               fmt=FORMAT, version=FORMAT_VERSION)
    assert read_checkpoint(legacy)["config"]["train"]["path"] == str(episodes)
    export_checkpoint(legacy, tmp_path / "shipped" / "x.pt")
    slim = read_checkpoint(tmp_path / "shipped" / "x.pt")
    assert slim["config"]["train"]["path"] == "../../data/train.jsonl" and slim["config"]["out"] == "."
    assert slim["provenance"]["files"] == {"../../data/train.jsonl": digest}
    assert slim["tensors_sha256"] == data["tensors_sha256"]

