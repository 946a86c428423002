"""Write a ``SceneDescription`` as an Isaac-Sim-ready OpenUSD stage (``write_usd``).

Conventions (``usd_conventions``, ``docs/scenes.md``): metres (``metersPerUnit = 1``), Z up,
``/World`` default prim, structure gprims under ``/World/Structure``, one ``Xform`` per object under
``/World/Objects`` whose child ``Cube`` / ``Cylinder`` / ``Sphere`` / ``Mesh`` prims carry
translate/orient/scale ops, ``displayColor`` and ``UsdPhysics.CollisionAPI``; semantic labels via
``UsdSemantics.LabelsAPI`` (taxonomy ``class``), instance ids in ``vlnverse:instanceId``, rooms under
``/World/Rooms``, doors under ``/World/Doors``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..core.errors import ConfigError, SceneError
from ..core.io import atomic_path
from ..core.precision import (FRICTION_DECIMALS, LENGTH_DECIMALS, MASS_DECIMALS, round_array, round_color,
                              round_float, round_length, round_lengths, unit_quaternion)
from .description import Geom, SceneDescription
from .usd_conventions import (ATTR_PREFIX, BAKED_LIGHT_ROOT, FORMAT_VERSION, INSTANCE_ID_ATTR, LIGHTMAP_DIR,
                              MATERIAL_ATTR, PRIMITIVE_ATTR, PRIMITIVE_SIZE_ATTR, RENDER_ONLY_ATTR, RENDER_PROTOTYPES,
                              WRITABLE_USD_SUFFIXES)


def _quat_wxyz(rot: np.ndarray) -> tuple[float, float, float, float]:
    """Unit quaternion (w, x, y, z) of a 3×3 rotation matrix (Shepperd's method)."""
    m = rot
    tr = m[0, 0] + m[1, 1] + m[2, 2]
    if tr > 0:
        s = math.sqrt(tr + 1.0) * 2
        q = (0.25 * s, (m[2, 1] - m[1, 2]) / s, (m[0, 2] - m[2, 0]) / s, (m[1, 0] - m[0, 1]) / s)
    elif m[0, 0] > m[1, 1] and m[0, 0] > m[2, 2]:
        s = math.sqrt(1.0 + m[0, 0] - m[1, 1] - m[2, 2]) * 2
        q = ((m[2, 1] - m[1, 2]) / s, 0.25 * s, (m[0, 1] + m[1, 0]) / s, (m[0, 2] + m[2, 0]) / s)
    elif m[1, 1] > m[2, 2]:
        s = math.sqrt(1.0 + m[1, 1] - m[0, 0] - m[2, 2]) * 2
        q = ((m[0, 2] - m[2, 0]) / s, (m[0, 1] + m[1, 0]) / s, 0.25 * s, (m[1, 2] + m[2, 1]) / s)
    else:
        s = math.sqrt(1.0 + m[2, 2] - m[0, 0] - m[1, 1]) * 2
        q = ((m[1, 0] - m[0, 1]) / s, (m[0, 2] + m[2, 0]) / s, (m[1, 2] + m[2, 1]) / s, 0.25 * s)
    return unit_quaternion(q)  # normalised, w >= 0, rounded (core.precision)


def _valid_child_path(name: str, parent: str, used: set[str]) -> bool:
    from pxr import Sdf

    if not name or not Sdf.Path.IsValidPathString(name):
        return False
    path = Sdf.Path(name)
    return path.IsPrimPath() and str(path.GetParentPath()) == parent and name not in used


def _identifier(text: str) -> str:
    from pxr import Tf

    return Tf.MakeValidIdentifier(text or "prim")


def _unique(path: str, used: set[str]) -> str:
    out, k = path, 1
    while out in used:
        out = f"{path}_{k}"
        k += 1
    used.add(out)
    return out


def _plan_paths(desc: SceneDescription) -> tuple[dict[int, str], list[str]]:
    """USD prim path of every object (by index) and every geom (by index), keeping names when valid."""
    used: set[str] = set()
    obj_paths: dict[int, str] = {}
    owner: dict[int, int] = {}
    for k, obj in enumerate(desc.objects):
        path = obj.prim_path if _valid_child_path(obj.prim_path, "/World/Objects", used) else \
            f"/World/Objects/{_identifier(f'{obj.category}_{obj.instance_id:04d}')}"
        obj_paths[k] = _unique(path, used)
        for gi in obj.geom_indices:
            owner.setdefault(gi, k)
    geom_paths = []
    for gi, g in enumerate(desc.geoms):
        parent = obj_paths[owner[gi]] if gi in owner else None
        if parent is not None:
            default = f"{parent}/{_identifier(g.name.rsplit('/', 1)[-1] if g.name else f'part_{gi:03d}')}"
            path = g.name if _valid_child_path(g.name, parent, used) else default
        else:
            parent_guess = g.name.rsplit("/", 1)[0] if g.name.startswith("/World/Structure") else ""
            default = f"/World/Structure/{_identifier(g.name.rsplit('/', 1)[-1] if g.name else f'{g.label}_{g.instance_id}')}"
            path = g.name if parent_guess and _valid_child_path(g.name, parent_guess, used) else default
        geom_paths.append(_unique(path, used))
    return obj_paths, geom_paths


def _define_ancestors(stage, path: str) -> None:
    from pxr import Sdf, UsdGeom

    for anc in Sdf.Path(path).GetParentPath().GetPrefixes():
        if not stage.GetPrimAtPath(anc):
            UsdGeom.Xform.Define(stage, anc)


def _set_label(prim, label: str, instance_id: int) -> None:
    from pxr import Sdf, UsdSemantics, Vt

    labels = UsdSemantics.LabelsAPI.Apply(prim, "class")
    labels.CreateLabelsAttr().Set(Vt.TokenArray([label]))
    prim.CreateAttribute(INSTANCE_ID_ATTR, Sdf.ValueTypeNames.Int).Set(int(instance_id))


def _set_xform(xformable, matrix: np.ndarray, scale: np.ndarray | None) -> None:
    from pxr import Gf, UsdGeom

    double = UsdGeom.XformOp.PrecisionDouble
    xformable.AddTranslateOp(double).Set(Gf.Vec3d(*round_lengths(matrix[:3, 3])))
    w, x, y, z = _quat_wxyz(matrix[:3, :3])
    xformable.AddOrientOp(double).Set(Gf.Quatd(w, Gf.Vec3d(x, y, z)))
    if scale is not None:
        xformable.AddScaleOp(double).Set(Gf.Vec3d(*round_lengths(scale)))


def _physics_material(stage, friction: float, cache: dict[float, Any]):
    from pxr import UsdPhysics, UsdShade

    key = round(float(friction), FRICTION_DECIMALS) + 0.0
    if key not in cache:
        name = "friction_" + f"{key:.4f}".replace(".", "_").replace("-", "m")
        mat = UsdShade.Material.Define(stage, f"/World/PhysicsMaterials/{name}")
        api = UsdPhysics.MaterialAPI.Apply(mat.GetPrim())
        api.CreateStaticFrictionAttr().Set(key)
        api.CreateDynamicFrictionAttr().Set(key)
        api.CreateRestitutionAttr().Set(0.0)
        cache[key] = mat
    return cache[key]


_LOOKS_ROOT = "/World/Looks"


@dataclass
class Looks:
    """Visual materials written so far: by (material, colour), prim paths used, kinds needing textures."""

    materials: dict[tuple, Any] = field(default_factory=dict)
    paths: set[str] = field(default_factory=set)
    kinds: set[str] = field(default_factory=set)


def _visual_material(stage, g: Geom, looks: Looks):
    """The ``UsdShade.Material`` (UsdPreviewSurface; a ``UsdUVTexture`` tinted by the geom colour for
    textured kinds, the file in ``textures/`` beside the stage) for ``g.material`` and ``g.color``;
    one per (material, colour), named after the material. None when the geom has no material."""
    from pxr import Gf, Sdf, UsdShade

    from .textures import LOOKS, material_kind, texture_file_name

    kind = material_kind(g.material)
    if not kind:
        return None
    colour = tuple(round(float(c), 4) for c in g.color)
    key = (g.material, colour)
    if key in looks.materials:
        return looks.materials[key]
    path = _unique(f"{_LOOKS_ROOT}/{_identifier(g.material)}", looks.paths)
    look = LOOKS[kind]
    mat = UsdShade.Material.Define(stage, path)
    mat.GetPrim().CreateAttribute(MATERIAL_ATTR, Sdf.ValueTypeNames.String).Set(g.material)
    pbr = UsdShade.Shader.Define(stage, f"{path}/PreviewSurface")
    pbr.CreateIdAttr("UsdPreviewSurface")
    pbr.CreateInput("roughness", Sdf.ValueTypeNames.Float).Set(round(look.roughness, 4))
    pbr.CreateInput("metallic", Sdf.ValueTypeNames.Float).Set(round(look.metallic, 4))
    if look.opacity < 1.0:
        pbr.CreateInput("opacity", Sdf.ValueTypeNames.Float).Set(round(look.opacity, 4))
    if look.emission > 0:
        pbr.CreateInput("emissiveColor", Sdf.ValueTypeNames.Color3f).Set(
            Gf.Vec3f(*(round(c * look.emission, 4) for c in colour)))
    diffuse = pbr.CreateInput("diffuseColor", Sdf.ValueTypeNames.Color3f)
    if look.texture is None:
        diffuse.Set(Gf.Vec3f(*colour))
    else:
        reader = UsdShade.Shader.Define(stage, f"{path}/TexCoords")
        reader.CreateIdAttr("UsdPrimvarReader_float2")
        reader.CreateInput("varname", Sdf.ValueTypeNames.String).Set("st")
        tex = UsdShade.Shader.Define(stage, f"{path}/Texture")
        tex.CreateIdAttr("UsdUVTexture")
        tex.CreateInput("file", Sdf.ValueTypeNames.Asset).Set(Sdf.AssetPath(texture_file_name(look.texture)))
        tex.CreateInput("st", Sdf.ValueTypeNames.Float2).ConnectToSource(reader.ConnectableAPI(), "result")
        tex.CreateInput("wrapS", Sdf.ValueTypeNames.Token).Set("repeat")
        tex.CreateInput("wrapT", Sdf.ValueTypeNames.Token).Set("repeat")
        tex.CreateInput("scale", Sdf.ValueTypeNames.Float4).Set(Gf.Vec4f(*colour, 1.0))  # tint
        tex.CreateInput("fallback", Sdf.ValueTypeNames.Float4).Set(Gf.Vec4f(*colour, 1.0))
        diffuse.ConnectToSource(tex.ConnectableAPI(), "rgb")
        tex.CreateOutput("rgb", Sdf.ValueTypeNames.Float3)
    mat.CreateSurfaceOutput().ConnectToSource(pbr.ConnectableAPI(), "surface")
    looks.kinds.add(kind)
    looks.materials[key] = mat
    return mat


#: Decimals of written texture coordinates.
_ST_DECIMALS = 5
#: Sides of the cylinders and spheres written as textured meshes (visual only: ``load_scene``
#: reads the primitive back).
_VISUAL_SIDES = 12


def _oriented_quads(points: np.ndarray, quads: list[tuple[int, ...]]) -> list[tuple[int, ...]]:
    """Each face's vertex order turned counter-clockwise seen from outside (USD's right-handed
    default) for a convex solid centred on the origin."""
    out = []
    for q in quads:
        p = points[list(q)]
        normal = np.cross(p[1] - p[0], p[2] - p[0])
        out.append(q if float(normal @ p.mean(axis=0)) >= 0 else tuple(reversed(q)))
    return out


def _primitive_mesh(g: Geom) -> tuple[np.ndarray, list[tuple[int, ...]]]:
    """Points (local frame, metres) and polygons of a box, cylinder (``_VISUAL_SIDES`` sides, two
    n-gon caps) or UV sphere standing in for ``g`` in the USD."""
    if g.kind == "box":
        signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], dtype=float)
        points = signs * np.asarray(g.size, float)
        quads = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
        return points, _oriented_quads(points, quads)
    n = _VISUAL_SIDES
    ang = 2 * np.pi * np.arange(n) / n
    ring = np.c_[np.cos(ang), np.sin(ang)]
    if g.kind == "cylinder":
        r, h = float(g.size[0]), float(g.size[1])
        points = np.concatenate([np.c_[r * ring, np.full(n, -h)], np.c_[r * ring, np.full(n, h)]])
        sides = [(i, (i + 1) % n, n + (i + 1) % n, n + i) for i in range(n)]
        caps = [tuple(range(n - 1, -1, -1)), tuple(range(n, 2 * n))]
        return points, _oriented_quads(points, sides + caps)
    r, stacks = float(g.size[0]), n // 2  # UV sphere: poles, stacks - 1 rings, quads between rings
    lat = np.pi * np.arange(1, stacks) / stacks
    points = np.concatenate([[[0.0, 0.0, r]], *[np.c_[r * np.sin(t) * ring, np.full(n, r * np.cos(t))] for t in lat],
                             [[0.0, 0.0, -r]]])
    last = len(points) - 1
    faces = [(0, 1 + i, 1 + (i + 1) % n) for i in range(n)]
    for k in range(stacks - 2):
        a, b = 1 + k * n, 1 + (k + 1) * n
        faces += [(a + i, b + i, b + (i + 1) % n, a + (i + 1) % n) for i in range(n)]
    base = 1 + (stacks - 2) * n
    faces += [(last, base + (i + 1) % n, base + i) for i in range(n)]
    return points, _oriented_quads(points, faces)


