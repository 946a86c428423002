"""The ``hnr`` and ``gama`` policies through the trainer (VLN-BERT's oracle with the cloud's
inputs recorded), checkpoints that round-trip into the ``policy`` agent, and acting in the runner."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from learn_helpers import small_config

torch = pytest.importorskip("torch")

from test_vlnbert import RIG16, _eval, _train, predictor_file  # noqa: E402,F401 (the session fixture)

from vlnverse.learn.checkpoint import policy_from_checkpoint, read_checkpoint  # noqa: E402

SMALL = {"hidden_size": 32, "cloud_cap": 192, "history": 4, "render": {"k": 3, "rays": 2, "samples": 6}}
GAMA = {**SMALL, "experts": 3, "top_k": 2}


def _cfg(out, episodes_file, predictor_file, policy, params, **kw):
    base = dict(policy=policy, policy__params={**params, "waypoint_predictor": str(predictor_file)}, sensors=RIG16,
                max_steps=25, il__batch_size=2, validation__every=1000, val={})
    base.update(kw)
    return small_config(out, episodes_file, **base)


@pytest.mark.parametrize("policy,params", [("hnr", SMALL), ("gama", GAMA)])
def test_trains_records_the_cloud_inputs_and_the_checkpoint_round_trips(corridor, episodes_file, predictor_file, tmp_path,
                                                                          policy, params):
    from vlnverse.run.agents import make_agent
    from vlnverse.learn.store import StepStore
    from learn_helpers import make_episodes
    from test_trainer import _actions

    cfg = _cfg(tmp_path / "il", episodes_file, predictor_file, policy, params, il__epochs=2)
    summary = _train(cfg, corridor)
    ep = StepStore(summary["cache"]["path"]).episode(0)
    # the cloud's inputs: per-cell depths and the encoder's grid features of the 12 views (2 x 2 cells each)
    assert ep["view_depth"].shape[1:] == (12, 2, 2) and (ep["view_depth"] > 0).all() and (ep["view_depth"] <= 10).all()
    from vlnverse.learn.waypoints.model import load_predictor

    assert ep["view_grid"].shape[1:] == (12, load_predictor(predictor_file).grid_channels, 2, 2)
    assert ep["view_grid"].std() > 0
    assert np.allclose(ep["world_pose"], ep["pose"])
    assert summary["cache"]["teacher_SR"] >= 0.75
    data = read_checkpoint(Path(cfg.out) / "last.pt")
    assert data["policy"] == policy and any(k.startswith("renderer.") for k in data["state_dict"])
    rebuilt = policy_from_checkpoint(data)
    assert data["cloud"] == {"grid": 2} and rebuilt.cloud_grid == 2  # the default grid is kept with the weights
    legacy = {k: v for k, v in data.items() if k != "cloud"}  # a checkpoint from before grid features: one point per view
    assert type(rebuilt).params_from_checkpoint(dict(data["config"]["policy"]["params"]), legacy, "x")["cloud_grid"] == 0
    for key, value in rebuilt.state_dict().items():
        assert torch.equal(value, data["state_dict"][key]), key
    # render.background travels with the weights (default on); a checkpoint from before it renders without
    assert data["render"] == {"background": True} and rebuilt.render_background is True
    old = policy_from_checkpoint({k: v for k, v in data.items() if k != "render"})
    assert old.render_background is False
    step = {k: torch.from_numpy(np.asarray(ep[k][:1], dtype=np.float32)) for k in
            ("view_feats", "candidates", "view_depth", "world_pose", "view_grid")}
    args = (step["view_feats"], step["candidates"], step["view_depth"], step["world_pose"])
    with torch.no_grad():
        got_old = old.render_lookaheads(*args, old.new_memory(1, "cpu"), step["view_grid"])
        mem = rebuilt.new_memory(1, "cpu")
        got_new = rebuilt.render_lookaheads(*args, mem, step["view_grid"])
        heading = step["world_pose"][:, None, 2] + step["candidates"][..., 0]
        origins = torch.cat([got_new[2], torch.zeros(*heading.shape, 1)], -1)
        plain = rebuilt.renderer(mem.cloud, origins, heading)  # Eq. 4 alone, as before the background
    assert torch.equal(got_old[0], plain[0]) and torch.equal(got_old[1], got_new[1])
    assert not torch.allclose(got_new[0], plain[0]) and float(got_new[1].min()) < 1  # the background fills the gaps
    if policy == "gama":  # the global action space travels with the weights; a checkpoint from before it has none
        assert data["gama"] == {"global_actions": True, "merge_radius": 0.5, "frontier": 16} and rebuilt.global_actions
        old = {k: v for k, v in data.items() if k != "gama"}
        assert type(rebuilt).params_from_checkpoint(dict(data["config"]["policy"]["params"]), old, "x")["global_actions"] is False
    agent = make_agent("policy", {"checkpoint": str(Path(cfg.out) / "last.pt")})
    actions = _actions(agent, corridor, make_episodes(corridor)[:1])
    assert actions[0]
    steps = [o for o in agent.outputs if "candidates" in o]
    assert steps
    if policy == "gama":  # expert usage is logged per step: top-k distinct experts among N, a fusion weight in (0, 1)
        assert all(len(set(o["experts"])) == 2 and all(0 <= e < 3 for e in o["experts"]) and 0 < o["sigma"] < 1 for o in steps)
        for o in steps:  # and the router's probabilities over the 3 experts, whose 2 largest are the chosen experts
            assert len(o["router"]) == 3 and abs(sum(o["router"]) - 1) < 1e-5
            assert set(o["experts"]) == set(sorted(range(3), key=lambda e: -o["router"][e])[:2])


@pytest.mark.slow  # the rendering loss falling in training is also the render-stage test's check
def test_rendering_loss_supervises_the_lookahead_with_the_next_real_view(corridor, episodes_file, predictor_file, tmp_path):
    """``render_weight`` > 0 adds (1 - cos) of the oracle candidate's rendered view against the next
    panorama's front view; training lowers it (the rendering model learns from the real views)."""
    from vlnverse.learn.store import StepStore

    cfg = _cfg(tmp_path / "il", episodes_file, predictor_file, "hnr", {**SMALL, "render_weight": 1.0}, il__epochs=1)
    summary = _train(cfg, corridor)
    store = StepStore(summary["cache"]["path"])
    policy = policy_from_checkpoint(read_checkpoint(Path(cfg.out) / "last.pt"))
    eps = [store.episode(i) for i in range(min(2, len(store)))]
    t = max(e["length"] for e in eps)
    extras = {}
    for name, shape in store.extra_fields.items():
        arr = np.zeros((len(eps), t, *shape), dtype=np.float32)
        for j, e in enumerate(eps):
            arr[j, :e["length"]] = e[name]
        extras[name] = torch.from_numpy(arr)
    weights = torch.from_numpy(np.stack([(np.arange(t) < e["length"]).astype(np.float32) for e in eps]))
    batch = {"extras": extras, "weights": weights}
    tokens = torch.ones(len(eps), 3, dtype=torch.long)

    def render_loss():
        instr = policy.instruction(tokens)
        mem, hidden, aux = policy.new_memory(len(eps), "cpu"), policy.initial_state(len(eps)), []
        for i in range(t):
            _, hidden, a = policy.graph_step(instr, extras["view_feats"][:, i], extras["candidates"][:, i],
                                             extras["view_depth"][:, i], extras["world_pose"][:, i], hidden, mem,
                                             extras["view_grid"][:, i])
            aux.append(a)
        return policy.auxiliary_loss(aux, batch, weights > 0)

    opt = torch.optim.Adam(policy.renderer.parameters(), lr=1e-2)
    first = render_loss()
    assert 0 < first.item() <= 2.0
    for _ in range(30):
        loss = render_loss()
        opt.zero_grad()
        loss.backward()
        opt.step()
    # measured 0.218 -> 0.184 with 2 x 2 grid cells per view (plateau: the cloud's geometry)
    assert render_loss().item() < 0.95 * first.item()


