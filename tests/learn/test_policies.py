"""Policy construction: the registry, the six VLN-CE actions, local pretrained weights (never downloaded)."""
from __future__ import annotations

import pytest

SENSORS = [{"name": "rgb", "kind": "rgb", "shape": [16, 16, 3]}, {"name": "depth", "kind": "depth", "shape": [16, 16]}]


def _vocab():
    from vlnverse.learn.vocab import Vocabulary

    return Vocabulary.build(["walk to the sofa", "turn left at the table"])


@pytest.mark.parametrize("name", ["seq2seq", "cma"])
def test_policies_score_the_six_vlnce_actions_and_batch_equals_stepwise(name):
    import torch

    from vlnverse.learn.policies import NUM_ACTIONS, POLICIES, VLNPolicy, build_policy
    from vlnverse.sim.types import DiscreteAction

    assert {"seq2seq", "cma", "rdp", "vlnbert"} <= set(POLICIES.names()) and NUM_ACTIONS == len(DiscreteAction) == 6
    assert issubclass(POLICIES.get("rdp"), VLNPolicy) and POLICIES.get(name).name == name
    torch.manual_seed(0)
    policy = build_policy(name, {"hidden_size": 32}, _vocab(), SENSORS).eval()
    tokens = torch.tensor([[2, 3, 4, 0], [5, 6, 1, 7]])
    frames = {"rgb": torch.randint(0, 255, (2, 5, 16, 16, 3), dtype=torch.uint8),
              "depth": (torch.rand(2, 5, 16, 16) * 5).half()}
    prev = torch.tensor([[0, 2, 2, 3, 1], [0, 1, 1, 4, 6]])
    with torch.no_grad():
        seq = policy.forward_sequence(tokens, frames, prev)
        instruction = policy.instruction(tokens)
        hidden = policy.initial_state(2)
        for t in range(5):  # the agent's step-by-step path computes the same logits
            visual = policy.encode_frames({k: v[:, t] for k, v in frames.items()})
            logits, hidden = policy.step(instruction, visual, prev[:, t], hidden)
            assert torch.allclose(logits, seq[:, t], atol=1e-5)
    assert seq.shape == (2, 5, 6)
    assert any("trained from scratch" in n for n in policy.notes)


def test_local_pretrained_weights_load_and_missing_files_are_errors(tmp_path):
    import torch

    from vlnverse.core.errors import ConfigError
    from vlnverse.learn.policies import CNNEncoder, build_policy

    donor = CNNEncoder(3, out_dim=128)
    from safetensors.torch import save_file

    save_file(donor.state_dict(), tmp_path / "rgb.pt")  # a plain safetensors state dict
    (tmp_path / "glove.txt").write_text("sofa " + " ".join(["0.5"] * 50) + "\nzebra " + " ".join(["1"] * 50) + "\n")
    params = {"rgb_encoder": {"type": "cnn", "weights": str(tmp_path / "rgb.pt")},
              "instruction_encoder": {"embeddings": str(tmp_path / "glove.txt")}}
    policy = build_policy("cma", params, _vocab(), SENSORS)
    assert torch.equal(policy.rgb.net[0].weight, donor.net[0].weight)
    assert torch.all(policy.instruction.embedding.weight[policy.vocab.index["sofa"]] == 0.5)
    assert any("loaded pretrained weights" in n for n in policy.notes)
    assert any("1 of" in n and "pretrained embeddings" in n for n in policy.notes)
    with pytest.raises(ConfigError, match="rgb_encoder.weights.*no such file"):
        build_policy("cma", {"rgb_encoder": {"weights": str(tmp_path / "none.pt")}}, _vocab(), SENSORS)
    with pytest.raises(ConfigError, match="depth_encoder.type"):
        build_policy("seq2seq", {"depth_encoder": {"type": "resnet18"}}, _vocab(), SENSORS)
    with pytest.raises(ConfigError, match="policy.params"):
        build_policy("seq2seq", {"hidden": 3}, _vocab(), SENSORS)


