"""Read any OpenUSD stage into a ``SceneDescription`` (``load_scene``).

It bakes world transforms (``UsdGeom.XformCache``), converts Y-up stages to Z-up and stage units to
metres, triangulates meshes, and takes labels from UsdSemantics, the Isaac Sim legacy ``Semantics``
schema or, failing both, prim names. Scenes are cached in-process by the hash of the file's bytes,
and on disk across processes (``scene_cache``).
"""
from __future__ import annotations

import copy
import math
import re
import warnings
from pathlib import Path

import numpy as np

from ..core.cache_key import content_digest
from ..core.errors import SceneError
from .description import STRUCTURE_LABELS, Geom, Door, Room, SceneDescription, SceneObject
from .usd_conventions import (ATTR_PREFIX, INSTANCE_ID_ATTR, MATERIAL_ATTR, PRIMITIVE_ATTR, PRIMITIVE_SIZE_ATTR,
                              RENDER_ONLY_ATTR)

#: Labels treated as walkable floor (in addition to ``floor``) in third-party stages.
FLOOR_LABELS = ("floor", "floors", "ground", "ground_plane", "groundplane")
#: Prim names too generic to serve as a label: the parent's name is used instead.
_GENERIC_NAMES = {"mesh", "geom", "geometry", "cube", "cylinder", "sphere", "cone", "capsule", "plane", "part",
                  "shape", "collision", "collisions", "collider", "visual", "visuals", "node", "model", "obj",
                  "default", "primitive", "body", "root", "instance", "prototype"}
_TESSELLATION = 24
_DEFAULT_FRICTION = 0.8


class SceneLoadWarning(UserWarning):
    """A stage loaded, but something had to be guessed (no labels, no rooms, no physics APIs)."""


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

    Results are cached in-process, and on disk (``scene_cache``), by the digest of the file's
    bytes (``core.cache_key.content_digest``: known before parsing, unlike the parsed scene's
    ``scene_content_hash``; a copy is returned each time). Raises ``SceneError`` naming the file
    when it is missing, not a USD file, has no collision geometry, or has no floor. Warns (``SceneLoadWarning``) when labels, rooms or
    physics APIs are missing and had to be guessed.
    """
    path = Path(path)
    if path.is_dir():
        raise SceneError(f"{path}: is a folder, not a scene file (expected a .usd/.usda/.usdc file)")
    if not path.is_file():
        raise SceneError(f"{path}: scene file not found")
    data = path.read_bytes()
    key = content_digest(data)
    if key not in _CACHE:
        from . import scene_cache

        desc = scene_cache.load(key)  # parsed before, by any process (``scene_cache``)
        if desc is None:
            caught: list = []
            try:
                with warnings.catch_warnings(record=True) as caught, np.errstate(all="ignore"):
                    warnings.simplefilter("always")  # NaN/inf transforms are refused just below, not warned about
                    desc = _read_stage(path)
            finally:
                for w in caught:  # as they were raised (the caller's filters apply now)
                    warnings.warn_explicit(w.message, w.category, w.filename, w.lineno, source=w.source,
                                           registry=globals().setdefault("__warningregistry__", {}))
            check_geometry(desc, path)
            if not caught:
                scene_cache.store(key, desc)
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
            attr = p.GetAttribute(INSTANCE_ID_ATTR)
            if attr and attr.HasAuthoredValue():
                return int(attr.Get()), str(p.GetPath())
            p = p.GetParent()
        return None

    has_physics = False
    gprims = []
    prims = iter(Usd.PrimRange.Stage(stage, Usd.TraverseInstanceProxies(Usd.PrimDefaultPredicate)))
    for prim in prims:
        flag = prim.GetAttribute(RENDER_ONLY_ATTR)
        if flag and flag.Get():  # an object's render meshes (visual only): not scene geometry
            prims.PruneChildren()
            continue
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
        attr = mat.GetPrim().GetAttribute(MATERIAL_ATTR)
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
        shape = prim.GetAttribute(PRIMITIVE_ATTR)
        if shape and shape.HasAuthoredValue() and str(shape.Get()) in ("box", "cylinder", "sphere") and ok:
            size = prim.GetAttribute(PRIMITIVE_SIZE_ATTR).Get()
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
        attrs = {a.GetName()[len(ATTR_PREFIX):]: str(a.Get()) for a in prim.GetAttributes()
                 if a.GetName().startswith(ATTR_PREFIX) and a.HasAuthoredValue()}
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