@pytest.mark.parametrize("name", ["hnr_fine_grained", "gama_fine_grained"])
def test_shipped_configs_build_a_cpu_sized_policy_that_trains_a_step(name, predictor_file):
    """The shipped configs validate (preflight) and build their policy; one optimiser step on a
    synthetic batch of the teacher's fields gives a finite loss and changes the weights."""
    from vlnverse.learn.config import load_train_config, resolve_train_config_path
    from vlnverse.learn.policies import build_policy
    from vlnverse.learn.vocab import Vocabulary

    cfg = load_train_config(resolve_train_config_path(name), {"policy.params.waypoint_predictor": str(predictor_file)})
    assert cfg.policy.name == name.split("_")[0]
    vocab = Vocabulary.build(["go to the door", "turn left"])
    policy = build_policy(cfg.policy.name, cfg.policy.params, vocab, [s.to_dict() if hasattr(s, "to_dict") else s
                                                                       for s in cfg.to_dict()["sensors"]])
    trainable = sum(p.numel() for p in policy.parameters() if p.requires_grad)
    assert 50_000 < trainable < 5_000_000  # CPU-sized
    g = torch.Generator().manual_seed(0)
    b, t, k = 2, 3, policy.predictor.params["k"]
    cands = torch.zeros(b, t, k, 3)
    cands[..., 0] = torch.rand(b, t, k, generator=g) * 6.28
    cands[..., 1] = 0.5 + torch.rand(b, t, k, generator=g)
    cands[:, :, :3, 2] = 1.0
    grid = cfg.policy.params["cloud_grid"]
    assert grid == 2 and policy.cloud_grid == 2 and policy.renderer.ray_pitches.numel() == 2 * cfg.policy.params["render"]["rays"]
    batch = {"extras": {"view_feats": torch.randn(b, t, 12, policy.predictor.params["hidden_size"], generator=g),
                        "view_grid": torch.rand(b, t, 12, policy.feat_dim, grid, grid, generator=g), "candidates": cands,
                        "target": torch.tensor([[0.0, 1.0, k], [2.0, k, 0.0]]),
                        "view_depth": 1 + torch.rand(b, t, 12, grid, grid, generator=g), "world_pose": torch.rand(b, t, 3, generator=g)},
             "tokens": torch.from_numpy(np.stack([vocab.encode("go to the door", 8), vocab.encode("turn left", 8)])),
             "weights": torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])}
    loss, correct = policy.imitation_loss(batch)
    assert torch.isfinite(loss) and 0 <= correct <= 5
    before = {n: p.detach().clone() for n, p in policy.named_parameters() if p.requires_grad}
    opt = torch.optim.Adam([p for p in policy.parameters() if p.requires_grad], lr=1e-3)
    loss.backward()
    opt.step()
    changed = {n for n, p in policy.named_parameters() if p.requires_grad and not torch.equal(p, before[n])}
    assert any(n.startswith("renderer.") for n in changed) and any(n.startswith("graph.") for n in changed)
    if cfg.policy.name == "gama":
        assert any(n.startswith("same.router") for n in changed) and any(n.startswith("global_encoder") for n in changed)