def _texcoords(points: np.ndarray, faces: list[tuple[int, ...]], tile_m: float, world: np.ndarray) -> np.ndarray:
    """Face-varying ``st`` (one per face corner) by box projection in world space (``world``: the
    geom's 4×4 pose, so the pattern runs on across neighbouring pieces, e.g. a wall cut around a
    window): each face takes the two world axes across its normal's dominant one, in metres /
    ``tile_m`` (one texture tile per ``tile_m`` metres, the scale MuJoCo's uniform projection draws)."""
    points = np.asarray(points, float) @ world[:3, :3].T + world[:3, 3]
    out = []
    for f in faces:
        p = points[list(f)]
        normal = np.zeros(3)
        for k in range(1, len(f) - 1):  # polygon normal (area-weighted fan)
            normal += np.cross(p[k] - p[0], p[k + 1] - p[0])
        axis = int(np.argmax(np.abs(normal)))
        u, v = [(1, 2), (0, 2), (0, 1)][axis]
        out.append(p[:, [u, v]] / tile_m)
    return np.round(np.concatenate(out), _ST_DECIMALS)


def _set_texcoords(gprim, points: np.ndarray, faces: list[tuple[int, ...]], tile_m: float, world: np.ndarray) -> None:
    """Author ``primvars:st`` (``texCoord2f[]``, faceVarying) on a mesh (see ``_texcoords``)."""
    from pxr import Sdf, UsdGeom, Vt

    st = _texcoords(points, faces, tile_m, world)
    primvar = UsdGeom.PrimvarsAPI(gprim).CreatePrimvar("st", Sdf.ValueTypeNames.TexCoord2fArray,
                                                       UsdGeom.Tokens.faceVarying)
    primvar.Set(Vt.Vec2fArray.FromNumpy(st.astype(np.float32)))