def test_policy_agent_names_the_expected_sensor_rig():
    import numpy as np

    from vlnverse.core.errors import ConfigError
    from vlnverse.learn.agent import PolicyAgent
    from vlnverse.learn.policies import build_policy
    from vlnverse.tasks.episode import Episode, Goal, Instruction

    policy = build_policy("seq2seq", {"hidden_size": 16}, _vocab(), SENSORS)
    policy.max_instruction_length = 8
    agent = PolicyAgent(policy=policy)
    episode = Episode("e", "s", "s.usda", "train", "fine_grained", [0, 0, 0], 0.0, [Goal([1, 0, 0])],
                      [[0, 0, 0], [1, 0, 0]], 1.0, [Instruction("walk to the zebra")])
    agent.reset(episode, None)
    good = {"rgb": np.zeros((16, 16, 3), np.uint8), "depth": np.ones((16, 16), np.float32)}
    assert 0 <= int(agent.propose(good)) < 6
    with pytest.raises(ConfigError, match=r"sensor 'rgb' gives \[32, 32, 3\].*shape \[16, 16, 3\]"):
        agent.propose({**good, "rgb": np.zeros((32, 32, 3), np.uint8)})
    with pytest.raises(ConfigError, match="observation 'depth' missing"):
        agent.propose({"rgb": good["rgb"]})
    with pytest.raises(ConfigError, match="exactly one of checkpoint / policy"):
        PolicyAgent()


def test_policy_agent_sets_torch_threads_unless_told_to_leave_them():
    """The acting process runs torch on ``threads`` (1 by default); None leaves the trainer's setting."""
    import torch

    from vlnverse.core.errors import ConfigError
    from vlnverse.learn.agent import PolicyAgent
    from vlnverse.learn.policies import build_policy

    policy = build_policy("seq2seq", {"hidden_size": 16}, _vocab(), SENSORS)
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        PolicyAgent(policy=policy, threads=None)
        assert torch.get_num_threads() == 2
        PolicyAgent(policy=policy)
        assert torch.get_num_threads() == 1
        with pytest.raises(ConfigError, match="threads.*an integer >= 1"):
            PolicyAgent(policy=policy, threads=0)
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("name", ["seq2seq", "cma"])
def test_progress_monitor_loss_targets_and_progress_decided_stop(name):
    """The progress head's target at step t of an n-step episode is (t + 1) / n (padding ignored);
    with stop_threshold the head alone decides STOP in eval mode."""
    import torch

    from vlnverse.core.errors import ConfigError
    from vlnverse.learn.policies import build_policy, sequence_loss

    torch.manual_seed(0)
    policy = build_policy(name, {"hidden_size": 32, "progress_weight": 2.0}, _vocab(), SENSORS)
    frames = {"rgb": torch.randint(0, 255, (2, 4, 16, 16, 3), dtype=torch.uint8),
              "depth": (torch.rand(2, 4, 16, 16) * 5).half()}
    batch = {"tokens": torch.tensor([[2, 3, 4, 0], [5, 6, 1, 7]]), "frames": frames,
             "prev": torch.tensor([[0, 2, 2, 1], [0, 1, 1, 0]]), "labels": torch.tensor([[1, 1, 2, 0], [1, 0, 0, 0]]),
             "weights": torch.tensor([[1.0, 1.0, 1.0, 1.0], [1.0, 1.0, 0.0, 0.0]])}  # lengths 4 and 2
    loss, correct = policy.imitation_loss(batch)
    logits, progress = policy.sequence_outputs(batch["tokens"], frames, batch["prev"])
    target = torch.tensor([[0.25, 0.5, 0.75, 1.0], [0.5, 1.0, 0.0, 0.0]])
    valid = batch["weights"] > 0
    expected = sequence_loss(logits, batch["labels"], batch["weights"]) + 2.0 * ((progress - target)[valid] ** 2).mean()
    assert torch.allclose(loss, expected, atol=1e-6)
    assert correct == float(((logits.argmax(-1) == batch["labels"]) & valid).sum())
    # the head decides STOP: bias it to p̂ = sigmoid(+-20)
    policy = build_policy(name, {"hidden_size": 32, "progress_weight": 1.0, "stop_threshold": 0.5}, _vocab(), SENSORS).eval()
    instruction = policy.instruction(batch["tokens"])
    visual = policy.encode_frames({k: v[:, 0] for k, v in frames.items()})
    with torch.no_grad():
        for bias, stops in ((20.0, True), (-20.0, False)):
            policy.progress_head.weight.zero_()
            policy.progress_head.bias.fill_(bias)
            logits, _ = policy.step(instruction, visual, batch["prev"][:, 0], policy.initial_state(2))
            assert bool((logits.argmax(-1) == 0).all()) is stops
    with pytest.raises(ConfigError, match="stop_threshold"):
        build_policy(name, {"stop_threshold": 0.9}, _vocab(), SENSORS)  # no progress head to decide
    with pytest.raises(ConfigError, match="progress_weight"):
        build_policy(name, {"progress_weight": -1}, _vocab(), SENSORS)


def _keywords(cls) -> dict:
    """The keyword-only parameters (with defaults) of ``cls``'s constructors along its bases."""
    import inspect

    own: dict = {}
    for klass in reversed(cls.__mro__):
        if "__init__" in vars(klass):
            own.update({k: p.default for k, p in inspect.signature(klass.__init__).parameters.items()
                        if p.kind is p.KEYWORD_ONLY and k not in ("seed", "model")})
    return own