@pytest.mark.slow  # online rounds of both policies run in the overfit-through-the-runner tests
def test_gama_fine_tunes_online_with_schedule_sampling(corridor, episodes_file, predictor_file, tmp_path):
    """A DAgger round: the HNR teacher asks the learner (its ``choose`` reads the teacher's
    panorama depths) and executes its choice with probability 1 - β."""
    cfg = _cfg(tmp_path / "il", episodes_file, predictor_file, "gama", GAMA, il__epochs=1)
    _train(cfg, corridor)
    dagger = _cfg(tmp_path / "dagger", episodes_file, predictor_file, "gama", GAMA, il__epochs=1, mode="dagger",
                  init=str(Path(cfg.out) / "last.pt"), dagger={"rounds": 1, "p": 0.5, "epochs": 1})
    before = read_checkpoint(Path(cfg.out) / "last.pt")["state_dict"]
    out = _train(dagger, corridor)
    after = read_checkpoint(Path(dagger.out) / "round_01.pt")["state_dict"]
    changed = [k for k in before if not torch.equal(before[k], after[k])]
    assert changed and not any(k.startswith("predictor.") for k in changed)
    assert out["dagger"][0]["beta"] == 0.5 and out["dagger"][0]["collected_steps"] > 0


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["telhop", "strict"])
@pytest.mark.parametrize("policy,params", [("hnr", SMALL), ("gama", GAMA)])
def test_overfits_four_episodes_through_the_runner(corridor, episodes_file, predictor_file, tmp_path, policy, params, mode):
    """VLN-BERT's overfit protocol (IL on the 4 corridor episodes, 3 online rounds, ``run_eval``
    with the ``policy`` agent): SR >= 0.75."""
    common = dict(il__epochs=40, il__batch_size=1, il__lr=0.002, collision_mode=mode)
    cfg = _cfg(tmp_path / "il", episodes_file, predictor_file, policy, params, **common)
    _train(cfg, corridor)
    dagger = _cfg(tmp_path / "dagger", episodes_file, predictor_file, policy, params, mode="dagger",
                  init=str(Path(cfg.out) / "last.pt"), dagger={"rounds": 3, "p": 0.5, "epochs": 10}, **common)
    _train(dagger, corridor)
    summary = _eval(Path(dagger.out) / "last.pt", episodes_file, corridor, tmp_path / "eval", mode)
    print("OVERFIT", policy, mode, summary["overall"]["means"]["SR"])
    assert summary["overall"]["means"]["SR"] >= 0.75, summary["overall"]["means"]
    records = [json.loads(line) for line in (tmp_path / "eval" / "episodes.jsonl").read_text().splitlines()]
    if policy == "gama":
        assert all("experts" in o for r in records for o in r["agent_outputs"] if "candidates" in o)