def _texture_tile(g: Geom) -> float | None:
    """Metres per texture tile of ``g``'s material, or None when the material has no texture."""
    from .textures import LOOKS, material_kind

    kind = material_kind(g.material)
    look = LOOKS.get(kind)
    return look.tile_m if look is not None and look.texture is not None else None


def _triangle_mesh(stage, path: str, vertices: Any, faces: Any):
    """A ``UsdGeom.Mesh`` of triangles at ``path`` (points rounded to ``LENGTH_DECIMALS``, no
    subdivision, its extent); returns the mesh and the rounded points."""
    from pxr import Gf, UsdGeom, Vt

    mesh = UsdGeom.Mesh.Define(stage, path)
    verts = round_array(np.asarray(vertices, dtype=float).reshape(-1, 3), LENGTH_DECIMALS)
    faces = np.asarray(faces, dtype=np.int64).reshape(-1, 3)
    mesh.CreatePointsAttr().Set(Vt.Vec3fArray.FromNumpy(verts.astype(np.float32)))
    mesh.CreateFaceVertexCountsAttr().Set(Vt.IntArray([3] * len(faces)))
    mesh.CreateFaceVertexIndicesAttr().Set(Vt.IntArray([int(v) for v in faces.ravel()]))
    mesh.CreateSubdivisionSchemeAttr().Set(UsdGeom.Tokens.none)
    lo, hi = verts.min(axis=0), verts.max(axis=0)
    mesh.CreateExtentAttr().Set(Vt.Vec3fArray([Gf.Vec3f(*map(float, lo)), Gf.Vec3f(*map(float, hi))]))
    return mesh, verts


