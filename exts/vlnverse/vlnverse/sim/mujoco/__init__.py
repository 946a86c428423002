"""Embedded MuJoCo backend: scene conversion, agent controller, GL / ray-cast rendering, LiDAR.

``vlnverse.sim.mujoco.gl`` picks ``MUJOCO_GL`` before the first ``import mujoco``; every module
here imports MuJoCo through it.
"""