def test_lookahead_similarity_against_the_copy_baseline(corridor, episodes_file, predictor_file, tmp_path):
    """The rendered lookahead's cosine to the real next view, and the copy-the-current-view baseline,
    over the teacher steps of a store (the corridor's training store here: not held out)."""
    from vlnverse.learn.hnr import lookahead_cosines, lookahead_similarity, view_at_angle
    from vlnverse.learn.store import StepStore

    f = torch.arange(12, dtype=torch.float32)[None, :, None].expand(1, 12, 2)
    assert view_at_angle(f, torch.tensor([[0.0, 3 * 3.14159265 / 12, -3.14159265 / 6]]))[0, :, 0].tolist() == \
        pytest.approx([0.0, 1.5, 11.0], abs=1e-5)
    cfg = _cfg(tmp_path / "il", episodes_file, predictor_file, "hnr", {**SMALL, "render_weight": 1.0}, il__epochs=2)
    summary = _train(cfg, corridor)
    store = StepStore(summary["cache"]["path"])
    policy = policy_from_checkpoint(read_checkpoint(Path(cfg.out) / "last.pt"))
    out = lookahead_similarity(policy, store)
    moves = sum(int((store.episode(i)["target"][:-1] < store.episode(i)["candidates"].shape[1]).sum()) for i in range(len(store)))
    assert out["steps"] == moves > 0
    assert -1 <= out["rendered_cos"] <= 1 and -1 <= out["copy_baseline_cos"] <= 1
    # a renderer that finds no density anywhere renders the background alone: exactly the copy baseline
    with torch.no_grad():
        policy.renderer.density[-1].bias.fill_(-1e4)
    cos = lookahead_cosines(policy, store)
    assert max(cos["opacity"]) == 0.0 and cos["rendered"] == pytest.approx(cos["copy"], abs=1e-6)
    policy.render_background = False  # without it an empty render is zero: cosine 0
    assert lookahead_cosines(policy, store)["rendered"] == pytest.approx([0.0] * moves)


