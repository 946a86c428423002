"""RDP (recurrent diffusion policy): teacher labels, DDPM objective and samplers, the stop-progress
head, training / DAgger / eval through the runner on the corridor scene (CPU, 16-32 px)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from learn_helpers import make_episodes, small_config

torch = pytest.importorskip("torch")

from vlnverse.learn.checkpoint import read_checkpoint  # noqa: E402

RIG16 = [{"name": "rgb", "kind": "rgb", "width": 16, "height": 16},
         {"name": "depth", "kind": "depth", "width": 16, "height": 16}]
PARAMS = {"hidden_size": 32, "denoiser_size": 32, "horizon": 3, "diffusion_steps": 10, "noise_samples": 2}


def _policy(**params):
    from vlnverse.learn.policies import build_policy
    from vlnverse.learn.vocab import Vocabulary

    rig = [{"name": "rgb", "kind": "rgb", "shape": [16, 16, 3]}, {"name": "depth", "kind": "depth", "shape": [16, 16]}]
    torch.manual_seed(0)
    return build_policy("rdp", {**PARAMS, **params}, Vocabulary.build(["go to the kitchen"]), rig)


def test_teacher_chunk_is_the_resampled_path_relative_to_the_agent():
    from vlnverse.learn.rdp import relative_chunk, resample_by_length

    path = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0]])
    pts = resample_by_length(path, 0.5)
    assert np.allclose(pts, [[0, 0], [0.5, 0], [1, 0], [1, 0.5], [1, 1]])
    # agent at the origin facing +Y: first action turns right by 90 deg and moves 0.5 m "forward" in its
    # frame (which is -y in the agent frame before the turn), the corner turns left by 90 deg
    chunk = relative_chunk(np.zeros(2), math.pi / 2, pts[1:], 5)
    assert np.allclose(chunk[0], [0.0, -0.5, -math.pi / 2], atol=1e-6)
    assert np.allclose(chunk[1], [0.5, 0.0, 0.0], atol=1e-6)
    assert np.allclose(chunk[2], [0.0, 0.5, math.pi / 2], atol=1e-6)
    assert np.allclose(chunk[3], [0.5, 0.0, 0.0], atol=1e-6) and np.allclose(chunk[4], 0.0)  # padded: no motion


def test_teacher_path_keeps_clearance_from_walls_and_falls_back_to_the_plain_map(corridor):
    """The teacher's path through the corridor's 1 m gap keeps ~0.15 m more from the navigable
    map's edge than the taut shortest path (which grazes the wall end); a margin that disconnects
    start and goal falls back to the plain map's path."""
    from scipy import ndimage

    from learn_helpers import PAIRS
    from vlnverse.learn.rdp import margin_planners, resample_by_length, teacher_path

    planner = corridor.planner
    edge = ndimage.distance_transform_edt(planner.free) * planner.resolution  # m to the nearest non-navigable cell

    def clearance(path):
        rows, cols = planner.map.world_to_cell(resample_by_length(path, 0.02)).T
        return float(edge[rows, cols].min())

    for start, _, goal, _ in PAIRS[:2]:  # from the low side of one room, through the gap, to the other
        start, goal = np.array(start), np.array(goal)
        plain = teacher_path([planner], start, goal)
        kept = teacher_path(margin_planners(planner, 0.15), start, goal)
        assert clearance(plain) <= 0.05 + 1e-9 and clearance(kept) >= 0.19
        assert np.allclose(kept[0], start) and np.allclose(kept[-1], goal)
        assert kept.shape[0] == plain.shape[0] and np.allclose(kept[1:-1, 1], 2.38, atol=0.03)  # gap y in [2, 3]
        # 1 m of margin closes the gap: both shrunk maps disconnect start and goal -> the plain path
        assert len(margin_planners(planner, 1.0)) == 3
        assert np.allclose(teacher_path(margin_planners(planner, 1.0), start, goal), plain)


