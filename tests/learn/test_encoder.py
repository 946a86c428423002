"""The pretrained visual encoder (``vlnverse pretrain-encoder``), its use by the policies (frozen or
fine-tuned, rig checks, checkpoints without the file) and the feature cache of frozen trunks."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from learn_helpers import small_config

SENSORS = [{"name": "rgb", "kind": "rgb", "shape": [16, 16, 3]}, {"name": "depth", "kind": "depth", "shape": [16, 16]}]


def _vocab():
    from vlnverse.learn.vocab import Vocabulary

    return Vocabulary.build(["walk to the sofa", "turn left at the table"])


def _encoder_file(folder: Path, size: int = 16, hfov: float = 90.0, seed: int = 0, channels: int = 8) -> Path:
    """A tiny encoder file (random trunks) for a ``size``² RGB-D rig, written as pretrain-encoder does."""
    import torch

    from vlnverse.learn import code_version
    from vlnverse.learn.encoder import FORMAT, FORMAT_VERSION, save_encoder
    from vlnverse.learn.policies import CNNEncoder

    torch.manual_seed(seed)
    folder.mkdir(parents=True, exist_ok=True)
    trunks = {"rgb": CNNEncoder(3, 32, channels), "depth": CNNEncoder(1, 32, channels)}
    rig = {"rgb": {"kind": "rgb", "width": size, "height": size, "hfov_deg": hfov},
           "depth": {"kind": "depth", "width": size, "height": size, "hfov_deg": hfov, "max_depth": 10.0}}
    return save_encoder(folder, trunks, {"format": FORMAT, "format_version": FORMAT_VERSION, "code_version": code_version(),
                                         "arch": {"type": "cnn", "channels": channels, "out_dim": 32}, "rig": rig,
                                         "objectives": ["semantic"]})


def _corridor_contexts():
    sys.path.insert(0, str(Path(__file__).parents[1] / "eval"))
    from eval_scenes import corridor_scene

    from vlnverse.sim.body import load_body
    from vlnverse.tasks.base import context_from_description

    body = load_body("r2r_ce")
    return {"train": context_from_description(corridor_scene(with_objects=True), body, 0.05, scene_path="a.usda"),
            "held_out": context_from_description(corridor_scene(gap_width=1.5, with_objects=True), body, 0.05,
                                                 scene_path="b.usda")}


def test_pretraining_lowers_the_loss_on_held_out_frames_and_writes_its_files(tmp_path):
    from vlnverse.learn.encoder import ROOM_CLASSES, EncoderTrainConfig, read_encoder, run_pretraining

    ctxs = _corridor_contexts()
    cfg = EncoderTrainConfig(scenes=["train"], val_scenes=["held_out"], poses_per_scene=48, val_poses_per_scene=16,
                             image_size=16, channels=8, out_dim=32, epochs=8, batch_size=16, lr=3e-3, probe_epochs=2)
    lines = []
    m = run_pretraining(cfg, tmp_path / "enc", progress=False, report=lines.append, context_loader=ctxs.__getitem__)
    before, after = m["held_out_before"], m["held_out"]
    # the held-out frames come from another corridor (a wider gap): the loss falls there too
    assert after["loss"] < 0.8 * before["loss"], (before["loss"], after["loss"])
    assert after["semantic_rgb_loss"] < before["semantic_rgb_loss"] and after["depth_rgb_loss"] < before["depth_rgb_loss"]
    assert after["semantic_rgb_accuracy"] > 0.5 and before["semantic_rgb_accuracy"] < 0.1  # dominant class per cell
    # fresh heads on the frozen pretrained trunks beat fresh heads on random trunks (held-out loss)
    assert m["probe"]["pretrained"]["loss"] < m["probe"]["random_init"]["loss"]
    assert [c["epoch"] for c in m["curve"]] == list(range(1, 9)) and m["curve"][-1]["held_out_loss"] == after["loss"]
    assert set(m["probe"]) == {"pretrained", "random_init"}
    out = tmp_path / "enc"
    assert {p.name for p in out.iterdir()} >= {"encoder.safetensors", "encoder.json", "metrics.json", "loss.png"}
    state, meta = read_encoder(out / "encoder.safetensors")
    assert meta["rig"]["rgb"] == {"kind": "rgb", "width": 16, "height": 16, "hfov_deg": 90.0}
    assert meta["objectives"] == ["semantic", "depth", "room"] and meta["held_out"]["loss"] == after["loss"]
    assert set(meta["room_classes"]) >= {"hallway", "kitchen"} and "none" in ROOM_CLASSES
    assert all(k.startswith(("rgb.", "depth.")) for k in state)  # trunks only, tensors only
    assert json.loads((out / "metrics.json").read_text())["train_frames"] == 48
    assert any("held-out loss" in line for line in lines)


def test_bad_pretraining_settings_are_one_line_errors(tmp_path):
    from vlnverse.cli import main

    assert main(["pretrain-encoder", "--objectives", "semantic,colour", "--out", str(tmp_path / "x")]) == 2
    assert main(["pretrain-encoder", "--scenes", str(tmp_path), "--out", str(tmp_path / "x")]) == 2  # no scenes there
    assert main(["pretrain-encoder", "--scenes", "train", "--val-scenes", "home_0001,home_0014",
                 "--out", str(tmp_path / "x")]) == 2  # a training home among the held-out ones


@pytest.mark.parametrize("name", ["seq2seq", "cma", "rdp"])
def test_policies_load_a_pretrained_encoder_frozen_or_fine_tuned(tmp_path, name):
    import torch
    from safetensors.torch import load_file

    from vlnverse.learn.policies import build_policy

    path = _encoder_file(tmp_path / "enc")
    state = load_file(str(path))
    params = {"hidden_size": 32, "rgb_encoder": {"type": "pretrained", "path": str(path)},
              "depth_encoder": {"type": "pretrained", "path": str(path.with_suffix(".json")), "frozen": False}}
    policy = build_policy(name, params, _vocab(), SENSORS)
    assert torch.equal(policy.rgb.net[0].weight, state["rgb.net.0.weight"])
    assert torch.equal(policy.depth.fc[1].weight, state["depth.fc.1.weight"])
    assert not any(p.requires_grad for p in policy.rgb.parameters())  # frozen by default
    assert all(p.requires_grad for p in policy.depth.parameters())
    assert any("pretrained rgb trunk" in n and "frozen" in n for n in policy.notes)


def test_an_encoder_made_for_another_rig_is_one_clear_error(tmp_path):
    from vlnverse.core.errors import ConfigError
    from vlnverse.run.setup import SensorConfig
    from vlnverse.learn.encoder import check_encoders
    from vlnverse.learn.policies import build_policy

    path = _encoder_file(tmp_path / "enc", size=32)
    params = {"rgb_encoder": {"type": "pretrained", "path": str(path)}}
    with pytest.raises(ConfigError, match=r"rgb_encoder: .*another sensor rig than this kind rgb, width 16, height 16 "
                                          r"\(expected kind rgb, width 32, height 32, or an encoder pretrained"):
        build_policy("cma", params, _vocab(), SENSORS)
    path16 = _encoder_file(tmp_path / "enc16", size=16, hfov=90.0)
    cams = [SensorConfig("rgb", "rgb", 16, 16, hfov_deg=60.0), SensorConfig("depth", "depth", 16, 16)]
    with pytest.raises(ConfigError, match="hfov_deg 60.0.*hfov_deg 90.0"):  # same size, another FoV
        check_encoders({"rgb_encoder": {"type": "pretrained", "path": str(path16)}}, cams)
    with pytest.raises(ConfigError, match="max_depth 5.0.*max_depth 10.0"):  # another depth normalisation
        build_policy("cma", {"depth_encoder": {"type": "pretrained", "path": str(path16)}, "max_depth": 5.0},
                     _vocab(), SENSORS)
    check_encoders({"rgb_encoder": {"type": "pretrained", "path": str(path16)}},
                   [SensorConfig("rgb", "rgb", 16, 16), SensorConfig("depth", "depth", 16, 16)])  # fits
    with pytest.raises(ConfigError, match="rgb_encoder.path.*no such file"):
        build_policy("cma", {"rgb_encoder": {"type": "pretrained", "path": str(tmp_path / "none.safetensors")}},
                     _vocab(), SENSORS)
    path.write_bytes(path.read_bytes()[:-8] + b"\0" * 8)
    with pytest.raises(ConfigError, match="does not match its sidecar's sha256"):
        build_policy("cma", {"rgb_encoder": {"type": "pretrained", "path": str(path)}}, _vocab(),
                     [{"name": "rgb", "kind": "rgb", "shape": [32, 32, 3]}])


def test_a_checkpoint_with_a_pretrained_encoder_reloads_without_the_file(tmp_path):
    import torch

    from vlnverse.learn.checkpoint import policy_from_checkpoint, read_checkpoint, save_checkpoint
    from vlnverse.learn.policies import build_policy

    path = _encoder_file(tmp_path / "enc")
    params = {"hidden_size": 32, "rgb_encoder": {"type": "pretrained", "path": str(path)},
              "depth_encoder": {"type": "pretrained", "path": str(path), "frozen": False}}
    policy = build_policy("cma", params, _vocab(), SENSORS).eval()
    save_checkpoint(tmp_path / "c.pt", policy, config={"policy": {"name": "cma", "params": params}})
    path.unlink()
    again = policy_from_checkpoint(read_checkpoint(tmp_path / "c.pt"))
    assert not any(p.requires_grad for p in again.rgb.parameters()) and all(p.requires_grad for p in again.depth.parameters())
    frames = {"rgb": torch.randint(0, 255, (3, 16, 16, 3), dtype=torch.uint8), "depth": torch.rand(3, 16, 16) * 4}
    with torch.no_grad():
        a, b = policy.encode_frames(frames), again.encode_frames(frames)
    assert torch.equal(a["rgb"][1], b["rgb"][1]) and torch.equal(a["depth"][0], b["depth"][0])


def test_user_cnn_and_resnet_weights_files_still_load_and_freeze(tmp_path):
    import torch
    from safetensors.torch import save_file

    from vlnverse.learn.features import frozen_trunks
    from vlnverse.learn.policies import CNNEncoder, build_policy

    donor = CNNEncoder(1, out_dim=64, channels=8)
    save_file(donor.state_dict(), tmp_path / "depth.pt")  # a plain safetensors state dict
    params = {"rgb_encoder": {"type": "cnn", "frozen": True, "weights": str(tmp_path / "depth.pt"), "out_dim": 64,
                              "channels": 8}}
    from vlnverse.core.errors import ConfigError

    with pytest.raises(ConfigError, match="rgb_encoder.weights.*weights do not fit"):  # a 1-channel CNN for RGB
        build_policy("cma", params, _vocab(), SENSORS)
    params = {"depth_encoder": {"type": "cnn", "frozen": True, "weights": str(tmp_path / "depth.pt"), "out_dim": 64,
                                "channels": 8}}
    policy = build_policy("cma", params, _vocab(), SENSORS)
    assert torch.equal(policy.depth.net[0].weight, donor.net[0].weight)
    assert not any(p.requires_grad for p in policy.depth.parameters()) and not frozen_trunks(policy)  # RGB trains
    torchvision = pytest.importorskip("torchvision")
    net = torchvision.models.resnet18(weights=None)
    save_file(net.state_dict(), tmp_path / "r18.pt")
    params["rgb_encoder"] = {"type": "resnet18", "weights": str(tmp_path / "r18.pt"), "frozen": True}
    policy = build_policy("cma", params, _vocab(), [{**SENSORS[0], "shape": [32, 32, 3]}, SENSORS[1]])
    assert torch.equal(policy.rgb.trunk[0].weight, net.conv1.weight) and frozen_trunks(policy)
    assert policy.rgb.fc[1].weight.requires_grad  # the projection after a frozen trunk trains


def _obs_store(root: Path, episodes: int = 3, seed: int = 0):
    from vlnverse.learn.store import StepStore

    rng = np.random.default_rng(seed)
    store = StepStore.create(root, key={"test": seed}, sensors=SENSORS, chunk_frames=16)
    for i in range(episodes):
        n = 5 + i
        steps = [{"rgb": rng.integers(0, 255, (16, 16, 3), dtype=np.uint8), "depth": rng.random((16, 16)) * 4,
                  "label": int(rng.integers(0, 6)), "executed": int(rng.integers(0, 6)), "pose": rng.random(3)}
                 for _ in range(n)]
        store.add_episode(f"ep{i}", "walk to the sofa", steps)
    store.close()
    return store


def test_feature_cache_holds_the_trunks_outputs_and_rebuilds_for_a_changed_encoder(tmp_path):
    import torch

    from vlnverse.learn.features import feature_name, feature_store, frozen_trunks
    from vlnverse.learn.policies import build_policy
    from vlnverse.learn.batching import EpisodeBatches

    obs = _obs_store(tmp_path / "obs")
    enc_a, enc_b = _encoder_file(tmp_path / "a", seed=0), _encoder_file(tmp_path / "b", seed=1)

    def policy(path):
        torch.manual_seed(0)
        p = {"hidden_size": 32, "rgb_encoder": {"type": "pretrained", "path": str(path)},
             "depth_encoder": {"type": "pretrained", "path": str(path)}}
        return build_policy("cma", p, _vocab(), SENSORS).eval()

    pa = policy(enc_a)
    assert frozen_trunks(pa)
    log = []
    fa, stats = feature_store(obs, pa, base_dir=tmp_path / "cache", report=log.append)
    assert stats["status"] == "built" and fa.num_steps == obs.num_steps == 18 and len(fa) == 3
    assert fa.manifest["sensors"] == [{"name": "feature_rgb", "kind": "feature", "shape": [16, 16]},
                                      {"name": "feature_depth", "kind": "feature", "shape": [16, 16]}]
    ep, feats = obs.episode(1), fa.episode(1)
    assert np.array_equal(feats["label"], ep["label"]) and np.array_equal(feats["executed"], ep["executed"])
    with torch.no_grad():
        x = pa.encoder_input("rgb", {"rgb": torch.from_numpy(ep["rgb"])})
        want = pa.rgb.spatial_features(x).numpy()
    assert np.allclose(feats[feature_name("rgb")].astype(np.float32), want, atol=2e-3, rtol=2e-3)
    # training from features computes what the policy computes from pixels
    tokens = torch.tensor([[2, 3, 4, 5]] * 2)
    pix = EpisodeBatches([obs], pa.vocab, 8, SENSORS).batch(np.array([0, 2]), 1.0, "cpu")
    fea = EpisodeBatches([fa], pa.vocab, 8, fa.manifest["sensors"]).batch(np.array([0, 2]), 1.0, "cpu")
    assert set(fea["frames"]) == {"feature_rgb", "feature_depth"} and torch.equal(pix["labels"], fea["labels"])
    with torch.no_grad():
        lp = pa.forward_sequence(tokens, pix["frames"], pix["prev"])
        lf = pa.forward_sequence(tokens, fea["frames"], fea["prev"])
    assert torch.allclose(lp, lf, atol=1e-2)
    # the same encoder reuses it; another encoder builds another store; a damaged store is rebuilt
    assert feature_store(obs, policy(enc_a), base_dir=tmp_path / "cache", report=log.append)[1]["status"] == "reused"
    fb, sb = feature_store(obs, policy(enc_b), base_dir=tmp_path / "cache", report=log.append)
    assert sb["status"] == "built" and fb.root != fa.root
    assert not np.allclose(fb.episode(1)["feature_rgb"], feats["feature_rgb"])
    next((fa.root / "chunks").glob("*.feature_depth.npy")).unlink()
    assert feature_store(obs, pa, base_dir=tmp_path / "cache", report=log.append)[1]["status"] == "rebuilt"
    assert any("stale" in line and "missing" in line for line in log)


def test_il_trains_from_cached_features_when_the_trunks_are_frozen(corridor, episodes_file, tmp_path):
    from vlnverse.learn.trainer import run_training

    path = _encoder_file(tmp_path / "enc", size=16)
    sensors = [{"name": "rgb", "kind": "rgb", "width": 16, "height": 16},
               {"name": "depth", "kind": "depth", "width": 16, "height": 16}]
    params = {"hidden_size": 32, "rgb_encoder": {"type": "pretrained", "path": str(path)},
              "depth_encoder": {"type": "pretrained", "path": str(path)}}
    lines = []
    cfg = small_config(tmp_path / "run", episodes_file, policy="cma", policy__params=params, sensors=sensors,
                       il__epochs=6, validation__every=100, max_steps=40)
    summary = run_training(cfg, scene_loader=lambda *a: corridor, progress=False, report=lines.append)
    assert summary["feature_cache"]["status"] == "built" and summary["feature_cache"]["steps"] == summary["il"]["steps"]
    assert any("from cached features" in line for line in lines)
    import csv

    losses = [float(r["loss"]) for r in csv.DictReader(open(tmp_path / "run" / "train_log.csv")) if r["phase"] == "il"]
    assert len(losses) == 6 and losses[-1] < losses[0]
    cfg2 = small_config(tmp_path / "run2", episodes_file, policy="cma", policy__params=params, sensors=sensors,
                        il__epochs=1, validation__every=100, max_steps=40, cache__features=False)
    assert "feature_cache" not in run_training(cfg2, scene_loader=lambda *a: corridor, progress=False,
                                               report=lambda s: None)


def test_the_dagger_round_trains_from_cached_features_as_il_does(corridor, episodes_file, tmp_path):
    """Frozen trunks: the round reuses IL's teacher features and builds the aggregate's in its own
    folder, one feature step per collected step; its loss is the pixel path's within float16
    rounding; ``dagger.features=false`` trains from pixels."""
    import torch

    from vlnverse.learn.checkpoint import read_checkpoint
    from vlnverse.learn.dagger import AGGREGATE_FEATURES
    from vlnverse.learn.store import StepStore
    from vlnverse.learn.trainer import run_training

    path = _encoder_file(tmp_path / "enc", size=16)
    sensors = [{"name": "rgb", "kind": "rgb", "width": 16, "height": 16},
               {"name": "depth", "kind": "depth", "width": 16, "height": 16}]
    params = {"hidden_size": 32, "rgb_encoder": {"type": "pretrained", "path": str(path)},
              "depth_encoder": {"type": "pretrained", "path": str(path)}}
    common = {"policy": "cma", "policy__params": params, "sensors": sensors, "max_steps": 40,
              "validation__every": 100, "cache__dir": str(tmp_path / "cache")}
    il = small_config(tmp_path / "il", episodes_file, il__epochs=2, **common)
    run_training(il, scene_loader=lambda *a: corridor, progress=False, report=lambda s: None)
    init = str(Path(il.out) / "last.pt")

    def dagger(name, features):
        lines = []
        cfg = small_config(tmp_path / name, episodes_file, mode="dagger", init=init, val={},
                           dagger={"rounds": 1, "p": 0.5, "epochs": 1, "features": features}, **common)
        return run_training(cfg, scene_loader=lambda *a: corridor, progress=False, report=lines.append), lines

    (fea, lines), (pix, _) = dagger("fea", True), dagger("pix", False)
    # a folder of either resumes with the other (as cache.features): the same recipe
    assert json.loads((tmp_path / "fea" / "config.json").read_text())["run_key"] == \
        json.loads((tmp_path / "pix" / "config.json").read_text())["run_key"]
    (round_f,), (round_p,) = fea["dagger"], pix["dagger"]
    assert any("feature cache: reusing" in line for line in lines)  # IL's teacher features
    assert round_f["feature_cache"]["status"] == "built" and "feature_cache" not in round_p
    assert round_f["feature_cache"]["steps"] == round_f["collected_steps"] == round_p["collected_steps"]
    assert StepStore(next((tmp_path / "fea" / AGGREGATE_FEATURES / "features").iterdir())).num_steps == \
        round_f["collected_steps"]
    assert not (tmp_path / "pix" / AGGREGATE_FEATURES).exists()
    assert round_f["train_loss"] == pytest.approx(round_p["train_loss"], rel=1e-4)
    a = read_checkpoint(tmp_path / "fea" / "last.pt")["state_dict"]
    b = read_checkpoint(tmp_path / "pix" / "last.pt")["state_dict"]
    assert any(not torch.equal(a[k], b[k]) for k in a)  # float16 features: close, not the same bits
    assert all(torch.allclose(a[k].float(), b[k].float(), atol=5e-3) for k in a)


def test_auto_encoder_paths_are_resolved_only_when_asked_and_need_one_square_rig(tmp_path):
    """``{type: pretrained, path: auto}`` (the recipes' encoder, pretrained on the training homes):
    params without it are left alone; cameras of two sizes, or a single training home, are one-line errors."""
    from vlnverse.core.errors import ConfigError
    from vlnverse.learn.encoder import resolve_auto_encoders

    rig = [{"name": "rgb", "kind": "rgb", "width": 32, "height": 32}, {"name": "depth", "kind": "depth", "width": 32,
                                                                      "height": 32}]
    params = {"rgb_encoder": {"type": "cnn"}, "depth_encoder": {"type": "pretrained", "path": "x.safetensors"}}
    assert resolve_auto_encoders(params, rig, ["a.usd", "b.usd"], seed=0, cache_dir=tmp_path) is None
    assert params["depth_encoder"]["path"] == "x.safetensors"
    auto = {"rgb_encoder": {"type": "pretrained", "path": "auto"}}
    with pytest.raises(ConfigError, match="rgb_encoder.path.*square RGB and depth cameras of one size"):
        resolve_auto_encoders(auto, [rig[0], {**rig[1], "width": 48, "height": 48}], ["a.usd", "b.usd"], seed=0,
                              cache_dir=tmp_path)
    with pytest.raises(ConfigError, match="at least 2 training homes"):
        resolve_auto_encoders(auto, rig, ["a.usd", "a.usd"], seed=0, cache_dir=tmp_path)
    assert auto["rgb_encoder"]["path"] == "auto"  # nothing half-resolved