def test_render_stage_trains_the_rendering_model_alone_then_the_policy_starts_from_it(corridor, episodes_file,
                                                                                          predictor_file, tmp_path):
    """The paper's two stages through ``run_training``: ``stage: render`` changes only ``renderer.*``
    weights and lowers the rendering loss; ``stage: joint`` with ``init=`` starts from them."""
    from vlnverse.core.errors import ConfigError
    from vlnverse.learn.policies import build_policy

    from vlnverse.learn.vocab import Vocabulary

    render = _cfg(tmp_path / "render", episodes_file, predictor_file, "gama", {**GAMA, "stage": "render"}, il__epochs=4,
                  il__lr=0.01)
    out = _train(render, corridor)
    data = read_checkpoint(Path(render.out) / "last.pt")
    after = data["state_dict"]
    # only the rendering model trains: the rebuilt stage-render policy's loss reaches the renderer alone
    staged = policy_from_checkpoint(data)
    assert {n for n, p in staged.named_parameters() if p.requires_grad} == {n for n, _ in staged.named_parameters()
                                                                            if n.startswith("renderer.")}
    from vlnverse.learn.store import StepStore

    store = StepStore(out["cache"]["path"])
    ep = store.episode(0)
    extras = {name: torch.from_numpy(np.asarray(ep[name], dtype=np.float32))[None] for name in store.extra_fields}
    loss, correct = staged.imitation_loss({"extras": extras, "tokens": torch.ones(1, 3, dtype=torch.long),
                                           "weights": torch.ones(1, int(ep["length"]))})
    loss.backward()
    assert correct == 0.0 and 0 < loss.item() <= 2
    assert all((p.grad is not None) == n.startswith("renderer.") for n, p in staged.named_parameters())
    import csv

    rows = [r for r in csv.DictReader(open(Path(render.out) / "train_log.csv")) if r["phase"] == "il" and r["loss"]]
    by_epoch = {}
    for r in rows:
        by_epoch.setdefault(int(r["epoch"]), []).append(float(r["loss"]))
    means = [sum(v) / len(v) for _, v in sorted(by_epoch.items())]
    assert len(means) >= 2 and means[-1] < means[0] and all(0 <= m <= 2 for m in means)  # 1 - cos
    assert out["il"]["steps"] > 0
    pretrained = {**GAMA, "render": {**GAMA["render"], "weights": str(Path(render.out) / "last.pt")}}
    policy = build_policy("gama", {**pretrained, "waypoint_predictor": str(predictor_file)},
                          Vocabulary.from_dict(data["vocab"]), RIG16)
    assert all(torch.equal(v, after["renderer." + k]) for k, v in policy.renderer.state_dict().items())
    assert all(p.requires_grad for p in policy.same.parameters())  # stage joint: everything trains
    joint = _cfg(tmp_path / "joint", episodes_file, predictor_file, "gama", pretrained, il__epochs=1)
    _train(joint, corridor)
    (Path(render.out) / "last.pt").rename(tmp_path / "moved.pt")  # the joint checkpoint needs no render file
    final = policy_from_checkpoint(read_checkpoint(Path(joint.out) / "last.pt"))
    assert not any(torch.equal(v, after["renderer." + k]) for k, v in final.renderer.state_dict().items()
                   if v.dtype.is_floating_point and v.numel() > 1)  # and the renderer trained on with the policy
    bad = tmp_path / "nope.pt"
    with pytest.raises(ConfigError) as err:
        build_policy("hnr", {"waypoint_predictor": str(predictor_file), "render": {"weights": str(bad)}},
                     Vocabulary.from_dict(data["vocab"]), RIG16)
    assert "nope.pt" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ConfigError) as err:
        build_policy("hnr", {"waypoint_predictor": str(predictor_file), "stage": "pretrain"},
                     Vocabulary.from_dict(data["vocab"]), RIG16)
    assert "policy.params.stage" in str(err.value)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["hnr_fine_grained", "gama_fine_grained"])