def _write_geom(stage, path: str, g: Geom, parent_world: np.ndarray, labelled: bool, movable: bool,
                materials: dict[float, Any], looks: Looks) -> None:
    from pxr import Gf, Sdf, UsdGeom, Vt

    local = np.linalg.inv(parent_world) @ g.transform
    tile = _texture_tile(g)
    if tile is not None and g.kind in ("box", "cylinder", "sphere"):
        # a textured primitive becomes a Mesh with texture coordinates (renderers need ``st`` to
        # show the texture; implicit Cube/Cylinder/Sphere prims have none), marked with the shape
        # it stands for so that ``load_scene`` reads the primitive back
        gprim = UsdGeom.Mesh.Define(stage, path)
        points, faces = _primitive_mesh(g)
        points = round_array(points, LENGTH_DECIMALS)
        gprim.CreatePointsAttr().Set(Vt.Vec3fArray.FromNumpy(points.astype(np.float32)))
        gprim.CreateFaceVertexCountsAttr().Set(Vt.IntArray([len(f) for f in faces]))
        gprim.CreateFaceVertexIndicesAttr().Set(Vt.IntArray([int(v) for f in faces for v in f]))
        gprim.CreateSubdivisionSchemeAttr().Set(UsdGeom.Tokens.none)
        lo, hi = points.min(axis=0), points.max(axis=0)
        gprim.CreateExtentAttr().Set(Vt.Vec3fArray([Gf.Vec3f(*map(float, lo)), Gf.Vec3f(*map(float, hi))]))
        _set_xform(gprim, local, None)
        _set_texcoords(gprim, points, faces, tile, g.transform)
        prim = gprim.GetPrim()
        prim.CreateAttribute(PRIMITIVE_ATTR, Sdf.ValueTypeNames.Token, custom=True).Set(g.kind)
        prim.CreateAttribute(PRIMITIVE_SIZE_ATTR, Sdf.ValueTypeNames.Double3, custom=True).Set(
            Gf.Vec3d(*round_lengths(g.size)))
        _finish_gprim(stage, gprim, g, labelled, movable, materials, looks, mesh_approx=True)
        return
    if g.kind == "box":
        gprim = UsdGeom.Cube.Define(stage, path)  # default size 2: scale = half extents
        _set_xform(gprim, local, g.size)
    elif g.kind == "cylinder":  # sized by attributes: PhysX rejects non-uniformly scaled cylinders
        gprim = UsdGeom.Cylinder.Define(stage, path)
        r, hh = round_length(g.size[0]), round_length(g.size[1])
        gprim.CreateRadiusAttr().Set(r)
        gprim.CreateHeightAttr().Set(2 * hh)
        gprim.CreateAxisAttr().Set(UsdGeom.Tokens.z)
        gprim.CreateExtentAttr().Set(Vt.Vec3fArray([Gf.Vec3f(-r, -r, -hh), Gf.Vec3f(r, r, hh)]))
        _set_xform(gprim, local, None)
    elif g.kind == "sphere":
        gprim = UsdGeom.Sphere.Define(stage, path)
        r = round_length(g.size[0])
        gprim.CreateRadiusAttr().Set(r)
        gprim.CreateExtentAttr().Set(Vt.Vec3fArray([Gf.Vec3f(-r, -r, -r), Gf.Vec3f(r, r, r)]))
        _set_xform(gprim, local, None)
    else:
        gprim, verts = _triangle_mesh(stage, path, g.vertices, g.faces)
        _set_xform(gprim, local, None)
        if tile is not None:
            faces = np.asarray(g.faces, dtype=np.int64).reshape(-1, 3)
            _set_texcoords(gprim, verts, [tuple(int(v) for v in f) for f in faces], tile, g.transform)
    _finish_gprim(stage, gprim, g, labelled, movable, materials, looks, mesh_approx=g.kind == "mesh")


def _finish_gprim(stage, gprim, g: Geom, labelled: bool, movable: bool, materials: dict[float, Any], looks: Looks,
                  mesh_approx: bool) -> None:
    """Display colour, collision (``MeshCollisionAPI`` for meshes), physics and visual material
    bindings and, for structure, the label of a written gprim."""
    from pxr import Gf, UsdPhysics, UsdShade, Vt

    gprim.CreateDisplayColorAttr().Set(Vt.Vec3fArray([Gf.Vec3f(*round_color(g.color))]))
    prim = gprim.GetPrim()
    if g.collides:
        UsdPhysics.CollisionAPI.Apply(prim)
        if mesh_approx:
            approx = UsdPhysics.MeshCollisionAPI.Apply(prim)
            approx.CreateApproximationAttr().Set(UsdPhysics.Tokens.convexHull if movable else UsdPhysics.Tokens.none)
        binding = UsdShade.MaterialBindingAPI.Apply(prim)
        binding.Bind(_physics_material(stage, g.friction, materials), UsdShade.Tokens.weakerThanDescendants,
                     "physics")
    look = _visual_material(stage, g, looks)
    if look is not None:
        UsdShade.MaterialBindingAPI.Apply(prim).Bind(look)
    if not labelled:
        _set_label(prim, g.label, g.instance_id)