@pytest.mark.parametrize("turn_in_place_deg", [None, 30.0])
def test_teacher_runs_under_strict_physics_without_touching_a_wall(corridor, episodes_file, tmp_path,
                                                                  turn_in_place_deg):
    """The continuous teacher's own chunks, executed by the waypoint controller under Strict
    physics (beta = 1), finish all 4 corridor episodes without a collision; with
    ``turn_in_place_deg`` every executed hop stays within that angle of the agent's heading, the
    larger turns made in place first."""
    from vlnverse.learn.collect import collect
    from vlnverse.learn.rdp import RDPPolicy
    from vlnverse.learn.store import StepStore
    from vlnverse.learn.trainer import Trainer

    cfg = small_config(tmp_path / "run", episodes_file, policy="rdp", sensors=RIG16[:1], collision_mode="strict",
                       max_steps=40)
    trainer = Trainer(cfg, scene_loader=lambda *a: corridor, progress=False)
    spec = RDPPolicy.teacher_spec({**PARAMS, "turn_in_place_deg": turn_in_place_deg})
    assert spec.clearance == 0.15 and spec.turn_in_place_deg == turn_in_place_deg
    assert ("turn_in_place_deg" in spec.key) == (turn_in_place_deg is not None)  # earlier caches keep their key
    store = StepStore.create(tmp_path / "store", key={}, sensors=trainer.layout, extra_fields=spec.extra_fields)
    got = collect(make_episodes(corridor), settings=trainer.settings, sensors=trainer.sensor_specs,
                  collision_mode="strict", store=store, scene_loader=lambda *a: corridor, teacher=spec, progress=False)
    assert [r["termination"] for r in got["records"]] == ["stop"] * 4
    assert all(r["metrics"]["SR"] == 1.0 and r["metrics"]["CR"] == 0.0 for r in got["records"])
    store.close()
    first = np.concatenate([store.episode(i)["executed_action"] for i in range(4)])  # (steps, 3) executed motions
    hops, turns = first[np.hypot(first[:, 0], first[:, 1]) > 1e-6], first[np.hypot(first[:, 0], first[:, 1]) <= 1e-6]
    largest = np.degrees(np.abs(np.arctan2(hops[:, 1], hops[:, 0]))).max()  # a hop's direction off the heading
    if turn_in_place_deg is None:
        assert largest > 30.0 and not np.any(np.abs(turns[:, 2]) > 1e-6)  # the corridor's start needs a turn
    else:
        assert largest <= 30.0 + 1e-3 and np.degrees(np.abs(turns[:, 2])).max() > 30.0


