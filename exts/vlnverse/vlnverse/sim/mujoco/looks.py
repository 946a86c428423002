"""Scene look for the ``default`` and ``high`` render presets: semantic materials of the scene
description (``Geom.material``, read from the USD's UsdPreviewSurface bindings) become MuJoCo
materials with the procedural textures of ``vlnverse.scenes.textures``, and each room gets the
ceiling light the USD declares, plus a sun and a dim headlight so no room is black.
"""
from __future__ import annotations

import numpy as np

from ...scenes.description import Geom, SceneDescription
from ...scenes.textures import DEFAULT_KIND_BY_LABEL, LOOKS, material_kind, room_light_positions, texture_array
from .gl import import_mujoco

#: Name prefix of the per-room lights (the renderer switches on the ones near the camera).
ROOM_LIGHT_PREFIX = "room_light_"
SUN_LIGHT = "sun"
#: Room light colour and strength; quadratic falloff (1 + 0.06 d²).
ROOM_LIGHT_RGB = np.array([1.0, 0.94, 0.84])
ROOM_LIGHT_DIFFUSE = 0.9
ROOM_LIGHT_ATTENUATION = [1.0, 0.0, 0.06]
SUN_DIRECTION = [0.45, 0.3, -0.55]
#: Half-angle (degrees) of the room lights' cone at ``high`` (where they are shadow-casting spots).
ROOM_LIGHT_SHADOW_CUTOFF = 80.0


def add_lights(spec, desc: SceneDescription, quality: str) -> None:
    """Headlight (ambient fill), one sun and one point light under each room's ceiling; at ``high``
    the sun and room lights cast shadows."""
    mujoco = import_mujoco()
    spec.visual.headlight.ambient = [0.48, 0.48, 0.49]
    spec.visual.headlight.diffuse = [0.25, 0.25, 0.25]
    spec.visual.headlight.specular = [0.05, 0.05, 0.05]
    spec.visual.quality.shadowsize = 1024
    shadows = quality == "high"
    lo, hi = desc.bounds()
    sun = spec.worldbody.add_light(name=SUN_LIGHT, pos=[(lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2, hi[2] + 6.0],
                                   dir=SUN_DIRECTION, castshadow=shadows, diffuse=[0.32, 0.31, 0.28],
                                   specular=[0.1, 0.1, 0.1])
    sun.type = mujoco.mjtLightType.mjLIGHT_DIRECTIONAL
    for rid, pos in room_light_positions(desc):
        light = spec.worldbody.add_light(name=f"{ROOM_LIGHT_PREFIX}{rid}", pos=list(pos), dir=[0, 0, -1],
                                         castshadow=shadows,
                                         diffuse=list(ROOM_LIGHT_RGB * ROOM_LIGHT_DIFFUSE * (0.4 if shadows else 1.0)),
                                         specular=[0.25, 0.25, 0.25], attenuation=ROOM_LIGHT_ATTENUATION)
        if shadows:  # MuJoCo casts shadows from spot lights: a wide downward cone covers the room
            # (a spot is not dimmed off-axis like MuJoCo's point light, hence the lower diffuse above)
            light.type = mujoco.mjtLightType.mjLIGHT_SPOT
            light.cutoff = ROOM_LIGHT_SHADOW_CUTOFF
            light.exponent = 0.0
        else:
            light.type = mujoco.mjtLightType.mjLIGHT_POINT
        light.bulbradius = 0.1


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
    mat = spec.add_material(name=name, rgba=[*map(float, tint), look.opacity], specular=look.specular,
                            shininess=float(1.0 - look.roughness), reflectance=0.12 if kind in ("marble", "tile") else 0.0,
                            emission=look.emission)
    if look.texture is not None:
        mat.textures[1] = _texture(spec, look.texture)  # mjTEXROLE_RGB
        mat.texuniform = True
        mat.texrepeat = [1.0 / look.tile_m, 1.0 / look.tile_m]
    cache[key] = name
    return name
