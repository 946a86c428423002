"""GL contexts are pooled (``sim.mujoco.gl.acquire_gl_context``): a simulator built after another
was closed draws in the same context, one alive at the same time gets its own, and the images
are byte-identical to those of fresh contexts (``mujoco.Renderer``'s own), interleaved or not,
at every preset (``high``: an MSAA context beside a plain one)."""
from __future__ import annotations

import numpy as np
import pytest

from vlnverse.sim import AgentPose, make_simulator
from vlnverse.sim.sensors import CameraSpec, PanoramaSpec

pytestmark = pytest.mark.gl

SPEC = PanoramaSpec(name="p", views=1, modalities=("rgb", "depth"),
                    camera=CameraSpec(name="d", kind="depth", width=48, height=48, hfov_deg=90.0))


@pytest.fixture(scope="module")
def homes():
    procgen = pytest.importorskip("vlnverse.scenes.procgen", reason="needs the scene generator")
    return procgen.generate_home(0), procgen.generate_home(1)


def poses(desc, n=5):
    lo, hi = desc.rooms[0].polygon.min(axis=0), desc.rooms[0].polygon.max(axis=0)
    return [AgentPose(*(lo + (hi - lo) * (0.25 + 0.1 * k)), yaw=1.3 * k) for k in range(n)]


def frames(sim, desc):
    out = []
    for pose in poses(desc):
        got = sim.render_at(pose, SPEC)
        out.append({k: np.array(v) for k, v in got.items()})
    return out


def assert_frames_equal(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert sorted(x) == sorted(y)
        for k in x:
            assert x[k].dtype == y[k].dtype and x[k].tobytes() == y[k].tobytes(), k


def contexts(sim):
    return [r._gl_context for r in sim._renderer._renderers.values()]


@pytest.mark.parametrize("quality", ["default", "high"])
def test_frames_in_a_reused_context_equal_fresh_contexts(homes, gl_context, quality, monkeypatch):
    from vlnverse.sim.mujoco import gl_render

    a, b = homes
    with monkeypatch.context() as m:  # the reference: fresh contexts
        m.setattr(gl_render, "_pooled_renderer",
                  lambda mj, model, height, width: mj.Renderer(model, height=height, width=width))
        ref = {}
        for desc in (a, b):
            sim = make_simulator(desc, sensors=[], quality=quality)
            try:
                ref[desc.scene_id] = frames(sim, desc)
            finally:
                sim.close()
    # pooled: a, then b in a's contexts, then a again in them
    first = make_simulator(a, sensors=[], quality=quality)
    try:
        got_a = frames(first, a)
        used = contexts(first)  # (``high``: the plain context is made at the first depth image)
        assert len(used) == (2 if quality == "high" else 1)
    finally:
        first.close()
    for desc, want in ((b, ref[b.scene_id]), (a, ref[a.scene_id])):
        sim = make_simulator(desc, sensors=[], quality=quality)
        try:
            assert_frames_equal(frames(sim, desc), want)
            assert {id(c) for c in contexts(sim)} == {id(c) for c in used}  # reused, not made
        finally:
            sim.close()
    assert_frames_equal(got_a, ref[a.scene_id])


def test_simulators_alive_together_get_their_own_contexts(homes, gl_context):
    a, b = homes
    alone = {}
    for desc in (a, b):
        sim = make_simulator(desc, sensors=[])
        try:
            alone[desc.scene_id] = frames(sim, desc)
        finally:
            sim.close()
    sa, sb = make_simulator(a, sensors=[]), make_simulator(b, sensors=[])
    try:
        assert {id(c) for c in contexts(sa)}.isdisjoint({id(c) for c in contexts(sb)})
        mixed = {a.scene_id: [], b.scene_id: []}
        for pa, pb in zip(poses(a), poses(b)):  # interleaved draws
            for sim, desc, pose in ((sa, a, pa), (sb, b, pb)):
                mixed[desc.scene_id].append({k: np.array(v) for k, v in sim.render_at(pose, SPEC).items()})
    finally:
        sa.close()
        sb.close()
    for sid in alone:
        assert_frames_equal(mixed[sid], alone[sid])


def test_a_context_still_current_in_another_thread_is_not_reused(homes, gl_context):
    """A simulator drawn in a thread that ended and closed in this one leaves its context current
    there (EGL refuses it here, as it did before the pool): the next simulator gets a context that
    works and draws the same bytes."""
    import threading

    a, _ = homes
    sim = make_simulator(a, sensors=[])
    try:
        want = frames(sim, a)
    finally:
        sim.close()
    made = {}

    def draw():
        made["sim"] = make_simulator(a, sensors=[])
        made["frames"] = frames(made["sim"], a)

    thread = threading.Thread(target=draw)
    thread.start()
    thread.join()
    assert_frames_equal(made["frames"], want)
    try:
        made["sim"].close()  # EGL: the context is current in the finished thread
    except Exception:  # noqa: BLE001 - OSMesa lets it go; EGL refuses (its resources are kept, not freed here)
        pass
    again = make_simulator(a, sensors=[])
    try:
        assert_frames_equal(frames(again, a), want)
    finally:
        again.close()


def test_a_renderer_alive_at_exit_leaves_no_egl_traceback(tmp_path):
    """A process that exits with a renderer still open (EGL's display already terminated when
    it is collected) exits 0 and prints no EGLError from the renderer's ``__del__``."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    import vlnverse

    root = Path(__file__).resolve().parents[2]
    script = tmp_path / "exit_with_renderer.py"
    script.write_text(
        "from vlnverse.learn.waypoints.data import PanoramaRenderer\n"
        "from vlnverse.scenes.usd_read import load_scene\n"
        f"desc = load_scene({str(root / 'scenes_usd' / 'home_0001.usd')!r})\n"
        "renderer = PanoramaRenderer(views=4, size=16)\n"
        "print(renderer.render(desc, None, (1.0, 1.0, 0.0))['depth'].shape)\n")
    env = {**os.environ, "PYTHONPATH": str(Path(vlnverse.__file__).resolve().parents[1])}
    run = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "(4, 16, 16)"
    assert "EGLError" not in run.stderr and "Exception ignored" not in run.stderr, run.stderr[-2000:]
