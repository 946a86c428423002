"""OpenUSD ↔ ``SceneDescription``: write our homes as Isaac-Sim-ready stages, read any stage back.

Conventions of the files ``write_usd`` produces are documented in ``docs/scenes.md``: metres
(``metersPerUnit = 1``), Z up, ``/World`` default prim, structure gprims under
``/World/Structure``, one ``Xform`` per object under ``/World/Objects`` whose child ``Cube`` /
``Cylinder`` / ``Sphere`` / ``Mesh`` prims carry translate/orient/scale ops, ``displayColor``
and ``UsdPhysics.CollisionAPI``; semantic labels via ``UsdSemantics.LabelsAPI`` (taxonomy
``class``), instance ids in ``vlnverse:instanceId``, rooms under ``/World/Rooms``, doors under
``/World/Doors``.

``load_scene`` reads *any* stage: it bakes world transforms (``UsdGeom.XformCache``), converts
Y-up stages to Z-up and stage units to metres, triangulates meshes, and takes labels from
UsdSemantics, the Isaac Sim legacy ``Semantics`` schema or, failing both, prim names.
"""
from __future__ import annotations

import copy
import hashlib
import math
import re
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..core.errors import ConfigError, SceneError
from ..core.io import atomic_path
from ..core.precision import (FRICTION_DECIMALS, LENGTH_DECIMALS, MASS_DECIMALS, round_array, round_color,
                              round_float, round_length, round_lengths, unit_quaternion)
from .description import STRUCTURE_LABELS, Geom, Door, Room, SceneDescription, SceneObject

#: Version of the on-disk conventions written into ``customLayerData["vlnverse"]``.
FORMAT_VERSION = 1
#: Every USD file suffix vlnverse reads (one list for every command); ``.usdz`` is read-only here.
USD_SUFFIXES = (".usd", ".usda", ".usdc", ".usdz")
#: Suffixes ``write_usd`` can produce (text ``.usda``, crate ``.usd``/``.usdc``).
WRITABLE_USD_SUFFIXES = (".usd", ".usda", ".usdc")
#: Labels treated as walkable floor (in addition to ``floor``) in third-party stages.
FLOOR_LABELS = ("floor", "floors", "ground", "ground_plane", "groundplane")
#: Prim names too generic to serve as a label: the parent's name is used instead.
_GENERIC_NAMES = {"mesh", "geom", "geometry", "cube", "cylinder", "sphere", "cone", "capsule", "plane", "part",
                  "shape", "collision", "collisions", "collider", "visual", "visuals", "node", "model", "obj",
                  "default", "primitive", "body", "root", "instance", "prototype"}
_ID_ATTR = "vlnverse:instanceId"
_ATTR_PREFIX = "vlnverse:attr:"
_TESSELLATION = 24
_DEFAULT_FRICTION = 0.8


class SceneLoadWarning(UserWarning):
    """A stage loaded, but something had to be guessed (no labels, no rooms, no physics APIs)."""


# =========================================================================== writing
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
    prim.CreateAttribute(_ID_ATTR, Sdf.ValueTypeNames.Int).Set(int(instance_id))


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
_MATERIAL_ATTR = "vlnverse:material"


@dataclass
class _Looks:
    """Visual materials written so far: by (material, colour), prim paths used, kinds needing textures."""

    materials: dict[tuple, Any] = field(default_factory=dict)
    paths: set[str] = field(default_factory=set)
    kinds: set[str] = field(default_factory=set)


def _visual_material(stage, g: Geom, looks: _Looks):
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
    mat.GetPrim().CreateAttribute(_MATERIAL_ATTR, Sdf.ValueTypeNames.String).Set(g.material)
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


#: Prim attribute naming the analytic shape a textured ``Mesh`` stands for (``box``, ``cylinder``,
#: ``sphere``) and its size (``Geom.size``): ``load_scene`` reads such a mesh back as that shape,
#: so occupancy and physics are those of the primitive.
_PRIMITIVE_ATTR, _PRIMITIVE_SIZE_ATTR = "vlnverse:primitive", "vlnverse:primitiveSize"
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


