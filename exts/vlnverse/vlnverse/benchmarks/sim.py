"""``vlnverse bench sim``: simulator throughput on one CPU core.

Figures (best of ``--repeat`` runs): ``physics_steps_per_s`` (agent driven in circles by a velocity
command through the controller loop, contacts collected every step), ``discrete_actions_per_s`` (forward
/ turn actions without rendering), ``rgb_fps`` (224² RGB), ``depth_fps`` (256² depth),
``rgbd_agent_steps_per_s`` (discrete action + 224² RGB and 256² depth observation),
``panoramas_per_s`` (12 views × 224², RGB + depth), ``lidar_scans_per_s`` (360-beam 2D) and
``lidar3d_scans_per_s`` (32 × 1024), all at the ``default`` render preset; ``rgb_fps_by_quality``
(224² RGB at each preset ``fast`` / ``default`` / ``high``, measured interleaved in the same run),
``default_over_fast_rgb`` (their ratio), ``rgb_fps_default_meshes`` / ``default_meshes_over_fast_rgb``
(``default`` with the ``objects="meshes"`` opt-in, in the same interleaved loop) and
``render_mesh_build_s`` (seconds to build the home's render meshes), ``light_bake_s`` (seconds to
bake the home's light from scratch: floors, rugs, walls, ceilings and objects, ``sim.mujoco.lightmap``; the meshes opt-in draws it at ``default``), ``rgbd_agent_steps_per_s_by_quality`` (``fast``,
``default`` and ``default_meshes``: ``default`` with render meshes and baked light, taking turns) and
``rgbd_agent_steps_per_s_default_meshes`` (the last, for its target); ``raw_mj_steps_per_s`` (the same compiled model
stepped by ``mj_step`` alone) and ``physics_efficiency`` (the controller loop's rate ÷ raw, the two
taking turns call by call, compared at the 0.8 quantile of per-call rates); ``rgb_fps_large_over_small`` (224² RGB in a 12-room vs a 4-room generated home,
interleaved) with ``drawn_geoms_small_home`` / ``drawn_geoms_large_home`` (geoms handed to OpenGL a
frame after culling); ``us_per_drawn_geom`` (what one more drawn geom costs a 224² frame: 200
tiny textured boxes in view against none, taking turns frame by frame) and
``draw_call_share_large_home`` (that cost × the large home's drawn geoms ÷ its frame time: an upper
bound on what merging drawn static geoms into fewer meshes could save); on a generated home (``--seed``) when the scene generator
is installed, else on ``vlnverse.sim.demo.demo_home``. The process is pinned to one core and
Mesa's llvmpipe to one thread. ``targets`` are issue 18's and 14's (``TARGETS``; absolute rates
for an idle machine) and ``meets_targets`` compares each figure with its target.
"""
from __future__ import annotations

import math
import os
import time
from typing import Callable

import numpy as np

from ..core.body import DEFAULT_BODY


#: Targets of issues 18, 14 and 33 (idle machine, one core): absolute rates and same-run ratios.
TARGETS = {"physics_steps_per_s": 50000, "rgbd_agent_steps_per_s": 60, "panoramas_per_s": 8,
           "physics_efficiency": 0.8, "rgb_fps_large_over_small": 0.85, "default_over_fast_rgb": 0.5,
           "default_meshes_over_fast_rgb": 0.45, "rgbd_agent_steps_per_s_default_meshes": 30}


def meets_targets(figures: dict, targets: dict | None = None) -> dict[str, bool]:
    """Per target (``TARGETS``): whether the figure reaches it (at or above)."""
    return {k: figures[k] >= v for k, v in (TARGETS if targets is None else targets).items()}


def _pin_to_one_core() -> int:
    os.environ.setdefault("LP_NUM_THREADS", "1")  # llvmpipe rasteriser threads (read when GL starts)
    if hasattr(os, "sched_setaffinity"):
        core = min(os.sched_getaffinity(0))
        os.sched_setaffinity(0, {core})
        return core
    return -1


