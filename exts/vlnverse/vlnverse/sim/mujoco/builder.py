"""SceneDescription + AgentBody → compiled MuJoCo model (via ``MjSpec``), cached by content hash.

Collision layout (``contype``/``conaffinity`` bits): the agent (bit 0) collides with static
obstacles and movable objects; floors and ceilings (bit 1 only) never touch the agent, which
moves on slide joints in the floor plane, but do carry movable objects; geoms with
``collides=False`` are visual only. The agent cylinder spans [``step_height``, ``height``] above
the floor so that, like the occupancy map (``build_occupancy_map(step_height=body.step_height)``), objects
lower than the step height do not block it. The agent geom is frictionless (``condim=1`` with a
higher ``priority``, so it wins the contact's condim) and slides along walls, unless the body
declares a ``friction`` (then ``condim=3`` with that coefficient). The cylinder translates but
does not turn: the heading is a child body on the yaw hinge, so contacts never torque it and only
the yaw actuator turns the base. The agent is driven by
body-frame actuators (site transmission) whose force limits are mass × max accel: velocity servos,
except a holonomic body's forward/lateral pair, which are motors fed by the backend's planar servo
(one force limit on the magnitude of the planar force).
"""
from __future__ import annotations

import math
from collections import OrderedDict
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from ...core.cache_key import content_key
from ...core.errors import ConfigError, SceneError
from ...scenes.baked_light import LIGHT_BAKERS, BakedLight, banded_meshes, box_bounds
from ...scenes.description import STRUCTURE_LABELS, Geom, SceneDescription, scene_content_hash
from ...scenes.object_meshes import check_objects, render_meshes
from ...scenes.textures import DEFAULT_KIND_BY_LABEL, LOOKS, material_kind
from ..body import AgentBody, as_body
from ..labels import default_label_table, label_table_for  # noqa: F401  (re-exported)
from ..types import RENDER_QUALITIES
from .gl import import_mujoco
from .lightmap import add_baked_box, bake_lightmaps

AGENT_BODY = "vlnverse_agent"
AGENT_GEOM = "vlnverse_agent_geom"
AGENT_SITE = "vlnverse_agent_base"
AGENT_HEADING_BODY = "vlnverse_agent_heading"
RENDER_CAMERA = "vlnverse_camera"
#: Geom groups: structure 0, objects 1, agent 3 (hidden from cameras and ray casts), and 4: the
#: collision geoms of objects drawn by render meshes (``objects="meshes"``), hidden from cameras too.
GROUP_STRUCTURE, GROUP_OBJECT, GROUP_AGENT, GROUP_COLLISION_ONLY = 0, 1, 3, 4
#: Density used for movable objects that declare no mass (kg/m³).
DEFAULT_DENSITY = 400.0
#: Labels that never block the agent (the agent moves on the floor plane).
PLANE_LABELS = ("floor", "ceiling")
#: Time constant of the agent's velocity servos (s): kv = mass / tau.
SERVO_TAU = 0.04
_CACHE_SIZE = 8
#: Render quality presets (see ``vlnverse.sim.types.RENDER_QUALITIES``).
QUALITIES = RENDER_QUALITIES


@dataclass
class BuiltScene:
    """A compiled model plus the Python-side tables the backend needs (geom → label/instance)."""

    model: object  # mujoco.MjModel; typed loosely so this module's signature leaks no MuJoCo type
    labels: list[str]
    geom_label_id: np.ndarray      # (ngeom,) int32 index into labels (0 = background)
    geom_instance: np.ndarray      # (ngeom,) int32 instance id (-1 for the agent)
    geom_movable: np.ndarray       # (ngeom,) bool
    geom_blocks_agent: np.ndarray  # (ngeom,) bool: can touch the agent
    geom_name: list[str]
    agent_body: int
    agent_geom: int
    qpos_adr: np.ndarray           # (3,) qpos addresses of slide x, slide y, hinge yaw
    dof_adr: np.ndarray            # (3,) matching dof addresses
    actuators: np.ndarray          # (3,) forward, lateral, yaw actuator ids
    camera: int
    movable_bodies: dict[int, int]  # instance id → body id
    floor_z: float
    key: str


