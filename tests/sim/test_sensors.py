"""Sensor rig: depth/semantics accuracy, GL vs ray-cast agreement, rates, panorama, LiDAR, intrinsics."""
from __future__ import annotations

import math

import numpy as np
import pytest

from vlnverse.core.errors import ConfigError, UnknownNameError
from vlnverse.sim import (AgentPose, CameraSpec, LidarSpec, PanoramaSpec, VelocityAction, camera_intrinsics, load_body,
                          make_sensor, make_simulator)
from vlnverse.sim.sensors import validate_sensor
from vlnverse.sim.demo import demo_home

FACING_EAST_WALL = (4.0, 3.0, 0.0)  # east wall inner face at x = 6: 2 m ahead


def _cameras(**kw):
    return [make_sensor("depth", width=64, height=48, **kw), make_sensor("semantic", width=64, height=48),
            make_sensor("instance", width=64, height=48), make_sensor("rgb", width=64, height=48)]


@pytest.mark.parametrize("renderer", ["raycast", pytest.param("gl", marks=pytest.mark.gl)])
def test_depth_of_wall_two_metres_ahead_and_its_label(room, renderer, request):
    if renderer == "gl":
        request.getfixturevalue("gl_context")
    with make_simulator(room, "r2r_ce", sensors=_cameras(), renderer=renderer) as sim:
        obs = sim.reset(FACING_EAST_WALL)
        depth = obs["depth"]
        assert depth.dtype == np.float32 and depth.shape == (48, 64)
        assert depth[24, 32] == pytest.approx(2.0, abs=0.02)
        # Planar depth: every pixel on the wall plane facing the camera reads 2 m.
        centre = depth[16:32, 16:48]
        assert np.all(np.abs(centre - 2.0) < 0.02)
        labels = sim.semantic_labels
        assert labels[0] == "background"
        assert labels[obs["semantic"][24, 32]] == "wall"
        assert obs["instance"][24, 32] == 2  # wall_east
        assert obs["rgb"].shape == (48, 64, 3) and obs["rgb"].dtype == np.uint8
        assert obs["rgb"][24, 32].astype(int).sum() > 100  # lit, not black


def test_depth_clip_and_normalise(room):
    sensors = [make_sensor("depth", name="d", width=32, height=32, max_depth=1.5),
               make_sensor("depth", name="dn", width=32, height=32, max_depth=4.0, normalize=True)]
    with make_simulator(room, "r2r_ce", sensors=sensors, renderer="raycast") as sim:
        obs = sim.reset(FACING_EAST_WALL)
        assert np.all(obs["d"] <= 1.5) and obs["d"][16, 16] == pytest.approx(1.5)
        assert obs["dn"][16, 16] == pytest.approx(2.0 / 4.0, abs=0.005)


@pytest.mark.gl
def test_gl_and_raycast_depth_agree_to_a_centimetre(gl_context):
    home = demo_home(1)
    spec = make_sensor("depth", width=96, height=72, hfov_deg=90.0)
    poses = [AgentPose(2.0, 2.0, 0.4, -0.2), AgentPose(6.0, 2.0, 2.5, 0.1), AgentPose(10.0, 6.0, -2.0, 0.0)]
    with make_simulator(home, "r2r_ce", sensors=[], renderer="gl") as gl, \
            make_simulator(home, "r2r_ce", sensors=[], renderer="raycast") as rc:
        assert gl.renderer_name == "gl" and rc.renderer_name == "raycast"
        gl.reset(poses[0])
        rc.reset(poses[0])
        for pose in poses:
            a, b = gl.render_at(pose, spec)["depth"], rc.render_at(pose, spec)["depth"]
            diff = np.abs(a - b)
            # Pixels straddling an edge may see different surfaces; all others agree within 1 cm.
            assert np.mean(diff < 0.01) > 0.99, f"{pose}: max diff {diff.max():.3f}"
            assert np.median(diff) < 1e-3


def test_sensor_rate_renders_one_step_in_ten(room):
    spec = make_sensor("depth", width=16, height=16, rate_hz=5.0)
    with make_simulator(room, "r2r_ce", sensors=[spec, make_sensor("rgb", width=16, height=16)],
                        renderer="raycast") as sim:
        assert sim.control.control_hz == 50.0
        first = sim.reset((1.0, 3.0, 0.0))["depth"]
        frames = []
        for _ in range(20):  # 20 control ticks of 20 ms = 0.4 s
            obs, _ = sim.step(VelocityAction(v=0.5, omega=0.0, duration=0.02))
            frames.append(obs["depth"])
        assert sim.render_counts["depth"] == 3  # t = 0, 0.2, 0.4
        assert sim.render_counts["rgb"] == 21  # no rate: every observation
        assert all(f is frames[0] for f in frames[:9]) and frames[0] is first  # cached, not re-rendered
        assert frames[9] is not first and frames[9][8, 8] < first[8, 8]  # re-rendered closer to the wall