@pytest.fixture
def one_thread():
    """One torch thread (the machine is shared; many threads on tiny tensors are slow)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def test_denoising_loss_falls_and_samples_have_shape_units_and_seed_determinism(one_thread):
    policy = _policy(sampler="ddpm")
    gen = torch.Generator().manual_seed(0)
    cond = torch.randn(8, 2 * PARAMS["hidden_size"], generator=gen)
    target = torch.tensor([[0.5, 0.0, 0.0], [0.4, 0.3, 0.6], [0.5, -0.1, -0.2]]).expand(8, 3, 3)
    opt = torch.optim.Adam(policy.denoiser.parameters(), lr=3e-3)
    losses = []
    for i in range(300):
        loss = policy.diffusion_loss(cond, target, generator=torch.Generator().manual_seed(i)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert np.mean(losses[-30:]) < 0.5 * np.mean(losses[:30])
    policy.eval()
    for sampler in ("ddpm", "ddim"):
        policy.sampler = sampler
        a = policy.sample(cond[:2], torch.Generator().manual_seed(7))
        b = policy.sample(cond[:2], torch.Generator().manual_seed(7))
        c = policy.sample(cond[:2], torch.Generator().manual_seed(8))
        assert a.shape == (2, 3, 3) and torch.equal(a, b) and not torch.equal(a, c)
        # metres and radians: the learnt chunk comes back within a few cm / degrees of the target
        assert torch.allclose(a, target[:2], atol=0.12), (sampler, a)
    # units: metres are diffused divided by the waypoint spacing, yaw as (sin, cos); samples come back in m / rad
    wide = _policy(waypoint_spacing=0.25)
    acts = torch.tensor([[0.5, -0.25, math.pi], [0.1, 0.05, -math.pi], [0.0, 0.0, 0.5]])
    latent = wide.to_latent(acts)
    assert torch.allclose(latent[0], torch.tensor([2.0, -1.0, 0.0, -1.0]), atol=1e-6)
    assert torch.allclose(latent[1, 2:], latent[0, 2:], atol=1e-6)  # +pi and -pi: one point
    back = wide.from_latent(latent)
    assert torch.allclose(back[:, :2], acts[:, :2], atol=1e-6) and torch.allclose(back[2, 2], torch.tensor(0.5))
    assert torch.allclose(back[:2, 2].abs(), torch.tensor([math.pi, math.pi]), atol=1e-5)


@pytest.mark.parametrize("prediction", ["epsilon", "sample"])
def test_samples_follow_their_condition(one_thread, prediction):
    """Two conditions, two chunks (veer left, veer right): after training each condition's sample
    is its own chunk (with either prediction target), not a blend or the other one."""
    policy = _policy(prediction=prediction)
    gen = torch.Generator().manual_seed(0)
    conds = torch.randn(2, 2 * PARAMS["hidden_size"], generator=gen)
    left = torch.tensor([[0.4, 0.3, 0.6], [0.5, 0.0, 0.0], [0.5, 0.0, 0.0]])
    right = left * torch.tensor([1.0, -1.0, -1.0])
    cond, target = conds.repeat(8, 1), torch.stack([left, right]).repeat(8, 1, 1)
    opt = torch.optim.Adam(policy.denoiser.parameters(), lr=3e-3)
    for i in range(300):
        loss = policy.diffusion_loss(cond, target, generator=torch.Generator().manual_seed(i)).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    policy.eval()
    got = policy.sample(conds, torch.Generator().manual_seed(3))
    assert torch.allclose(got[0], left, atol=0.12) and torch.allclose(got[1], right, atol=0.12), got


def test_nan_sample_is_drawn_again_and_counted(monkeypatch):
    from vlnverse.sim.types import WaypointAction

    policy = _policy()
    policy.eval()
    real = policy.denoiser.forward
    calls = {"n": 0}

    def flaky(noisy, k, cond):
        calls["n"] += 1
        out = real(noisy, k, cond)
        return out * float("nan") if calls["n"] == 1 else out

    monkeypatch.setattr(policy.denoiser, "forward", flaky)
    tokens = torch.from_numpy(policy.vocab.encode("go to the kitchen", 10))[None]
    frames = {"rgb": torch.zeros(1, 16, 16, 3, dtype=torch.uint8), "depth": torch.ones(1, 16, 16)}
    with torch.no_grad():
        action, _, info = policy.act_step(policy.instruction(tokens), policy.encode_frames(frames),
                                          policy.start_motion(1), policy.initial_state(1), torch.Generator().manual_seed(0))
    assert isinstance(action, WaypointAction) and info["nan_resamples"] == 1


def test_bad_params_are_config_errors():
    from vlnverse.core.errors import ConfigError

    with pytest.raises(ConfigError, match="policy.params.sampler"):
        _policy(sampler="euler")
    with pytest.raises(ConfigError, match="stop_threshold"):
        _policy(stop_threshold=1.5)
    with pytest.raises(ConfigError, match="prediction.*epsilon or sample"):
        _policy(prediction="v")


def _train(cfg, corridor):
    from vlnverse.learn.trainer import run_training

    return run_training(cfg, scene_loader=lambda *a: corridor, progress=False, report=lambda s: None)


def test_rdp_trains_with_labelled_cache_reloads_and_runs_dagger(corridor, episodes_file, tmp_path):
    from vlnverse.run.agents import make_agent
    from vlnverse.learn.store import StepStore

    cfg = small_config(tmp_path / "run", episodes_file, policy="rdp", policy__params=PARAMS, sensors=RIG16, max_steps=30,
                       il__epochs=2, il__batch_size=2, validation__every=2, validation__limit=2)
    summary = _train(cfg, corridor)
    store = StepStore(summary["cache"]["path"])
    ep = store.episode(0)
    assert ep["actions"].shape == (ep["length"], 3, 3) and ep["progress"][0] == 0.0 and ep["progress"][-1] == 1.0
    assert ep["label"][-1] == 0 and (ep["label"][:-1] == 1).all()  # the teacher stops once, at the end
    first = ep["actions"][0, 0]  # corridor-0 starts along +x: one 0.5 m step, nearly straight ahead
    assert abs(np.hypot(first[0], first[1]) - 0.5) < 1e-3 and first[0] > 0.45 and abs(first[2]) < 0.3
    assert np.allclose(ep["executed_action"][:-1], ep["actions"][:-1, 0])  # teacher forcing: executed = label
    rec = json.loads((Path(cfg.out) / "val" / "epoch_002" / "train" / "episodes.jsonl").read_text().splitlines()[0])
    assert all(a == "STOP" or a["type"] == "WaypointAction" for a in rec["actions"])
    assert "progress" in rec["agent_outputs"][0]
    _check_condition_check(Path(cfg.out), store)
    # the checkpoint rebuilds the same policy: identical (seeded) sampling, hence identical actions
    from test_trainer import _actions

    episodes = make_episodes(corridor)[:1]
    a = _actions(make_agent("policy", {"checkpoint": str(Path(cfg.out) / "last.pt")}), corridor, episodes)
    b = _actions(make_agent("policy", {"checkpoint": str(Path(cfg.out) / "last.pt")}), corridor, episodes)
    assert a == b and a[0]
    dagger = small_config(tmp_path / "dagger", episodes_file, policy="rdp", policy__params=PARAMS, sensors=RIG16,
                          max_steps=30, il__epochs=2, il__batch_size=2, validation__every=2, validation__limit=1,
                          mode="dagger", init=str(Path(cfg.out) / "last.pt"),
                          dagger={"rounds": 1, "p": 0.5, "epochs": 1, "episodes": 2})
    before = read_checkpoint(Path(cfg.out) / "last.pt")["state_dict"]
    out = _train(dagger, corridor)
    after = read_checkpoint(Path(dagger.out) / "round_01.pt")["state_dict"]
    assert out["dagger"][0]["beta"] == 0.5 and out["dagger"][0]["collected_steps"] > 0
    assert any(not torch.equal(before[k], after[k]) for k in before)
    agg = StepStore(Path(dagger.out) / "dagger_aggregate")
    assert set(agg.extra_fields) == {"actions", "progress", "executed_action"}


def _check_condition_check(run: Path, store) -> None:
    """tools/rdp_condition_check.py on a run: one row per moving teacher state, one first step per
    episode; a denoiser blind to its condition (cond_in zeroed) scores the same shuffled or not."""
    import importlib.util

    from vlnverse.learn.checkpoint import policy_from_checkpoint
    from vlnverse.learn.rdp import condition_check

    spec = importlib.util.spec_from_file_location("rdp_condition_check", Path(__file__).parents[2] / "tools" / "rdp_condition_check.py")
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    assert tool.main([str(run), "--episodes", "3"]) == 0
    got = json.loads((run / "condition_check.json").read_text())
    moving = sum(int((store.episode(i)["label"] == 1).sum()) for i in range(min(3, len(store))))
    assert got["all"]["states"] == moving and got["first_step"]["states"] == min(3, len(store))
    assert 0 <= got["all"]["median_true"] <= 180 and 0 <= got["turning"]["states"] <= moving
    policy = policy_from_checkpoint(read_checkpoint(run / "last.pt"), path=str(run / "last.pt"))
    with torch.no_grad():
        policy.denoiser.cond_in.weight.zero_()
    blind = condition_check(policy, store, episodes=3)
    assert blind["all"]["median_true"] == blind["all"]["median_shuffled"]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["telhop", "strict"])
def test_rdp_overfits_four_episodes_through_the_runner(corridor, episodes_file, tmp_path, mode):
    """IL on the 4 corridor episodes (batches of all 4), then DAgger rounds (the teacher labels the
    states the policy drifts into), then ``run_eval`` (the runner) with the final checkpoint, the
    executed action being the first of the medoid of 5 sampled chunks: SR >= 0.75 under Tel-Hop
    and under Strict (where touching a wall ends the episode), and the progress head reads ~0 at
    the start and ~1 at the stop."""
    from vlnverse.run.setup import EpisodeSource, NamedSpec
    from vlnverse.eval.config import EvalConfig, ReportConfig
    from vlnverse.eval.runner import run_eval

    params = {"hidden_size": 64, "denoiser_size": 64, "diffusion_steps": 20, "noise_samples": 8, "action_samples": 5}
    common = dict(policy="rdp", sensors=RIG16, max_steps=40, collision_mode=mode, policy__params=params,
                  il__epochs=300, il__batch_size=4, il__lr=0.003, validation__every=300, val={})
    _train(small_config(tmp_path / "il", episodes_file, **common), corridor)
    _train(small_config(tmp_path / "dagger", episodes_file, mode="dagger", init=str(tmp_path / "il" / "last.pt"),
                        dagger={"rounds": 6, "p": 0.7, "epochs": 20}, **common), corridor)
    ecfg = EvalConfig(agent=NamedSpec("policy", {"checkpoint": str(tmp_path / "dagger" / "last.pt")}),
                      task="fine_grained", episodes=EpisodeSource(path=str(episodes_file)), collision_mode=mode,
                      sensors=small_config(tmp_path / "x", episodes_file, sensors=RIG16).sensors, max_steps=40,
                      success_distance=1.5, out=str(tmp_path / "eval"), report=ReportConfig(enabled=False))
    summary = run_eval(ecfg, progress=False, print_summary=False, scene_loader=lambda *a: corridor)
    records = [json.loads(line) for line in (tmp_path / "eval" / "episodes.jsonl").read_text().splitlines()]
    assert summary["overall"]["means"]["SR"] >= 0.75, [(r["episode_id"], r["termination"], r["failure"],
                                                         r["metrics"]["NE"]) for r in records]
    starts = [r["agent_outputs"][0]["progress"] for r in records]
    ends = [r["agent_outputs"][-1]["progress"] for r in records if r["termination"] == "stop"]
    assert np.mean(starts) < 0.25 and ends and min(ends) > 0.85


def test_look_before_hop_turns_onto_a_bearing_out_of_view_and_keeps_the_rest():
    from vlnverse.learn.rdp import look_before_hop
    from vlnverse.sim.types import WaypointAction

    sideways = WaypointAction(0.0, -0.5, -1.2)  # 0.5 m to the right: bearing -90 deg
    assert look_before_hop(sideways, 45.0) == WaypointAction(0.0, 0.0, -math.pi / 2)
    ahead = WaypointAction(0.4, 0.3, 0.6)  # bearing atan2(0.3, 0.4) = 36.9 deg: in a 90 deg view
    assert look_before_hop(ahead, 45.0) is ahead
    assert look_before_hop(ahead, 30.0) == WaypointAction(0.0, 0.0, math.atan2(0.3, 0.4))
    turn = WaypointAction(0.03, -0.03, 2.0)  # 0.042 m: a turn, not a hop
    assert look_before_hop(turn, 45.0) is turn


def test_hop_view_deg_makes_act_step_turn_where_the_sampled_hop_leaves_the_view():
    """The same condition and noise: without ``hop_view_deg`` the first action; with it, that
    action or the turn onto its bearing, as ``look_before_hop`` gives."""
    from vlnverse.learn.rdp import look_before_hop

    policy = _policy(hop_view_deg=45.0, stop_threshold=0.999)
    policy.eval()
    instruction = policy.instruction(torch.tensor([[1, 2, 3]]))
    visual = policy.encode_frames({"rgb": torch.rand(1, 16, 16, 3), "depth": torch.rand(1, 16, 16)})
    hidden, prev = policy.initial_state(1, None), policy.start_motion(1)
    turned = 0
    for seed in range(8):
        policy.hop_view_deg = None
        plain, _, _ = policy.act_step(instruction, visual, prev, hidden, generator=torch.Generator().manual_seed(seed))
        policy.hop_view_deg = 45.0
        looked, _, info = policy.act_step(instruction, visual, prev, hidden, generator=torch.Generator().manual_seed(seed))
        assert looked == look_before_hop(plain, 45.0)
        assert info.get("looked", False) == (looked != plain)
        turned += looked != plain
    assert 0 < turned < 8  # both branches ran (the frames and weights are seeded)
