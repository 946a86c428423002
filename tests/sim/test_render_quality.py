"""Render presets (``render.quality``): what ``default``/``high`` add over ``fast``, measured on
frames of a generated home; depth and segmentation do not depend on the preset; geoms out of view
cost nothing."""
from __future__ import annotations

import copy
import math

import numpy as np
import pytest

from vlnverse.core.errors import ConfigError
from vlnverse.scenes.procgen import generate_home
from vlnverse.sim import AgentPose, make_sensor, make_simulator
from vlnverse.sim.gallery import image_stats, room_views
from vlnverse.sim.types import RENDER_QUALITIES

pytestmark = pytest.mark.gl
SIZE = dict(width=160, height=120)


@pytest.fixture(scope="module")
def home():
    return generate_home(2)


@pytest.fixture(scope="module")
def views(home, gl_context):
    return [pose for _, pose in room_views(home, rooms=3)]


@pytest.fixture(scope="module")
def frames(home, views):
    """{quality: [obs per view]} with RGB, depth, semantic and instance images."""
    sensors = [make_sensor(k, **SIZE) for k in ("rgb", "depth", "semantic", "instance")]
    out = {}
    for q in RENDER_QUALITIES:
        with make_simulator(home, "r2r_ce", sensors=[], renderer="gl", quality=q) as sim:
            out[q] = [{s.kind: sim.render_at(p, s)[s.name] for s in sensors} for p in views]
    return out


def test_depth_and_segmentation_are_identical_at_every_preset(frames):
    for q in ("default", "high"):
        for a, b in zip(frames["fast"], frames[q]):
            for kind in ("depth", "semantic", "instance"):
                assert np.array_equal(a[kind], b[kind]), (q, kind)
    # while the colour images differ
    assert not np.array_equal(frames["fast"][0]["rgb"], frames["default"][0]["rgb"])


def test_default_has_more_colours_and_local_contrast_than_fast(frames):
    for fast, default in zip(frames["fast"], frames["default"]):
        f, d = image_stats(fast["rgb"]), image_stats(default["rgb"])
        assert d["distinct_colours"] > 2 * f["distinct_colours"], (f, d)
        assert d["local_contrast"] > 1.2 * f["local_contrast"], (f, d)


def test_lit_rooms_are_neither_dark_nor_washed_out(frames):
    for q in ("default", "high"):
        for obs in frames[q]:
            luma = obs["rgb"].astype(float) @ [0.299, 0.587, 0.114]
            assert 60.0 <= luma.mean() <= 190.0, (q, luma.mean())
            assert np.mean(luma >= 254) < 0.05 and np.mean(luma <= 8) < 0.15


def test_ceiling_light_is_a_bright_visible_source(home, gl_context):
    """Looking up at a room's ceiling light: the fixture is much brighter than the ceiling around
    it at ``default`` (it glows and the room light sits under it), not at ``fast``."""
    room = max(home.rooms, key=lambda r: float(np.prod(np.ptp(r.polygon, axis=0))))
    cx, cy = room.centroid
    pose = AgentPose(float(cx) - 1.0, float(cy), 0.0, math.radians(40))
    rgb, sem = make_sensor("rgb", **SIZE), make_sensor("semantic", **SIZE)
    contrast, glow = {}, {}
    for q in ("fast", "default"):
        with make_simulator(home, "r2r_ce", sensors=[], renderer="gl", quality=q) as sim:
            labels = sim.semantic_labels
            image = sim.render_at(pose, rgb)["rgb"].astype(float) @ [0.299, 0.587, 0.114]
            seg = sim.render_at(pose, sem)["semantic"]
        lamp = seg == labels.index("ceiling_light")
        ceiling = seg == labels.index("ceiling")
        assert lamp.sum() > 20 and ceiling.sum() > 200
        contrast[q] = image[lamp].mean() - image[ceiling].mean()
        glow[q] = image[lamp].mean()
    assert glow["default"] >= 245.0 and glow["default"] > glow["fast"] + 15.0, glow
    assert contrast["default"] > 35.0 and contrast["default"] > contrast["fast"] + 25.0, contrast


def _with_extra_rooms(home, offset: float):
    """``home`` plus a copy of four of its rooms' geometry ``offset`` metres along +x."""
    small = generate_home(3, min_rooms=4, max_rooms=4)
    extra = copy.deepcopy(small.geoms)
    next_id = max(g.instance_id for g in home.geoms) + 1
    for g in extra:
        g.transform[0, 3] += offset
        g.instance_id += next_id
    bigger = copy.copy(home)
    bigger.geoms = home.geoms + extra
    return bigger, len(extra)


def test_rooms_out_of_view_are_not_drawn(home, views, gl_context):
    bigger, added = _with_extra_rooms(home, home.bounds()[1][0] + 30.0)
    assert added > 60
    rgb = make_sensor("rgb", **SIZE)
    west = [AgentPose(p.x, p.y, math.pi, 0.0) for p in views]  # facing -x, the copy is behind
    drawn = {}
    for name, desc in (("home", home), ("bigger", bigger)):
        with make_simulator(desc, "r2r_ce", sensors=[], renderer="gl", quality="default") as sim:
            counts = []
            for p in west:
                sim.render_at(p, rgb)
                counts.append(sim._renderer.last_drawn)
            drawn[name] = counts
            total = sim._m.ngeom
    assert drawn["bigger"] == drawn["home"]
    assert max(drawn["home"]) < 0.8 * total  # culling drops a real share even in the home itself


def test_unknown_quality_is_a_clear_config_error(home, tmp_path):
    with pytest.raises(ConfigError, match=r"render\.quality.*fast, default, high"):
        make_simulator(home, "r2r_ce", sensors=[], renderer="raycast", quality="ultra")
    from vlnverse.eval.config import load_eval_config

    cfg = tmp_path / "e.yaml"
    cfg.write_text("agent: {name: random}\ntask: fine_grained\nepisodes: x.jsonl\nrender: {quality: ultra}\n")
    with pytest.raises(ConfigError, match=r"render.*quality"):
        load_eval_config(cfg)
    assert load_eval_config(cfg, ["render.quality=high"]).render.quality == "high"


def test_gallery_command_writes_a_contact_sheet_and_figures(home, tmp_path, gl_context):
    import json

    from PIL import Image

    from vlnverse.cli import main
    from vlnverse.scenes.usd_io import write_usd

    scene = write_usd(home, tmp_path / "home.usda")
    out = tmp_path / "gallery"
    assert main(["scenes", "gallery", str(scene), "--out", str(out), "--rooms", "2", "--width", "64", "--height", "48",
                 "--quality", "fast", "--quality", "default", "--no-progress"]) == 0
    summary = json.loads((out / "gallery.json").read_text())
    assert summary["objects"] == "meshes"  # the gallery's default: the homes as people see them
    assert set(summary["presets"]) == {"fast", "default"} and len(summary["views"]) == 2
    for v in summary["presets"].values():  # the rate is of the frames drawn: one per view, over the seconds timed
        assert v["frames"] == len(summary["views"]) == len(v["views"])
        assert v["fps"] == round(v["frames"] / v["seconds"], 1)
    sheet = Image.open(out / "gallery.png")
    assert sheet.width >= 2 * 64 and sheet.height >= 2 * 48
    for f, d in zip(summary["presets"]["fast"]["views"], summary["presets"]["default"]["views"]):
        assert d["distinct_colours"] > f["distinct_colours"]
    assert main(["scenes", "gallery", str(scene), "--out", str(out), "--rooms", "0"]) == 2
