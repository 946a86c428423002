"""The docs' before/after pair of the baked light (docs/images/baked_light_before_after.png):
generated home 3 with ``objects="meshes"`` at ``default``, top row without baked light,
bottom row with it (floors, rugs, walls, ceilings and objects; (``vlnverse.sim.mujoco.lightmap``), four 160² views.

    PYTHONPATH=exts/vlnverse python3 tools/baked_light_figure.py OUT.png
"""
import math
import sys

import numpy as np
from PIL import Image

import vlnverse.sim.mujoco.builder as builder
from vlnverse.scenes.baked_light import BakedLight
from vlnverse.scenes.procgen import generate_home
from vlnverse.sim import make_sensor, make_simulator
from vlnverse.sim.types import AgentPose

home = generate_home(3)
# (camera xy, looked-at xy): dining table, bed, sofa, bed
views = [((3.2, 3.4), (1.5, 1.74)), ((5.0, 3.4), (6.18, 1.11)), ((14.6, 3.4), (12.21, 0.54)), ((11.2, 5.6), (9.73, 7.75))]
poses = [AgentPose(x, y, math.atan2(ty - y, tx - x)) for (x, y), (tx, ty) in views]
spec = make_sensor("rgb", width=160, height=160)
bake = builder.baked_lightmaps
rows = []
for bakefn in ((lambda desc, cache=True: BakedLight()), bake):
    builder.baked_lightmaps = bakefn
    builder._CACHE.clear()
    with make_simulator(home, "r2r_ce", sensors=[spec], quality="default", objects="meshes") as sim:
        rows.append(np.concatenate([sim.render_at(p, spec)["rgb"] for p in poses], 1))
Image.fromarray(np.concatenate(rows, 0)).save(sys.argv[1], optimize=True)