_CACHE: "OrderedDict[str, BuiltScene]" = OrderedDict()


def _number(value):
    return None if value is None else float(value)


#: format of ``scene_hash`` (an in-process key: a change only recompiles)
MODEL_KEY_VERSION = 2


def scene_hash(desc: SceneDescription, body: AgentBody, *, step_height: float, physics_dt: float,
               label_table: Sequence[str] | None = None, quality: str = "fast", objects: str = "primitives") -> str:
    """The compiled model's cache key: the scene's content (``scene_content_hash``, the one scene
    fingerprint) with what compiling adds to it -- the geoms' colour, friction and material, the
    objects' masses, the wall height -- and the body and options."""
    looks = [[[float(c) for c in g.color], float(g.friction), g.material] for g in desc.geoms]
    return content_key("mujoco-model", MODEL_KEY_VERSION, scene_content_hash(desc), looks,
                       [float(o.mass) for o in desc.objects], _number(desc.metadata.get("wall_height")),
                       sorted(vars(body).items()), float(step_height), float(physics_dt), list(label_table or ()),
                       quality, objects)


@LIGHT_BAKERS.register("mujoco")
def baked_lightmaps(desc: SceneDescription, *, cache: bool = True) -> BakedLight:
    """The home's baked light (``lightmap.bake_lightmaps``: floors, rugs, walls, ceilings and the
    objects' render meshes), cast against the model the meshes opt-in draws at ``fast`` (render
    meshes; the agent and the hidden collision geoms left out)."""
    def occluders():
        built = build_model(desc, as_body("r2r_ce"), quality="fast", objects="meshes")
        groups = np.ones(6, np.uint8)
        groups[GROUP_AGENT] = groups[GROUP_COLLISION_ONLY] = 0
        return built.model, built.agent_body, groups

    return bake_lightmaps(desc, occluders, render_meshes(desc), cache=cache)


def _darker_material(spec, name: str, level: float, cache: dict) -> str:
    """A copy of material ``name`` with its tint times ``level`` (a baked band; one per pair)."""
    key = (name, level)
    if key not in cache:
        base = spec.material(name)
        mat = spec.add_material(name=f"{name}_l{int(round(level * 100)):03d}",
                                rgba=[*(float(c) * level for c in base.rgba[:3]), float(base.rgba[3])],
                                specular=base.specular, shininess=base.shininess, reflectance=base.reflectance,
                                emission=base.emission)
        mat.textures[1] = base.textures[1]
        mat.texuniform = base.texuniform
        mat.texrepeat = list(base.texrepeat)
        cache[key] = mat.name
    return cache[key]


#: metres beyond the agent's radius within which an object counts as touching it at the origin
AGENT_START_MARGIN = 0.05


def _near_origin(obj, reach: float) -> bool:
    """Whether ``obj``'s footprint (its XY bounds) comes within ``reach`` of the origin."""
    lo, hi = np.asarray(obj.bounds_min, dtype=float), np.asarray(obj.bounds_max, dtype=float)
    gap = np.maximum(np.maximum(lo[:2], -hi[:2]), 0.0)
    return float(np.hypot(*gap)) <= reach


def _geom_volume(g: Geom) -> float:
    if g.kind == "box":
        return float(8 * np.prod(g.size))
    if g.kind == "cylinder":
        return float(math.pi * g.size[0] ** 2 * 2 * g.size[1])
    if g.kind == "sphere":
        return float(4 / 3 * math.pi * g.size[0] ** 3)
    lo, hi = np.min(g.vertices, axis=0), np.max(g.vertices, axis=0)
    return float(np.prod(np.maximum(hi - lo, 1e-3)))