def _jsonable_metadata(meta: dict[str, Any]) -> dict[str, Any]:
    """Keep metadata entries USD can store in ``customLayerData`` (str/bool/int/float and lists of them)."""
    out = {}
    for key, value in sorted(meta.items()):
        if isinstance(value, (bool, int, float, str)):
            out[str(key)] = round_float(value) if isinstance(value, float) else value
        elif isinstance(value, np.generic):
            out[str(key)] = round_float(value.item()) if isinstance(value.item(), float) else value.item()
    return out


def write_usd(desc: SceneDescription, path: str | Path, *, objects: str = "primitives",
              baked: Any = None) -> Path:
    """Write ``desc`` as a USD stage (``.usda`` text or ``.usd``/``.usdc`` crate by suffix), atomically.

    The output is byte-identical for identical descriptions (no timestamps; prims in the
    description's order). ``objects="meshes"`` adds each object's render meshes
    (``scenes.object_meshes``) as an instanceable ``Render`` prim referencing a shared prototype and
    makes its collision gprims invisible (``_write_render_meshes``), and the home's baked light
    (``scenes.baked_light``; ``baked``, a ``BakedLight``, or else the ``mujoco`` light baker's, read
    from its cache): the objects' darker triangles as ``GeomSubset``s bound to darkened looks, and
    each baked floor, rug, wall and ceiling drawn by a render-only mesh under ``BAKED_LIGHT_ROOT``
    textured with its light map (an 8-bit greyscale PNG under ``LIGHTMAP_DIR`` beside the stage, at
    ``baked_light.USD_PX_PER_M``) while its gprim, invisible, keeps colliding. ``load_scene``
    reads the same description from either file. Returns ``path``.
    """
    from pxr import Gf, Sdf, Usd, UsdGeom, UsdLux, UsdPhysics, Vt

    path = Path(path)
    if path.suffix not in WRITABLE_USD_SUFFIXES:
        raise ConfigError(f"unsupported suffix '{path.suffix}'", file=path, expected=" or ".join(WRITABLE_USD_SUFFIXES))
    layer = Sdf.Layer.CreateAnonymous(".usda")
    stage = Usd.Stage.Open(layer)
    UsdGeom.SetStageUpAxis(stage, UsdGeom.Tokens.z)
    UsdGeom.SetStageMetersPerUnit(stage, 1.0)
    UsdPhysics.SetStageKilogramsPerUnit(stage, 1.0)
    world = UsdGeom.Xform.Define(stage, "/World")
    stage.SetDefaultPrim(world.GetPrim())
    scene = UsdPhysics.Scene.Define(stage, "/World/PhysicsScene")
    scene.CreateGravityDirectionAttr().Set(Gf.Vec3f(0.0, 0.0, -1.0))
    scene.CreateGravityMagnitudeAttr().Set(9.81)

    from .object_meshes import check_objects, render_meshes

    meshes = render_meshes(desc) if check_objects(objects, "objects") == "meshes" else {}
    hidden = {gi for obj in desc.objects if obj.instance_id in meshes for gi in obj.geom_indices}
    light = None
    if objects == "meshes":
        from .baked_light import home_light

        light = home_light(desc, baked)
        hidden |= set(light.surfaces)
    obj_paths, geom_paths = _plan_paths(desc)
    owner = {gi: k for k, obj in enumerate(desc.objects) for gi in obj.geom_indices}
    materials: dict[float, Any] = {}
    looks = Looks()
    obj_world: dict[int, np.ndarray] = {}
    for gi, g in enumerate(desc.geoms):
        k = owner.get(gi)
        if k is not None and k not in obj_world:
            obj = desc.objects[k]
            _define_ancestors(stage, obj_paths[k])
            xf = UsdGeom.Xform.Define(stage, obj_paths[k])
            m = np.eye(4)
            m[:3, 3] = [obj.position[0], obj.position[1], obj.bounds_min[2]]
            m[:3, 3] = round_lengths(m[:3, 3])
            xf.AddTranslateOp(UsdGeom.XformOp.PrecisionDouble).Set(Gf.Vec3d(*m[:3, 3]))
            obj_world[k] = m
            prim = xf.GetPrim()
            _set_label(prim, obj.category, obj.instance_id)
            if obj.room_id is not None:
                prim.CreateAttribute("vlnverse:roomId", Sdf.ValueTypeNames.Int).Set(int(obj.room_id))
            for key in sorted(obj.attributes):
                prim.CreateAttribute(ATTR_PREFIX + _identifier(str(key)), Sdf.ValueTypeNames.String).Set(
                    str(obj.attributes[key]))
            if obj.movable:
                UsdPhysics.RigidBodyAPI.Apply(prim)
            if obj.mass > 0:
                UsdPhysics.MassAPI.Apply(prim).CreateMassAttr().Set(round(float(obj.mass), MASS_DECIMALS) + 0.0)
        _define_ancestors(stage, geom_paths[gi])
        _write_geom(stage, geom_paths[gi], g, obj_world[k] if k is not None else np.eye(4), k is not None,
                    k is not None and desc.objects[k].movable, materials, looks)
        if gi in hidden:  # drawn by the object's render meshes or a baked mesh; still collides
            if g.collides or light is None or gi not in light.surfaces:
                UsdGeom.Imageable(stage.GetPrimAtPath(geom_paths[gi])).MakeInvisible()
            else:  # a visual-only box (a rug): invisible ones are skipped on load, guides are not drawn
                UsdGeom.Imageable(stage.GetPrimAtPath(geom_paths[gi])).CreatePurposeAttr().Set(UsdGeom.Tokens.guide)
    if meshes:
        _write_render_meshes(stage, desc, meshes, obj_paths, obj_world, looks, light)
    pngs = _write_baked_surfaces(stage, desc, light, geom_paths) if light is not None and light.surfaces else {}

    if desc.rooms:
        UsdGeom.Scope.Define(stage, "/World/Rooms")
    used: set[str] = set()
    for room in desc.rooms:
        p = _unique(f"/World/Rooms/{_identifier(room.name or f'room_{room.room_id:02d}')}", used)
        prim = UsdGeom.Scope.Define(stage, p).GetPrim()
        prim.CreateAttribute("vlnverse:roomId", Sdf.ValueTypeNames.Int).Set(int(room.room_id))
        prim.CreateAttribute("vlnverse:roomType", Sdf.ValueTypeNames.String).Set(str(room.room_type))
        prim.CreateAttribute("vlnverse:polygon", Sdf.ValueTypeNames.Float2Array).Set(
            Vt.Vec2fArray([Gf.Vec2f(round_length(x), round_length(y)) for x, y in room.polygon]))
    if desc.doors:
        UsdGeom.Scope.Define(stage, "/World/Doors")
    for door in desc.doors:
        prim = UsdGeom.Scope.Define(stage, _unique(f"/World/Doors/door_{door.door_id:02d}", used)).GetPrim()
        prim.CreateAttribute("vlnverse:doorId", Sdf.ValueTypeNames.Int).Set(int(door.door_id))
        prim.CreateAttribute("vlnverse:roomIds", Sdf.ValueTypeNames.Int2).Set(Gf.Vec2i(*door.room_ids))
        prim.CreateAttribute("vlnverse:center", Sdf.ValueTypeNames.Double2).Set(Gf.Vec2d(*round_lengths(door.center)))
        prim.CreateAttribute("vlnverse:width", Sdf.ValueTypeNames.Double).Set(round_length(door.width))
        prim.CreateAttribute("vlnverse:axis", Sdf.ValueTypeNames.String).Set(str(door.axis))
    _add_room_lights(stage, desc, UsdLux)

    layer.customLayerData = {"vlnverse": {
        "format_version": FORMAT_VERSION, "scene_id": desc.scene_id, "floor_z": round_length(desc.floor_z),
        "metadata": _jsonable_metadata(desc.metadata)}}
    with atomic_path(path) as tmp:
        if not layer.Export(str(tmp)):
            raise SceneError(f"{path}: USD export failed")
    write_stage_files(path.parent, looks, pngs)
    return path