def _rate(fn: Callable[[], int], repeat: int, min_time: float = 0.5) -> float:
    """Best-of-``repeat`` rate of ``fn`` (which returns how many units it did) over >= ``min_time`` s."""
    best = 0.0
    for _ in range(max(1, repeat)):
        done, t0 = 0, time.perf_counter()
        while True:
            done += fn()
            elapsed = time.perf_counter() - t0
            if elapsed >= min_time:
                break
        best = max(best, done / elapsed)
    return best


def _scene(seed: int):
    try:
        from vlnverse.scenes.procgen import generate_home
    except ImportError:
        from vlnverse.sim.demo import demo_home

        return demo_home(seed), "demo_home"
    return generate_home(seed), "procgen.generate_home"


def run(args) -> dict:
    """Measure the figures listed in the module docstring; returns a JSON-ready dict."""
    from tqdm import tqdm

    from vlnverse.benchmarks.train.options import TimingOptions, options_from_args
    from vlnverse.sim import AgentPose, DiscreteAction, VelocityAction, make_sensor, make_simulator
    from vlnverse.sim.gym_env import VLNVerseNavEnv

    core = _pin_to_one_core()
    options = options_from_args(TimingOptions, args)
    repeat, seed = options.repeat, options.seed
    scene, source = _scene(seed)
    env = VLNVerseNavEnv(scene, DEFAULT_BODY, sensors=[make_sensor("rgb"), make_sensor("depth")])
    env.reset(seed=seed)
    sim = env.sim
    start = sim.pose
    bare = make_simulator(scene, DEFAULT_BODY, sensors=[])
    bare.reset(start)
    rng = np.random.default_rng(seed)
    figures: dict = {"scene": scene.scene_id, "scene_source": source, "geoms": len(scene.geoms),
                     "renderer": sim.renderer_name, "core": core, "repeat": repeat}

    bare.reset(start)

    def physics() -> int:  # circles of ~0.4 m radius: no reset needed between calls
        return bare.step(VelocityAction(v=0.2, omega=0.5, duration=1.0))[1].physics_steps

    actions = [DiscreteAction.MOVE_FORWARD, DiscreteAction.TURN_LEFT, DiscreteAction.MOVE_FORWARD, DiscreteAction.TURN_RIGHT]

    def discrete() -> int:
        bare.reset(start)
        for a in actions:
            bare.step(a)
        return len(actions)

    rgb, depth = make_sensor("rgb"), make_sensor("depth")
    pano, lidar, lidar3d = make_sensor("panorama"), make_sensor("lidar2d"), make_sensor("lidar3d", beams=1024, channels=32)

    def render(spec) -> Callable[[], int]:
        def fn() -> int:
            yaw = float(rng.uniform(-math.pi, math.pi))
            sim.render_at(AgentPose(start.x, start.y, yaw), spec)
            return 1
        return fn

    def agent_steps() -> int:
        env.reset(options={"pose": start})
        for a in actions:
            env.step(int(a))
        return len(actions)

    jobs = {
        "physics_steps_per_s": physics, "discrete_actions_per_s": discrete, "rgb_fps": render(rgb),
        "depth_fps": render(depth), "rgbd_agent_steps_per_s": agent_steps, "panoramas_per_s": render(pano),
        "lidar_scans_per_s": render(lidar), "lidar3d_scans_per_s": render(lidar3d),
    }
    for name, fn in tqdm(jobs.items(), desc="bench sim", unit="figure"):
        figures[name] = round(_rate(fn, repeat), 1)
    figures.update(_physics_efficiency(bare, start, physics, repeat))
    figures.update(_quality_rates(scene, start, rgb, repeat, rng))
    figures.update(_home_size_rates(seed, rgb, repeat, rng))
    figures["us_per_drawn_geom"] = _draw_call_cost(repeat)
    if "drawn_geoms_large_home" in figures:
        frame_us = 1e6 / max(figures["rgb_fps_large_home"], 1e-9)
        figures["draw_call_share_large_home"] = round(figures["us_per_drawn_geom"] * figures["drawn_geoms_large_home"] / frame_us, 3)
    figures["rgbd_agent_steps_per_s_by_quality"] = _agent_step_rates(scene, start, actions, repeat)
    figures["rgbd_agent_steps_per_s_default_meshes"] = figures["rgbd_agent_steps_per_s_by_quality"]["default_meshes"]
    figures["targets"] = dict(TARGETS)
    figures["meets_targets"] = meets_targets(figures)
    env.close()
    bare.close()
    return figures


