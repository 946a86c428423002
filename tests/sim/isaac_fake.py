"""A recording fake of the Omniverse modules ``vlnverse.sim.isaac.adapter.CALLS`` lists, built from that table.

``FakeOmniverse.import_module`` stands in for ``importlib.import_module``: the modules it serves are
the table's (grouped from its ``module:attribute`` rows, so fake and adapter cannot disagree on a module
path), every attribute fetched from them must be a loadable row, the fake's classes define exactly the
members the table lists for them, and every call the adapter makes is checked against its row
(positional count, keyword names, argument types; :func:`conform`). Each call is recorded in ``calls`` as ``(name, args, kwargs)`` in order, imports as
``("import", module)``. The world is a small rigid-body integrator (force/mass, torque/inertia about
Z, explicit Euler at ``physics_dt``, no collisions) so the shared controller closes its loop through
the adapter's wrench; the stage is the real authored USD file, opened with usd-core. Scene queries
answer for a square room [0, room]² (rays stop at its walls; overlaps are configured); contact
reports and segmentation ids are configured per test.
"""
from __future__ import annotations

import functools
import inspect
import math
from types import SimpleNamespace

import numpy as np

from vlnverse.sim.isaac.adapter import API, CALLS, Call

_TYPES = {"int": (int,), "float": (float, int), "str": (str,), "bool": (bool,), "dict": (dict,), "list": (list,)}


def check_shape(call: Call, sig: inspect.Signature, args: tuple, kwargs: dict) -> None:
    """Fail unless ``args``/``kwargs`` have the shape and types ``call`` declares (``sig``: the fake's own)."""
    if len(args) != call.nargs or not set(kwargs) <= set(call.kwargs):
        raise AssertionError(f"{call.symbol} called with {len(args)} positional argument(s) and keywords "
                             f"{sorted(kwargs)}; adapter.CALLS says {call.nargs} and {list(call.kwargs)}")
    bound = sig.bind(*args, **kwargs).arguments
    for name, tname in call.types:
        if name not in bound or bound[name] is None:
            continue
        value = bound[name]
        ok = (isinstance(value, _TYPES[tname]) and not (tname in ("int", "float") and isinstance(value, bool))
              if tname in _TYPES else type(value).__name__ == tname.split(".")[-1])
        if not ok:
            raise AssertionError(f"{call.symbol}: {name} is {type(value).__name__}, adapter.CALLS says {tname}")


def conform(call: Call, fn, method: bool = False):
    """``fn`` wrapped so that every call is checked against ``call`` (``method``: skip ``self``)."""
    sig = inspect.signature(fn)
    if method:
        sig = sig.replace(parameters=list(sig.parameters.values())[1:])

    @functools.wraps(fn)
    def checked(*args, **kwargs):
        check_shape(call, sig, args[1:] if method else args, kwargs)
        return fn(*args, **kwargs)
    return checked


def _public(cls) -> set[str]:
    return {n for n in vars(cls) if not n.startswith("_")}


class _Module:
    """A fake module whose listed attributes record their calls."""

    def __init__(self, fake: "FakeOmniverse", name: str, attrs: dict):
        self._fake, self._name, self._attrs = fake, name, attrs

    def __getattr__(self, attr: str):
        full = f"{self._name}:{attr}"
        if full not in API:
            raise AssertionError(f"{full} used but not listed in adapter.API")
        if attr not in self._attrs:
            raise AttributeError(attr)
        return self._attrs[attr]