def test_vlnverse_train_and_eval_cli_with_the_shipped_config(name, predictor_file, tmp_path):
    """``vlnverse train <config>`` (one home_0001 episode, one epoch, the test predictor) and
    ``vlnverse eval ... agent.name=policy`` on its checkpoint, as the config's header says."""
    from test_readme_commands import TINY, _cli

    _cli("train", name, *TINY, f"cache.dir={tmp_path / 'cache'}", f"policy.params.waypoint_predictor={predictor_file}",
         "policy.params.heads=4", cwd=tmp_path)
    ckpt = tmp_path / "runs" / "train" / name / "best.pt"
    assert ckpt.is_file() and read_checkpoint(ckpt)["policy"] == name.split("_")[0]
    _cli("eval", "oracle_fine_grained_strict", "agent.name=policy", f"agent.params.checkpoint={ckpt}", "limit=1",
         "max_steps=10", "report.enabled=false", "--no-progress", cwd=tmp_path)
    records = [json.loads(line) for line in
               (tmp_path / "runs" / "oracle_fine_grained_strict" / "episodes.jsonl").read_text().splitlines()]
    assert len(records) == 1 and records[0]["actions"]


@pytest.mark.parametrize("policy,bad,field", [("hnr", {"cloud_cap": 0}, "policy.params.cloud_cap"),
                                              ("hnr", {"stage": "pretrain"}, "policy.params.stage"),
                                              ("gama", {"experts": 2, "top_k": 3}, "policy.params.top_k"),
                                              ("gama", {"balance_weight": -1.0}, "policy.params.balance_weight"),
                                              ("hnr", {"render": {"rays": 0}}, "policy.params.render"),
                                              ("hnr", {"render": {"background": "yes"}}, "policy.params.render.background"),
                                              ("gama", {"expertz": 2}, "policy.params.expertz")])
def test_bad_parameters_are_one_line_errors(policy, bad, field, predictor_file):
    from vlnverse.core.errors import ConfigError
    from vlnverse.learn.policies import build_policy
    from vlnverse.learn.vocab import Vocabulary

    with pytest.raises(ConfigError) as err:
        build_policy(policy, {"hidden_size": 32, "waypoint_predictor": str(predictor_file), **bad},
                     Vocabulary.build(["go"]), RIG16)
    assert field in str(err.value) and "\n" not in str(err.value)


def test_the_teacher_records_the_built_policys_cloud_inputs(episodes_file, predictor_file, tmp_path):
    """The config's ``cloud_grid`` (default 2) sets the teacher's grid; once a policy is built (a
    DAgger init from a checkpoint written before grid features holds one point per view), the
    teacher records what that policy reads."""
    from vlnverse.learn.policies import build_policy
    from vlnverse.learn.trainer import Trainer
    from vlnverse.learn.vocab import Vocabulary

    cfg = _cfg(tmp_path / "il", episodes_file, predictor_file, "hnr", SMALL)
    trainer = Trainer(cfg, progress=False, report=lambda s: None)
    assert trainer.teacher_spec().grid == 2 and "view_grid" in trainer.teacher_spec().extra_fields
    rig = [{"name": "depth", "kind": "depth", "shape": [16, 16]}]
    trainer.policy = build_policy("hnr", {**cfg.policy.params, "cloud_grid": 0}, Vocabulary.build(["go"]), rig)
    spec = trainer.teacher_spec()
    assert spec.grid == 0 and spec.extra_fields["view_depth"] == [12] and "view_grid" not in spec.extra_fields
