"""The Isaac Sim backend without Isaac Sim: the adapter and ``IsaacSimulator`` against a recording fake
of every Omniverse module ``adapter.API`` lists (``isaac_fake.py``), the authored stage read back with
usd-core, and the one-line error where Isaac Sim is not installed.

None of this runs Isaac Sim; ``test_backend_contract.py`` runs the same physics/sensor contract on
Isaac Sim wherever ``isaacsim`` imports.
"""
from __future__ import annotations

import math
import subprocess
import sys

import numpy as np
import pytest

from vlnverse.core.errors import SceneError
from vlnverse.sim import CameraSpec, DiscreteAction, LidarSpec, PanoramaSpec, make_simulator
from vlnverse.sim.api import ControlConfig
from vlnverse.sim.body import load_body
from vlnverse.sim.isaac import adapter as adapter_mod
from vlnverse.sim.isaac.adapter import API, WARMUP_STEPS, IsaacAdapter, IsaacNotInstalledError
from vlnverse.sim.isaac.backend import IsaacSimulator
from vlnverse.sim.isaac.stage import camera_hfov_deg

from isaac_fake import FakeOmniverse

CAM = CameraSpec("rgb", "rgb", 64, 48, 90.0)


def _sim(room, fake, sensors=(CAM,), **kw):
    adapter = IsaacAdapter(importer=fake.import_module)
    adapter.start(headless=True, running=False)  # a standalone run: no Kit app in this process yet
    return IsaacSimulator(room, load_body("r2r_ce"), sensors=list(sensors), control=ControlConfig(),
                          adapter=adapter, **kw)


@pytest.fixture()
def fake():
    return FakeOmniverse(room=6.0)


def test_simulation_app_is_constructed_before_any_other_omniverse_import(room, fake):
    with _sim(room, fake):
        pass
    names = fake.names()
    # before SimulationApp: only isaacsim itself and carb's logging (which SimulationApp's module imports first)
    start = names.index("SimulationApp")
    assert fake.calls[0] == ("import", ("isaacsim",), {})
    assert {c[1][0] for c in fake.calls[:start] if c[0] == "import"} == {"isaacsim", "carb.logging"}
    assert fake.calls[start] == ("SimulationApp", ({"headless": True},), {})
    assert fake.loggers == []  # the start is over: Kit's log is no longer read
    assert names[-1] == "SimulationApp.close"  # the adapter closes the app it constructed


def test_every_omniverse_symbol_used_is_listed_and_load_enforces_it(room, fake):
    with _sim(room, fake) as sim:
        sim.step(DiscreteAction.MOVE_FORWARD)
        sim.teleport((3.0, 3.0, 0.0))
        sim.get_observations()
    used = {c[1][0] for c in fake.calls if c[0] == "import"}
    assert used <= {name.split(":")[0] for name in API}
    a = IsaacAdapter(importer=fake.import_module)
    with pytest.raises(RuntimeError, match="SimulationApp must come first"):
        a.load("isaacsim.core.api:World")
    a.start(running=True)  # inside a running Kit app: no SimulationApp is constructed
    assert a.app is None
    with pytest.raises(KeyError, match="not in vlnverse.sim.isaac.adapter.API"):
        a.load("omni.isaac.core:World")  # deprecated namespace: never listed


def test_stage_world_and_contact_reporting_are_set_up_in_order(room, fake):
    with _sim(room, fake):
        names = fake.names()
    order = [names.index(n) for n in ("open_stage", "World", "PhysxContactReportAPI.Apply", "add_labels",
                                      "RigidPrim", "World.reset", "RigidPrim.initialize")]
    assert order == sorted(order)
    world = next(c for c in fake.calls if c[0] == "World")
    assert world[2] == {"physics_dt": 0.005, "rendering_dt": 0.005, "stage_units_in_meters": 1.0,
                        "physics_prim_path": "/World/PhysicsScene"}
    assert ("PhysxContactReportAPI.Apply", ("/World/Agent",), {}) in fake.calls
    assert ("PhysxContactReportAPI.threshold", (0.0,), {}) in fake.calls
    labels = [c for c in fake.calls if c[0] == "add_labels"]
    assert {c[2]["labels"][0] for c in labels} == {"wall", "floor", "ceiling", "crate", "safe"}
    assert all(c[2]["instance_name"] == "class" for c in labels)