def write_stage_files(folder: Path, looks: Looks, pngs: dict[str, bytes]) -> None:
    """Write the files a stage's looks read beside it in ``folder``: the detail textures of
    ``looks.kinds`` (``textures.write_textures``) and the light maps ``pngs`` ({path relative to
    ``folder``: PNG bytes}), each atomically and only when missing or different."""
    if looks.kinds:
        from .textures import write_textures

        write_textures(folder, looks.kinds)
    for rel, data in pngs.items():
        target = Path(folder) / rel
        if not (target.exists() and target.read_bytes() == data):
            target.parent.mkdir(parents=True, exist_ok=True)
            with atomic_path(target) as tmp:
                Path(tmp).write_bytes(data)


def _write_baked_surfaces(stage, desc: SceneDescription, light, geom_paths: list[str]) -> dict[str, bytes]:
    """One render-only ``Mesh`` per baked box under ``BAKED_LIGHT_ROOT`` (``baked_surface_mesh``),
    labelled like the box; returns {path relative to the stage: 8-bit greyscale PNG bytes}."""
    from pxr import Sdf, UsdGeom

    root = UsdGeom.Scope.Define(stage, BAKED_LIGHT_ROOT).GetPrim()
    root.CreateAttribute(RENDER_ONLY_ATTR, Sdf.ValueTypeNames.Bool, custom=True).Set(True)
    used: set[str] = set()
    pngs: dict[str, bytes] = {}
    for gi in sorted(light.surfaces):
        g = desc.geoms[gi]
        path = _unique(f"{BAKED_LIGHT_ROOT}/{_identifier(geom_paths[gi].rsplit('/', 1)[-1])}", used)
        mesh, rel, data = baked_surface_mesh(stage, path, g, light.surfaces[gi], desc.scene_id)
        pngs[rel] = data
        _set_label(mesh.GetPrim(), g.label, g.instance_id)
    return pngs