def _quat(mujoco, rot: np.ndarray) -> np.ndarray:
    q = np.zeros(4)
    mujoco.mju_mat2Quat(q, np.ascontiguousarray(rot, dtype=np.float64).reshape(9))
    return q


def check_quality(quality: str, field: str = "render.quality") -> str:
    """``quality`` if it names a preset, else ``ConfigError`` naming ``field``."""
    if quality not in QUALITIES:
        raise ConfigError(f"got {quality!r}", field=field, expected="one of " + ", ".join(QUALITIES))
    return quality


def build_model(desc: SceneDescription, body: AgentBody, *, step_height: float | None = None,
                physics_dt: float = 0.005, label_table: Sequence[str] | None = None,
                quality: str = "fast", objects: str = "primitives") -> BuiltScene:
    """Compile ``desc`` with the agent ``body``; cached in-process by ``scene_hash``.

    ``quality`` (``QUALITIES``) adds materials, textures and room lights (``default``, ``high``);
    geometry, and therefore depth and segmentation, is the same at every preset. ``objects``
    (``scenes.object_meshes.OBJECT_STYLES``): ``meshes`` draws objects with a render-mesh generator
    by visual-only meshes carrying their label and instance id (cameras, ray casts and lidar see
    those) while their collision geoms keep colliding in the hidden ``GROUP_COLLISION_ONLY``.
    Raises ``SceneError`` naming the scene for unusable geometry and ``ConfigError`` for a step
    height not below the body height or an unknown quality.
    """
    step_height = body.step_height if step_height is None else step_height
    if not 0.0 <= step_height < body.height:
        raise ConfigError(f"got {step_height}", field="step_height", expected=f"0 <= step_height < body height {body.height}")
    check_quality(quality)
    check_objects(objects, "objects")
    key = scene_hash(desc, body, step_height=step_height, physics_dt=physics_dt, label_table=label_table,
                     quality=quality, objects=objects)
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    built = _compile(desc, body, step_height, physics_dt, label_table, key, quality, objects)
    _CACHE[key] = built
    while len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return built


