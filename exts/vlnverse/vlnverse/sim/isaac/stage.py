"""The physics stage the Isaac Sim backend opens, authored with plain OpenUSD (``pxr``: usd-core outside Kit, Kit's own USD inside).

Nothing here imports Omniverse: the stage is written with ``UsdGeom`` / ``UsdPhysics`` /
``UsdShade`` only, so it is built and checked without Isaac Sim (``tests/sim/test_isaac_stage.py``)
and PhysX reads the same file on a GPU machine. Layout (metres, Z up, ``metersPerUnit = 1``):

- ``/World/PhysicsScene`` — ``UsdPhysics.Scene``, gravity −Z 9.81 m/s².
- ``/World/Scene/Static/<geom>`` — every static collider of the ``SceneDescription`` (box → ``Cube``
  scaled to its half extents, cylinder, sphere, mesh with triangle-mesh collision); geoms with
  ``collides=False`` are visual only.
- ``/World/Scene/Objects/object_<instance>`` — one rigid body per movable object
  (``RigidBodyAPI`` + ``MassAPI`` with the object's mass), its geoms as convex-hull children.
- With ``objects="meshes"`` (``scenes.object_meshes``) each object that has render meshes gets them
  as visual-only ``Mesh`` children (``<category>_<instance>_render_NN``, no collider, in
  :attr:`StageLayout.visuals`) and its collision geoms get purpose ``guide``: cameras see the
  meshes, PhysX the primitives. The home's baked light comes with them, authored by the USD
  writer's own functions (``scenes.usd_write.render_mesh`` / ``baked_surface_mesh``, the light from
  ``scenes.baked_light.home_light``: the ``mujoco`` baker's cache, computed once per home): each
  render mesh bound to its look (``/World/Looks``) with its darker triangles as ``GeomSubset``s
  bound to darkened looks, and each baked floor, rug, wall and ceiling drawn by a render-only mesh
  under ``/World/BakedLight`` (``<geom>_<index>``, in :attr:`StageLayout.visuals`, labelled like
  its geom) textured with its grey light map, while its primitive gets purpose ``guide`` and keeps
  colliding. The light maps (``lightmaps/<scene>/``) and detail textures (``textures/``) are
  written beside the stage, atomically.
- ``/World/Agent`` — the agent body: a rigid body (mass, inertia about Z as in the MuJoCo model)
  whose cylinder collider (``/World/Agent/collider``) spans [``step_height``, ``height``] above the
  floor (objects lower than the step height do not block it, as in the occupancy map), purpose
  ``guide`` so cameras never see it; a D6 joint to the world (``/World/AgentJoint``) locks
  translation Z and rotation X/Y, leaving the planar base (x, y, yaw) free as in MuJoCo.
- Physics materials per friction value (the agent's is frictionless unless its body declares a
  friction), bound with purpose ``physics``.

Every collider carries ``vlnverse:label`` (semantic label) and ``vlnverse:instance`` (instance id);
the backend applies the semantic labels at load (``adapter.add_semantic_label``) and maps contact and
segmentation prim paths back to them through :class:`StageLayout`.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ...core.errors import ConfigError, SceneError
from ...scenes.baked_light import BakedLight
from ...scenes.description import Geom, SceneDescription
from ..body import AgentBody

AGENT_PATH = "/World/Agent"
AGENT_COLLIDER = "/World/Agent/collider"
AGENT_JOINT = "/World/AgentJoint"
PHYSICS_SCENE = "/World/PhysicsScene"
CAMERA_ROOT = "/World/Sensors"
#: USD camera horizontal aperture (mm); the focal length follows from the sensor's horizontal FoV.
HORIZONTAL_APERTURE_MM = 20.955


@dataclass
class ColliderInfo:
    """What a collider prim stands for: label, instance id, geom name, whether it can be pushed."""

    label: str
    instance: int
    name: str
    movable: bool


@dataclass
class StageLayout:
    """Prim paths of an authored stage and what each collider stands for."""

    usd_path: str
    colliders: dict[str, ColliderInfo] = field(default_factory=dict)
    objects: dict[int, str] = field(default_factory=dict)  # movable instance id → rigid body prim path
    visuals: dict[str, ColliderInfo] = field(default_factory=dict)  # render-only mesh prims (objects="meshes")
    object_start: dict[int, np.ndarray] = field(default_factory=dict)  # instance id → initial (x, y, z)
    inertia_z: float = 0.0
    floor_z: float = 0.0

    def info(self, collider_path: str) -> ColliderInfo:
        """The collider or render mesh at ``collider_path`` (or its nearest authored ancestor)."""
        path = collider_path
        while path.startswith("/") and len(path) > 1:
            if path in self.colliders:
                return self.colliders[path]
            if path in self.visuals:
                return self.visuals[path]
            path = path.rsplit("/", 1)[0]
        return ColliderInfo("unknown", -1, collider_path, False)


def _prim_name(text: str, fallback: str) -> str:
    name = "".join(c if c.isalnum() or c == "_" else "_" for c in text) or fallback
    return name if not name[0].isdigit() else f"_{name}"


def _set_xform(xformable, matrix: np.ndarray, scale=None) -> None:
    from pxr import Gf, UsdGeom

    xf = UsdGeom.Xformable(xformable)
    xf.ClearXformOpOrder()
    xf.AddTransformOp().Set(Gf.Matrix4d(*np.asarray(matrix, float).T.flatten()))
    if scale is not None:
        xf.AddScaleOp().Set(Gf.Vec3f(*map(float, scale)))


def _checked_mesh(path: str, g: Geom, where: str) -> tuple[np.ndarray, np.ndarray]:
    """Vertices and triangles of mesh geom ``g`` (authored at ``path``), or a ``SceneError``."""
    verts = np.asarray(g.vertices, float)
    faces = np.asarray(g.faces, int)
    if verts.ndim != 2 or len(verts) < 4 or faces.ndim != 2 or faces.shape[1] != 3 or len(faces) == 0:
        raise SceneError(f"{where}: prim {path}: mesh '{g.name}' needs >= 4 vertices and triangle faces")
    return verts, faces


def _geom_prim(stage, path: str, g: Geom, local: np.ndarray, where: str):
    """Author one geom at ``path`` with local→parent transform ``local``."""
    from pxr import Gf, UsdGeom, Vt

    if g.kind == "box":
        prim = UsdGeom.Cube.Define(stage, path)
        prim.CreateSizeAttr(2.0)
        if np.any(g.size <= 0):
            raise SceneError(f"{where}: prim {path}: box half extents {g.size.tolist()} must be positive")
        _set_xform(prim, local, g.size)
    elif g.kind == "cylinder":
        prim = UsdGeom.Cylinder.Define(stage, path)
        prim.CreateRadiusAttr(float(g.size[0]))
        prim.CreateHeightAttr(float(2.0 * g.size[1]))
        prim.CreateAxisAttr("Z")
        _set_xform(prim, local)
    elif g.kind == "sphere":
        prim = UsdGeom.Sphere.Define(stage, path)
        prim.CreateRadiusAttr(float(g.size[0]))
        _set_xform(prim, local)
    else:
        verts, faces = _checked_mesh(path, g, where)
        prim = UsdGeom.Mesh.Define(stage, path)
        prim.CreatePointsAttr(Vt.Vec3fArray([Gf.Vec3f(*map(float, v)) for v in verts]))
        prim.CreateFaceVertexCountsAttr(Vt.IntArray([3] * len(faces)))
        prim.CreateFaceVertexIndicesAttr(Vt.IntArray(faces.flatten().tolist()))
        _set_xform(prim, local)
    prim.CreateDisplayColorAttr([Gf.Vec3f(*map(float, g.color))])
    return prim


def _physics_material(stage, cache: dict, friction: float):
    from pxr import UsdPhysics, UsdShade

    key = round(float(friction), 4)
    if key not in cache:
        path = f"/World/PhysicsMaterials/friction_{len(cache)}"
        mat = UsdShade.Material.Define(stage, path)
        api = UsdPhysics.MaterialAPI.Apply(mat.GetPrim())
        api.CreateStaticFrictionAttr(key)
        api.CreateDynamicFrictionAttr(key)
        api.CreateRestitutionAttr(0.0)
        cache[key] = mat
    return cache[key]


def _collider(stage, prim, materials: dict, friction: float, approximation: str | None) -> None:
    from pxr import UsdPhysics, UsdShade

    UsdPhysics.CollisionAPI.Apply(prim.GetPrim())
    if approximation is not None:
        UsdPhysics.MeshCollisionAPI.Apply(prim.GetPrim()).CreateApproximationAttr(approximation)
    binding = UsdShade.MaterialBindingAPI.Apply(prim.GetPrim())
    binding.Bind(_physics_material(stage, materials, friction), UsdShade.Tokens.weakerThanDescendants, "physics")


def _tag(prim, label: str, instance: int) -> None:
    from pxr import Sdf

    prim.GetPrim().CreateAttribute("vlnverse:label", Sdf.ValueTypeNames.String).Set(label)
    prim.GetPrim().CreateAttribute("vlnverse:instance", Sdf.ValueTypeNames.Int).Set(int(instance))


def author_stage(scene: SceneDescription, body: AgentBody, path: str | Path, *, step_height: float | None = None,
                 objects: str = "primitives", baked: BakedLight | None = None) -> StageLayout:
    """Write the physics stage of ``scene`` with ``body`` to ``path`` (a ``.usda``/``.usd`` file,
    written to a temp file and renamed) and return its :class:`StageLayout`. ``objects`` =
    primitives | meshes (see the module doc); ``baked``: the home's light for ``meshes`` (default
    ``baked_light.home_light``'s, from the cache)."""
    from pxr import Gf, Sdf, Usd, UsdGeom, UsdPhysics

    from ...scenes.baked_light import home_light, object_face_levels
    from ...scenes.object_meshes import check_objects, render_meshes
    from ...scenes.usd_conventions import BAKED_LIGHT_ROOT, RENDER_ONLY_ATTR
    from ...scenes.usd_write import Looks, baked_surface_mesh, render_mesh, write_stage_files

    where = scene.source_path or f"scene '{scene.scene_id}'"
    if not scene.geoms:
        raise SceneError(f"{where}: no geometry to simulate")
    step = body.step_height if step_height is None else step_height
    if not 0.0 <= step < body.height:
        raise ConfigError(f"got {step}", field="step_height", expected=f"0 <= step_height < body height {body.height}")
    meshes = render_meshes(scene) if check_objects(objects, "objects") == "meshes" else {}
    light = home_light(scene, baked) if objects == "meshes" else None
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.stem}.tmp{path.suffix}")
    stage = Usd.Stage.CreateNew(str(tmp))
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    stage.SetDefaultPrim(UsdGeom.Xform.Define(stage, "/World").GetPrim())
    physics = UsdPhysics.Scene.Define(stage, PHYSICS_SCENE)
    physics.CreateGravityDirectionAttr(Gf.Vec3f(0.0, 0.0, -1.0))
    physics.CreateGravityMagnitudeAttr(9.81)
    layout = StageLayout(usd_path=str(path), floor_z=float(scene.floor_z))
    materials: dict = {}

    owner = {gi: obj for obj in scene.objects if obj.movable for gi in obj.geom_indices}
    drawn_by_mesh = {gi for obj in scene.objects if obj.instance_id in meshes for gi in obj.geom_indices}
    drawn_by_mesh |= set(light.surfaces) if light is not None else set()
    UsdGeom.Scope.Define(stage, "/World/Scene")
    UsdGeom.Scope.Define(stage, "/World/Scene/Static")
    UsdGeom.Scope.Define(stage, "/World/Scene/Objects")
    for obj in scene.objects:
        if not obj.movable:
            continue
        if not obj.mass > 0:
            raise SceneError(f"{where}: prim {obj.prim_path or obj.instance_id}: movable object needs a positive mass, got {obj.mass}")
        centre = obj.position
        opath = f"/World/Scene/Objects/object_{obj.instance_id}"
        xf = UsdGeom.Xform.Define(stage, opath)
        m = np.eye(4)
        m[:3, 3] = centre
        _set_xform(xf, m)
        UsdPhysics.RigidBodyAPI.Apply(xf.GetPrim())
        UsdPhysics.MassAPI.Apply(xf.GetPrim()).CreateMassAttr(float(obj.mass))
        layout.objects[obj.instance_id] = opath
        layout.object_start[obj.instance_id] = centre.copy()
    for gi, g in enumerate(scene.geoms):
        obj = owner.get(gi)
        name = _prim_name(g.name, f"geom_{gi}")
        if obj is None:
            gpath = f"/World/Scene/Static/{name}_{gi}"
            local = g.transform
        else:
            gpath = f"{layout.objects[obj.instance_id]}/{name}_{gi}"
            local = g.transform.copy()
            local[:3, 3] -= obj.position
        prim = _geom_prim(stage, gpath, g, local, where)
        _tag(prim, g.label, g.instance_id)
        if g.collides:
            approximation = None if g.kind != "mesh" else ("convexHull" if obj is not None else "none")
            _collider(stage, prim, materials, g.friction, approximation)
            layout.colliders[gpath] = ColliderInfo(g.label, int(g.instance_id), g.name or name, obj is not None)
        if gi in drawn_by_mesh:
            prim.CreatePurposeAttr(UsdGeom.Tokens.guide)  # drawn by its render meshes or baked mesh instead
    looks = Looks()
    for obj in scene.objects:
        parent = layout.objects.get(obj.instance_id, "/World/Scene/Static")
        offset = obj.position if obj.instance_id in layout.objects else np.zeros(3)
        parts = meshes.get(obj.instance_id, [])
        for k, (g, levels) in enumerate(zip(parts, object_face_levels(light, obj.instance_id, parts))):
            vpath = f"{parent}/{_prim_name(obj.category, 'object')}_{obj.instance_id}_render_{k:02d}"
            _checked_mesh(vpath, g, where)
            local = g.transform.copy()
            local[:3, 3] -= offset
            prim = render_mesh(stage, vpath, g, levels, looks)  # the USD writer's mesh, looks and light subsets
            _set_xform(prim, local)
            _tag(prim, g.label, g.instance_id)
            layout.visuals[vpath] = ColliderInfo(g.label, int(g.instance_id), g.name or vpath, obj.instance_id in layout.objects)
    pngs: dict[str, bytes] = {}
    if light is not None and light.surfaces:
        root = UsdGeom.Scope.Define(stage, BAKED_LIGHT_ROOT).GetPrim()
        root.CreateAttribute(RENDER_ONLY_ATTR, Sdf.ValueTypeNames.Bool, custom=True).Set(True)
        for gi in sorted(light.surfaces):
            g, obj = scene.geoms[gi], owner.get(gi)
            name = f"{_prim_name(g.name, f'geom_{gi}')}_{gi}"
            bpath = f"{BAKED_LIGHT_ROOT}/{name}" if obj is None else f"{layout.objects[obj.instance_id]}/{name}_baked"
            mesh, rel, data = baked_surface_mesh(stage, bpath, g, light.surfaces[gi], scene.scene_id,
                                                 offset=None if obj is None else obj.position)
            pngs[rel] = data
            _tag(mesh, g.label, g.instance_id)
            layout.visuals[bpath] = ColliderInfo(g.label, int(g.instance_id), g.name or name, obj is not None)

    # The agent: planar rigid body (x, y, yaw free) with a guide-purpose cylinder collider.
    agent = UsdGeom.Xform.Define(stage, AGENT_PATH)
    m = np.eye(4)
    m[2, 3] = scene.floor_z
    _set_xform(agent, m)
    UsdPhysics.RigidBodyAPI.Apply(agent.GetPrim())
    mass_api = UsdPhysics.MassAPI.Apply(agent.GetPrim())
    mass_api.CreateMassAttr(float(body.mass))
    half = (body.height - step) / 2.0
    layout.inertia_z = 0.5 * body.mass * body.radius ** 2 + 0.01
    i_xy = body.mass * (3 * body.radius ** 2 + (2 * half) ** 2) / 12.0
    mass_api.CreateDiagonalInertiaAttr(Gf.Vec3f(i_xy, i_xy, layout.inertia_z))
    mass_api.CreateCenterOfMassAttr(Gf.Vec3f(0.0, 0.0, step + half))
    cyl = UsdGeom.Cylinder.Define(stage, AGENT_COLLIDER)
    cyl.CreateRadiusAttr(float(body.radius))
    cyl.CreateHeightAttr(float(2 * half))
    cyl.CreateAxisAttr("Z")
    cyl.CreatePurposeAttr(UsdGeom.Tokens.guide)
    m = np.eye(4)
    m[2, 3] = step + half
    _set_xform(cyl, m)
    _collider(stage, cyl, materials, body.friction, None)
    _tag(cyl, "agent", -1)
    joint = UsdPhysics.Joint.Define(stage, AGENT_JOINT)
    joint.CreateBody1Rel().SetTargets([Sdf.Path(AGENT_PATH)])
    joint.CreateLocalPos0Attr(Gf.Vec3f(0.0, 0.0, float(scene.floor_z)))
    for dof in ("transZ", "rotX", "rotY"):  # low > high locks the degree of freedom (UsdPhysics convention)
        limit = UsdPhysics.LimitAPI.Apply(joint.GetPrim(), dof)
        limit.CreateLowAttr(1.0)
        limit.CreateHighAttr(-1.0)
    UsdGeom.Scope.Define(stage, CAMERA_ROOT)
    write_stage_files(path.parent, looks, pngs)  # before the stage appears: the files its looks read
    stage.GetRootLayer().Save()
    del stage
    tmp.replace(path)
    return layout


