"""A monocular setup's turn candidates (``vlnbert.TURN_ANGLES_DEG``): the oracle turns towards
the geodesic path when it lies out of view and no visible candidate leads closer; a turn executes
as a rotation in place; GAMA's map never makes one a node; the panoramic perception is unchanged."""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from test_vlnbert import predictor_file  # noqa: E402,F401 (the session fixture)

MONO = {"view": "monocular", "hfov_deg": 90}
K = 8


def _cands(moves, turns=True):
    """(K, 3) rows: the moving candidates (angle, distance), then the three turns."""
    out = np.zeros((K, 3), dtype=np.float32)
    for j, (a, d) in enumerate(moves):
        out[j] = (a, d, 1.0)
    if turns:
        out[len(moves):len(moves) + 3] = [(math.pi / 2, 0, 1), (-math.pi / 2, 0, 1), (math.pi, 0, 1)]
    return out


def _agent(corridor, observation=MONO):
    from vlnverse.learn.vlnbert import VLNBertTeacher, VLNBertTeacherAgent
    from vlnverse.learn.waypoints.grid import ObservationSetup

    agent = VLNBertTeacherAgent.__new__(VLNBertTeacherAgent)
    agent.spec = VLNBertTeacher("unused.pt", observation=ObservationSetup.parse(observation))
    agent.context, agent.subgoals = corridor, []
    return agent


def _state(corridor, x, y, yaw, goal):
    field = corridor.planner.distance_field(goal)
    return SimpleNamespace(pose=SimpleNamespace(x=x, y=y, yaw=yaw), success_distance=1.0, goal_distance=field.distance,
                           episode=SimpleNamespace(goals=[SimpleNamespace(position=[*goal, 0.0])], task_type="fine_grained",
                                                   info={}))


def test_the_monocular_oracle_turns_towards_a_goal_behind(corridor):
    """In the open hallway (x 0..5, y 0..3) facing +x, two visible candidates (0°, 1 m; 17°, 1.5 m)
    lead away from a goal behind. Goal (2, 2.6) from (3, 0.8): the path heads atan2(1.8, -1) =
    119°, nearest the +90° turn (slot 2); mirrored, (2, 0.4) from (3, 2.2): -119°, the -90° turn
    (slot 3); (1, 1.5) from (3, 1.5): 180°, slot 4. Without turn rows (the panoramic rows) the
    least-bad candidate, slot 0, as before; so too a second time at the same place (one turn per
    place); a goal within the success distance: STOP."""
    agent = _agent(corridor)
    moves = [(0.0, 1.0), (0.3, 1.5)]
    for (x, y, goal), slot, sign in (((3.0, 0.8, (2.0, 2.6)), 2, 1), ((3.0, 2.2, (2.0, 0.4)), 3, -1),
                                     ((3.0, 1.5, (1.0, 1.5)), 4, 1)):
        st = _state(corridor, x, y, 0.0, goal)
        heading = agent.path_heading(st, np.array([x, y]), None)
        want = math.atan2(goal[1] - y, goal[0] - x)
        assert abs(np.angle(np.exp(1j * (heading - want)))) < math.radians(3)  # open space: the straight line
        cands = _cands(moves)
        choice = agent.oracle(st, cands, len(moves))
        assert choice == slot and cands[choice, 1] == 0 and np.sign(cands[choice, 0]) == sign
        assert agent.oracle(st, _cands(moves, turns=False), len(moves)) == 0
        # one turn per place: asked again here (as after the no-candidate sweep), the least-bad candidate
        assert agent.oracle(st, cands, len(moves)) == 0 and agent.turned_at.tolist() == [x, y]
    st = _state(corridor, 3.0, 1.5, 0.0, (2.5, 1.5))  # 0.5 m behind: within the success distance
    assert agent.oracle(st, _cands(moves), len(moves)) == K


def test_no_turn_when_the_path_is_in_view(corridor):
    """From (3.5, 1) facing +x the path to (5.8, 1) behind the wall runs through the gap at the
    top (y 2..3): it heads up-right, within ±45°; the one candidate (-40°, 2 m) ends in the wall
    (unreachable), yet a turn would not help: the old fallback (slot 0), not a turn."""
    agent = _agent(corridor)
    st = _state(corridor, 3.5, 1.0, 0.0, (5.8, 1.0))
    heading = agent.path_heading(st, np.array([3.5, 1.0]), None)
    assert 0 < heading < math.radians(45)
    assert agent.oracle(st, _cands([(-0.7, 2.0)]), 1) == 0