def test_teleport_invalidates_rate_limited_frames(room):
    """A teleport (Tel-Hop, resets) moves the agent without advancing the clock: a rate-limited
    sensor must not keep returning the frame it rendered at the old pose."""
    spec = make_sensor("depth", width=16, height=16, rate_hz=5.0)
    with make_simulator(room, "r2r_ce", sensors=[spec], renderer="raycast") as sim:
        before = sim.reset(FACING_EAST_WALL)["depth"]  # east wall 2 m ahead
        sim.teleport((5.0, 3.0, 0.0))  # 1 m from the wall, same sim time
        after = sim.get_observations()["depth"]
        assert sim.render_counts["depth"] == 2
        assert after[8, 8] == pytest.approx(before[8, 8] - 1.0, abs=0.02)


def test_panorama_views_match_single_cameras(room):
    pano = PanoramaSpec.of(width=32, height=32, views=12)
    with make_simulator(room, "r2r_ce", sensors=[pano], renderer="raycast") as sim:
        obs = sim.reset((3.0, 3.0, 0.0))
        assert obs["panorama_rgb"].shape == (12, 32, 32, 3) and obs["panorama_depth"].shape == (12, 32, 32)
        # The room centre is 3 m from every wall: view 0 faces east, view 3 (90° CCW) north.
        for view in (0, 3, 6, 9):
            assert obs["panorama_depth"][view, 16, 16] == pytest.approx(3.0, abs=0.02)
            single = sim.render_at(AgentPose(3.0, 3.0, math.radians(30 * view)), make_sensor("depth", width=32, height=32))
            np.testing.assert_allclose(obs["panorama_depth"][view], single["depth"], atol=1e-5)
        # View 1 faces 30° CCW: pixel (16, 16) looks (0.5 / 16) to the right of the optical axis, so the
        # east wall (3 m away along x) is at planar depth z with z (cos 30° + 0.5 / 16 · sin 30°) = 3.
        c, s = math.cos(math.radians(30)), math.sin(math.radians(30))
        assert obs["panorama_depth"][1, 16, 16] == pytest.approx(3.0 / (c + s * 0.5 / 16), abs=0.002)


def test_lidar_ranges_in_a_square_room(room):
    lidar = LidarSpec(name="scan", beams=360, channels=1, max_range=8.0)
    lidar3d = make_sensor("lidar3d", beams=64, channels=8, max_range=8.0)
    with make_simulator(room, "r2r_ce", sensors=[lidar, lidar3d], renderer="raycast") as sim:
        obs = sim.reset((3.0, 2.0, 0.0))
        scan = obs["scan"][0]
        assert obs["scan"].shape == (1, 360) and obs["lidar3d"].shape == (8, 64)
        az = np.degrees(np.linspace(-math.pi, math.pi, 360, endpoint=False))
        assert scan[az == 0.0][0] == pytest.approx(3.0, abs=0.01)   # east wall
        assert scan[az == 90.0][0] == pytest.approx(4.0, abs=0.01)  # north wall
        assert scan[az == -90.0][0] == pytest.approx(2.0, abs=0.01)  # south wall
        assert scan.min() == pytest.approx(2.0, abs=0.01)
        pts = lidar.points(obs["scan"])
        assert len(pts) == 360 and np.all(np.abs(pts[:, 2]) < 1e-9)


def test_intrinsics_and_extrinsics_back_project_onto_the_wall(room):
    spec = make_sensor("depth", width=64, height=48, hfov_deg=70.0, mount=(0.1, 0.0, 1.2, -10.0))
    with make_simulator(room, "r2r_ce", sensors=[spec], renderer="raycast") as sim:
        obs = sim.reset((4.2, 2.5, 0.3))
        k, cam_to_world = sim.camera_intrinsics("depth"), sim.camera_extrinsics("depth")
        assert k[0, 0] == pytest.approx(32 / math.tan(math.radians(35)))
        assert k[0, 2] == 32 and k[1, 2] == 24
        v, u = np.mgrid[0:48, 0:64]
        d = obs["depth"]
        rays = np.linalg.inv(k) @ np.stack([u.ravel() + 0.5, v.ravel() + 0.5, np.ones(u.size)])
        pts = (cam_to_world[:3, :3] @ (rays * d.ravel()) + cam_to_world[:3, 3:4]).T
        centre = pts[24 * 64 + 32]
        assert centre[0] == pytest.approx(6.0, abs=0.01)  # lands on the east wall's face
        floor_hits = pts[obs["depth"].ravel() < 10.0]
        assert floor_hits[:, 2].min() > -0.01  # nothing below the floor
        assert cam_to_world[2, 3] == pytest.approx(1.2)


