"""HNR / GAMA building blocks: back-projection, the capped feature cloud, volume rendering,
graph-aware self-attention and the SAME router's load-balancing loss."""
from __future__ import annotations

import math

import pytest

torch = pytest.importorskip("torch")

from vlnverse.learn.hnr import FeatureCloud, GraphAwareAttention, VolumeRenderer, backproject, integrate  # noqa: E402


def test_backprojection_of_a_known_depth_image_reproduces_the_floor_and_a_wall():
    """A camera 1.2 m above a floor (z = 0) at (1, 2), yaw 90°: the planar depth of each floor pixel
    below the horizon is h·fy/(v - cy); its points lie on z = 0 in front of the camera. A wall
    3 m ahead (rows above the horizon) lands on y = 2 + 3."""
    hh, ww, fx, fy = 32, 32, 16.0, 16.0
    cx, cy = ww / 2, hh / 2
    v = torch.arange(hh, dtype=torch.float64) + 0.5
    depth = torch.full((hh, ww), 3.0, dtype=torch.float64)
    below = v > cy
    depth[below] = torch.minimum((1.2 * fy / (v[below] - cy))[:, None].expand(-1, ww), torch.tensor(3.0, dtype=torch.float64))
    feats = torch.arange(hh * ww, dtype=torch.float64).reshape(1, hh, ww)
    pose = torch.tensor([1.0, 2.0, 1.2, math.pi / 2, 0.0], dtype=torch.float64)
    out = backproject(feats, depth, (fx, fy, cx, cy), pose)
    pts = out["positions"].reshape(hh, ww, 3)
    floor = (v > cy)[:, None] & (depth < 3.0)
    assert floor.sum() > 100
    assert torch.allclose(pts[floor.expand(-1, ww)][:, 2], torch.zeros(1, dtype=torch.float64), atol=1e-9)
    assert (pts[floor.expand(-1, ww)][:, 1] > 2.0).all()  # in front of the camera (yaw 90°: +y)
    wall = ~below
    assert torch.allclose(pts[wall][..., 1], torch.tensor(5.0, dtype=torch.float64), atol=1e-9)
    # the centre column is straight ahead: x = camera x; pixels to the right have x > 1 (yaw 90°: right is +x)
    assert torch.allclose(pts[wall][..., 0][:, ww // 2 - 1:ww // 2 + 1].mean(1), torch.tensor(1.0, dtype=torch.float64))
    assert (pts[0, -1, 0] > 1.0) and (pts[0, 0, 0] < 1.0)
    assert torch.equal(out["features"][:, 0], feats.reshape(-1))
    assert torch.allclose(out["scales"].reshape(hh, ww)[0], torch.tensor(3.0 / fx, dtype=torch.float64))
    # a coarser 4 x 4 grid reads the median depth of its 8 x 8 cells: the wall cells stay on y = 5
    coarse = backproject(torch.zeros(2, 4, 4, dtype=torch.float64), depth, (fx, fy, cx, cy), pose)["positions"].reshape(4, 4, 3)
    assert torch.allclose(coarse[:2, :, 1], torch.tensor(5.0, dtype=torch.float64), atol=1e-9)
    # pitch: looking 90° down from 1.2 m at planar depth 1.2 puts the centre on the floor below the camera
    down = backproject(torch.zeros(1, 1, 1), torch.full((1, 1), 1.2), (0.5, 0.5, 0.5, 0.5),
                       torch.tensor([0.0, 0.0, 1.2, 0.0, -math.pi / 2]))["positions"][0]
    assert torch.allclose(down, torch.zeros(3), atol=1e-6)


def test_feature_cloud_caps_and_evicts_the_oldest_points_first():
    cloud = FeatureCloud(1, 2, cap=5)
    for step in range(3):
        n = 2
        cloud.add({"positions": torch.full((1, n, 3), float(step)), "features": torch.full((1, n, 2), float(step)),
                   "headings": torch.zeros(1, n), "scales": torch.ones(1, n)})
    assert len(cloud) == 5
    assert cloud.features[0, :, 0].tolist() == [0.0, 1.0, 1.0, 2.0, 2.0]  # one of step 0's points evicted


def _single_point_cloud(feature, at=(2.0, 0.0, 0.0)):
    cloud = FeatureCloud(1, feature.shape[0], cap=8)
    cloud.add({"positions": torch.tensor([[at]]), "features": feature[None, None], "headings": torch.zeros(1, 1),
               "scales": torch.full((1, 1), 0.05)})
    return cloud


def test_volume_rendering_of_a_single_opaque_point_gives_its_feature():
    torch.manual_seed(0)
    feature = torch.tensor([0.3, -1.2, 2.0, 0.7])
    renderer = VolumeRenderer(4, hidden=16, k=3, rays=1, samples=16, near=0.2, far=4.0, radius=0.3)
    with torch.no_grad():
        renderer.density[-1].bias.fill_(60.0)  # opaque wherever the point is in reach
    cloud = _single_point_cloud(feature)
    origins = torch.zeros(1, 2, 3)
    with torch.no_grad():
        feat, opacity = renderer(cloud, origins, torch.tensor([[0.0, math.pi]]))
    assert torch.allclose(feat[0, 0], feature, atol=1e-4) and opacity[0, 0] == pytest.approx(1.0, abs=1e-5)
    # facing away: the ray never comes near the point: empty space, zero feature
    assert torch.allclose(feat[0, 1], torch.zeros(4)) and float(opacity[0, 1]) == 0.0
    # a translucent point lets part of the ray through: the feature scales with the opacity
    with torch.no_grad():
        renderer.density[-1].bias.fill_(-3.0)
        for p in renderer.density[:-1].parameters():
            p.zero_()
        renderer.density[-1].weight.zero_()
    with torch.no_grad():
        feat, opacity = renderer(cloud, origins, torch.tensor([[0.0, math.pi]]))
    assert 0.0 < float(opacity[0, 0]) < 0.9
    assert torch.allclose(feat[0, 0], float(opacity[0, 0]) * feature, atol=1e-5)


def test_the_renderers_neighbours_are_the_named_points_and_their_gradient_counts_each_use():
    """``_neighbours`` (one gather along the cloud's points) gives point ``idx[b, q, k]`` of episode
    b, and the gradient of their sum reaches each point once per use; a renderer's features and
    their gradient are those of the dense per-query gather it replaced."""
    from vlnverse.learn.hnr.cloud import _neighbours

    points = torch.arange(2 * 4 * 3, dtype=torch.float32).reshape(2, 4, 3).requires_grad_()
    idx = torch.tensor([[[0, 3], [3, 3]], [[1, 2], [2, 0]]])  # (B 2, Q 2, K 2); point 3 of episode 0 three times
    got = _neighbours(points, idx)
    assert got.shape == (2, 2, 2, 3)
    assert got[0, 1, 0].tolist() == [9.0, 10.0, 11.0] and got[1, 0, 1].tolist() == [18.0, 19.0, 20.0]
    assert _neighbours(points[..., 0], idx)[1, 1].tolist() == [18.0, 12.0]  # (B, N) scalars too
    got.sum().backward()
    assert points.grad[:, :, 0].tolist() == [[1.0, 0.0, 0.0, 3.0], [1.0, 1.0, 2.0, 0.0]]

    torch.manual_seed(0)
    b, n, c = 2, 40, 5
    renderer = VolumeRenderer(c, hidden=8, k=3, rays=2, rows=2, samples=4, radius=1.5)
    feats = torch.randn(b, n, c, requires_grad=True)
    cloud = FeatureCloud(b, c, cap=n)
    cloud.add({"positions": torch.rand(b, n, 3) * 3, "features": feats, "headings": torch.rand(b, n) * 6,
               "scales": torch.rand(b, n)})
    feat, _ = renderer(cloud, torch.rand(b, 3, 3) * 3, torch.rand(b, 3) * 6)
    grad, = torch.autograd.grad(feat.sum(), feats)
    q = torch.rand(b, 7, 3) * 3
    idx = torch.cdist(q, cloud.positions).topk(3, dim=-1, largest=False)[1]
    dense = torch.gather(feats[:, None].expand(-1, 7, n, c), 2, idx[..., None].expand(-1, -1, -1, c))
    assert torch.equal(_neighbours(feats, idx), dense)
    assert grad.abs().sum() > 0


def test_the_background_fills_the_transmittance_a_ray_has_left():
    """``Σ w_i f_i + T_N f_bg``: an empty cloud (or a ray through empty space) renders the background,
    an opaque point still renders its own feature, a translucent one mixes the two by its opacity."""
    torch.manual_seed(0)
    feature, bg = torch.tensor([0.3, -1.2, 2.0, 0.7]), torch.tensor([[[1.5, 0.25, -0.5, 4.0], [-2.0, 1.0, 0.5, 3.0]]])
    renderer = VolumeRenderer(4, hidden=16, k=3, rays=3, samples=16, near=0.2, far=4.0, radius=0.3)
    origins, yaws = torch.zeros(1, 2, 3), torch.tensor([[0.0, math.pi]])
    with torch.no_grad():
        feat, opacity = renderer(FeatureCloud(1, 4), origins, yaws, bg)  # nothing in the cloud yet
        assert torch.equal(feat, bg) and torch.equal(opacity, torch.zeros(1, 2))
        feat, opacity = renderer(FeatureCloud(1, 4), origins, yaws)  # without a background: zero
        assert torch.equal(feat, torch.zeros(1, 2, 4)) and torch.equal(opacity, torch.zeros(1, 2))
        renderer.density[-1].bias.fill_(60.0)
        one_ray = VolumeRenderer(4, hidden=16, k=3, rays=1, samples=16, near=0.2, far=4.0, radius=0.3)
        one_ray.load_state_dict(renderer.state_dict())
        feat, opacity = one_ray(_single_point_cloud(feature), origins, yaws, bg)
    assert torch.allclose(feat[0, 0], feature, atol=1e-4) and opacity[0, 0] == pytest.approx(1.0, abs=1e-5)
    assert torch.allclose(feat[0, 1], bg[0, 1]) and float(opacity[0, 1]) == 0.0  # facing away: all background
    with torch.no_grad():  # translucent: opacity · f + (1 - opacity) · f_bg (one ray: the view's opacity is the ray's)
        renderer.density[-1].bias.fill_(-3.0)
        for p in renderer.density[:-1].parameters():
            p.zero_()
        renderer.density[-1].weight.zero_()
        one_ray.load_state_dict(renderer.state_dict())
        feat, opacity = one_ray(_single_point_cloud(feature), origins, yaws, bg)
        a = float(opacity[0, 0])
        assert 0.0 < a < 0.9
        assert torch.allclose(feat[0, 0], a * feature + (1 - a) * bg[0, 0], atol=1e-5)
        # three rays (the point lies on the middle one only): the background fills each ray's own gap
        feat, opacity = renderer(_single_point_cloud(feature), origins, yaws, bg)
        assert float(opacity[0, 0]) == pytest.approx(a / 3, abs=1e-6)
        assert torch.allclose(feat[0, 0], (a * feature + (1 - a) * bg[0, 0] + 2 * bg[0, 0]) / 3, atol=1e-5)


def test_integrate_is_front_to_back():
    latent = torch.tensor([[[1.0], [5.0]]])
    feat, opacity = integrate(torch.tensor([[100.0, 100.0]]), latent, torch.tensor([1.0, 1.0]))
    assert feat.item() == pytest.approx(1.0) and opacity.item() == pytest.approx(1.0)  # the first opaque sample hides the second


def _plain_attention(module, x, mask=None):
    b, n, d = x.shape
    h = module.heads
    q, k, v = module.qkv(x).chunk(3, -1)
    split = lambda t: t.reshape(b, n, h, d // h).transpose(1, 2)  # noqa: E731
    out = torch.nn.functional.scaled_dot_product_attention(split(q), split(k), split(v),
                                                           attn_mask=None if mask is None else mask[:, None, None, :])
    return module.out(out.transpose(1, 2).reshape(b, n, d))


def test_gasa_with_zero_distances_equals_plain_attention_and_distances_matter():
    torch.manual_seed(1)
    gasa = GraphAwareAttention(16, heads=4)
    with torch.no_grad():
        gasa.edge.bias.normal_()  # a constant per head shifts every logit alike: still plain attention
    x = torch.randn(2, 5, 16)
    mask = torch.tensor([[True] * 5, [True, True, True, False, False]])
    e0 = torch.zeros(2, 5, 5)
    assert torch.allclose(gasa(x, e0, mask), _plain_attention(gasa, x, mask), atol=1e-5)
    assert torch.allclose(gasa(x, e0), _plain_attention(gasa, x), atol=1e-5)
    far = torch.rand(2, 5, 5) * 10
    assert not torch.allclose(gasa(x, far + far.transpose(1, 2), mask), gasa(x, e0, mask), atol=1e-3)


def test_same_load_balancing_loss_is_minimal_for_uniform_usage():
    from vlnverse.learn.gama import SAME, expert_share, load_balancing_loss

    n, k, b = 4, 2, 8
    uniform = torch.full((b, n), 1.0 / n)
    assert load_balancing_loss(uniform).item() == pytest.approx(1.0)
    skewed = torch.tensor([[0.7, 0.2, 0.05, 0.05]]).expand(b, -1)
    assert load_balancing_loss(skewed).item() == pytest.approx(4 * (0.49 + 0.04 + 2 * 0.0025))
    torch.manual_seed(0)
    for _ in range(20):  # any routing scores at least the uniform one
        p = torch.softmax(torch.randn(b, n) * 3, -1)
        assert load_balancing_loss(p).item() >= 1.0 - 1e-6
    # gradient descent on the loss spreads a collapsed router towards uniform usage
    same = SAME(6, 5, experts=n, k=k)
    with torch.no_grad():
        same.router.bias.copy_(torch.tensor([3.0, 0.0, 0.0, 0.0]))
    feats = torch.randn(64, 6)
    opt = torch.optim.SGD(same.router.parameters(), lr=0.5)
    first = None
    for _ in range(100):
        probs, idx, _ = same.route(feats)
        loss = load_balancing_loss(probs)
        first = loss.item() if first is None else first
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert first > 1.3 and loss.item() < 1.1
    share = expert_share(idx, n)
    assert share.sum().item() == pytest.approx(1.0) and share.max().item() < 0.5  # no expert takes every step


def test_same_routes_per_step_to_top_k_experts():
    from vlnverse.learn.gama import SAME

    torch.manual_seed(2)
    same = SAME(6, 5, experts=3, k=1)
    probs, idx, gates = same.route(torch.randn(2, 6))
    assert probs.shape == (2, 3) and idx.shape == (2, 1)
    assert torch.equal(idx[:, 0], probs.argmax(-1)) and torch.allclose(gates[:, 0], probs.max(-1).values)
    tokens = torch.randn(2, 4, 5)
    scores = same.score(tokens, idx, gates)
    for b in range(2):  # k = 1: the chosen expert's scores times its router probability (the Switch gate)
        expected = probs[b].max() * same.experts[int(idx[b, 0])](tokens[b])[:, 0]
        assert torch.allclose(scores[b], expected, atol=1e-6)
    # the navigation loss reaches the router through that gate (a renormalised single gate is 1: no gradient)
    torch.nn.functional.cross_entropy(scores, torch.tensor([0, 3])).backward()
    assert same.router.weight.grad is not None and same.router.weight.grad.abs().sum().item() > 1e-6
    same2 = SAME(6, 5, experts=3, k=2)
    _, idx2, gates2 = same2.route(torch.randn(2, 6))
    assert torch.allclose(gates2.sum(-1), torch.ones(2))  # k >= 2: renormalised over the chosen experts
    from vlnverse.core.errors import ConfigError

    with pytest.raises(ConfigError):
        SAME(6, 5, experts=2, k=3)


def test_graph_distances_follow_the_trajectory_not_the_straight_line():
    from vlnverse.learn.hnr import graph_distances, topological_edges

    # visited (0,0) -> (2,0) -> (2,2), current (0,2); candidates (0,3) and (-1,2); lookaheads at the candidates
    pos = torch.tensor([[[0.0, 0.0], [2.0, 0.0], [2.0, 2.0], [0.0, 2.0], [0.0, 3.0], [-1.0, 2.0], [0.0, 3.0], [-1.0, 2.0]]])
    adj = topological_edges(3, 2, 1)
    assert adj.shape == (1, 8, 8) and torch.equal(adj, adj.transpose(1, 2))
    d = graph_distances(pos, adj)[0]
    assert d[0, 3].item() == pytest.approx(6.0)  # along the path: 2 + 2 + 2 (the straight line is 2)
    assert d[0, 4].item() == pytest.approx(7.0) and d[4, 5].item() == pytest.approx(2.0)  # candidate to candidate via the current node
    assert d[4, 6].item() == pytest.approx(0.0) and d[6, 7].item() == pytest.approx(2.0)
    assert torch.equal(d, d.T)
    cut = adj.clone()
    cut[0, 0, 1] = cut[0, 1, 0] = False
    assert graph_distances(pos, cut)[0, 0, 3].item() == 100.0  # unreachable: the cap


def test_expert_usage_per_task_and_step_and_its_plot(tmp_path):
    import json

    from vlnverse.core.errors import ConfigError
    from vlnverse.learn.gama import expert_usage, plot_expert_usage

    fine = [{"agent_outputs": [{"candidates": 3, "experts": [0, 1]}, {"no_candidates": True}, {"candidates": 2, "experts": [0, 2]}]},
            {"agent_outputs": [{"candidates": 3, "experts": [1, 0]}]}]
    path = tmp_path / "episodes.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in fine) + "\n")
    usage = expert_usage({"fine_grained": path, "object_goal": [{"agent_outputs": [{"experts": [2, 1]}]}]}, experts=3)
    assert usage["fine_grained"]["steps"] == [4, 2]
    assert usage["fine_grained"]["share"] == [[0.5, 0.5, 0.0], [0.5, 0.0, 0.5]]
    assert usage["fine_grained"]["overall"] == [0.5, 0.3333, 0.1667]
    assert usage["object_goal"]["share"] == [[0.0, 0.5, 0.5]]
    png = plot_expert_usage(usage, tmp_path / "usage.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and not list(tmp_path.glob("*.tmp*"))
    with pytest.raises(ConfigError) as err:
        expert_usage({"x": [{"agent_outputs": [{"experts": [5]}]}]}, experts=3)
    assert "\n" not in str(err.value) and "experts" in str(err.value)


def _room_panorama(center, yaw, half=2.0, views=12, size=16, hfov_deg=90.0):
    """Planar depth (V, H, W) of a 12-view panorama at ``center`` (x, y), heading ``yaw``, inside
    walls at x, y = ±``half`` (floor and ceiling out of reach): per pixel, the ray's distance to
    the first wall times its cosine to the optical axis. Also returns the wall (0-3) each
    pixel column hits (V, W)."""
    import numpy as np

    f = (size / 2) / math.tan(math.radians(hfov_deg) / 2)
    u = (np.arange(size) + 0.5 - size / 2) / f  # right, per unit forward
    v = (np.arange(size) + 0.5 - size / 2) / f  # down
    depth = np.zeros((views, size, size), dtype=np.float32)
    walls = np.zeros((views, size), dtype=int)
    for i in range(views):
        a = yaw + 2 * math.pi * i / views
        fwd, left = np.array([math.cos(a), math.sin(a)]), np.array([-math.sin(a), math.cos(a)])
        dirs = fwd[None] - u[:, None] * left[None]  # (W, 2) horizontal ray per column, forward component 1
        t = np.full(size, np.inf)
        for n, (axis, wall) in enumerate(((0, -half), (0, half), (1, -half), (1, half))):
            with np.errstate(divide="ignore", invalid="ignore"):
                s = (wall - center[axis]) / dirs[:, axis]
            walls[i] = np.where((s > 0) & (s < t), n, walls[i])
            t = np.where((s > 0) & (s < t), s, t)
        depth[i] = np.broadcast_to(t[None, :], (size, size))  # planar depth = t (forward component 1)
    return depth, walls


def test_grid_features_back_project_to_the_room_walls():
    """A 12-view depth panorama of a square room (walls at ±2 m): each view's 4 x 4 grid cells,
    at the median depth of their pixels (``cell_depths``), back-project (``panorama_points``) onto
    the walls; view 0 faces the x = 2 wall squarely, so its cells land at x = 2 exactly, spread
    over y and z as the cell centres' rays do."""
    import numpy as np

    from vlnverse.learn.hnr import cell_depths, panorama_points

    center, yaw, g = (0.4, -0.3), 0.0, 4
    depth, walls = _room_panorama(center, yaw)
    cells = cell_depths(depth, g, max_depth=10.0)
    assert cells.shape == (12, g, g)
    feats = torch.arange(12 * 3 * g * g, dtype=torch.float32).reshape(1, 12, 3, g, g)
    pts = panorama_points(feats, torch.from_numpy(cells)[None], torch.tensor([[*center, yaw]]), 90.0)
    pos = pts["positions"][0].double()
    assert pos.shape == (12 * g * g, 3) and pts["features"].shape == (1, 12 * g * g, 3)
    assert torch.equal(pts["features"][0, :g * g], feats[0, 0].reshape(3, -1).T)  # view 0's cells first, row-major
    # view 0 (heading 0, facing the x = 2 wall at 1.6 m): cell (i, j) at y = cy - (u_j - cx)/f · d, z = -(v_i - cy)/f · d
    d0 = 2.0 - center[0]
    offs = (torch.arange(g, dtype=torch.float64) + 0.5) / g * 2 - 1  # cell centres in units of tan(45°) = 1
    v0 = pos[:g * g].reshape(g, g, 3)
    assert torch.allclose(v0[..., 0], torch.tensor(2.0, dtype=torch.float64), atol=1e-5)
    assert torch.allclose(v0[..., 1], (center[1] - offs * d0)[None].expand(g, g), atol=1e-5)
    assert torch.allclose(v0[..., 2], (-offs * d0)[:, None].expand(g, g), atol=1e-5)
    # every cell that sees one wall lies on it within 2 cm (a cell's median depth vs its centre's
    # ray); a cell across a corner (its columns see two walls) within 25 cm (measured 0.20 m)
    off_wall = torch.minimum((pos[:, 0].abs() - 2).abs(), (pos[:, 1].abs() - 2).abs()).reshape(12, g, g)
    cols = walls.reshape(12, g, -1)
    corner = torch.from_numpy((cols != cols[..., :1]).any(-1))[:, None, :].expand(12, g, g)  # (V, rows, cols)
    assert 0 < int(corner.sum()) <= 12 * g * 2
    assert off_wall[~corner].max() < 0.02 and off_wall[corner].max() < 0.25, off_wall.max()
    # the heading of each point is its view's; its scale is depth / f (metres per cell at that depth)
    assert torch.allclose(pts["headings"][0].reshape(12, -1)[:, 0], torch.arange(12) * (2 * math.pi / 12))
    f = (g / 2) / math.tan(math.radians(45.0))
    assert torch.allclose(pts["scales"][0].reshape(12, g, g), torch.from_numpy(cells) / f)


def test_cell_depths_take_the_median_and_fill_misses_with_the_max_depth():
    import numpy as np

    from vlnverse.learn.hnr import cell_depths

    depth = np.ones((1, 4, 4), dtype=np.float32)
    depth[0, :2, :2] = [[1.0, 2.0], [3.0, np.inf]]
    depth[0, 2:, 2:] = np.nan
    out = cell_depths(depth, 2, max_depth=5.0)
    assert out.tolist() == [[[2.5, 1.0], [1.0, 5.0]]]


def test_rows_of_rays_see_a_point_above_the_horizon_in_their_band_only():
    """``rows`` = 2 over a 90° square view: rays pitched ±atan(1/2) (the centres of the upper and
    lower band); an opaque point 2 m ahead on the upper ray is rendered by that row alone (half
    the view's rays: half its feature, opacity 1/2), and level rays (1 row) miss it."""
    torch.manual_seed(0)
    feature = torch.tensor([1.0, -2.0])
    up = math.atan(0.5)
    cloud = _single_point_cloud(feature, at=(2 * math.cos(up), 0.0, 2 * math.sin(up)))
    two = VolumeRenderer(2, hidden=8, k=1, rays=1, rows=2, samples=32, near=0.2, far=4.0, radius=0.2)
    assert torch.allclose(two.ray_pitches.sort().values, torch.tensor([-up, up]), atol=1e-6)
    level = VolumeRenderer(2, hidden=8, k=1, rays=1, rows=1, samples=32, near=0.2, far=4.0, radius=0.2)
    for r in (two, level):
        with torch.no_grad():
            r.density[-1].bias.fill_(60.0)
    with torch.no_grad():
        feat, opacity = two(cloud, torch.zeros(1, 1, 3), torch.zeros(1, 1))
        flat, flat_opacity = level(cloud, torch.zeros(1, 1, 3), torch.zeros(1, 1))
    assert opacity[0, 0] == pytest.approx(0.5, abs=1e-4) and torch.allclose(feat[0, 0], feature / 2, atol=1e-4)
    assert float(flat_opacity[0, 0]) == 0.0 and torch.equal(flat[0, 0], torch.zeros(2))