#: quantile of per-call rates that ``physics_efficiency`` compares (upper: calls not preempted)
EFFICIENCY_QUANTILE = 0.8


def _physics_efficiency(sim, start, physics: Callable[[], int], repeat: int) -> dict:
    """``raw_mj_steps_per_s``: the simulator's own compiled model stepped by MuJoCo alone
    (``mj_step`` with ``nstep`` from the simulator's state with its actuator command held, one
    second of simulated time a call), taking turns call by call with ``physics`` (the same
    steps through the controller loop) in the same run; and ``physics_efficiency`` = the
    controller loop's best rate ÷ raw's best rate."""
    import mujoco

    model = sim._m  # the same compiled model (scene + agent), stepped on its own data
    data = mujoco.MjData(model)
    physics()  # settle into the steady circle the figure measures
    n = int(round(1.0 / model.opt.timestep))

    def raw() -> int:
        # the simulator's current state and actuator command (body-frame forces/servo targets,
        # steady on the circle), then one second of simulated time in one mj_step call
        src = sim._d
        data.qpos[:], data.qvel[:], data.ctrl[:] = src.qpos, src.qvel, src.ctrl
        if model.na:
            data.act[:] = src.act
        data.time = src.time
        mujoco.mj_step(model, data, n)
        return n

    # The two take turns call by call (one simulated second each, a few ms), at least
    # ``min_time`` s each per round; a call's rate is its steps over its time, and a round's
    # rate the ``EFFICIENCY_QUANTILE`` quantile of its calls' rates (on a shared machine many
    # calls are preempted part-way; a total over all calls would measure the load). Best round.
    min_time = 1.0
    best_raw = best_ours = 0.0
    for _ in range(max(1, repeat)):
        rates: dict[str, list[float]] = {"raw": [], "ours": []}
        spent = {"raw": 0.0, "ours": 0.0}
        while min(spent.values()) < min_time:
            for key, fn in (("raw", raw), ("ours", physics)):
                t0 = time.perf_counter()
                steps = fn()
                dt = time.perf_counter() - t0
                spent[key] += dt
                rates[key].append(steps / dt)
        best_raw = max(best_raw, float(np.quantile(rates["raw"], EFFICIENCY_QUANTILE)))
        best_ours = max(best_ours, float(np.quantile(rates["ours"], EFFICIENCY_QUANTILE)))
    return {"raw_mj_steps_per_s": round(best_raw, 1),
            "physics_efficiency": round(best_ours / max(best_raw, 1e-9), 3)}


#: start poses per home in ``rgb_fps_large_over_small``
HOME_SIZE_STARTS = 8