def baked_surface_mesh(stage, path: str, g: Geom, maps: dict[str, np.ndarray], scene_id: str,
                       offset: np.ndarray | None = None) -> tuple[Any, str, bytes]:
    """The render-only ``Mesh`` at ``path`` drawing baked box ``g`` (``baked_light.box_mesh``: 24
    vertices, vertex ``st`` into its atlas, translated to the box centre less ``offset``, its
    parent's origin) bound to its own ``UsdPreviewSurface`` (``/World/Looks/baked/<name>``) whose
    ``UsdUVTexture`` reads the atlas (``maps``: the box's light maps; the material's detail times
    the light, tinted by the colour; at ``baked_light.USD_PX_PER_M``); returns the mesh, the PNG's
    path relative to the stage (``LIGHTMAP_DIR/<scene>/<name>.png``) and its 8-bit greyscale bytes
    (rows flipped: ``st`` v = 0 is the image's bottom row and the atlas' row 0)."""
    from pxr import Gf, Sdf, UsdGeom, UsdShade, Vt

    from .baked_light import USD_PX_PER_M, box_atlas, box_bounds, box_mesh
    from .textures import DEFAULT_KIND_BY_LABEL, LOOKS, grey_png_bytes, material_kind, texture_array

    kind = material_kind(g.material) or DEFAULT_KIND_BY_LABEL.get(g.label, "")
    look = LOOKS.get(kind)
    detail = texture_array(look.texture) if look is not None and look.texture is not None else None
    img, regions = box_atlas(g, maps, detail, look.tile_m if look is not None else 1.0, USD_PX_PER_M)
    verts, faces, uv = box_mesh(g, regions, img.shape[:2])
    name = path.rsplit("/", 1)[-1]
    mesh, _ = _triangle_mesh(stage, path, verts, faces)
    mesh.CreateDisplayColorAttr().Set(Vt.Vec3fArray([Gf.Vec3f(*round_color(g.color))]))
    centre = np.eye(4)
    centre[:3, 3] = round_lengths(sum(box_bounds(g)) / 2 - (0.0 if offset is None else np.asarray(offset, float)))
    _set_xform(mesh, centre, None)
    UsdGeom.PrimvarsAPI(mesh).CreatePrimvar("st", Sdf.ValueTypeNames.TexCoord2fArray, UsdGeom.Tokens.vertex).Set(
        Vt.Vec2fArray.FromNumpy(np.round(uv, _ST_DECIMALS).astype(np.float32)))
    rel = f"{LIGHTMAP_DIR}/{_identifier(scene_id)}/{name}.png"
    data = grey_png_bytes(img[::-1, :, 0])  # the atlas is grey: one channel
    colour = tuple(round(float(c), 4) for c in g.color)
    mat = UsdShade.Material.Define(stage, f"{_LOOKS_ROOT}/baked/{name}")
    pbr = UsdShade.Shader.Define(stage, f"{_LOOKS_ROOT}/baked/{name}/PreviewSurface")
    pbr.CreateIdAttr("UsdPreviewSurface")
    if look is not None:  # the shading of the box's plain look (``_visual_material``)
        pbr.CreateInput("roughness", Sdf.ValueTypeNames.Float).Set(round(look.roughness, 4))
        pbr.CreateInput("metallic", Sdf.ValueTypeNames.Float).Set(round(look.metallic, 4))
        if look.emission > 0:
            pbr.CreateInput("emissiveColor", Sdf.ValueTypeNames.Color3f).Set(
                Gf.Vec3f(*(round(c * look.emission, 4) for c in colour)))
    reader = UsdShade.Shader.Define(stage, f"{_LOOKS_ROOT}/baked/{name}/TexCoords")
    reader.CreateIdAttr("UsdPrimvarReader_float2")
    reader.CreateInput("varname", Sdf.ValueTypeNames.String).Set("st")
    tex = UsdShade.Shader.Define(stage, f"{_LOOKS_ROOT}/baked/{name}/LightMap")
    tex.CreateIdAttr("UsdUVTexture")
    tex.CreateInput("file", Sdf.ValueTypeNames.Asset).Set(Sdf.AssetPath(rel))
    tex.CreateInput("st", Sdf.ValueTypeNames.Float2).ConnectToSource(reader.ConnectableAPI(), "result")
    tex.CreateInput("wrapS", Sdf.ValueTypeNames.Token).Set("clamp")
    tex.CreateInput("wrapT", Sdf.ValueTypeNames.Token).Set("clamp")
    tex.CreateInput("scale", Sdf.ValueTypeNames.Float4).Set(Gf.Vec4f(*colour, 1.0))  # tint
    tex.CreateInput("fallback", Sdf.ValueTypeNames.Float4).Set(Gf.Vec4f(*colour, 1.0))
    tex.CreateOutput("rgb", Sdf.ValueTypeNames.Float3)
    pbr.CreateInput("diffuseColor", Sdf.ValueTypeNames.Color3f).ConnectToSource(tex.ConnectableAPI(), "rgb")
    mat.CreateSurfaceOutput().ConnectToSource(pbr.ConnectableAPI(), "surface")
    UsdShade.MaterialBindingAPI.Apply(mesh.GetPrim()).Bind(mat)
    return mesh, rel, data


def _write_render_meshes(stage, desc: SceneDescription, meshes: dict, obj_paths: list[str],
                         obj_world: dict[int, np.ndarray], looks: Looks, light=None) -> None:
    """Each distinct set of render meshes once, as a prototype under the abstract
    ``RENDER_PROTOTYPES`` (one ``Mesh`` per material with vertex ``st`` and a UsdPreviewSurface
    binding; with baked ``light``, the triangles of each darkening level, ``baked_light.face_levels``,
    form a ``GeomSubset`` (family ``materialBind``) bound to the look darkened by that level, the
    brightest level keeping the mesh's own look); each object gets an instanceable ``Render`` Xform
    referencing its prototype, posed in the object's frame and marked ``RENDER_ONLY_ATTR``. Objects
    with the same meshes and light (twins) share a prototype."""
    import hashlib

    from pxr import Sdf, UsdGeom

    from .baked_light import object_face_levels

    stage.CreateClassPrim(RENDER_PROTOTYPES)
    protos: dict[str, str] = {}
    used: set[str] = set()
    for k, obj in enumerate(desc.objects):
        parts = meshes.get(obj.instance_id)
        if not parts or k not in obj_world:
            continue
        levels = object_face_levels(light, obj.instance_id, parts)
        h = hashlib.sha256()
        for g, lv in zip(parts, levels):
            h.update(f"{g.material}|{round_color(g.color)}".encode())
            for arr in (g.vertices, g.faces, g.texcoords, lv):
                h.update(b"-" if arr is None else np.ascontiguousarray(arr).tobytes())
        digest = h.hexdigest()
        if digest not in protos:
            proto = _unique(f"{RENDER_PROTOTYPES}/{_identifier(obj.category)}_{len(protos):03d}", used)
            UsdGeom.Xform.Define(stage, proto)
            for j, (g, lv) in enumerate(zip(parts, levels)):
                render_mesh(stage, f"{proto}/part_{j:02d}", g, lv, looks)
            protos[digest] = proto
        render = UsdGeom.Xform.Define(stage, _unique(f"{obj_paths[k]}/Render", used))
        _set_xform(render, np.linalg.inv(obj_world[k]) @ parts[0].transform, None)
        prim = render.GetPrim()
        prim.GetReferences().AddInternalReference(Sdf.Path(protos[digest]))
        prim.SetInstanceable(True)
        prim.CreateAttribute(RENDER_ONLY_ATTR, Sdf.ValueTypeNames.Bool, custom=True).Set(True)