def test_attach_detach_and_render_at_leave_state_alone(room):
    with make_simulator(room, "r2r_ce", sensors=[], renderer="raycast") as sim:
        sim.reset((1.0, 1.0, 0.0))
        assert set(sim.get_observations()) == {"pose"}
        sim.attach_sensor(make_sensor("rgb", width=8, height=8))
        with pytest.raises(ValueError, match="already attached"):
            sim.attach_sensor(make_sensor("rgb", width=8, height=8))
        assert sim.get_observations()["rgb"].shape == (8, 8, 3)
        before = sim.pose
        sim.render_at((5.0, 5.0, 1.0), make_sensor("depth", width=8, height=8))
        assert sim.pose == before
        sim.detach_sensor("rgb")
        with pytest.raises(UnknownNameError, match="rgb"):
            sim.detach_sensor("rgb")


def test_bad_sensor_and_preset_names_raise_clear_errors(room):
    with pytest.raises(UnknownNameError, match="thermal.*registered: .*depth"):
        make_sensor("thermal")
    with pytest.raises(ConfigError, match="width"):
        make_sensor("rgb", width=0)
    for fov in (0.0, 180.0, -5.0, 200.0):
        with pytest.raises(ConfigError, match="hfov_deg.*\\(0, 180\\)"):
            make_sensor("rgb", hfov_deg=fov)
    with pytest.raises(ConfigError, match="rate_hz"):
        make_sensor("depth", rate_hz=0.0)
    with pytest.raises(ConfigError, match="min_depth"):
        make_sensor("depth", min_depth=5.0, max_depth=1.0)
    with pytest.raises(ConfigError, match="kind"):
        make_simulator(room, "r2r_ce", sensors=[CameraSpec(kind="thermal")])
    with pytest.raises(ConfigError, match="unknown_field"):
        make_sensor("rgb", unknown_field=3)
    with pytest.raises(UnknownNameError, match="body preset 'hovercraft'"):
        make_simulator(room, "hovercraft")
    with pytest.raises(UnknownNameError, match="simulator backend 'bullet'"):
        make_simulator(room, "r2r_ce", backend="bullet")
    with pytest.raises(ConfigError, match="renderer"):
        make_simulator(room, "r2r_ce", sensors=[], renderer="vulkan")


def test_intrinsics_formula():
    k = camera_intrinsics(224, 224, 90.0)
    np.testing.assert_allclose(k, [[112, 0, 112], [0, 112, 112], [0, 0, 1]])
    assert make_sensor("depth").width == 256 and make_sensor("rgb").hfov_deg == 90.0
    body = load_body("stretch")
    assert not body.holonomic and body.camera_height == pytest.approx(1.29)


@pytest.mark.parametrize("bad, field", [({"width": 0}, "width"), ({"height": 4097}, "height"),
                                        ({"hfov_deg": 0.0}, "hfov_deg"), ({"hfov_deg": 180.0}, "hfov_deg"),
                                        ({"max_depth": 0.05}, "max_depth"), ({"max_depth": 1500.0}, "max_depth")])
def test_config_cameras_and_simulator_cameras_share_one_set_of_limits(bad, field):
    """``SensorConfig`` (a config file's camera) and ``CameraSpec`` check against the same limits
    (``vlnverse.sim.sensors.check_camera``): what one refuses the other refuses, naming the field."""
    from vlnverse.run.setup import SensorConfig
    from vlnverse.sim.sensors import HFOV_DEG, IMAGE_SIDE_PX, MAX_DEPTH_M

    for camera in (SensorConfig(name="rgb", kind="rgb", **bad), CameraSpec(name="rgb", kind="rgb", **bad),
                   PanoramaSpec.of(**bad)):
        with pytest.raises(ConfigError, match=f"^{field}: "):
            camera.validate()
    edge = {"width": IMAGE_SIDE_PX[0], "height": IMAGE_SIDE_PX[1], "hfov_deg": HFOV_DEG[1] - 0.5, "max_depth": MAX_DEPTH_M[1]}
    SensorConfig(name="d", kind="depth", **edge).validate()
    SensorConfig(name="d", kind="depth", **edge).to_spec().validate()