def _home_size_rates(seed: int, spec, repeat: int, rng: np.random.Generator) -> dict:
    """224² RGB frames/s (``default`` preset) in a 4-room and a 12-room generated home, from
    ``HOME_SIZE_STARTS`` random starts in turn facing random directions, the homes taking turns
    frame by frame; ``rgb_fps_large_over_small`` = 12 ÷ 4."""
    try:
        from vlnverse.scenes.procgen import generate_home
    except ImportError:
        return {}
    from vlnverse.sim import AgentPose
    from vlnverse.sim.gym_env import VLNVerseNavEnv

    envs = {}
    try:
        for label, rooms in (("small", 4), ("large", 12)):
            env = VLNVerseNavEnv(generate_home(seed, min_rooms=rooms, max_rooms=rooms), DEFAULT_BODY, sensors=[])
            env.reset(seed=seed)
            envs[label] = env
        poses = {}
        for label, env in envs.items():  # several starts per home: the cost follows what is in view
            poses[label] = []
            for k in range(HOME_SIZE_STARTS):
                env.reset(seed=seed + k)
                poses[label].append(env.sim.pose)
        best = {label: 0.0 for label in envs}
        drawn: dict = {label: [] for label in envs}
        for label, env in envs.items():  # the first frame of a scene uploads its meshes and textures: not timed
            env.sim.render_at(poses[label][0], spec)
        # the homes take turns frame by frame (same yaw for both), so that load from other
        # processes hits them alike; best of ``repeat`` rounds of at least 1 s per home
        for _ in range(max(1, repeat)):
            spent = {label: 0.0 for label in envs}
            frames = 0
            while min(spent.values()) < 1.0:
                yaw = float(rng.uniform(-math.pi, math.pi))
                for label, env in envs.items():
                    start = poses[label][frames % len(poses[label])]
                    t0 = time.perf_counter()
                    env.sim.render_at(AgentPose(start.x, start.y, yaw), spec)
                    spent[label] += time.perf_counter() - t0
                    drawn[label].append(getattr(getattr(env.sim, "_renderer", None), "last_drawn", 0))
                frames += 1
            best = {label: max(best[label], frames / spent[label]) for label in envs}
        return {"rgb_fps_small_home": round(best["small"], 1), "rgb_fps_large_home": round(best["large"], 1),
                "geoms_small_home": len(envs["small"].scene.geoms), "geoms_large_home": len(envs["large"].scene.geoms),
                "drawn_geoms_small_home": round(float(np.mean(drawn["small"])), 1),
                "drawn_geoms_large_home": round(float(np.mean(drawn["large"])), 1),
                "rgb_fps_large_over_small": round(best["large"] / max(best["small"], 1e-9), 3)}
    finally:
        for env in envs.values():
            env.close()


#: tiny boxes drawn by ``_draw_call_cost`` (each covers a pixel or two of a 224² frame)
DRAW_COST_GEOMS = 200


def _draw_call_cost(repeat: int, size: int = 224) -> float:
    """Microseconds one more drawn geom adds to a ``size``² RGB frame on this machine's GL: a
    textured floor and wall with ``DRAW_COST_GEOMS`` tiny textured boxes in view against the same
    frame without them, the two taking turns frame by frame; best of ``repeat`` rounds of ≥ 1 s."""
    from vlnverse.sim.mujoco.gl import import_mujoco

    mujoco = import_mujoco()

    def model(n: int):
        boxes = "".join(f'<geom type="box" size="0.01 0.01 0.01" pos="{2 + 0.02 * (i % 20)} {-0.2 + 0.02 * (i // 20)} 1" '
                        'material="m" contype="0" conaffinity="0"/>' for i in range(n))
        return mujoco.MjModel.from_xml_string(f"""<mujoco><visual><quality numquads="1"/>
            <global offwidth="{size}" offheight="{size}"/></visual>
            <asset><texture name="t" type="2d" builtin="checker" width="256" height="256" rgb1=".6 .4 .2" rgb2=".5 .3 .1"/>
            <material name="m" texture="t" texrepeat="4 4"/></asset>
            <worldbody><light pos="0 0 3" castshadow="false"/><geom type="plane" size="10 10 .1" material="m"/>
            <geom type="box" size="0.1 5 1.5" pos="6 0 1.5" material="m"/>{boxes}
            <camera name="c" pos="0 0 1" xyaxes="0 -1 0 0 0 1"/></worldbody></mujoco>""")

    runs = {}
    for n in (0, DRAW_COST_GEOMS):
        m = model(n)
        d = mujoco.MjData(m)
        mujoco.mj_forward(m, d)
        runs[n] = (mujoco.Renderer(m, size, size), d)
    try:
        for r, d in runs.values():  # the first frame uploads textures: not timed
            r.update_scene(d, camera="c")
            r.render()
        best = {n: math.inf for n in runs}
        for _ in range(max(1, repeat)):
            spent = {n: 0.0 for n in runs}
            frames = 0
            while min(spent.values()) < 1.0:
                for n, (r, d) in runs.items():
                    t0 = time.perf_counter()
                    r.update_scene(d, camera="c")
                    r.render()
                    spent[n] += time.perf_counter() - t0
                frames += 1
            best = {n: min(best[n], spent[n] / frames) for n in runs}
        return round(max(0.0, best[DRAW_COST_GEOMS] - best[0]) / DRAW_COST_GEOMS * 1e6, 2)
    finally:
        for r, _ in runs.values():
            r.close()