def render_mesh(stage, path: str, g: Geom, levels: np.ndarray | None, looks: Looks):
    """Render mesh ``g`` as a ``Mesh`` at ``path`` (points in its own frame, vertex ``st`` in
    texture tiles, displayColor) bound to its look (``_visual_material``); with baked ``levels``
    (``baked_light.face_levels``, one per triangle) the look darkened by the brightest level, and
    each darker level's triangles a ``GeomSubset`` ``light_<level×100>`` (family ``materialBind``,
    nonOverlapping) bound to the look darkened by that level. Returns the mesh (no transform)."""
    from pxr import Gf, Sdf, UsdGeom, UsdShade, Vt

    from .baked_light import darkened

    mesh, _ = _triangle_mesh(stage, path, g.vertices, g.faces)
    mesh.CreateDisplayColorAttr().Set(Vt.Vec3fArray([Gf.Vec3f(*round_color(g.color))]))
    tile = _texture_tile(g) or 1.0
    st = np.round(np.asarray(g.texcoords, float) / tile, _ST_DECIMALS)
    UsdGeom.PrimvarsAPI(mesh).CreatePrimvar("st", Sdf.ValueTypeNames.TexCoord2fArray,
                                            UsdGeom.Tokens.vertex).Set(
        Vt.Vec2fArray.FromNumpy(st.astype(np.float32)))
    top = 1.0 if levels is None else float(levels.max())
    look = _visual_material(stage, darkened(g, top), looks)
    if look is not None:
        UsdShade.MaterialBindingAPI.Apply(mesh.GetPrim()).Bind(look)
    if levels is None:
        return mesh
    binding = UsdShade.MaterialBindingAPI(mesh.GetPrim())
    for level in sorted(set(levels.tolist()), reverse=True)[1:]:  # darker bands
        faces = Vt.IntArray([int(i) for i in np.flatnonzero(levels == level)])
        subset = binding.CreateMaterialBindSubset(f"light_{int(round(level * 100)):03d}", faces)
        band = _visual_material(stage, darkened(g, level), looks)
        if band is not None:
            UsdShade.MaterialBindingAPI.Apply(subset.GetPrim()).Bind(band)
    if len(set(levels.tolist())) > 1:
        binding.SetMaterialBindSubsetsFamilyType(UsdGeom.Tokens.nonOverlapping)
    return mesh


def _add_room_lights(stage, desc: SceneDescription, UsdLux) -> None:
    """One warm sphere light under each room's ceiling (``textures.room_light_positions``) and a
    sun (distant light) so the stage is lit when opened in Isaac Sim as in MuJoCo."""
    from pxr import Gf, UsdGeom

    from .textures import SUN_DIRECTION, room_light_positions

    lights = room_light_positions(desc)
    if not lights:
        return
    for rid, pos in lights:
        light = UsdLux.SphereLight.Define(stage, f"/World/Lights/light_{rid:02d}")
        light.CreateRadiusAttr().Set(0.1)
        light.CreateIntensityAttr().Set(30000.0)
        light.CreateColorAttr().Set(Gf.Vec3f(1.0, 0.94, 0.84))
        UsdGeom.Xformable(light).AddTranslateOp(UsdGeom.XformOp.PrecisionDouble).Set(Gf.Vec3d(*round_lengths(pos)))
    sun = UsdLux.DistantLight.Define(stage, "/World/Lights/sun")
    sun.CreateIntensityAttr().Set(3000.0)
    sun.CreateAngleAttr().Set(0.53)
    # a distant light shines down its -Z axis: turn that onto SUN_DIRECTION (MuJoCo's sun too), so
    # daylight comes in through the windows on the west and south walls
    w, x, y, z = _rotation_onto(np.array([0.0, 0.0, -1.0]), np.asarray(SUN_DIRECTION, float))
    UsdGeom.Xformable(sun).AddOrientOp(UsdGeom.XformOp.PrecisionDouble).Set(Gf.Quatd(w, Gf.Vec3d(x, y, z)))


def _rotation_onto(a: np.ndarray, b: np.ndarray) -> tuple[float, float, float, float]:
    """Unit quaternion (w, x, y, z; rounded, ``core.precision``) of the shortest rotation taking
    direction ``a`` onto ``b`` (not opposite)."""
    a, b = a / np.linalg.norm(a), b / np.linalg.norm(b)
    axis = np.cross(a, b)
    return unit_quaternion((1.0 + float(a @ b), *map(float, axis)))