def test_a_turn_executes_as_a_rotation_in_place_and_is_no_graph_node():
    """A distance-0 candidate at 90°: ``WaypointAction(0, 0, π/2)``, whose target pose from (1, 2,
    -π/4) is (1, 2, π/4); the topological map takes the moving candidate (1 m ahead) alone."""
    from vlnverse.run.modes import CollisionMode
    from vlnverse.learn.topomap import TopoMap
    from vlnverse.learn.vlnbert import VLNBertTeacher, VLNBertTeacherAgent
    from vlnverse.sim.types import AgentPose

    agent = VLNBertTeacherAgent.__new__(VLNBertTeacherAgent)
    agent.spec = VLNBertTeacher("unused.pt")
    cands = _cands([(0.0, 1.0)])
    action = agent.execute(1, cands, None)
    assert (action.dx, action.dy, action.dyaw) == (0.0, 0.0, pytest.approx(math.pi / 2))
    target = CollisionMode(sim=None).target_pose(AgentPose(1.0, 2.0, -math.pi / 4), action)
    assert (target.x, target.y, target.yaw) == pytest.approx((1.0, 2.0, math.pi / 4))
    topo = TopoMap(merge_radius=0.01)
    pose = np.array([1.0, 2.0, 0.0], dtype=np.float32)
    topo.arrive(pose)
    topo.observe(pose, cands, 0)
    assert [(f.slot, tuple(np.round(f.xy, 4))) for f in topo.frontier] == [(0, (2.0, 2.0))]


def test_perception_adds_the_turns_to_a_monocular_setup_only(corridor, predictor_file):
    """Panoramic: the predictor's candidates padded, bit for bit the formula before turns (no row
    at distance 0). Monocular: the in-view candidates, then (90°, 0, 1), (-90°, 0, 1), (180°, 0, 1)
    (with k in view the best k - 3 keep their slots); the cache key names the turns (monocular
    caches rebuilt), the panoramic key does not; a monocular predictor with k <= 3 is refused."""
    from vlnverse.core.body import as_body
    from vlnverse.learn.vlnbert import Perception, VLNBertTeacher, is_turn
    from vlnverse.learn.waypoints.model import load_predictor

    predictor = load_predictor(predictor_file)
    pano, mono = Perception(predictor), Perception(predictor, MONO)
    k = pano.k
    for pose in [(1.3, 1.5, 0.0), (8.5, 2.5, math.pi)]:
        feats, cands, n = pano(corridor.desc, corridor.body, pose)
        img = pano.renderer.render(corridor.desc, corridor.body, pose, options={})
        d = torch.from_numpy(img["depth"])[None]
        with torch.no_grad():
            heat = torch.sigmoid(predictor(d, None))[0].numpy()
        want = predictor.candidates(heat, img["depth"], threshold=predictor.params["threshold"], body=as_body(corridor.body))
        expect = np.zeros((k, 3), dtype=np.float32)
        expect[:len(want), :2], expect[:len(want), 2] = want, 1.0
        assert n == len(want) > 0 and cands.tobytes() == expect.tobytes() and not is_turn(cands).any()
        _, mc, m = mono(corridor.desc, corridor.body, pose)
        turns = np.array([[math.pi / 2, 0, 1], [-math.pi / 2, 0, 1], [math.pi, 0, 1]], dtype=np.float32)
        assert (mc[m:m + 3] == turns).all() and not mc[m + 3:].any() and (mc[:m, 1] > 0).all()
        assert is_turn(mc).tolist() == [False] * m + [True] * 3 + [False] * (k - m - 3)
    # k full: twelve predicted candidates in view, the best k - 3 (the first, NMS order) keep their slots
    full = np.stack([np.linspace(-0.5, 0.5, k), np.linspace(0.25, 3.0, k)], 1)
    predictor.candidates = lambda *a, **kw: full
    _, mc, m = mono(corridor.desc, corridor.body, (1.3, 1.5, 0.0))
    assert m == k - 3 and np.allclose(mc[:m, :2], full[:m]) and is_turn(mc)[m:].all()
    from vlnverse.core.errors import ConfigError
    from vlnverse.learn.waypoints.model import WaypointPredictor

    with pytest.raises(ConfigError, match=r"k > 3") as err:  # no room beside the three turns
        Perception(WaypointPredictor(k=3), MONO)
    assert "\n" not in str(err.value)
    spec = VLNBertTeacher(str(predictor_file))
    assert "turns" not in spec.key and "observation" not in spec.key
    from dataclasses import replace

    assert replace(spec, observation=mono.observation).key["turns"] == [90.0, -90.0, 180.0]


