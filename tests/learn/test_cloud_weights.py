"""HNR / GAMA's feature cloud from a user's own encoder weights file (``cloud_encoder: {type:
cnn | resnet18 | resnet50 | clip_vit, weights: FILE}``): grid features of the encoder's last
feature map, the teacher cache's key, the one-line errors, training and a checkpoint that acts
without the file. The weights files are tiny random ones the tests write (nothing is downloaded)."""
from __future__ import annotations

import math
import shutil
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from test_hnr_gama import GAMA, SMALL, _cfg  # noqa: E402
from test_vlnbert import _train, predictor_file  # noqa: E402,F401 (the session fixture)


def _clip_file(path: Path, seed: int = 0, width: int = 64, layers: int = 2, patch: int = 4, grid: int = 4,
               output_dim: int = 24, prefix: str = "visual.") -> Path:
    """A tiny CLIP ViT image tower in OpenAI's layout (``visual.*``, beside a text tower's tensor)."""
    from safetensors.torch import save_file

    from vlnverse.learn.encoders import CLIPVisionEncoder

    torch.manual_seed(seed)
    m = CLIPVisionEncoder(width, layers, max(1, width // 64), patch, grid, output_dim)
    for p in m.parameters():  # LayerNorms away from the identity, so every tensor matters
        p.data.add_(0.1 * torch.randn_like(p))
    state = {prefix + k: v.contiguous() for k, v in m.state_dict().items()}
    if prefix:
        state["token_embedding.weight"] = torch.zeros(4, 8)  # a whole CLIP: the text tower is ignored
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(state, str(path))
    return path


def _cnn_file(path: Path, in_channels: int = 1, channels: int = 4, seed: int = 0) -> Path:
    from safetensors.torch import save_file

    from vlnverse.learn.encoders import CNNEncoder

    torch.manual_seed(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    save_file(CNNEncoder(in_channels, out_dim=16, channels=channels).state_dict(), str(path))
    return path


def _reference_clip(state: dict, x: torch.Tensor, heads: int) -> torch.Tensor:
    """OpenAI CLIP's ViT forward written out by hand (pre-LN blocks, QuickGELU, q/k/v stacked in
    ``in_proj``), patch tokens after ln_post @ proj as (N, D, g, g): checks the module's layout."""
    from torch.nn import functional as F

    from vlnverse.learn.encoders import CLIP_MEAN, CLIP_STD

    s = {k[len("visual."):]: v for k, v in state.items() if k.startswith("visual.")}
    patch = s["conv1.weight"].shape[-1]
    g = int(math.isqrt(s["positional_embedding"].shape[0] - 1))
    x = F.interpolate(x, size=(g * patch, g * patch), mode="bilinear", align_corners=False)
    x = (x - torch.tensor(CLIP_MEAN).view(1, 3, 1, 1)) / torch.tensor(CLIP_STD).view(1, 3, 1, 1)
    t = F.conv2d(x, s["conv1.weight"], stride=patch).flatten(2).transpose(1, 2)
    t = torch.cat([s["class_embedding"].expand(t.shape[0], 1, -1), t], 1) + s["positional_embedding"]
    w = t.shape[-1]
    t = F.layer_norm(t, (w,), s["ln_pre.weight"], s["ln_pre.bias"])
    layers = len({k.split(".")[2] for k in s if k.startswith("transformer.resblocks.")})
    for i in range(layers):
        b = {k[len(f"transformer.resblocks.{i}."):]: v for k, v in s.items() if k.startswith(f"transformer.resblocks.{i}.")}
        y = F.layer_norm(t, (w,), b["ln_1.weight"], b["ln_1.bias"])
        q, k, v = (y @ b["attn.in_proj_weight"].T + b["attn.in_proj_bias"]).chunk(3, -1)
        split = lambda z: z.reshape(*z.shape[:2], heads, w // heads).transpose(1, 2)  # noqa: E731
        a = torch.softmax(split(q) @ split(k).transpose(-1, -2) / math.sqrt(w // heads), -1) @ split(v)
        t = t + a.transpose(1, 2).reshape(t.shape) @ b["attn.out_proj.weight"].T + b["attn.out_proj.bias"]
        y = F.layer_norm(t, (w,), b["ln_2.weight"], b["ln_2.bias"]) @ b["mlp.c_fc.weight"].T + b["mlp.c_fc.bias"]
        t = t + (y * torch.sigmoid(1.702 * y)) @ b["mlp.c_proj.weight"].T + b["mlp.c_proj.bias"]
    t = F.layer_norm(t[:, 1:], (w,), s["ln_post.weight"], s["ln_post.bias"]) @ s["proj"]
    return t.transpose(1, 2).reshape(t.shape[0], -1, g, g)


def test_clip_weights_give_grid_features_of_the_last_layers_patch_tokens(tmp_path):
    from safetensors.torch import load_file
    from torch.nn import functional as F

    from vlnverse.learn.hnr import WeightsGridEncoder, cloud_encoder_spec

    path = _clip_file(tmp_path / "clip.safetensors")
    enc = WeightsGridEncoder(cloud_encoder_spec({"type": "clip_vit", "weights": str(path)}), 10.0)
    assert enc.arch == {"width": 64, "layers": 2, "patch": 4, "grid": 4, "output_dim": 24} and enc.grid_channels == 24
    assert enc.needs_rgb and not any(p.requires_grad for p in enc.parameters())
    enc.train()
    assert not enc.training  # frozen statistics whatever the policy's mode
    rgb = torch.randint(0, 255, (1, 12, 16, 16, 3), dtype=torch.uint8)
    depth = torch.rand(1, 12, 16, 16)
    out = enc.grid_features(depth, rgb, 2)
    x = rgb[0].float().permute(0, 3, 1, 2) / 255.0
    want = F.adaptive_avg_pool2d(_reference_clip(load_file(str(path)), x, 1), 2)
    assert out.shape == (1, 12, 24, 2, 2) and torch.allclose(out[0], want, atol=1e-4), (out[0] - want).abs().max()
    assert enc.grid_features(depth, rgb, 4).shape == (1, 12, 24, 4, 4) and out.std() > 0
    # other weights, other features; a bare image tower (no ``visual.`` prefix) loads the same
    other = WeightsGridEncoder(cloud_encoder_spec({"type": "clip_vit", "weights": str(
        _clip_file(tmp_path / "clip2.safetensors", seed=1))}), 10.0)
    assert (other.grid_features(depth, rgb, 2) - out).abs().max() > 1e-2
    bare = WeightsGridEncoder(cloud_encoder_spec({"type": "clip_vit", "weights": str(
        _clip_file(tmp_path / "bare.safetensors", prefix=""))}), 10.0)
    assert torch.allclose(bare.grid_features(depth, rgb, 2), out, atol=1e-6)


def test_cnn_weights_pool_the_last_convolutions_map(tmp_path):
    from torch.nn import functional as F

    from vlnverse.learn.encoders import CNNEncoder
    from vlnverse.learn.hnr import WeightsGridEncoder, cloud_encoder_spec

    path = _cnn_file(tmp_path / "depth.safetensors", channels=4, seed=2)
    enc = WeightsGridEncoder(cloud_encoder_spec({"type": "cnn", "weights": str(path)}), 10.0)
    torch.manual_seed(2)
    donor = CNNEncoder(1, out_dim=16, channels=4)  # the file's weights, rebuilt from the seed
    assert enc.grid_channels == 8 and not enc.needs_rgb and not hasattr(enc.trunk, "fc")
    depth = torch.rand(1, 12, 32, 32) * 12.0  # beyond max_depth clamps
    got = enc.grid_features(depth, None, 2)
    last = donor.net[:-1]((depth[0].clamp(0, 10) / 10).reshape(12, 1, 32, 32))  # (12, 8, 4, 4) before the 4x4 pool
    assert last.shape[-1] == 4 and torch.allclose(got[0], F.adaptive_avg_pool2d(last, 2), atol=1e-6)
    other = WeightsGridEncoder(cloud_encoder_spec({"type": "cnn", "weights": str(
        _cnn_file(tmp_path / "d2.safetensors", channels=4, seed=3))}), 10.0)
    assert (other.grid_features(depth, None, 2) - got).abs().max() > 1e-3
    rgb = WeightsGridEncoder(cloud_encoder_spec({"type": "cnn", "trunk": "rgb", "weights": str(
        _cnn_file(tmp_path / "rgb.safetensors", in_channels=3, channels=2))}), 10.0)
    pix = torch.randint(0, 255, (1, 12, 32, 32, 3), dtype=torch.uint8)
    assert rgb.needs_rgb and rgb.grid_features(depth, pix, 1).shape == (1, 12, 4, 1, 1)


def test_resnet_weights_give_layer4_grid_features(tmp_path):
    torchvision = pytest.importorskip("torchvision")
    from safetensors.torch import save_file
    from torch.nn import functional as F

    from vlnverse.learn.hnr import WeightsGridEncoder, cloud_encoder_spec

    torch.manual_seed(0)
    net = torchvision.models.resnet18(weights=None).eval()
    save_file(net.state_dict(), str(tmp_path / "r18.safetensors"))
    enc = WeightsGridEncoder(cloud_encoder_spec({"type": "resnet18", "weights": str(tmp_path / "r18.safetensors")}), 10.0)
    pix = torch.randint(0, 255, (1, 12, 64, 64, 3), dtype=torch.uint8)
    got = enc.grid_features(torch.rand(1, 12, 64, 64), pix, 2)
    x = pix[0].float().permute(0, 3, 1, 2) / 255.0
    x = (x - torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)) / torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    with torch.no_grad():
        last = torch.nn.Sequential(*list(net.children())[:-2])(x)
    assert got.shape == (1, 12, 512, 2, 2) and torch.allclose(got[0], F.adaptive_avg_pool2d(last, 2), atol=1e-4)
    # a checkpoint's tensors rebuild it without the file (what params_from_checkpoint does)
    from vlnverse.learn.hnr import weights_arch

    again = WeightsGridEncoder({"type": "resnet18", "arch": weights_arch("resnet18", enc.trunk.state_dict())}, 10.0)
    again.load_state_dict(enc.state_dict())
    assert torch.equal(again.grid_features(torch.rand(1, 12, 64, 64), pix, 2), got)


def test_the_teacher_cache_key_follows_the_weights(tmp_path, predictor_file):
    from vlnverse.learn.hnr import HNRPolicy

    a = _clip_file(tmp_path / "a.safetensors")
    copy = tmp_path / "copy" / "a.safetensors"
    copy.parent.mkdir()
    shutil.copy(a, copy)
    b = _clip_file(tmp_path / "b.safetensors", seed=1)

    def key(spec):
        return HNRPolicy.teacher_spec({"waypoint_predictor": str(predictor_file), "cloud_grid": 2,
                                       "cloud_encoder": spec}).key

    ka = key({"type": "clip_vit", "weights": str(a)})
    assert ka["cloud_encoder"]["type"] == "clip_vit" and len(ka["cloud_encoder"]["sha256"]) == 16
    assert key({"type": "clip_vit", "weights": str(copy)}) == ka  # by content, not by path
    assert key({"type": "clip_vit", "weights": str(b)}) != ka
    assert key({"type": "clip_vit", "weights": str(a), "heads": 2}) != ka
    assert key("predictor") != ka and "cloud_encoder" not in key("predictor")
    cnn = _cnn_file(tmp_path / "d.safetensors")
    assert key({"type": "cnn", "weights": str(cnn)}) != key({"type": "cnn", "weights": str(
        _cnn_file(tmp_path / "d2.safetensors", seed=5))})
    a.write_bytes(b.read_bytes())  # the file changed in place: a new cache
    assert key({"type": "clip_vit", "weights": str(a)}) == key({"type": "clip_vit", "weights": str(b)}) != ka


def test_bad_weights_are_one_line_errors(tmp_path, predictor_file):
    from vlnverse.core.errors import ConfigError
    from vlnverse.learn.hnr import HNRParams, HNRPolicy, WeightsGridEncoder, cloud_encoder_spec

    clip = _clip_file(tmp_path / "clip.safetensors")
    cnn = _cnn_file(tmp_path / "cnn.safetensors")
    pickle = tmp_path / "r18.pt"
    torch.save({"conv1.weight": torch.zeros(2, 3, 4, 4)}, pickle)
    (tmp_path / "junk.safetensors").write_bytes(b"not a tensor file")

    def build(spec):
        return lambda: WeightsGridEncoder(cloud_encoder_spec(spec), 10.0)

    cases = [(build({"type": "clip_vit", "weights": str(cnn)}), "cnn.safetensors", "not a clip_vit state dict"),
             (build({"type": "cnn", "weights": str(clip)}), "clip.safetensors", "not a cnn state dict"),
             (build({"type": "cnn", "trunk": "rgb", "weights": str(cnn)}), "cnn.safetensors", "size mismatch for net.0.weight"),
             (build({"type": "clip_vit", "weights": str(clip), "heads": 3}), "clip.safetensors", "do not divide"),
             (build({"type": "clip_vit", "weights": str(pickle)}), "r18.pt", ""),
             (build({"type": "clip_vit", "weights": str(tmp_path / "junk.safetensors")}), "junk.safetensors", ""),
             (build({"type": "cnn", "weights": str(tmp_path / "gone.safetensors")}), "gone.safetensors", "no such file"),
             (lambda: cloud_encoder_spec({"type": "clip_vit"}), "cloud_encoder.weights", ""),
             (lambda: cloud_encoder_spec({"type": "clip_vit", "weights": "x", "trunk": "rgb", "channels": 4}),
              "cloud_encoder", "unknown key"),
             (lambda: cloud_encoder_spec({"type": "resnet18", "path": "x"}), "cloud_encoder", "unknown key"),
             (lambda: cloud_encoder_spec({"type": "clip_vit", "weights": "x", "heads": 0}), "cloud_encoder.heads", ""),
             (lambda: HNRParams(waypoint_predictor="p.pt", cloud_grid=0,
                                cloud_encoder={"type": "cnn", "weights": str(cnn)}).validate(), "cloud_encoder", "cloud_grid 0"),
             (lambda: HNRPolicy.teacher_spec({"waypoint_predictor": str(predictor_file),
                                              "cloud_encoder": {"type": "cnn", "arch": {"channels": 4}}}),
              "cloud_encoder.weights", "needs the cloud encoder's file")]
    for make, where, what in cases:
        with pytest.raises(ConfigError) as err:
            make()
        msg = str(err.value)
        assert where in msg and what in msg and "\n" not in msg, msg
    # the field names the file's option: policy.params.cloud_encoder.weights
    with pytest.raises(ConfigError, match=r"r18\.pt: policy\.params\.cloud_encoder\.weights"):
        build({"type": "clip_vit", "weights": str(pickle)})()


@pytest.mark.parametrize("policy,params,spec", [("hnr", SMALL, "clip_vit"), ("gama", GAMA, "cnn")])
def test_trains_and_acts_on_a_weights_files_grid_features(corridor, episodes_file, predictor_file, tmp_path, policy,
                                                         params, spec):
    from vlnverse.core.errors import ConfigError
    from vlnverse.run.agents import make_agent
    from vlnverse.learn.checkpoint import read_checkpoint
    from vlnverse.learn.hnr import HNRPerception, WeightsGridEncoder, checkpoint_teacher, cloud_encoder_spec
    from vlnverse.learn.store import StepStore
    from vlnverse.learn.waypoints.model import load_predictor
    from learn_helpers import make_episodes
    from test_trainer import _actions

    predictor = load_predictor(predictor_file)
    path = _clip_file(tmp_path / "w" / "enc.safetensors", seed=4) if spec == "clip_vit" else \
        _cnn_file(tmp_path / "w" / "enc.safetensors", channels=5, seed=4)
    channels = 24 if spec == "clip_vit" else 10
    enc_spec = {"type": spec, "weights": str(path)}
    cfg = _cfg(tmp_path / "il", episodes_file, predictor_file, policy, {**params, "cloud_encoder": enc_spec},
               il__epochs=1)
    summary = _train(cfg, corridor)
    ep = StepStore(summary["cache"]["path"]).episode(0)
    # the teacher recorded the file's grid features, of its width (not the predictor's)
    assert ep["view_grid"].shape[1:] == (12, channels, 2, 2) and predictor.grid_channels != channels
    encoder = WeightsGridEncoder(cloud_encoder_spec(enc_spec), predictor.params["max_depth"])
    perception = HNRPerception(predictor, 2, None, encoder)
    x, y, yaw = (float(v) for v in ep["world_pose"][0])
    perception(corridor.desc, corridor.body, (x, y, yaw))
    assert np.allclose(ep["view_grid"][0], perception.last_grid, atol=1e-4) and ep["view_grid"].std() > 0
    ckpt = Path(cfg.out) / "last.pt"
    data = read_checkpoint(ckpt)
    trunk = {k: v for k, v in data["state_dict"].items() if k.startswith("cloud_encoder.trunk.")}
    mine = encoder.state_dict()
    assert trunk and trunk.keys() == {f"cloud_encoder.{k}" for k in mine}
    assert all(torch.equal(v, mine[k[len("cloud_encoder."):]]) for k, v in trunk.items())
    # the lookahead bench's teacher: the file must hold the checkpoint's weights
    from vlnverse.learn.checkpoint import policy_from_checkpoint

    rebuilt = policy_from_checkpoint(data)
    teacher = checkpoint_teacher(rebuilt, data, tmp_path / "lk", file=ckpt)
    assert teacher.key["cloud_encoder"]["type"] == spec and teacher.encoder_path == str(path)
    original = path.read_bytes()
    (_clip_file if spec == "clip_vit" else _cnn_file)(path, **({"channels": 5} if spec == "cnn" else {}), seed=9)
    with pytest.raises(ConfigError, match="holds other weights than the checkpoint's trunk"):
        checkpoint_teacher(rebuilt, data, tmp_path / "lk", file=ckpt)
    path.write_bytes(original)
    # the checkpoint rebuilds and acts with the weights file gone
    shutil.rmtree(path.parent)
    with pytest.raises(ConfigError, match="cloud encoder's file .* is not here"):
        checkpoint_teacher(rebuilt, data, tmp_path / "lk", file=ckpt)
    agent = make_agent("policy", {"checkpoint": str(ckpt)})
    assert isinstance(agent.policy.cloud_encoder, WeightsGridEncoder) and agent.policy.feat_dim == channels
    assert agent.policy.renderer.density[0].in_features == SMALL["hidden_size"] + channels  # the renderer reads its width
    for k, v in agent.policy.cloud_encoder.state_dict().items():
        assert torch.equal(v, mine[k])
    actions = _actions(agent, corridor, make_episodes(corridor)[:1])
    assert actions[0]
