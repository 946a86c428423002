"""Scene look for the ``default`` and ``high`` render presets: semantic materials of the scene
description (``Geom.material``, read from the USD's UsdPreviewSurface bindings) become MuJoCo
materials with the procedural textures of ``vlnverse.scenes.textures``, and each room gets the
ceiling light the USD declares, plus a sun (``textures.SUN_DIRECTION``, the USD's DistantLight)
and a dim headlight so no room is black.

At ``high`` the sun casts shadows: its orthographic shadow map is centred on the home and wide
enough for all of it (MuJoCo centres a directional light's shadow map on the light's position
and sizes it by ``visual.map.shadowclip``: a sun above the home's centre tilted 45° left part of
the home outside the map, where the sun lit walls and floors through the ceiling, the bright wedges
of issue 14), so daylight reaches the floor only through window openings. Window glass is
visual-only and must not block that light: ``mark_shadowless`` turns glass geoms into decor
(which MuJoCo never renders into shadow maps) in each frame's scene.
"""
from __future__ import annotations

import numpy as np

from ...scenes.description import Geom, SceneDescription
from ...scenes.textures import (DEFAULT_KIND_BY_LABEL, LOOKS, SUN_DIRECTION, material_kind, room_light_positions,
                                texture_array)
from .gl import import_mujoco

#: Name prefix of the per-room lights (the renderer switches on the ones near the camera).
ROOM_LIGHT_PREFIX = "room_light_"
SUN_LIGHT = "sun"
#: Room light colour and strength; quadratic falloff (1 + 0.06 d²).
ROOM_LIGHT_RGB = np.array([1.0, 0.94, 0.84])
ROOM_LIGHT_DIFFUSE = 0.9
ROOM_LIGHT_ATTENUATION = [1.0, 0.0, 0.06]
#: Sun strength (diffuse) at ``default`` (no shadows: it lights every surface facing it) and at
#: ``high`` (shadowed: only what it reaches through windows).
SUN_DIFFUSE = {"default": 0.32, "high": 0.9}
#: Half-angle (degrees) and exponent of the room lights' cone at ``high`` (shadow-casting spots);
#: the cone fades to ~6 % at its edge, so it leaves no hard boundary on walls (an 80° cone without
#: falloff did, and its 160° shadow map was too coarse: striped floors), and its shadow map is
#: four times finer than the 160° one.
ROOM_LIGHT_SHADOW_CUTOFF = 60.0
ROOM_LIGHT_EXPONENT = 4.0
#: Window glass in MuJoCo: opaque glowing sky (the USD's glass is clear); opaque is drawn in the cheap pass.
WINDOW_SKY_OPACITY, WINDOW_SKY_EMISSION = 1.0, 0.7
#: Material kinds whose geoms never cast shadows (glass: light passes through).
SHADOWLESS_KINDS = ("window", "glass")


def add_lights(spec, desc: SceneDescription, quality: str) -> None:
    """Headlight (ambient fill), one sun and one point light under each room's ceiling; at ``high``
    the sun and room lights cast shadows (see the module docstring)."""
    mujoco = import_mujoco()
    spec.visual.headlight.ambient = [0.48, 0.48, 0.49]
    spec.visual.headlight.diffuse = [0.25, 0.25, 0.25]
    spec.visual.headlight.specular = [0.05, 0.05, 0.05]
    spec.visual.quality.shadowsize = 1024
    shadows = quality == "high"
    lo, hi = desc.bounds()
    centre = (np.asarray(lo, float) + np.asarray(hi, float)) / 2
    direction = np.asarray(SUN_DIRECTION, float) / np.linalg.norm(SUN_DIRECTION)
    reach = float(np.linalg.norm(np.asarray(hi, float) - np.asarray(lo, float))) / 2 + 1.0
    sun = spec.worldbody.add_light(name=SUN_LIGHT, pos=list(centre - direction * (reach + 5.0)), dir=list(direction),
                                   castshadow=shadows, diffuse=[SUN_DIFFUSE.get(quality, 0.32) * c for c in (1.0, 0.97, 0.88)],
                                   specular=[0.1, 0.1, 0.1])
    sun.type = mujoco.mjtLightType.mjLIGHT_DIRECTIONAL
    if shadows:  # the shadow map (half-width shadowclip × extent, centred on the sun) covers the home
        spec.visual.map.shadowclip = reach / max(_extent(desc), 1e-3)
    for rid, pos in room_light_positions(desc):
        diffuse = list(ROOM_LIGHT_RGB * ROOM_LIGHT_DIFFUSE * (0.75 if shadows else 1.0))
        light = spec.worldbody.add_light(name=f"{ROOM_LIGHT_PREFIX}{rid}", pos=list(pos), dir=[0, 0, -1],
                                         castshadow=shadows, diffuse=diffuse, specular=[0.25, 0.25, 0.25],
                                         attenuation=ROOM_LIGHT_ATTENUATION)
        if shadows:  # MuJoCo casts shadows from spot lights: a soft downward cone
            light.type = mujoco.mjtLightType.mjLIGHT_SPOT
            light.cutoff = ROOM_LIGHT_SHADOW_CUTOFF
            light.exponent = ROOM_LIGHT_EXPONENT
        else:
            light.type = mujoco.mjtLightType.mjLIGHT_POINT
        light.bulbradius = 0.1