def test_teleport_runs_the_twenty_step_warm_up_before_a_frame_is_captured(room, fake):
    with _sim(room, fake) as sim:
        del fake.calls[:]
        sim.teleport((3.0, 3.0, 0.5))
        sim.get_observations()
        names = fake.names()
        capture = names.index("Camera.get_current_frame")
        steps = [c for c in fake.calls[:capture] if c[0] == "World.step"]
        assert len(steps) == WARMUP_STEPS == 20 and all(c[2]["render"] for c in steps)
        assert sim.pose.x == pytest.approx(3.0) and sim.pose.yaw == pytest.approx(0.5)  # held still
        # render_at: the camera jumps, so 20 render-only frames, and physics does not step
        del fake.calls[:]
        t0 = sim.time
        sim.render_at((1.0, 1.0, 0.0), CAM)
        names = fake.names()
        assert names.count("World.render") == WARMUP_STEPS and "World.step" not in names
        assert names.index("Camera.get_current_frame") > max(i for i, n in enumerate(names) if n == "World.render")
        assert sim.time == t0


def test_camera_has_the_configured_resolution_fov_rate_and_pose(room, fake):
    spec = CameraSpec("depth", "depth", 64, 48, 75.0, rate_hz=5.0, min_depth=0.1, max_depth=8.0)
    with _sim(room, fake, sensors=[spec]) as sim:
        cam = next(c for c in fake.calls if c[0] == "Camera")
        assert cam[2]["resolution"] == (64, 48)
        from pxr import UsdGeom

        usd_cam = UsdGeom.Camera(fake.stage.GetPrimAtPath(cam[2]["prim_path"]))
        assert camera_hfov_deg(usd_cam) == pytest.approx(75.0, abs=1e-4)
        ha, va = usd_cam.GetHorizontalApertureAttr().Get(), usd_cam.GetVerticalApertureAttr().Get()
        assert va / ha == pytest.approx(48 / 64)
        assert tuple(usd_cam.GetClippingRangeAttr().Get()) == pytest.approx((0.1, 8.0))
        assert "Camera.add_distance_to_image_plane_to_frame" in fake.names()
        sim.reset((2.0, 2.0, math.pi / 2))
        obs = sim.get_observations()
        assert obs["depth"].shape == (48, 64) and obs["depth"].dtype == np.float32
        assert np.all(obs["depth"] == pytest.approx(2.0))
        place = [c for c in fake.calls if c[0] == "Camera.set_world_pose"][-1][2]
        assert place["camera_axes"] == "world"
        # facing +Y: the camera's forward axis (+X in Isaac's "world" camera axes) must point along world +Y
        from scipy.spatial.transform import Rotation

        w, x, y, z = place["orientation"]
        optical = Rotation.from_quat([x, y, z, w]).apply([1.0, 0.0, 0.0])
        assert optical == pytest.approx([0.0, 1.0, 0.0], abs=1e-9)
        assert place["position"][2] == pytest.approx(load_body("r2r_ce").camera_height)
        # the 5 Hz rate is the shared rate logic: a second observation 0.1 s later reuses the frame
        n = fake.names().count("Camera.get_current_frame")
        sim.step(DiscreteAction.STOP)
        sim.get_observations()
        assert fake.names().count("Camera.get_current_frame") == n


def test_forward_and_turn_close_the_loop_through_the_adapter_wrench(room, fake):
    with _sim(room, fake, sensors=[]) as sim:
        sim.reset((2.0, 2.0, 0.0))
        _, r = sim.step(DiscreteAction.MOVE_FORWARD)
        assert r.success, r.message
        assert sim.pose.x - 2.0 == pytest.approx(0.25, abs=0.004) and abs(sim.pose.y - 2.0) < 1e-3
        _, r = sim.step(DiscreteAction.TURN_LEFT)
        assert r.success and math.degrees(sim.pose.yaw) == pytest.approx(15.0, abs=0.3)