def test_every_policy_declares_params_matching_its_constructor():
    """Each built-in policy (and the agents that run checkpoints) declares ``Params`` whose fields
    and defaults are its constructors' keywords; ``build_policy`` refuses what they refuse, naming
    ``policy.params.<field>``, before anything is built."""
    import dataclasses

    from vlnverse.core.errors import ConfigError
    from vlnverse.core.params import param_range
    from vlnverse.run.agents import AGENTS
    from vlnverse.learn.policies import POLICIES, build_policy

    for name in ("seq2seq", "cma", "rdp", "vlnbert", "graph_nf", "room_classifier"):
        cls = POLICIES.get(name)
        assert {f.name: f.default for f in dataclasses.fields(cls.Params)} == _keywords(cls), name
    for name in ("policy", "graph_policy"):
        cls = AGENTS.get(name)
        assert {f.name: f.default for f in dataclasses.fields(cls.Params)} == _keywords(cls), name
    rdp = {f.name: param_range(f) for f in dataclasses.fields(POLICIES.get("rdp").Params)}
    assert rdp["diffusion_steps"] == (2, 10_000) and rdp["progress_weight"][0] == 0.0
    cases = [("cma", {"attention_size": 0}, r"policy.params.attention_size: got 0 \(expected a number in \[1, 8192\]\)"),
             ("seq2seq", {"progress_weight": -0.5}, r"policy.params.progress_weight: got -0.5 \(expected a number >= 0\)"),
             ("seq2seq", {"hidden_size": 32.5}, r"policy.params.hidden_size: got 32.5 \(expected an integer\)"),
             ("seq2seq", {"rgb_encoder": "cnn"}, r"policy.params.rgb_encoder: got 'cnn' \(expected a mapping\)"),
             ("cma", {"stop_threshold": 1.5, "progress_weight": 1.0}, r"policy.params.stop_threshold: stop_threshold 1.5"),
             ("rdp", {"ddim_steps": 30}, r"policy.params.ddim_steps: bad value 30 \(expected 1..diffusion_steps\)"),
             ("rdp", {"attention_heads": 3}, r"policy.params.attention_heads: bad value 3"),
             ("rdp", {"stop_threshold": 1.0}, r"policy.params.stop_threshold: bad value 1.0 \(expected in \(0, 1\)\)"),
             ("vlnbert", {}, r"policy.params.waypoint_predictor: VLN-BERT needs a waypoint predictor"),
             ("vlnbert", {"waypoint_predictor": "p.pt", "no_candidate_turn_deg": 190},
              r"policy.params.no_candidate_turn_deg: got 190.0 \(expected a number in \[0.1, 180\]\)"),
             ("graph_nf", {"hidden_size": 30}, r"policy.params.heads: hidden_size 30 with heads 4"),
             ("room_classifier", {"classes": ["kitchen"]}, r"policy.params.classes: got \['kitchen'\]"),
             ("room_classifier", {"sight": 0}, r"policy.params.sight: got 0.0 \(expected a number in \[0.1, 100\]\)")]
    for name, params, message in cases:
        with pytest.raises(ConfigError, match="^" + message):
            build_policy(name, params, _vocab(), SENSORS)
    # RDP's own progress head: its stop_threshold needs no base-class progress_weight
    assert build_policy("rdp", {"hidden_size": 32, "progress_weight": 0.0}, _vocab(), SENSORS).stop_threshold == 0.95


def test_a_plugin_policy_without_params_still_has_its_base_fields_checked():
    from vlnverse.core.errors import ConfigError
    from vlnverse.learn.policies import POLICIES, VLNPolicy, build_policy, register_policy

    @register_policy("_params_probe")
    class Probe(VLNPolicy):
        def __init__(self, vocab, sensors, *, bias: float = 0.0, **params):
            super().__init__(vocab, sensors, **params)
            self.bias = bias

    try:
        assert build_policy("_params_probe", {"bias": 2.0, "hidden_size": 16}, _vocab(), SENSORS).bias == 2.0
        with pytest.raises(ConfigError, match=r"^policy.params.max_depth: got 0.0"):
            build_policy("_params_probe", {"max_depth": 0.0}, _vocab(), SENSORS)
        with pytest.raises(ConfigError, match=r"^policy.params: .*unexpected keyword argument 'colour'"):
            build_policy("_params_probe", {"colour": 1}, _vocab(), SENSORS)
    finally:
        POLICIES._items.pop("_params_probe", None)