def _extent(desc: SceneDescription) -> float:
    """MuJoCo's ``stat.extent`` of the scene before the model exists: the diagonal of its bounding
    box (what the compiler computes for a model made of the scene's geoms)."""
    lo, hi = desc.bounds()
    return float(np.linalg.norm(np.asarray(hi, float) - np.asarray(lo, float)))


def shadowless_geoms(model) -> np.ndarray:
    """Ids of the geoms whose material kind is in ``SHADOWLESS_KINDS`` (window glass)."""
    ids = []
    for gid in range(model.ngeom):
        mat = int(model.geom_matid[gid])
        if mat >= 0 and model.material(mat).name.rsplit("_", 1)[-1] in SHADOWLESS_KINDS:
            ids.append(gid)
    return np.asarray(ids, dtype=np.int64)


def mark_shadowless(scene, geom_ids: np.ndarray) -> None:
    """Make the ``geom_ids`` drawn in ``scene`` (an updated ``mjvScene``) decor, which MuJoCo
    leaves out of shadow maps: glass then lets the sun through. Call after ``update_scene``."""
    if not len(geom_ids):
        return
    mujoco = import_mujoco()
    want = set(int(g) for g in geom_ids)
    geom_type = int(mujoco.mjtObj.mjOBJ_GEOM)
    decor = int(mujoco.mjtCatBit.mjCAT_DECOR)
    for k in range(scene.ngeom):
        g = scene.geoms[k]
        if g.objtype == geom_type and g.objid in want:
            g.category = decor


def _texture(spec, tex: str) -> str:
    name = f"tex_{tex}"
    if spec.texture(name) is None:
        mujoco = import_mujoco()
        img = texture_array(tex)
        t = spec.add_texture(name=name, type=mujoco.mjtTexture.mjTEXTURE_2D, width=img.shape[1], height=img.shape[0],
                             nchannel=3)
        t.data = img.tobytes()
    return name


def material_for(spec, g: Geom, cache: dict) -> str:
    """Name of the MuJoCo material of geom ``g`` (created on first use; one per material name and
    colour); ``""`` when the geom has no known material kind."""
    kind = material_kind(g.material) or DEFAULT_KIND_BY_LABEL.get(g.label, "")
    if not kind:
        return ""
    colour = tuple(round(float(c), 3) for c in g.color)
    key = (g.material or kind, colour)
    if key in cache:
        return cache[key]
    look = LOOKS[kind]
    name = f"mat{len(cache)}_{kind}"
    tint = np.asarray(colour)
    if look.texture is not None:  # textures are detail maps: undo their mean so the colour stays the named one
        tint = np.clip(tint * 255.0 / float(texture_array(look.texture).mean()), 0.0, 1.0)
    opacity, emission = look.opacity, look.emission
    if kind == "window":  # nothing outside the home to see through it: the glass shows bright sky
        opacity, emission = WINDOW_SKY_OPACITY, WINDOW_SKY_EMISSION
    mat = spec.add_material(name=name, rgba=[*map(float, tint), opacity], specular=look.specular,
                            shininess=float(1.0 - look.roughness), reflectance=0.12 if kind in ("marble", "tile") else 0.0,
                            emission=emission)
    if look.texture is not None:
        mat.textures[1] = _texture(spec, look.texture)  # mjTEXROLE_RGB
        mat.texuniform = True
        mat.texrepeat = [1.0 / look.tile_m, 1.0 / look.tile_m]
    cache[key] = name
    return name