def test_contact_report_becomes_the_action_result_contacts(room, fake):
    with _sim(room, fake, sensors=[]) as sim:
        sim.reset((2.0, 2.0, 0.0))
        wall = next(p for p, info in sim.layout.colliders.items() if info.label == "wall")
        fake.contact_pairs = [("/World/Agent", "", "/World/Agent/collider", wall)]
        _, r = sim.step(DiscreteAction.MOVE_FORWARD)
        assert r.collided and [c.label for c in r.contacts] == ["wall"]
        assert r.contacts[0].instance_id == sim.layout.colliders[wall].instance


def test_teleport_into_an_obstacle_moves_to_the_nearest_free_pose(room, fake):
    with _sim(room, fake, sensors=[]) as sim:
        crate = next(p for p, info in sim.layout.colliders.items() if info.label == "crate")
        original = fake.modules["omni.physx"]["get_physx_scene_query_interface"]()

        def overlap_shape(p0, p1, report, any_hit):  # the probe overlaps the crate within 0.1 m of (2, 4.5)
            x, y = fake.bodies["/World/Agent"]["pos"][:2]
            fake.overlap_hits = [crate] if math.hypot(x - 2.0, y - 4.5) < 0.1 else []
            return original.overlap_shape(p0, p1, report, any_hit)

        fake.modules["omni.physx"]["get_physx_scene_query_interface"] = lambda: type(
            "Q", (), {"overlap_shape": staticmethod(overlap_shape), "raycast_all": original.raycast_all})()
        r = sim.teleport((2.0, 4.5, 0.0))
        assert r.collided and [c.label for c in r.contacts] == ["crate"]
        assert r.obstacle_displacement == pytest.approx(0.1, abs=0.01)  # the shared nearest-free search
        assert "nearest free pose" in r.message


def test_segmentation_ids_map_to_the_simulator_label_table_and_instances(room, fake):
    sem = CameraSpec("semantic", "semantic", 8, 6, 90.0)
    inst = CameraSpec("instance", "instance", 8, 6, 90.0)
    with _sim(room, fake, sensors=[sem, inst]) as sim:
        wall = next(p for p, info in sim.layout.colliders.items() if info.label == "wall")
        data = np.zeros((6, 8), np.uint32)
        data[:, 4:] = 7
        fake.semantic = {"data": data, "info": {"idToLabels": {"0": {"class": "BACKGROUND"}, "7": {"class": "wall"}}}}
        fake.instance = {"data": data, "info": {"idToLabels": {"0": "BACKGROUND", "7": wall}}}
        obs = sim.reset((2.0, 2.0, 0.0))
        wall_id = sim.semantic_labels.index("wall")
        assert obs["semantic"].dtype == np.int32 and set(np.unique(obs["semantic"])) == {0, wall_id}
        assert (obs["semantic"][:, 4:] == wall_id).all()
        assert set(np.unique(obs["instance"])) == {-1, sim.layout.colliders[wall].instance}


def test_lidar_rays_skip_the_agent_and_stop_at_the_walls(room, fake):
    lidar = LidarSpec("lidar", channels=1, beams=4, max_range=10.0)
    with _sim(room, fake, sensors=[lidar]) as sim:
        obs = sim.reset((2.0, 1.5, 0.0))
        # beams at -180, -90, 0, 90 degrees from the heading: walls at x=0, y=0, x=6, y=6
        assert obs["lidar"].shape == (1, 4)
        assert obs["lidar"][0] == pytest.approx([2.0, 1.5, 4.0, 4.5], abs=1e-6)


def test_panorama_views_turn_counter_clockwise(room, fake):
    pano = PanoramaSpec.of("pano", views=4, width=8, height=8, modalities=("rgb",))
    with _sim(room, fake, sensors=[pano]) as sim:
        del fake.calls[:]
        sim.reset((3.0, 3.0, 0.0))
        from scipy.spatial.transform import Rotation

        axes = []
        for c in fake.calls:
            if c[0] == "Camera.set_world_pose":
                w, x, y, z = c[2]["orientation"]
                axes.append(Rotation.from_quat([x, y, z, w]).apply([1.0, 0.0, 0.0])[:2])
        assert np.allclose(axes, [[1, 0], [0, 1], [-1, 0], [0, -1]], atol=1e-9)


def test_a_body_physx_rejects_is_reported_by_prim_path(room, fake):
    fake.reject = {"/World/Agent"}
    with pytest.raises(SceneError, match="/World/Agent"):
        _sim(room, fake)