def _quality_rates(scene, start, spec, repeat: int, rng: np.random.Generator, min_time: float = 1.0) -> dict:
    """224² RGB frames/s at each render preset, the presets taking turns frame by frame (same pose
    for each) so that load from other processes hits them alike; best of ``repeat`` rounds of at
    least ``min_time`` s per preset; plus the ratio of the best default and fast rates, and the same
    for ``default`` with render meshes and baked light (``objects="meshes"``, taking its turn in the same loop)."""
    from vlnverse.scenes.object_meshes import clear_cache, render_meshes
    from vlnverse.sim import AgentPose, make_simulator
    from vlnverse.sim.types import RENDER_QUALITIES

    clear_cache()
    t0 = time.perf_counter()
    render_meshes(scene)
    build_s = time.perf_counter() - t0
    from vlnverse.sim.mujoco.builder import baked_lightmaps

    t0 = time.perf_counter()
    baked_lightmaps(scene, cache=False)  # from scratch; the simulator below reads (or writes) the disk cache
    bake_s = time.perf_counter() - t0
    sims = {q: make_simulator(scene, "r2r_ce", sensors=[], quality=q) for q in RENDER_QUALITIES}
    sims["default_meshes"] = make_simulator(scene, "r2r_ce", sensors=[], quality="default", objects="meshes")
    best = {q: 0.0 for q in sims}
    try:
        for sim in sims.values():
            sim.reset(start)
            sim.render_at(start, spec)  # warm-up: GL context, textures
        for _ in range(max(1, repeat)):
            spent = {q: 0.0 for q in sims}
            frames = 0
            while min(spent.values()) < min_time:
                pose = AgentPose(start.x, start.y, float(rng.uniform(-math.pi, math.pi)))
                for q, sim in sims.items():
                    t0 = time.perf_counter()
                    sim.render_at(pose, spec)
                    spent[q] += time.perf_counter() - t0
                frames += 1
            rates = {q: frames / spent[q] for q in sims}
            best = {q: max(best[q], rates[q]) for q in sims}
    finally:
        for sim in sims.values():
            sim.close()
    return {"rgb_fps_by_quality": {q: round(best[q], 1) for q in RENDER_QUALITIES},
            "default_over_fast_rgb": round(best["default"] / max(best["fast"], 1e-9), 3),
            "rgb_fps_default_meshes": round(best["default_meshes"], 1),
            "default_meshes_over_fast_rgb": round(best["default_meshes"] / max(best["fast"], 1e-9), 3),
            "render_mesh_build_s": round(build_s, 3), "light_bake_s": round(bake_s, 3)}


def _agent_step_rates(scene, start, actions, repeat: int) -> dict:
    """RGB-D agent steps/s (discrete action + 224² RGB + 224² depth) at ``fast``, ``default`` and
    ``default_meshes`` (``default`` with ``objects="meshes"``: render meshes and baked light), taking turns."""
    from vlnverse.sim import make_sensor
    from vlnverse.sim.gym_env import VLNVerseNavEnv

    options = {"fast": {"quality": "fast"}, "default": {"quality": "default"},
               "default_meshes": {"quality": "default", "objects": "meshes"}}
    envs = {q: VLNVerseNavEnv(scene, "r2r_ce", sensors=[make_sensor("rgb"), make_sensor("depth")], **o)
            for q, o in options.items()}
    best = {q: 0.0 for q in envs}
    try:
        for _ in range(max(1, repeat)):
            for q, env in envs.items():
                def fn(env=env) -> int:
                    env.reset(options={"pose": start})
                    for a in actions:
                        env.step(int(a))
                    return len(actions)
                best[q] = max(best[q], _rate(fn, 1))
    finally:
        for env in envs.values():
            env.close()
    return {q: round(v, 1) for q, v in best.items()}