def _write_geom(stage, path: str, g: Geom, parent_world: np.ndarray, labelled: bool, movable: bool,
                materials: dict[float, Any], looks: _Looks) -> None:
    from pxr import Gf, Sdf, UsdGeom, UsdPhysics, UsdShade, Vt

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
        prim.CreateAttribute(_PRIMITIVE_ATTR, Sdf.ValueTypeNames.Token, custom=True).Set(g.kind)
        prim.CreateAttribute(_PRIMITIVE_SIZE_ATTR, Sdf.ValueTypeNames.Double3, custom=True).Set(
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
        gprim = UsdGeom.Mesh.Define(stage, path)
        verts = round_array(np.asarray(g.vertices, dtype=float).reshape(-1, 3), LENGTH_DECIMALS)
        faces = np.asarray(g.faces, dtype=np.int64).reshape(-1, 3)
        gprim.CreatePointsAttr().Set(Vt.Vec3fArray.FromNumpy(verts.astype(np.float32)))
        gprim.CreateFaceVertexCountsAttr().Set(Vt.IntArray([3] * len(faces)))
        gprim.CreateFaceVertexIndicesAttr().Set(Vt.IntArray([int(v) for v in faces.ravel()]))
        gprim.CreateSubdivisionSchemeAttr().Set(UsdGeom.Tokens.none)
        lo, hi = verts.min(axis=0), verts.max(axis=0)
        gprim.CreateExtentAttr().Set(Vt.Vec3fArray([Gf.Vec3f(*map(float, lo)), Gf.Vec3f(*map(float, hi))]))
        _set_xform(gprim, local, None)
        if tile is not None:
            _set_texcoords(gprim, verts, [tuple(int(v) for v in f) for f in faces], tile, g.transform)
    _finish_gprim(stage, gprim, g, labelled, movable, materials, looks, mesh_approx=g.kind == "mesh")


def _finish_gprim(stage, gprim, g: Geom, labelled: bool, movable: bool, materials: dict[float, Any], looks: _Looks,
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


def write_usd(desc: SceneDescription, path: str | Path) -> Path:
    """Write ``desc`` as a USD stage (``.usda`` text or ``.usd``/``.usdc`` crate by suffix), atomically.

    The output is byte-identical for identical descriptions (no timestamps; prims in the
    description's order). Returns ``path``.
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

    obj_paths, geom_paths = _plan_paths(desc)
    owner = {gi: k for k, obj in enumerate(desc.objects) for gi in obj.geom_indices}
    materials: dict[float, Any] = {}
    looks = _Looks()
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
                prim.CreateAttribute(_ATTR_PREFIX + _identifier(str(key)), Sdf.ValueTypeNames.String).Set(
                    str(obj.attributes[key]))
            if obj.movable:
                UsdPhysics.RigidBodyAPI.Apply(prim)
            if obj.mass > 0:
                UsdPhysics.MassAPI.Apply(prim).CreateMassAttr().Set(round(float(obj.mass), MASS_DECIMALS) + 0.0)
        _define_ancestors(stage, geom_paths[gi])
        _write_geom(stage, geom_paths[gi], g, obj_world[k] if k is not None else np.eye(4), k is not None,
                    k is not None and desc.objects[k].movable, materials, looks)

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
    if looks.kinds:
        from .textures import write_textures

        write_textures(path.parent, looks.kinds)
    return path


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


# =========================================================================== reading
_CACHE: dict[str, SceneDescription] = {}


def clear_cache() -> None:
    """Forget every scene ``load_scene`` has cached in this process."""
    _CACHE.clear()


#: The largest distance (m) a scene's geometry may extend from the origin; beyond it the file is
#: almost certainly in the wrong units or scaled by mistake (docs/reliability.md).
MAX_SCENE_EXTENT_M = 1000.0


def check_geometry(desc: SceneDescription, path: str | Path) -> None:
    """Refuse a scene with NaN/inf in a transform, size or mesh, or geometry farther than
    ``MAX_SCENE_EXTENT_M`` from the origin (``SceneError`` naming the file and the prim)."""
    for g in desc.geoms:
        arrays = [("transform", g.transform), ("size", g.size)]
        if g.vertices is not None:
            arrays.append(("points", g.vertices))
        for what, arr in arrays:
            if not np.all(np.isfinite(np.asarray(arr, dtype=float))):
                raise SceneError(f"{path}: {g.name or g.label}: non-finite {what} (NaN or inf)")
        reach = float(np.max(np.abs(g.world_points()))) if g.kind != "mesh" or g.vertices is not None else 0.0
        if not math.isfinite(reach) or reach > MAX_SCENE_EXTENT_M:
            raise SceneError(f"{path}: {g.name or g.label}: extends {reach:.3g} m from the origin (limit "
                             f"{MAX_SCENE_EXTENT_M:g} m); check metersPerUnit and xformOp:scale")


def load_scene(path: str | Path) -> SceneDescription:
    """Read any USD stage into a ``SceneDescription`` (metres, Z up, world-space geoms).

    Results are cached in-process by the sha1 of the file's bytes (a copy is returned each
    time). Raises ``SceneError`` naming the file when it is missing, not a USD file, has no
    collision geometry, or has no floor. Warns (``SceneLoadWarning``) when labels, rooms or
    physics APIs are missing and had to be guessed.
    """
    path = Path(path)
    if path.is_dir():
        raise SceneError(f"{path}: is a folder, not a scene file (expected a .usd/.usda/.usdc file)")
    if not path.is_file():
        raise SceneError(f"{path}: scene file not found")
    data = path.read_bytes()
    key = hashlib.sha1(data).hexdigest()
    if key not in _CACHE:
        with np.errstate(all="ignore"):  # NaN/inf transforms are refused just below, not warned about
            desc = _read_stage(path)
        check_geometry(desc, path)
        _CACHE[key] = desc
    desc = copy.deepcopy(_CACHE[key])
    desc.source_path = str(path)
    return desc


def _open_stage(path: Path):
    from pxr import Sdf, Tf, Usd

    try:
        existing = Sdf.Layer.Find(str(path))
        if existing:
            existing.Reload()
        stage = Usd.Stage.Open(str(path))
    except Tf.ErrorException as exc:
        detail = str(exc).strip().splitlines()
        reason = next((ln.strip() for ln in detail if "Error" in ln or "error" in ln), detail[-1] if detail else "")
        raise SceneError(f"{path}: not a readable USD file ({reason[:200]})") from None
    if stage is None:
        raise SceneError(f"{path}: not a readable USD file")
    return stage


def _up_correction(stage, path: Path) -> np.ndarray:
    """4×4 matrix taking stage coordinates to metres, Z up (unauthored values use USD's fallbacks)."""
    from pxr import UsdGeom

    if not UsdGeom.StageHasAuthoredMetersPerUnit(stage):
        warnings.warn(f"{path}: metersPerUnit not authored; using USD's fallback "
                      f"{UsdGeom.GetStageMetersPerUnit(stage):g}", SceneLoadWarning, stacklevel=4)
    mpu = float(UsdGeom.GetStageMetersPerUnit(stage)) or 1.0
    c = np.eye(4) * mpu
    c[3, 3] = 1.0
    if UsdGeom.GetStageUpAxis(stage) == UsdGeom.Tokens.y:
        c = c @ np.array([[1.0, 0, 0, 0], [0, 0, -1, 0], [0, 1, 0, 0], [0, 0, 0, 1]])  # (x, y, z) -> (x, -z, y)
    return c


_AXIS_TO_Z = {"Z": np.eye(3), "X": np.array([[0.0, 0, 1], [0, 1, 0], [-1, 0, 0]]),
              "Y": np.array([[1.0, 0, 0], [0, 0, 1], [0, -1, 0]])}  # columns: canonical x, y, z in prim axes


def _tessellate(kind: str, radius: float, half: float) -> tuple[np.ndarray, np.ndarray]:
    """Canonical (Z-axis) triangle mesh of a cylinder, cone or UV sphere."""
    n = _TESSELLATION
    ang = np.linspace(0, 2 * np.pi, n, endpoint=False)
    ring = np.c_[radius * np.cos(ang), radius * np.sin(ang)]
    i = np.arange(n)
    j = (i + 1) % n
    if kind == "sphere":
        lat = np.linspace(0, np.pi, n // 2 + 1)[1:-1]
        rings = [np.c_[ring * np.sin(t), np.full(n, radius * np.cos(t))] for t in lat]
        verts = np.concatenate([[[0, 0, radius]], *rings, [[0, 0, -radius]]])
        faces = [np.c_[np.zeros(n, int), 1 + i, 1 + j]]
        for r in range(len(lat) - 1):
            a, b = 1 + r * n, 1 + (r + 1) * n
            faces += [np.c_[a + i, b + i, b + j], np.c_[a + i, b + j, a + j]]
        last = len(verts) - 1
        faces.append(np.c_[np.full(n, last), 1 + (len(lat) - 1) * n + j, 1 + (len(lat) - 1) * n + i])
        return verts.astype(float), np.concatenate(faces)
    top_r = 0.0 if kind == "cone" else 1.0
    bottom = np.c_[ring, np.full(n, -half)]
    top = np.c_[ring * top_r, np.full(n, half)]
    verts = np.concatenate([bottom, top, [[0, 0, -half], [0, 0, half]]])
    cb, ct = 2 * n, 2 * n + 1
    faces = np.concatenate([np.c_[i, j, n + j], np.c_[i, n + j, n + i], np.c_[np.full(n, cb), j, i],
                            np.c_[np.full(n, ct), n + i, n + j]])
    return verts, faces


def _cube_mesh(half: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    signs = np.array([[sx, sy, sz] for sx in (-1, 1) for sy in (-1, 1) for sz in (-1, 1)], dtype=float)
    faces = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1],
                      [2, 3, 7], [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]])
    return signs * half, faces


def _triangulate(counts: np.ndarray, indices: np.ndarray) -> np.ndarray:
    """Fan-triangulate polygons given USD ``faceVertexCounts`` / ``faceVertexIndices`` → (T, 3)."""
    counts = np.asarray(counts, dtype=np.int64)
    indices = np.asarray(indices, dtype=np.int64)
    if counts.sum() != len(indices):
        raise ValueError(f"faceVertexCounts sum {counts.sum()} != {len(indices)} indices")
    starts = np.cumsum(counts) - counts
    keep = counts >= 3
    counts, starts = counts[keep], starts[keep]
    n_tris = counts - 2
    face = np.repeat(np.arange(len(counts)), n_tris)
    k = np.arange(n_tris.sum()) - np.repeat(np.cumsum(n_tris) - n_tris, n_tris)
    base = starts[face]
    return np.stack([indices[base], indices[base + k + 1], indices[base + k + 2]], axis=1)


def _decompose(a: np.ndarray) -> tuple[np.ndarray, np.ndarray, bool]:
    """Split a 3×3 linear map into rotation × diag(scale); ``ok`` is False for shear or mirroring."""
    scale = np.linalg.norm(a, axis=0)
    if np.any(scale < 1e-12):
        return np.eye(3), scale, False
    rot = a / scale
    ok = bool(np.allclose(rot.T @ rot, np.eye(3), atol=1e-6) and np.linalg.det(rot) > 0)
    return rot, scale, ok


def _label_of(prim) -> str | None:
    """The class label authored directly on ``prim`` (UsdSemantics or Isaac legacy Semantics)."""
    from pxr import UsdSemantics

    if prim.HasAPI(UsdSemantics.LabelsAPI):
        if "class" in UsdSemantics.LabelsAPI.GetDirectTaxonomies(prim):
            labels = UsdSemantics.LabelsAPI(prim, "class").GetLabelsAttr().Get()
            if labels:
                return str(labels[0])
    for attr in prim.GetAttributes():
        name = attr.GetName()
        if name.startswith("semantic:") and name.endswith(":params:semanticData"):
            kind = prim.GetAttribute(name.replace(":semanticData", ":semanticType"))
            if not kind or kind.Get() in (None, "class"):
                value = attr.Get()
                if value:
                    return str(value)
    return None


def _label_from_names(prim) -> tuple[str, str] | None:
    """(category, path of the prim whose name gave it) from the names of ``prim`` and its
    ancestors (nearest first) through the documented lexicon (``labels.category_from_name``),
    so a mesh ``/World/Table/Leg_1`` belongs to the table; None when no name is recognised."""
    from .labels import category_from_name

    p = prim
    while p and not p.IsPseudoRoot():
        category = category_from_name(p.GetName(), abbreviations=p == prim)
        if category is not None:
            return category, str(p.GetPath())
        p = p.GetParent()
    return None


def _name_label(prim) -> str:
    """A label guessed from the prim name (or its parent's when the name is generic)."""
    for p in (prim, prim.GetParent()):
        if not p or p.IsPseudoRoot():
            break
        name = re.sub(r"[_\-\.\s]*\d+$", "", p.GetName()).lower()
        name = re.sub(r"(?<=[a-z])(?=[A-Z])", "_", name)
        if name and name not in _GENERIC_NAMES:
            return name
    return re.sub(r"[_\-\.\s]*\d+$", "", prim.GetName()).lower() or "unknown"


def _read_stage(path: Path) -> SceneDescription:
    from pxr import Usd, UsdGeom, UsdPhysics, UsdShade

    stage = _open_stage(path)
    corr = _up_correction(stage, path)
    xf_cache = UsdGeom.XformCache(Usd.TimeCode.Default())
    labels: dict[str, tuple[str, str] | None] = {}

    def owner_label(prim) -> tuple[str, str] | None:
        """(label, labelled prim path) of the nearest labelled ancestor-or-self."""
        key = str(prim.GetPath())
        if key not in labels:
            own = _label_of(prim)
            if own is not None:
                labels[key] = (own, key)
            else:
                parent = prim.GetParent()
                labels[key] = owner_label(parent) if parent and not parent.IsPseudoRoot() else None
        return labels[key]

    def instance_id_of(prim) -> tuple[int, str] | None:
        p = prim
        while p and not p.IsPseudoRoot():
            attr = p.GetAttribute(_ID_ATTR)
            if attr and attr.HasAuthoredValue():
                return int(attr.Get()), str(p.GetPath())
            p = p.GetParent()
        return None

    has_physics = False
    gprims = []
    for prim in Usd.PrimRange.Stage(stage, Usd.TraverseInstanceProxies(Usd.PrimDefaultPredicate)):
        if prim.HasAPI(UsdPhysics.CollisionAPI) or prim.HasAPI(UsdPhysics.RigidBodyAPI) or prim.IsA(UsdPhysics.Scene):
            has_physics = True
        if prim.IsA(UsdGeom.Gprim) and prim.GetTypeName() in ("Cube", "Cylinder", "Sphere", "Capsule", "Cone", "Mesh", "Plane"):
            gprims.append(prim)
    if not gprims:
        raise SceneError(f"{path}: no collision geometry (the stage has no Cube/Cylinder/Sphere/Capsule/Cone/Mesh prims)")
    if not has_physics:
        warnings.warn(f"{path}: no UsdPhysics APIs on any prim; treating every gprim as collision geometry",
                      SceneLoadWarning, stacklevel=3)

    try:
        bound, _ = UsdShade.MaterialBindingAPI.ComputeBoundMaterials(gprims, "physics")
    except Exception:  # pragma: no cover - very old USD without the vectorised call
        bound = [UsdShade.MaterialBindingAPI(p).ComputeBoundMaterial("physics")[0] for p in gprims]
    friction_of: dict[str, float] = {}
    looks = _visual_materials(gprims)

    geoms: list[Geom] = []
    owners: list[str | None] = []
    unlabelled = 0
    inferred: dict[str, str] = {}  # prim path → category guessed from its name
    auto_ids: list[int] = []  # geom indices that need an instance id
    for prim, mat in zip(gprims, bound):
        collides = prim.HasAPI(UsdPhysics.CollisionAPI) if has_physics else True
        if collides and has_physics:
            enabled = UsdPhysics.CollisionAPI(prim).GetCollisionEnabledAttr().Get()
            collides = enabled is None or bool(enabled)
        if not collides and UsdGeom.Imageable(prim).ComputeVisibility() == UsdGeom.Tokens.invisible:
            continue
        matrix = corr @ np.array(xf_cache.GetLocalToWorldTransform(prim), dtype=float).T
        try:
            geom = _geom_from_prim(prim, matrix)
        except ValueError as exc:
            warnings.warn(f"{path}: skipping {prim.GetPath()}: {exc}", SceneLoadWarning, stacklevel=3)
            continue
        if geom is None:
            continue
        lab = owner_label(prim)
        if lab is None:
            unlabelled += 1
            guessed = _label_from_names(prim)
            if guessed is not None:  # a recognised name: the category, grouped by the named prim
                geom.label, owner = guessed
                inferred[owner] = geom.label
            else:                    # geometry only (occupancy), not an object
                geom.label = _name_label(prim)
                owner = None
        else:
            geom.label, owner = lab
        ident = instance_id_of(prim)
        if ident is not None:
            geom.instance_id = ident[0]
        else:
            auto_ids.append(len(geoms))
        geom.collides = collides
        geom.name = str(prim.GetPath())
        mat_path = str(mat.GetPath()) if mat else ""
        if mat_path not in friction_of:
            friction_of[mat_path] = _DEFAULT_FRICTION
            if mat and mat.GetPrim().HasAPI(UsdPhysics.MaterialAPI):
                value = UsdPhysics.MaterialAPI(mat.GetPrim()).GetDynamicFrictionAttr().Get()
                if value is not None:
                    friction_of[mat_path] = _f32(value)
        geom.friction = friction_of[mat_path]
        geom.color = _display_color(prim)
        geom.material = looks.get(str(prim.GetPath()), "")
        geoms.append(geom)
        owners.append(owner if geom.label not in STRUCTURE_LABELS + FLOOR_LABELS else None)
    if unlabelled:
        named = ", ".join(sorted(set(inferred.values()))) or "none recognised"
        warnings.warn(f"{path}: {unlabelled} gprim(s) without semantic labels; labels inferred from prim names "
                      f"for {len(inferred)} prim(s): {named}", SceneLoadWarning, stacklevel=3)
    if not any(g.collides for g in geoms):
        raise SceneError(f"{path}: no collision geometry (no gprim carries UsdPhysics.CollisionAPI)")

    # instance ids for geoms without vlnverse:instanceId: one per labelled owner, else one per gprim
    next_id = max([g.instance_id for gi, g in enumerate(geoms) if gi not in set(auto_ids)] + [0]) + 1
    owner_ids: dict[str, int] = {}
    for gi in auto_ids:
        own = owners[gi]
        if own is not None and own in owner_ids:
            geoms[gi].instance_id = owner_ids[own]
            continue
        geoms[gi].instance_id = next_id
        if own is not None:
            owner_ids[own] = next_id
        next_id += 1

    custom = dict(stage.GetRootLayer().customLayerData or {}).get("vlnverse", {})
    desc = SceneDescription(scene_id=str(custom.get("scene_id", path.stem)), geoms=geoms, source_path=str(path),
                            metadata=dict(custom.get("metadata", {})))
    if inferred:  # which labels were guessed (``scenes info`` reports them); not written back to USD
        desc.metadata["inferred_labels"] = dict(sorted(inferred.items()))
    desc.rooms, desc.doors = _read_rooms_doors(stage, corr, path)
    desc.objects = _read_objects(stage, geoms, owners, desc.rooms)
    has_floor = any(g.collides for g in geoms if g.label in FLOOR_LABELS)
    desc.floor_z = float(custom["floor_z"]) if "floor_z" in custom and has_floor else _find_floor_z(geoms, path)
    return desc


def _visual_materials(gprims) -> dict[str, str]:
    """Prim path → semantic material name of its bound (all-purpose) material: the material's
    ``vlnverse:material`` attribute, else the material prim's name (``Wood_Oak`` → ``wood_oak``)."""
    from pxr import UsdShade

    try:
        bound, _ = UsdShade.MaterialBindingAPI.ComputeBoundMaterials(gprims)
    except Exception:  # pragma: no cover - very old USD without the vectorised call
        bound = [UsdShade.MaterialBindingAPI(p).ComputeBoundMaterial()[0] for p in gprims]
    out = {}
    for prim, mat in zip(gprims, bound):
        if not mat:
            continue
        attr = mat.GetPrim().GetAttribute(_MATERIAL_ATTR)
        name = str(attr.Get()) if attr and attr.HasAuthoredValue() else mat.GetPrim().GetName().lower()
        out[str(prim.GetPath())] = name
    return out


def _f32(value: float) -> float:
    """The shortest decimal that reads back as the same float32 (undoes float32 storage noise)."""
    return float(np.format_float_positional(np.float32(value), unique=True, trim="0"))


def _display_color(prim) -> tuple[float, float, float]:
    from pxr import UsdGeom

    value = UsdGeom.Gprim(prim).GetDisplayColorAttr().Get()
    if value is None or len(value) == 0:
        return (0.7, 0.7, 0.7)
    return tuple(_f32(c) for c in value[0])  # type: ignore[return-value]


def _geom_from_prim(prim, matrix: np.ndarray) -> Geom | None:
    """World-space ``Geom`` of one gprim given its local-to-world matrix (column convention, metres)."""
    from pxr import UsdGeom

    a, t = matrix[:3, :3], matrix[:3, 3]
    rot, scale, ok = _decompose(a)
    kind = prim.GetTypeName()

    def place(r: np.ndarray) -> np.ndarray:
        m = np.eye(4)
        m[:3, :3], m[:3, 3] = r, t
        return m

    def as_mesh(verts: np.ndarray, faces: np.ndarray, linear: np.ndarray) -> Geom:
        """Bake ``linear`` (canonical → world rotation·scale) into the vertices, keeping rotation if clean."""
        r, s, clean = _decompose(linear)
        if clean:
            return Geom("mesh", place(r), vertices=verts * s, faces=faces)
        return Geom("mesh", place(np.eye(3)), vertices=verts @ linear.T, faces=faces)

    if kind == "Mesh":
        shape = prim.GetAttribute(_PRIMITIVE_ATTR)
        if shape and shape.HasAuthoredValue() and str(shape.Get()) in ("box", "cylinder", "sphere") and ok:
            size = prim.GetAttribute(_PRIMITIVE_SIZE_ATTR).Get()
            if size is not None:  # a textured primitive written by ``write_usd``: read the primitive back
                # (the same arithmetic as for a Cube scaled by its half extents, a Cylinder or a
                # Sphere, so both spellings of a shape load to the same bits)
                size = np.asarray(size, dtype=float)
                if str(shape.Get()) == "box":
                    rot_b, scale_b, ok_b = _decompose(a @ np.diag(size))
                    if ok_b:
                        return Geom("box", place(rot_b), size=scale_b * 1.0)
                elif str(shape.Get()) == "cylinder" and abs(scale[0] - scale[1]) <= 1e-6 * max(scale[0], 1e-12):
                    return Geom("cylinder", place(rot), size=[size[0] * scale[0], size[1] * scale[2], 0.0])
                elif np.allclose(scale, scale[0], rtol=1e-6):
                    return Geom("sphere", place(rot), size=[size[0] * scale[0], 0.0, 0.0])
        mesh = UsdGeom.Mesh(prim)
        points = mesh.GetPointsAttr().Get()
        counts = mesh.GetFaceVertexCountsAttr().Get()
        indices = mesh.GetFaceVertexIndicesAttr().Get()
        if points is None or counts is None or indices is None or len(points) == 0:
            return None
        faces = _triangulate(np.asarray(counts), np.asarray(indices))
        if len(faces) == 0:
            return None
        if faces.max() >= len(points) or faces.min() < 0:
            raise ValueError("face vertex index out of range")
        return as_mesh(np.asarray(points, dtype=float), faces, a)
    if kind == "Cube":
        half = float(UsdGeom.Cube(prim).GetSizeAttr().Get() or 2.0) / 2
        if ok:
            return Geom("box", place(rot), size=scale * half)
        verts, faces = _cube_mesh(np.full(3, half))
        return as_mesh(verts, faces, a)
    if kind == "Sphere":
        r = float(UsdGeom.Sphere(prim).GetRadiusAttr().Get() or 1.0)
        if ok and np.allclose(scale, scale[0], rtol=1e-6):
            return Geom("sphere", place(rot), size=[r * scale[0], 0.0, 0.0])
        verts, faces = _tessellate("sphere", r, r)
        return as_mesh(verts, faces, a)
    if kind == "Plane":
        plane = UsdGeom.Plane(prim)
        q = _AXIS_TO_Z[str(plane.GetAxisAttr().Get() or "Z")]
        half = np.array([float(plane.GetWidthAttr().Get() or 2.0) / 2, float(plane.GetLengthAttr().Get() or 2.0) / 2, 0.0])
        r2, s2, ok2 = _decompose(a @ q)
        if ok2:
            return Geom("box", place(r2), size=half * s2)
        verts, faces = _cube_mesh(half)
        return as_mesh(verts, faces, a @ q)
    # Cylinder, Capsule (→ cylinder of the full length), Cone (→ mesh)
    schema = {"Cylinder": UsdGeom.Cylinder, "Capsule": UsdGeom.Capsule, "Cone": UsdGeom.Cone}[kind](prim)
    r = float(schema.GetRadiusAttr().Get() or 1.0)
    half = float(schema.GetHeightAttr().Get() or 2.0) / 2
    if kind == "Capsule":
        half += r
    q = _AXIS_TO_Z[str(schema.GetAxisAttr().Get() or "Z")]
    lin = a @ q
    r2, s2, ok2 = _decompose(lin)
    if kind != "Cone" and ok2 and abs(s2[0] - s2[1]) <= 1e-6 * max(s2[0], 1e-12):
        return Geom("cylinder", place(r2), size=[r * s2[0], half * s2[2], 0.0])
    verts, faces = _tessellate("cone" if kind == "Cone" else "cylinder", r, half)
    return as_mesh(verts, faces, lin)


def _read_rooms_doors(stage, corr: np.ndarray, path: Path) -> tuple[list[Room], list[Door]]:
    """Rooms (prims with ``vlnverse:roomType``) and doors (prims with ``vlnverse:roomIds``)."""
    rooms, doors = [], []
    scale = float(corr[0, 0]) if corr[0, 0] else 1.0
    for prim in stage.Traverse():
        rtype = prim.GetAttribute("vlnverse:roomType")
        if rtype and rtype.HasAuthoredValue():
            poly = prim.GetAttribute("vlnverse:polygon").Get()
            rid = prim.GetAttribute("vlnverse:roomId").Get()
            if poly is None or rid is None:
                warnings.warn(f"{path}: room prim {prim.GetPath()} lacks vlnverse:polygon or vlnverse:roomId; skipped",
                              SceneLoadWarning, stacklevel=4)
                continue
            rooms.append(Room(int(rid), str(rtype.Get()), np.asarray(poly, dtype=float) * scale, name=prim.GetName()))
        ids = prim.GetAttribute("vlnverse:roomIds")
        if ids and ids.HasAuthoredValue():
            center = prim.GetAttribute("vlnverse:center").Get()
            width = prim.GetAttribute("vlnverse:width").Get()
            did = prim.GetAttribute("vlnverse:doorId").Get()
            axis = prim.GetAttribute("vlnverse:axis").Get()
            doors.append(Door(int(did) if did is not None else len(doors), tuple(int(v) for v in ids.Get()),
                              np.asarray(center, dtype=float) * scale if center is not None else np.zeros(2),
                              float(width or 0.0) * scale, str(axis or "x")))
    if not rooms:
        warnings.warn(f"{path}: no rooms recorded (no prims with vlnverse:roomType); rooms left empty",
                      SceneLoadWarning, stacklevel=4)
    return rooms, doors


def _read_objects(stage, geoms: list[Geom], owners: list[str | None], rooms: list[Room]) -> list[SceneObject]:
    """One ``SceneObject`` per labelled non-structure prim, in the order its first geom appears."""
    from pxr import UsdPhysics

    grouped: dict[str, list[int]] = {}
    for gi, own in enumerate(owners):
        if own is not None:
            grouped.setdefault(own, []).append(gi)
    objects = []
    for own, indices in grouped.items():
        prim = stage.GetPrimAtPath(own)
        boxes = [geoms[i].world_aabb() for i in indices]
        lo = np.min([b[0] for b in boxes], axis=0)
        hi = np.max([b[1] for b in boxes], axis=0)
        movable = False
        p = prim
        while p and not p.IsPseudoRoot():
            if p.HasAPI(UsdPhysics.RigidBodyAPI):
                enabled = UsdPhysics.RigidBodyAPI(p).GetRigidBodyEnabledAttr().Get()
                movable = enabled is None or bool(enabled)
                break
            p = p.GetParent()
        mass = 0.0
        if prim.HasAPI(UsdPhysics.MassAPI):
            mass = _f32(UsdPhysics.MassAPI(prim).GetMassAttr().Get() or 0.0)
        attrs = {a.GetName()[len(_ATTR_PREFIX):]: str(a.Get()) for a in prim.GetAttributes()
                 if a.GetName().startswith(_ATTR_PREFIX) and a.HasAuthoredValue()}
        room_attr = prim.GetAttribute("vlnverse:roomId")
        if room_attr and room_attr.HasAuthoredValue():
            room_id = int(room_attr.Get())
        else:
            centre = (lo[:2] + hi[:2]) / 2
            room_id = next((r.room_id for r in rooms if r.contains(centre[None])[0]), None)
        objects.append(SceneObject(geoms[indices[0]].instance_id, geoms[indices[0]].label, own, lo, hi, indices,
                                   movable=movable, mass=mass, room_id=room_id, attributes=attrs))
    return objects


def _find_floor_z(geoms: list[Geom], path: Path) -> float:
    """Top of the floor: geoms labelled floor, else the lowest large upward-facing collision surface."""
    floors = [g for g in geoms if g.collides and g.label in FLOOR_LABELS]
    if floors:
        tops = [(g.world_aabb()[1][2], np.prod(np.ptp(g.world_points()[:, :2], axis=0))) for g in floors]
        return round(float(max(tops, key=lambda t: t[1])[0]), 9)
    levels: dict[float, float] = {}
    for g in geoms:
        if not g.collides:
            continue
        rot = g.transform[:3, :3]
        if g.kind == "mesh":
            verts = np.asarray(g.vertices) @ rot.T + g.transform[:3, 3]
            tri = verts[np.asarray(g.faces)]
            normal = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
            area = np.linalg.norm(normal, axis=1) / 2
            up = (area > 1e-12) & (normal[:, 2] > 0.95 * 2 * area)
            for z, ar in zip(tri[up, :, 2].mean(axis=1), area[up]):
                levels[round(float(z), 2)] = levels.get(round(float(z), 2), 0.0) + float(ar)
            continue
        vertical = np.abs(rot[2]).max() > 1 - 1e-6  # a local axis points straight up
        if not vertical or g.kind == "sphere":
            continue
        top = float(g.world_aabb()[1][2])
        if g.kind == "box":
            axis = int(np.abs(rot[2]).argmax())
            others = [k for k in range(3) if k != axis]
            area = 4 * g.size[others[0]] * g.size[others[1]]
        else:
            if abs(rot[2, 2]) < 1 - 1e-6:  # lying cylinder: no flat top
                continue
            area = math.pi * g.size[0] ** 2
        levels[round(top, 2)] = levels.get(round(top, 2), 0.0) + float(area)
    if not levels:
        raise SceneError(f"{path}: no floor (no geom labelled floor and no upward-facing collision surface)")
    biggest = max(levels.values())
    candidates = sorted(z for z, area in levels.items() if area >= max(1.0, 0.2 * biggest))
    if not candidates:
        raise SceneError(f"{path}: no floor (no geom labelled floor and no upward-facing collision surface "
                         f"of at least 1 m²; largest is {biggest:.2f} m²)")
    return float(candidates[0])