def test_a_config_camera_is_made_of_the_camera_spec_fields():
    """``SensorConfig`` is not a second camera definition: its fields are ``CONFIG_CAMERA_FIELDS``
    of ``CameraSpec`` with ``CameraSpec``'s types and defaults (``name`` required); a config entry
    keeps its six keys (dumps unchanged), converts to the equal ``CameraSpec``, and a bad entry
    fails in one line naming the file, the field and the expected value."""
    import dataclasses

    from vlnverse.run.setup import SensorConfig, sensor_config
    from vlnverse.sim.sensors import CONFIG_CAMERA_FIELDS

    spec = {f.name: f for f in dataclasses.fields(CameraSpec)}
    entry = dataclasses.fields(SensorConfig)
    assert tuple(f.name for f in entry) == CONFIG_CAMERA_FIELDS == ("name", "kind", "width", "height", "hfov_deg", "max_depth")
    assert entry[0].default is dataclasses.MISSING
    assert [(f.type, f.default) for f in entry[1:]] == [(spec[f.name].type, spec[f.name].default) for f in entry[1:]]
    assert [f.default for f in entry[1:]] == ["rgb", 224, 224, 90.0, 10.0]

    written = {"name": "depth", "kind": "depth", "width": 64, "height": 48, "hfov_deg": 79.0, "max_depth": 5.0}
    cam = sensor_config(written)
    assert dataclasses.asdict(cam) == written and SensorConfig("depth", "depth", 64, 48, 79.0, 5.0) == cam
    assert cam.to_spec() == CameraSpec(name="depth", kind="depth", width=64, height=48, hfov_deg=79.0, max_depth=5.0)
    assert sensor_config({"name": "rgb"}).to_spec() == CameraSpec(name="rgb")
    for bad, message in (({"name": "d", "mount": [0, 0, 1, 0]}, "x.yaml: sensors[1]: unknown field(s) ['mount'] (expected one of"),
                         ({"kind": "rgb"}, "x.yaml: sensors[1]: missing required field(s) ['name']"),
                         ({"name": "a b"}, "x.yaml: sensors[1].name: got 'a b' (expected a Python identifier)"),
                         ({"name": "d", "kind": "thermal"}, "x.yaml: sensors[1].kind: got 'thermal' (expected one of"),
                         ({"name": "d", "max_depth": 0.05}, "x.yaml: sensors[1].max_depth: got 0.05 (expected metres in"),
                         (["d"], "x.yaml: sensors[1]: got ['d'] (expected a mapping with keys from")):
        with pytest.raises(ConfigError) as err:
            sensor_config(bad, field="sensors[1]", file="x.yaml")
        assert str(err.value).startswith(message) and "\n" not in str(err.value), str(err.value)


def test_a_panorama_is_one_camera_spec_turned_views_times():
    """``PanoramaSpec`` holds a ``CameraSpec`` (no copy of its fields or checks): the preset's flat
    fields build it, the camera's fields read through, its checks are the camera's, and each view
    is that camera turned ``i * 360 / views`` degrees."""
    import pickle

    cam = CameraSpec(width=40, height=30, hfov_deg=75.0, mount=(0.1, 0.0, 1.2, -10.0), max_depth=6.0, normalize=True)
    pano = PanoramaSpec(name="pano", views=4, modalities=("rgb", "depth"), camera=cam)
    assert make_sensor("panorama", name="pano", views=4, width=40, height=30, hfov_deg=75.0,
                       mount=(0.1, 0.0, 1.2, -10.0), max_depth=6.0, normalize=True) == pano
    assert (pano.width, pano.height, pano.max_depth, pano.normalize, pano.rate_hz) == (40, 30, 6.0, True, None)
    np.testing.assert_array_equal(pano.intrinsics, cam.intrinsics)
    assert pickle.loads(pickle.dumps(pano)) == pano
    with pytest.raises(AttributeError):
        pano.kind  # a panorama draws modalities; the camera's kind is not its own
    views = pano.view_specs()
    assert [(round(math.degrees(yaw)), s.name, s.kind) for yaw, s in views[:4]] == [
        (0, "pano_rgb", "rgb"), (0, "pano_depth", "depth"), (90, "pano_rgb", "rgb"), (90, "pano_depth", "depth")]
    assert all((s.width, s.hfov_deg, s.mount, s.max_depth) == (40, 75.0, (0.1, 0.0, 1.2, -10.0), 6.0) for _, s in views)
    with pytest.raises(ConfigError, match="sensor preset 'panorama'.*'kind'"):
        make_sensor("panorama", kind="rgb")
    with pytest.raises(ConfigError, match="sensor 'pano'.mount\\[3\\]"):
        validate_sensor(PanoramaSpec(name="pano", camera=CameraSpec(mount=(0.0, 0.0, None, 95.0))))
    with pytest.raises(ConfigError, match="sensor 'panorama'.modalities"):
        make_sensor("panorama", modalities=("rgb", "thermal"))
