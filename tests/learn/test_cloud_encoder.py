"""HNR / GAMA's feature cloud from the visual encoder pretrained by ``vlnverse pretrain-encoder``
(``cloud_encoder: {type: pretrained, path, trunk}``) instead of the waypoint predictor's CNN: the
grid features it gives, the teacher recording them, a checkpoint that acts without the file, and
the one-line errors. The encoder file is a tiny random one the test writes (no download)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from test_encoder import _encoder_file  # noqa: E402
from test_hnr_gama import GAMA, _cfg  # noqa: E402
from test_vlnbert import _train, predictor_file  # noqa: E402,F401 (the session fixture)


def test_pretrained_grid_encoder_pools_the_trunks_spatial_map(tmp_path):
    from torch.nn import functional as F

    from vlnverse.learn.encoder import read_encoder
    from vlnverse.learn.hnr import PretrainedGridEncoder

    path = _encoder_file(tmp_path / "enc", size=16, channels=4)
    enc = PretrainedGridEncoder("depth", 16, 10.0, path=str(path))
    state, _ = read_encoder(path)
    assert enc.grid_channels == 8 and all(torch.equal(v, state[f"depth.{k}"]) for k, v in enc.trunk.state_dict().items())
    assert not any(p.requires_grad for p in enc.parameters())
    depth = torch.rand(1, 12, 16, 16) * 12.0  # beyond max_depth clamps to 1
    out = enc.grid_features(depth, None, 2)
    want = F.adaptive_avg_pool2d(enc.trunk.net((depth.clamp(0, 10) / 10).reshape(12, 1, 16, 16)), 2)
    assert out.shape == (1, 12, 8, 2, 2) and torch.allclose(out[0], want, atol=1e-6)
    rgb = PretrainedGridEncoder("rgb", 16, 10.0, path=str(path))
    pix = torch.randint(0, 255, (1, 12, 16, 16, 3), dtype=torch.uint8)
    assert rgb.needs_rgb and rgb.grid_features(depth, pix, 1).shape == (1, 12, 8, 1, 1)
    assert not torch.allclose(rgb.grid_features(depth, pix, 1), enc.grid_features(depth, None, 1))


def test_cloud_encoder_errors_are_one_line(tmp_path, predictor_file):
    from vlnverse.core.errors import ConfigError
    from vlnverse.learn.gama import GAMAParams
    from vlnverse.learn.hnr import PretrainedGridEncoder, cloud_encoder_spec

    path = _encoder_file(tmp_path / "enc32", size=32)
    cases = [(lambda: PretrainedGridEncoder("depth", 16, 10.0, path=str(path)), "policy.params.cloud_encoder"),  # other rig
             (lambda: cloud_encoder_spec({"type": "pretrained", "path": str(path), "trunk": "semantic"}), "cloud_encoder.trunk"),
             (lambda: cloud_encoder_spec("pretrained"), "cloud_encoder"),
             (lambda: cloud_encoder_spec({"type": "clip", "path": "x"}), "cloud_encoder"),
             (lambda: GAMAParams(waypoint_predictor=str(predictor_file), cloud_grid=0,
                                 cloud_encoder={"type": "pretrained", "path": str(path)}).validate(), "cloud_encoder")]
    for build, field in cases:
        with pytest.raises(ConfigError) as err:
            build()
        assert field in str(err.value) and "\n" not in str(err.value), str(err.value)
    assert cloud_encoder_spec(None) == cloud_encoder_spec("predictor") == {"type": "predictor"}


@pytest.mark.parametrize("trunk", ["depth", "rgb"])
def test_gama_trains_and_acts_on_a_pretrained_encoders_grid_features(corridor, episodes_file, predictor_file, tmp_path,
                                                                     trunk):
    from vlnverse.run.agents import make_agent
    from vlnverse.learn.checkpoint import read_checkpoint
    from vlnverse.learn.hnr import HNRPerception, PretrainedGridEncoder
    from vlnverse.learn.store import StepStore
    from vlnverse.learn.waypoints.model import load_predictor
    from learn_helpers import make_episodes
    from test_trainer import _actions

    predictor = load_predictor(predictor_file)
    size = int(predictor.params["image_size"])
    path = _encoder_file(tmp_path / "enc", size=size, channels=4, seed=3)
    params = {**GAMA, "cloud_encoder": {"type": "pretrained", "path": str(path), "trunk": trunk}}
    cfg = _cfg(tmp_path / "il", episodes_file, predictor_file, "gama", params, il__epochs=1)
    summary = _train(cfg, corridor)
    ep = StepStore(summary["cache"]["path"]).episode(0)
    # the teacher recorded the encoder's grid features (8 channels; the predictor's trunk has another width);
    # the RGB trunk reads an RGB panorama the depth-only predictor does not need
    assert ep["view_grid"].shape[1:] == (12, 8, 2, 2) and predictor.grid_channels != 8
    perception_encoder = PretrainedGridEncoder(trunk, size, predictor.params["max_depth"], path=str(path))
    perception = HNRPerception(predictor, 2, None, perception_encoder)
    x, y, yaw = (float(v) for v in ep["world_pose"][0])
    perception(corridor.desc, corridor.body, (x, y, yaw))
    assert np.allclose(ep["view_grid"][0], perception.last_grid, atol=1e-5) and ep["view_grid"].std() > 0
    # the checkpoint holds the frozen trunk: it rebuilds and acts with the encoder file gone
    ckpt = Path(cfg.out) / "last.pt"
    data = read_checkpoint(ckpt)
    trunk = {k: v for k, v in data["state_dict"].items() if k.startswith("cloud_encoder.trunk.")}
    mine = perception_encoder.state_dict()
    assert trunk and all(torch.equal(v, mine[k[len("cloud_encoder."):]]) for k, v in trunk.items())
    for f in path.parent.iterdir():
        f.unlink()
    agent = make_agent("policy", {"checkpoint": str(ckpt)})
    assert agent.policy.cloud_encoder is not None and agent.policy.feat_dim == 8
    actions = _actions(agent, corridor, make_episodes(corridor)[:1])
    assert actions[0] and any("experts" in o for o in agent.outputs)
    # the policy agent's observation option (what a task's eval sets) reaches the policy's perception
    mono = make_agent("policy", {"checkpoint": str(ckpt), "observation": {"view": "monocular", "hfov_deg": 90}})
    _actions(mono, corridor, make_episodes(corridor)[:1])
    seen = mono.cache["hnr_perception"]
    assert seen.observation.monocular and (seen.last_depth[1:] == -1).all() and (seen.last_depth[0] >= 0).all()