def author_camera(stage, path: str, width: int, height: int, hfov_deg: float, near: float, far: float):
    """Define (or update) a USD camera at ``path`` whose horizontal FoV is ``hfov_deg`` over a
    ``width``×``height`` image (square pixels): aperture 20.955 mm, focal length from the FoV,
    vertical aperture from the aspect ratio, clipping range [near, far]."""
    from pxr import Gf, UsdGeom

    cam = UsdGeom.Camera.Define(stage, path)
    focal = HORIZONTAL_APERTURE_MM / (2.0 * math.tan(math.radians(hfov_deg) / 2.0))
    cam.CreateHorizontalApertureAttr().Set(HORIZONTAL_APERTURE_MM)
    cam.CreateVerticalApertureAttr().Set(HORIZONTAL_APERTURE_MM * height / width)
    cam.CreateFocalLengthAttr().Set(focal)
    cam.CreateClippingRangeAttr().Set(Gf.Vec2f(float(near), float(far)))
    cam.CreateProjectionAttr().Set(UsdGeom.Tokens.perspective)
    return cam


def camera_hfov_deg(cam) -> float:
    """Horizontal FoV (degrees) of a ``UsdGeom.Camera`` from its aperture and focal length."""
    return math.degrees(2.0 * math.atan(cam.GetHorizontalApertureAttr().Get() / (2.0 * cam.GetFocalLengthAttr().Get())))


def quat_wxyz(rotation: np.ndarray) -> np.ndarray:
    """Unit quaternion (w, x, y, z) of a 3×3 rotation matrix."""
    from scipy.spatial.transform import Rotation

    x, y, z, w = Rotation.from_matrix(np.asarray(rotation, float)).as_quat()
    return np.array([w, x, y, z])


def yaw_of_wxyz(q) -> float:
    """Yaw (rad) of a (w, x, y, z) quaternion of a rotation about Z (the agent's planar heading)."""
    w, x, y, z = (float(v) for v in q)
    return math.atan2(2.0 * (w * z + x * y), 1.0 - 2.0 * (y * y + z * z))