def test_backend_isaac_without_isaac_sim_fails_at_once_in_one_line(room, monkeypatch):
    monkeypatch.setattr(adapter_mod, "isaacsim_available", lambda: False)
    with pytest.raises(IsaacNotInstalledError) as exc:
        make_simulator(room, "r2r_ce", sensors=[], backend="isaac")
    msg = str(exc.value)
    assert "\n" not in msg and "pip install" in msg and "isaacsim" in msg and "python.sh" in msg


@pytest.mark.skipif(adapter_mod.isaacsim_available(), reason="Isaac Sim is installed here")
def test_eval_cli_with_backend_isaac_prints_the_install_line_and_exits(tmp_path):
    cmd = [sys.executable, "-m", "vlnverse", "eval", "oracle_fine_grained_strict", "--backend", "isaac",
           f"out={tmp_path / 'run'}"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "needs Isaac Sim" in lines[0] and "pip install" in lines[0]
    assert not (tmp_path / "run").exists()  # nothing half-written


def test_importing_the_isaac_backend_imports_no_omniverse():
    code = ("import sys; import vlnverse.sim.isaac, vlnverse.sim.isaac.backend; "
            "bad = [m for m in sys.modules if m.split('.')[0] in ('omni', 'isaacsim', 'carb')]; "
            "print(bad); assert not bad")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)


def test_tools_cli_selects_isaac_from_its_arguments_and_fails_in_one_line_without_it(tmp_path):
    from pathlib import Path

    from vlnverse.sim.isaac.adapter import wants_isaac

    assert wants_isaac(["eval", "x", "--backend", "isaac"]) and wants_isaac(["eval", "x", "backend=isaac"])
    assert wants_isaac(["--backend=isaac"]) and not wants_isaac(["eval", "x", "--backend", "mujoco"])
    if adapter_mod.isaacsim_available():
        pytest.skip("Isaac Sim is installed here")
    tool = Path(__file__).resolve().parents[2] / "tools" / "vlnverse_cli.py"
    proc = subprocess.run([sys.executable, str(tool), "eval", "oracle_fine_grained_strict", "--backend", "isaac",
                           f"out={tmp_path / 'run'}"], capture_output=True, text=True, timeout=120)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "pip install" in lines[0]