def _compile(desc: SceneDescription, body: AgentBody, step_height: float, physics_dt: float,
             label_table: Sequence[str] | None, key: str, quality: str = "fast",
             objects: str = "primitives") -> BuiltScene:
    mujoco = import_mujoco()
    where = desc.source_path or f"scene '{desc.scene_id}'"
    if not desc.geoms:
        raise SceneError(f"{where}: no geometry to simulate")
    labels = label_table_for(desc, label_table)
    label_index = {name: i for i, name in enumerate(labels)}

    spec = mujoco.MjSpec()
    spec.modelname = f"vlnverse_{desc.scene_id}"
    spec.option.timestep = physics_dt
    spec.option.integrator = mujoco.mjtIntegrator.mjINT_IMPLICITFAST
    if hasattr(mujoco.mjtEnableBit, "mjENBL_SLEEP"):  # island sleeping: resting objects cost nothing
        spec.option.enableflags |= int(mujoco.mjtEnableBit.mjENBL_SLEEP)
    # One quad per box face in the renderer's built-in meshes (MuJoCo's default 4x4 is for
    # per-vertex lighting; its lighting is per pixel, so images match to a few edge pixels) —
    # ~16x fewer triangles per box: +20 % RGB and +45 % depth frames/s on llvmpipe. Depth changes
    # by float rounding only (< 1e-5 m); cylinders and spheres keep their tessellation.
    spec.visual.quality.numquads = 1
    world = spec.worldbody
    lo, hi = desc.bounds()
    materials: dict[tuple[str, tuple[float, ...]], str] = {}
    if quality != "fast":
        from .looks import add_lights, material_for
    if quality == "fast":
        spec.visual.headlight.ambient = [0.45, 0.45, 0.45]
        spec.visual.headlight.diffuse = [0.45, 0.45, 0.45]
        spec.visual.headlight.specular = [0.0, 0.0, 0.0]
        # Two key lights from above and a weak fill from below (ceilings); no shadows (cost, see notes).
        for direction, strength in (([0.3, 0.5, -1.0], 0.35), ([-0.4, -0.2, -1.0], 0.35), ([0.1, 0.2, 1.0], 0.2)):
            light = world.add_light(pos=[(lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2, hi[2] + 5.0], dir=direction,
                                    castshadow=False, diffuse=[strength] * 3, specular=[0, 0, 0])
            _directional(mujoco, light)
    else:
        add_lights(spec, desc, quality)
    world.add_camera(name=RENDER_CAMERA, pos=[0, 0, 1], fovy=90.0)

    owner: dict[int, int] = {}
    for obj_index, obj in enumerate(desc.objects):
        for gi in obj.geom_indices:
            if not 0 <= gi < len(desc.geoms):
                raise SceneError(f"{where}: object {obj.instance_id} ({obj.category}): geom index {gi} out of range "
                                 f"(scene has {len(desc.geoms)} geoms)")
            owner[gi] = obj_index

    geom_meta: list[tuple[str, str, int, bool]] = []  # (mj name, label, instance, movable) in spec order
    meshes = render_meshes(desc) if objects == "meshes" else {}
    drawn_by_mesh = {gi for obj in desc.objects if obj.instance_id in meshes for gi in obj.geom_indices}
    # baked light (``lightmap``): the meshes opt-in's floors, rugs, walls, ceilings and objects at
    # the textured presets
    light = BakedLight()
    if objects == "meshes" and quality != "fast":
        light = baked_lightmaps(desc)
    baked = light.surfaces

    darker: dict[tuple[str, float], str] = {}

    def add_render_meshes(parent, obj, offset: np.ndarray, movable: bool) -> None:
        """The object's render meshes: visual only, massless, in the object group."""
        parts = [(g, 1.0) for g in meshes.get(obj.instance_id, [])]
        if obj.instance_id in light.objects:  # baked: bands, darkened by their level
            parts = banded_meshes([g for g, _ in parts], light.objects[obj.instance_id])
        for k, (g, level) in enumerate(parts):
            name = f"r{obj.instance_id}_{k}"
            mesh = spec.add_mesh(name=f"mesh_{name}", uservert=np.asarray(g.vertices, float).reshape(-1).tolist(),
                                 userface=np.asarray(g.faces, int).reshape(-1).tolist(),
                                 usertexcoord=np.asarray(g.texcoords, float).reshape(-1).tolist())
            if hasattr(mujoco, "mjtMeshInertia"):  # open surfaces: no volume to derive inertia from
                mesh.inertia = mujoco.mjtMeshInertia.mjMESH_INERTIA_SHELL
            kw: dict = dict(name=name, type=mujoco.mjtGeom.mjGEOM_MESH, meshname=f"mesh_{name}",
                            rgba=[*map(float, g.color), 1.0], pos=g.transform[:3, 3] - offset,
                            quat=_quat(mujoco, g.transform[:3, :3]), contype=0, conaffinity=0, group=GROUP_OBJECT,
                            mass=0.0)
            if level < 1.0:
                kw["rgba"] = [*(float(c) * level for c in g.color), 1.0]
            if quality != "fast":
                mat = material_for(spec, g, materials)
                if mat:
                    kw["material"] = mat if level >= 1.0 else _darker_material(spec, mat, level, darker)
                    kw["rgba"] = [0.5, 0.5, 0.5, 1.0]
            parent.add_geom(**kw)
            geom_meta.append((name, g.label, int(g.instance_id), movable))

    def add_geom(parent, index: int, g: Geom, offset: np.ndarray, mass: float | None, movable: bool) -> None:
        name = f"g{index}"
        kw: dict = dict(name=name, rgba=[*map(float, g.color), 1.0], friction=[g.friction, 0.005, 0.0001],
                        pos=g.transform[:3, 3] - offset, quat=_quat(mujoco, g.transform[:3, :3]))
        if g.kind == "box":
            if np.any(g.size <= 0):
                raise SceneError(f"{where}: geom {index} ({g.name or g.label}): box half extents {g.size.tolist()} must be positive")
            kw.update(type=mujoco.mjtGeom.mjGEOM_BOX, size=g.size.tolist())
        elif g.kind == "cylinder":
            kw.update(type=mujoco.mjtGeom.mjGEOM_CYLINDER, size=[g.size[0], g.size[1], 0.0])
        elif g.kind == "sphere":
            kw.update(type=mujoco.mjtGeom.mjGEOM_SPHERE, size=[g.size[0], 0.0, 0.0])
        else:
            if g.vertices is None or g.faces is None or len(g.vertices) < 4:
                raise SceneError(f"{where}: geom {index} ({g.name or g.label}): mesh needs >= 4 vertices and faces")
            spec.add_mesh(name=f"mesh{index}", uservert=np.asarray(g.vertices, float).reshape(-1).tolist(),
                          userface=np.asarray(g.faces, int).reshape(-1).tolist())
            kw.update(type=mujoco.mjtGeom.mjGEOM_MESH, meshname=f"mesh{index}")
        if quality != "fast":
            mat = material_for(spec, g, materials)
            if mat:
                kw["material"] = mat
                kw["rgba"] = [0.5, 0.5, 0.5, 1.0]  # MuJoCo's default geom rgba: the material colour applies
        plane = g.label in PLANE_LABELS
        if not g.collides:
            kw.update(contype=0, conaffinity=0)
        elif movable:
            kw.update(contype=3, conaffinity=3)
        elif plane:
            kw.update(contype=2, conaffinity=2)
        else:
            kw.update(contype=1, conaffinity=3)
        kw["group"] = GROUP_STRUCTURE if g.label in STRUCTURE_LABELS else GROUP_OBJECT
        if index in drawn_by_mesh or index in baked:
            kw["group"] = GROUP_COLLISION_ONLY
        if mass is not None:
            kw["mass"] = mass
        parent.add_geom(**kw)
        geom_meta.append((name, g.label, int(g.instance_id), movable))
        if index in baked:  # drawn by a visual-only copy with the baked light map
            kind = material_kind(g.material) or DEFAULT_KIND_BY_LABEL.get(g.label, "")
            mat = add_baked_box(spec, g, f"b{index}", baked[index], kw.get("material", ""), LOOKS.get(kind))
            lo, hi = box_bounds(g)
            parent.add_geom(name=f"b{index}", type=mujoco.mjtGeom.mjGEOM_MESH, meshname=f"mesh_b{index}",
                            material=mat, rgba=[0.5, 0.5, 0.5, 1.0], pos=(lo + hi) / 2 - offset, contype=0,
                            conaffinity=0, mass=0.0,
                            group=GROUP_STRUCTURE if g.label in STRUCTURE_LABELS else GROUP_OBJECT)
            geom_meta.append((f"b{index}", g.label, int(g.instance_id), movable))

    for i, g in enumerate(desc.geoms):
        obj = desc.objects[owner[i]] if i in owner else None
        if obj is None or not obj.movable:
            add_geom(world, i, g, np.zeros(3), None, False)
    for obj in desc.objects:
        if not obj.movable:
            add_render_meshes(world, obj, np.zeros(3), False)
    movable_names: dict[int, str] = {}
    for obj in desc.objects:
        if not obj.movable or not obj.geom_indices:
            continue
        geoms = [desc.geoms[i] for i in obj.geom_indices]
        volumes = np.array([_geom_volume(g) for g in geoms])
        total_mass = obj.mass if obj.mass > 0 else DEFAULT_DENSITY * volumes.sum()
        centre = obj.position
        bname = f"obj{obj.instance_id}"
        b = world.add_body(name=bname, pos=centre)
        # MuJoCo >= 3.4: resting objects start asleep and wake when touched; not one touching the
        # agent's cylinder at the origin (where it is compiled; it never sleeps): MuJoCo could not
        # put it to sleep and would warn (a stray MUJOCO_LOG.TXT)
        if hasattr(b, "sleep") and not _near_origin(obj, body.radius + AGENT_START_MARGIN):
            b.sleep = mujoco.mjtSleepPolicy.mjSLEEP_INIT
        b.add_freejoint()
        for gi, g, vol in zip(obj.geom_indices, geoms, volumes):
            add_geom(b, gi, g, centre, float(total_mass * vol / volumes.sum()), True)
        add_render_meshes(b, obj, centre, True)
        movable_names[obj.instance_id] = bname

    # The agent: a cylinder on slide-x and slide-y joints at the origin (the pose lives in qpos), and a
    # child body on the hinge-z (yaw) joint carrying the base's yaw inertia and the actuators' site.
    # The cylinder is symmetric about z, so it does not need to turn with the heading; keeping it off
    # the yaw body means contacts can never torque the heading: a frictionless cylinder takes no yaw
    # torque physically, but MuJoCo's convex box-cylinder contacts at a box corner give normals that
    # miss the axis (tens of N·m against a yaw servo limited to inertia × max angular accel), which
    # spun the base far past its angular speed limit. The heading changes only through the yaw
    # actuator (with friction, as if the wheels' floor grip held it).
    agent = world.add_body(name=AGENT_BODY, pos=[0.0, 0.0, desc.floor_z])
    if hasattr(agent, "sleep"):
        agent.sleep = mujoco.mjtSleepPolicy.mjSLEEP_NEVER
    for jname, axis in (("agent_x", [1, 0, 0]), ("agent_y", [0, 1, 0])):
        agent.add_joint(name=jname, type=mujoco.mjtJoint.mjJNT_SLIDE, axis=axis, armature=0.0)
    heading = agent.add_body(name=AGENT_HEADING_BODY, pos=[0.0, 0.0, 0.0])
    heading.add_joint(name="agent_yaw", type=mujoco.mjtJoint.mjJNT_HINGE, axis=[0, 0, 1], armature=0.01)
    # a cylinder's inertia about its axis; the heading body takes a thousandth of the mass so that
    # the translating mass stays ``body.mass``
    heading_mass = 1e-3 * body.mass
    axial = 0.5 * body.mass * body.radius ** 2
    heading.explicitinertial = True
    heading.mass = heading_mass
    heading.inertia = [axial / 2.0, axial / 2.0, axial]
    half = (body.height - step_height) / 2.0
    agent.add_geom(name=AGENT_GEOM, type=mujoco.mjtGeom.mjGEOM_CYLINDER, size=[body.radius, half, 0.0],
                   pos=[0.0, 0.0, step_height + half], mass=body.mass - heading_mass,
                   condim=1 if body.friction == 0 else 3,
                   priority=1, friction=[body.friction, 0.005, 0.0001], contype=1, conaffinity=1, group=GROUP_AGENT,
                   rgba=[0.9, 0.5, 0.1, 1.0])
    heading.add_site(name=AGENT_SITE, pos=[0.0, 0.0, 0.0])
    inertia_z = 0.5 * body.mass * body.radius ** 2 + 0.01
    lateral_force = body.mass * (body.max_linear_accel if body.holonomic else 9.81)
    for aname, gear, kv, force in (
        ("agent_forward", [1, 0, 0, 0, 0, 0], body.mass / SERVO_TAU, body.mass * body.max_linear_accel),
        ("agent_lateral", [0, 1, 0, 0, 0, 0], body.mass / SERVO_TAU, lateral_force),
        ("agent_yaw", [0, 0, 0, 0, 0, 1], inertia_z / SERVO_TAU, inertia_z * math.radians(body.max_angular_accel_deg)),
    ):
        act = spec.add_actuator(name=aname, trntype=mujoco.mjtTrn.mjTRN_SITE, target=AGENT_SITE, gear=gear)
        # A holonomic body's planar servo runs in the backend (``planar_servo``): force = kv × velocity
        # error, limited in *magnitude* (the same in every direction), applied through these two as
        # motors. Two MuJoCo velocity servos would each clip their own axis, so a push into a wall
        # saturating the forward one would drive a sideways slide set by the heading, not the command.
        if not (body.holonomic and aname in ("agent_forward", "agent_lateral")):
            act.set_to_velocity(kv=kv)
        act.forcelimited = 1
        act.forcerange = [-force, force]
        act.ctrllimited = 0

    try:
        model = spec.compile()
    except Exception as exc:  # mujoco raises ValueError with the compiler message
        raise SceneError(f"{where}: MuJoCo could not compile the scene: {exc}") from None
    extent = float(max(model.stat.extent, 1e-3))
    model.vis.map.znear = 0.02 / extent
    model.vis.map.zfar = 100.0 / extent

    name_to_meta = {m[0]: m for m in geom_meta}
    ngeom = model.ngeom
    geom_label_id = np.zeros(ngeom, np.int32)
    geom_instance = np.full(ngeom, -1, np.int32)
    geom_movable = np.zeros(ngeom, bool)
    geom_name = [""] * ngeom
    for gid in range(ngeom):
        meta = name_to_meta.get(model.geom(gid).name)
        if meta is None:
            continue
        _, label, inst, movable = meta
        geom_label_id[gid] = label_index[label]
        geom_instance[gid] = inst
        geom_movable[gid] = movable
        geom_name[gid] = label
    for i, g in enumerate(desc.geoms):
        if g.name:
            gid = model.geom(f"g{i}").id
            geom_name[gid] = g.name
    agent_geom = model.geom(AGENT_GEOM).id
    blocks = (model.geom_contype & 1).astype(bool) | (model.geom_conaffinity & 1).astype(bool)
    blocks[agent_geom] = False
    joints = [model.joint(n) for n in ("agent_x", "agent_y", "agent_yaw")]
    return BuiltScene(
        model=model, labels=labels, geom_label_id=geom_label_id, geom_instance=geom_instance,
        geom_movable=geom_movable, geom_blocks_agent=blocks, geom_name=geom_name,
        agent_body=model.body(AGENT_BODY).id, agent_geom=agent_geom,
        qpos_adr=np.array([int(j.qposadr[0]) for j in joints]), dof_adr=np.array([int(j.dofadr[0]) for j in joints]),
        actuators=np.array([model.actuator(n).id for n in ("agent_forward", "agent_lateral", "agent_yaw")]),
        camera=model.camera(RENDER_CAMERA).id,
        movable_bodies={inst: model.body(n).id for inst, n in movable_names.items()},
        floor_z=float(desc.floor_z), key=key,
    )


def _directional(mujoco, light) -> None:
    """Make an ``MjsLight`` directional (MuJoCo >= 3.3 light types, else the old flag)."""
    if hasattr(mujoco, "mjtLightType"):
        light.type = mujoco.mjtLightType.mjLIGHT_DIRECTIONAL
    else:  # MuJoCo < 3.3
        light.directional = True


def keep_models(n: int) -> None:
    """Keep at least ``n`` compiled models in the in-process cache (a server that opens ``n``
    homes again and again, e.g. the human study)."""
    global _CACHE_SIZE
    _CACHE_SIZE = max(_CACHE_SIZE, int(n))


def clear_cache() -> None:
    """Forget all cached compiled models."""
    _CACHE.clear()