class FakeOmniverse:
    """Recording fake; see module doc. ``room`` is the side (m) of the square room queries see."""

    def __init__(self, room: float = 6.0):
        self.calls: list[tuple] = []
        self.room = room
        self.reject: set[str] = set()
        self.overlap_hits: list[str] = []
        self.contact_pairs: list[tuple[str, str, str, str]] = []  # actor0, actor1, collider0, collider1
        self.semantic = {"data": None, "info": {"idToLabels": {}}}
        self.instance = {"data": None, "info": {"idToLabels": {}}}
        self.depth_value = 2.0
        self.stage = None
        self.time = 0.0
        self.dt = None
        self.bodies: dict[str, dict] = {}
        self.start_errors: list[tuple[str, str]] | None = None  # set: SimulationApp fails with these Kit errors
        self.loggers: list = []
        self.argv_seen: list[str] | None = None
        fake = self

        def rec(name):
            def wrap(fn):
                @functools.wraps(fn)
                def call(*args, **kwargs):
                    fake.calls.append((name, args, kwargs))
                    return fn(*args, **kwargs)
                return call
            return wrap

        class SimulationApp:
            def __init__(self, launch_config):
                import sys

                fake.calls.append(("SimulationApp", (launch_config,), {}))
                fake.argv_seen = list(sys.argv)
                self.config = launch_config
                if fake.start_errors is not None:  # Kit's start fails: it logs, then SimulationApp exits
                    for source, message in fake.start_errors:
                        for logger in list(fake.loggers):
                            logger(source, 1, "app.cpp", 1, message)
                    sys.exit(1)

            def close(self):
                fake.calls.append(("SimulationApp.close", (), {}))

        def get_app():
            raise RuntimeError("no Kit app in the recording fake")

        class ILogging:
            def add_logger(self, arg0):
                fake.loggers.append(arg0)
                return arg0

            def remove_logger(self, arg0):
                fake.loggers.remove(arg0)

        logging_iface = ILogging()

        @rec("open_stage")
        def open_stage(usd_path):
            from pxr import Usd

            fake.stage = Usd.Stage.Open(usd_path)
            return fake.stage is not None

        @rec("get_current_stage")
        def get_current_stage():
            return fake.stage

        class World:
            def __init__(self, physics_dt=None, rendering_dt=None, stage_units_in_meters=None,
                         physics_prim_path="/physicsScene"):
                fake.calls.append(("World", (), dict(physics_dt=physics_dt, rendering_dt=rendering_dt,
                                                     stage_units_in_meters=stage_units_in_meters,
                                                     physics_prim_path=physics_prim_path)))
                assert fake.stage.GetPrimAtPath(physics_prim_path).GetTypeName() == "PhysicsScene"
                fake.dt = physics_dt

            @classmethod
            def clear_instance(cls):
                fake.calls.append(("World.clear_instance", (), {}))

            def reset(self):
                fake.calls.append(("World.reset", (), {}))

            def step(self, render=True):
                fake.calls.append(("World.step", (), {"render": render}))
                fake.integrate()

            def render(self):
                fake.calls.append(("World.render", (), {}))

            @property
            def current_time(self):
                return fake.time

        class RigidPrim:
            def __init__(self, prim_paths_expr):
                fake.calls.append(("RigidPrim", (), {"prim_paths_expr": prim_paths_expr}))
                from pxr import UsdGeom, UsdPhysics

                prim = fake.stage.GetPrimAtPath(prim_paths_expr)
                assert prim.IsValid(), prim_paths_expr
                mass = UsdPhysics.MassAPI(prim)
                m = mass.GetMassAttr().Get()
                inertia = mass.GetDiagonalInertiaAttr().Get()
                pos = UsdGeom.Xformable(prim).ComputeLocalToWorldTransform(0).ExtractTranslation()
                self.path = prim_paths_expr
                self.state = fake.bodies.setdefault(prim_paths_expr, {
                    "mass": float(m), "iz": float(inertia[2]) if inertia is not None and inertia[2] > 0 else 1.0,
                    "pos": np.array(pos, float), "yaw": 0.0, "vel": np.zeros(6), "force": np.zeros(3),
                    "torque": np.zeros(3)})

            def initialize(self):
                fake.calls.append(("RigidPrim.initialize", (self.path,), {}))

            def is_physics_handle_valid(self):
                return self.path not in fake.reject

            def get_world_poses(self):
                s = self.state
                return s["pos"].reshape(1, 3).copy(), np.array([[math.cos(s["yaw"] / 2), 0, 0, math.sin(s["yaw"] / 2)]])

            def set_world_poses(self, positions=None, orientations=None):
                fake.calls.append(("RigidPrim.set_world_poses", (self.path,), {"positions": positions,
                                                                                  "orientations": orientations}))
                w, x, y, z = orientations[0]
                self.state["pos"] = np.array(positions[0], float)
                self.state["yaw"] = math.atan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z))

            def get_velocities(self):
                return self.state["vel"].reshape(1, 6).copy()

            def set_velocities(self, velocities):
                self.state["vel"] = np.array(velocities, float).reshape(6)

            def apply_forces_and_torques_at_pos(self, forces=None, torques=None, is_global=True):
                assert is_global is True
                self.state["force"] = np.array(forces, float).reshape(3)
                self.state["torque"] = np.array(torques, float).reshape(3)

        @rec("add_labels")
        def add_labels(prim, labels, instance_name="class"):
            return None

        class Camera:
            def __init__(self, prim_path, resolution=None, frequency=None):
                fake.calls.append(("Camera", (), {"prim_path": prim_path, "resolution": resolution,
                                                  "frequency": frequency}))
                self.path, self.resolution = prim_path, resolution

            def initialize(self):
                fake.calls.append(("Camera.initialize", (self.path,), {}))

            def add_distance_to_image_plane_to_frame(self):
                fake.calls.append(("Camera.add_distance_to_image_plane_to_frame", (self.path,), {}))

            def add_semantic_segmentation_to_frame(self):
                fake.calls.append(("Camera.add_semantic_segmentation_to_frame", (self.path,), {}))

            def add_instance_id_segmentation_to_frame(self):
                fake.calls.append(("Camera.add_instance_id_segmentation_to_frame", (self.path,), {}))

            def set_world_pose(self, position=None, orientation=None, camera_axes="world"):
                fake.calls.append(("Camera.set_world_pose", (self.path,), {"position": position,
                                                                          "orientation": orientation,
                                                                          "camera_axes": camera_axes}))

            def get_rgba(self):
                w, h = self.resolution
                return np.full((h, w, 4), 128, np.uint8)

            def get_current_frame(self):
                fake.calls.append(("Camera.get_current_frame", (self.path,), {}))
                w, h = self.resolution
                sem = dict(fake.semantic)
                sem["data"] = np.zeros((h, w), np.uint32) if sem["data"] is None else sem["data"]
                inst = dict(fake.instance)
                inst["data"] = np.zeros((h, w), np.uint32) if inst["data"] is None else inst["data"]
                return {"distance_to_image_plane": np.full((h, w), fake.depth_value, np.float32),
                        "semantic_segmentation": sem, "instance_id_segmentation": inst}

        class IPhysxSimulation:
            def get_contact_report(self):
                headers = [SimpleNamespace(actor0=fake.encode(a0), actor1=fake.encode(a1),
                                           collider0=fake.encode(c0), collider1=fake.encode(c1))
                           for a0, a1, c0, c1 in fake.contact_pairs]
                return headers, []

        class PhysXSceneQuery:
            def overlap_shape(self, meshPath0, meshPath1, reportFn, anyHit=False):  # noqa: N803 - Omniverse's names
                fake.calls.append(("overlap_shape", (fake.paths[meshPath0], meshPath1), {"anyHit": anyHit}))
                reportFn(SimpleNamespace(collision="/World/Agent/collider", rigid_body="/World/Agent"))  # itself
                for path in fake.overlap_hits:
                    reportFn(SimpleNamespace(collision=path, rigid_body=path))
                return len(fake.overlap_hits) + 1

            def raycast_all(self, origin, dir, distance, reportFn, bothSides=False):  # noqa: A002,N803
                ox, oy, _ = origin
                dx, dy, _ = dir
                reportFn(SimpleNamespace(collision="/World/Agent/collider", rigid_body="/World/Agent", distance=0.0))
                ts = []
                for o, d in ((ox, dx), (oy, dy)):
                    if abs(d) > 1e-12:
                        ts.append(((fake.room if d > 0 else 0.0) - o) / d)
                t = min(ts)
                if t <= distance:
                    reportFn(SimpleNamespace(collision="/World/Scene/Static/wall", rigid_body="", distance=t))
                return True

        sim_iface, query_iface = IPhysxSimulation(), PhysXSceneQuery()

        class PhysxContactReportAPI:
            def __init__(self, prim):
                self.prim = prim

            @classmethod
            def Apply(cls, prim):  # noqa: N802 - USD's name
                fake.calls.append(("PhysxContactReportAPI.Apply", (str(prim.GetPath()),), {}))
                return cls(prim)

            def CreateThresholdAttr(self):  # noqa: N802
                return SimpleNamespace(Set=rec("PhysxContactReportAPI.threshold")(lambda v: None))

        def intToSdfPath(intPath):  # noqa: N802,N803
            return fake.paths[intPath]

        def encodeSdfPath(path):  # noqa: N802
            return fake.encode(path), 0

        from pxr import Sdf

        class Float3(tuple):
            def __new__(cls, x, y, z):
                return tuple.__new__(cls, (x, y, z))

        #: implementation of every loadable row, and the fake class standing for each class row
        impl = {"isaacsim:SimulationApp": SimulationApp, "omni.kit.app:get_app": get_app,
                "carb.logging:acquire_logging": lambda: logging_iface,
                "isaacsim.core.utils.stage:open_stage": open_stage,
                "isaacsim.core.utils.stage:get_current_stage": get_current_stage,
                "isaacsim.core.api:World": World, "isaacsim.core.prims:RigidPrim": RigidPrim,
                "isaacsim.core.utils.semantics:add_labels": add_labels, "isaacsim.sensors.camera:Camera": Camera,
                "omni.physx:get_physx_simulation_interface": lambda: sim_iface,
                "omni.physx:get_physx_scene_query_interface": lambda: query_iface,
                "pxr.PhysxSchema:PhysxContactReportAPI": PhysxContactReportAPI,
                "pxr.PhysicsSchemaTools:intToSdfPath": intToSdfPath,
                "pxr.PhysicsSchemaTools:encodeSdfPath": encodeSdfPath, "pxr.Sdf:Path": Sdf.Path, "carb:Float3": Float3}
        classes = {**{k: v for k, v in impl.items() if isinstance(v, type) and v is not Sdf.Path},
                   "omni.physx.bindings._physx:IPhysxSimulation": IPhysxSimulation,
                   "omni.physx.bindings._physx:PhysXSceneQuery": PhysXSceneQuery, "carb.logging:ILogging": ILogging}
        assert set(impl) == set(API), set(impl) ^ set(API)
        for symbol, cls in classes.items():  # the fake's classes define exactly the table's members
            members = {c.path.split(".", 1)[1] for c in CALLS if c.symbol.startswith(symbol + ".")}
            assert _public(cls) == members, (symbol, _public(cls) ^ members)
        for call in CALLS:
            cls_symbol, _, member = call.symbol.rpartition(".")
            if call.loadable and call.kind == "call":
                impl[call.symbol] = conform(call, impl[call.symbol])
            elif call.loadable and call.kind == "class" and impl[call.symbol] is not Sdf.Path:
                cls = impl[call.symbol]
                cls.__init__ = conform(call, cls.__init__, method=True) if "__init__" in vars(cls) else cls.__init__
                if "__new__" in vars(cls):
                    cls.__new__ = staticmethod(conform(call, cls.__new__, method=True))
            elif cls_symbol in classes and call.kind in ("call", "classmethod"):
                cls = classes[cls_symbol]
                fn = inspect.getattr_static(cls, member)
                if isinstance(fn, classmethod):
                    setattr(cls, member, classmethod(conform(call, fn.__func__, method=True)))
                else:
                    setattr(cls, member, conform(call, fn, method=True))
        self.modules: dict[str, dict] = {}
        for call in CALLS:
            if call.loadable:
                self.modules.setdefault(call.module, {})[call.path] = impl[call.symbol]
        self.paths: dict[int, str] = {}

    def encode(self, path) -> int:
        """A fake PhysX integer encoding of prim ``path`` (decoded by ``intToSdfPath``)."""
        key = 1000 + [*self.paths.values(), str(path)].index(str(path))
        self.paths[key] = str(path)
        return key


    def import_module(self, name: str):
        """``importlib.import_module`` for the listed modules only."""
        self.calls.append(("import", (name,), {}))
        if name not in self.modules:
            raise ModuleNotFoundError(name)
        return _Module(self, name, self.modules[name])

    def integrate(self) -> None:
        """One explicit-Euler step of every rigid body under its applied wrench (no gravity, no contacts)."""
        dt = self.dt
        for s in self.bodies.values():
            s["vel"][:3] += s["force"] / s["mass"] * dt
            s["vel"][5] += s["torque"][2] / s["iz"] * dt
            s["pos"][:2] += s["vel"][:2] * dt
            s["yaw"] += s["vel"][5] * dt
            s["force"][:] = 0.0
            s["torque"][:] = 0.0
        self.time += dt

    def names(self) -> list[str]:
        """Recorded call names, in order."""
        return [c[0] for c in self.calls]