@pytest.mark.parametrize("mode", ["telhop", "strict"])
def test_the_monocular_teacher_turns_round_and_succeeds(corridor, predictor_file, mode):
    """Two corridor episodes whose goal starts behind the agent (facing +x): (3.5, 1.5) → (0.8, 1.5)
    in the hallway and (8, 1.5) → (6, 0.8) in the kitchen. The monocular (90°) teacher with turns
    succeeds on both, its first decision a turn (distance 0), under Tel-Hop and under Strict
    physics (a turn is a rotation in place); with the turn rows taken away (the teacher before
    turns) the kitchen episode fails (measured: 25 steps, SR 0)."""
    from learn_helpers import make_episodes
    from vlnverse.run.rollout import run_scene
    from vlnverse.run.episodes import run_settings
    from vlnverse.learn.vlnbert import VLNBertTeacher
    from vlnverse.learn.waypoints.grid import ObservationSetup

    pairs = [((3.5, 1.5), 0.0, (0.8, 1.5), "turn round"), ((8.0, 1.5), 0.0, (6.0, 0.8), "turn round")]
    settings = run_settings("fine_grained", body="r2r_ce", max_steps=25, success_distance=1.5)
    spec = VLNBertTeacher(str(predictor_file), observation=ObservationSetup.parse(MONO))
    sr = {}
    for turns in (True, False):
        agent = spec.make_agent()
        if not turns:
            agent.perception.turns = np.zeros(0)
        sr[turns] = []
        for ep in make_episodes(corridor, pairs):
            (record,) = run_scene("corridor.usda", [ep], settings, agent, collision_mode=mode,
                                  scene_loader=lambda *a: corridor)
            sr[turns].append(record["metrics"]["SR"])
            first = agent.steps[0]
            if turns:
                assert first["candidates"][int(first["target"]), 1] == 0
    assert sr == {True: [1.0, 1.0], False: [1.0, 0.0]}


def _graph_policy(predictor_file, name, **params):
    from vlnverse.learn.policies import build_policy
    from vlnverse.learn.vocab import Vocabulary

    torch.manual_seed(0)
    vocab = Vocabulary.build(["turn left"])
    base = {"hidden_size": 32, "cloud_cap": 192, "history": 4, "render": {"k": 3, "rays": 2, "samples": 6},
            "waypoint_predictor": str(predictor_file), **({"experts": 3, "top_k": 2} if name == "gama" else {})}
    return build_policy(name, {**base, **params}, vocab, [{"name": "depth", "kind": "depth", "width": 16, "height": 16}]), vocab


@pytest.mark.parametrize("name,global_actions", [("gama", True), ("gama", False), ("hnr", None)])
def test_gama_and_hnr_score_and_learn_a_turn(predictor_file, name, global_actions):
    """Monocular steps (views 1..11 blank, unseen depths): at (0, 0) facing +x a candidate 1.5 m
    ahead and the three turns; the label turns round (180°, slot 3); at step 1 the agent is at (0,
    0) facing -x. Every turn's score is finite (its lookahead rendered from the agent's own
    position); GAMA's earlier frontier at step 1 is the step-0 candidate alone (id 0), no turn; the
    IL loss (rendering loss included) is finite and trains the navigator."""
    from vlnverse.learn.hnr import UNSEEN

    policy, vocab = _graph_policy(predictor_file, name, **({} if global_actions is None else {"global_actions": global_actions}))
    k, grid = policy.predictor.params["k"], policy.cloud_grid
    g = torch.Generator().manual_seed(2)
    cands = torch.zeros(1, 2, k, 3)
    rows = [[0.0, 1.5, 1.0], [math.pi / 2, 0, 1], [-math.pi / 2, 0, 1], [math.pi, 0, 1]]
    cands[0, 0, :4] = torch.tensor(rows)
    cands[0, 1, :4] = torch.tensor(rows)
    feats = torch.randn(1, 2, 12, policy.predictor.params["hidden_size"], generator=g)
    feats[:, :, 1:] = 0.0
    depth = 1 + torch.rand(1, 2, 12, grid, grid, generator=g)
    depth[:, :, 1:] = UNSEEN
    ex = {"view_feats": feats, "view_grid": torch.rand(1, 2, 12, policy.feat_dim, grid, grid, generator=g),
          "candidates": cands, "view_depth": depth, "world_pose": torch.tensor([[[0.0, 0.0, 0.0], [0.0, 0.0, math.pi]]])}
    ex["view_grid"][:, :, 1:] = 0.0
    tokens = torch.from_numpy(np.stack([vocab.encode("turn left", 8)]))
    instr = policy.instruction(tokens)
    mem, hidden = policy.new_memory(1, "cpu"), policy.initial_state(1)
    with torch.no_grad():
        for i in range(2):
            logits, hidden, aux = policy.graph_step(instr, feats[:, i], cands[:, i], depth[:, i], ex["world_pose"][:, i],
                                                    hidden, mem, ex["view_grid"][:, i])
            assert torch.isfinite(logits[0, :4]).all() and torch.isfinite(aux["rendered"]).all()
    if global_actions:
        assert logits.shape == (1, k + 2) and [f.id for f in aux["earlier"][0]] == [0]
    batch = {"extras": {**ex, "target": torch.tensor([[3.0, 0.0]])}, "tokens": tokens, "weights": torch.ones(1, 2)}
    loss, _ = policy.imitation_loss(batch)
    assert torch.isfinite(loss)
    loss.backward()
    assert policy.polar[0].weight.grad.abs().sum() > 0  # the candidates' (and turns') polar encoding learns