def test_data_generate_with_backend_isaac_fails_before_any_work(tmp_path, monkeypatch, capsys):
    from vlnverse.cli import main

    monkeypatch.setattr(adapter_mod, "isaacsim_available", lambda: False)
    rc = main(["data", "generate", "--task", "fine_grained", "--scenes", "test", "--episodes-per-scene", "1",
               "--out", str(tmp_path / "ds"), "--backend", "isaac"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc != 0 and len(err) == 1 and "needs Isaac Sim" in err[0]
    assert not (tmp_path / "ds").exists()


def test_a_failed_kit_start_is_one_backend_error_with_kits_reason_and_kit_never_sees_our_argv(fake, monkeypatch):
    from vlnverse.core.errors import BackendError

    monkeypatch.setattr(adapter_mod, "_START_FAILURE", None)
    monkeypatch.setattr(sys, "argv", ["pytest", "-q", "-m", "isaac", "--backend", "isaac"])
    fake.start_errors = [  # what Kit 110.4 logged when SimulationApp failed on the 6.2 pip packages (measured)
        ("omni.kit.registry.nucleus.index_v2.index_sync", "Syncing registry index failed for url: 'https://x'"),
        ("omni.ext.plugin", "Failed to resolve extension dependencies. Failure hints:\n  * No versions of "
                            "omni.usd.schema.physx that satisfies: omni.physx-110.4.4 depends on it"),
        ("omni.kit.app.plugin", "Exiting app because of dependency solver failure..."),
        ("simulation_app.simulation_app", "SimulationApp._start_app: Application failed to start.")]
    with pytest.raises(BackendError) as exc:
        IsaacAdapter(importer=fake.import_module).start(running=False)
    msg = str(exc.value)
    assert msg == ("Isaac Sim could not start: [omni.ext.plugin] Failed to resolve extension dependencies. "
                   "Failure hints: * No versions of omni.usd.schema.physx that satisfies: omni.physx-110.4.4 "
                   "depends on it")
    assert fake.argv_seen == ["pytest"] and sys.argv[1:] == ["-q", "-m", "isaac", "--backend", "isaac"]
    assert fake.loggers == []
    # Kit cannot start twice in one process: the next simulator gets the same error without a second try
    with pytest.raises(BackendError, match="omni.usd.schema.physx"):
        IsaacAdapter(importer=fake.import_module).start(running=False)
    assert fake.names().count("SimulationApp") == 1


def test_a_failed_start_without_kit_errors_names_the_exit_status(fake, monkeypatch):
    from vlnverse.core.errors import BackendError

    monkeypatch.setattr(adapter_mod, "_START_FAILURE", None)
    fake.start_errors = []
    with pytest.raises(BackendError, match="^Isaac Sim could not start: SimulationApp exited with status 1$"):
        IsaacAdapter(importer=fake.import_module).start(running=False)


def test_kit_running_needs_an_app_that_runs_not_just_the_module(monkeypatch):
    import types

    from vlnverse.sim.isaac.adapter import kit_running

    monkeypatch.delitem(sys.modules, "omni.kit.app", raising=False)
    assert kit_running() is False
    module = types.ModuleType("omni.kit.app")
    monkeypatch.setitem(sys.modules, "omni.kit.app", module)

    def no_app():
        raise RuntimeError("no app")  # what omni.kit.app.get_app() does after a plain `import isaacsim`

    module.get_app = no_app
    assert kit_running() is False
    app = types.SimpleNamespace(running=False, is_running=lambda: app.running)
    module.get_app = lambda: app
    assert kit_running() is False  # a SimulationApp whose start failed
    app.running = True
    assert kit_running() is True


def test_the_fake_rejects_calls_whose_shape_the_table_does_not_declare(room, fake):
    adapter = IsaacAdapter(importer=fake.import_module)
    adapter.start(running=False)
    camera = adapter.load("isaacsim.sensors.camera:Camera")
    with pytest.raises(AssertionError, match="frequency is float, adapter.CALLS says int"):
        camera(prim_path="/World/cam", resolution=(4, 4), frequency=5.0)
    with pytest.raises(AssertionError, match="adapter.CALLS says 0 and"):
        camera("/World/cam", resolution=(4, 4))
    with pytest.raises(AssertionError, match="not listed in adapter.API"):
        fake.import_module("isaacsim.core.api").SimulationContext
    from pxr import Usd

    fake.stage = Usd.Stage.CreateInMemory()
    adapter.stage = fake.stage
    adapter.stage.DefinePrim("/World/cam", "Camera")
    adapter.camera("/World/cam", 4, 4, 5.0, ("rgb",))  # the adapter passes the rate as int Hz
    assert [c for c in fake.calls if c[0] == "Camera"][-1][2]["frequency"] == 5


def test_pip_openusd_imported_before_kit_is_refused_in_one_line(monkeypatch):
    import pxr  # noqa: F401 - usd-core's, in this environment

    from vlnverse.core.errors import BackendError
    from vlnverse.sim.isaac.adapter import usd_core_pxr

    assert usd_core_pxr().endswith("(usd-core)")
    monkeypatch.setattr(adapter_mod, "_START_FAILURE", None)
    with pytest.raises(BackendError, match="pxr was imported from a pip OpenUSD build") as exc:
        IsaacAdapter().start(running=False)
    assert "\n" not in str(exc.value)


def test_every_table_row_is_well_formed_and_the_fake_serves_exactly_the_loadable_ones(fake):
    from vlnverse.sim.isaac.adapter import CALL_BY_SYMBOL, CALLS

    assert len(CALL_BY_SYMBOL) == len(CALLS)  # no symbol twice
    kinds = {"call", "class", "type", "classmethod", "property"}
    for call in CALLS:
        assert call.kind in kinds and set(call.versions) <= {5, 6} and call.purpose, call
        assert call.kind in ("call", "class", "classmethod") or (call.nargs == 0 and not call.kwargs), call
    served = {f"{m}:{a}" for m, attrs in fake.modules.items() for a in attrs}
    assert served == {c.symbol for c in CALLS if c.loadable} == set(API)
    assert "isaacsim:SimulationApp" in served and "isaacsim.simulation_app:SimulationApp" not in served
