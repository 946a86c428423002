"""``vlnverse scenes gallery --room-sheet``: per home, the same whole-room view (a corner of its
living room, wide field of view, render meshes) at every preset, tiled one row per view."""
from __future__ import annotations

import json

import numpy as np
import pytest

from vlnverse.scenes.procgen import generate_home
from vlnverse.sim.gallery import ROOM_HFOV_DEG, ROOM_PITCH, corner_views, render_room_sheet
from vlnverse.sim.types import RENDER_QUALITIES

pytestmark = pytest.mark.gl
W, H = 96, 72
PAD, LABEL = 4, 16  # ``_tile_sheet``'s layout


@pytest.fixture(scope="module")
def home_usd(tmp_path_factory):
    from vlnverse.scenes.usd_io import write_usd

    return write_usd(generate_home(11), tmp_path_factory.mktemp("home") / "home.usda")


@pytest.fixture(scope="module")
def sheet(home_usd, tmp_path_factory, gl_context):
    out = tmp_path_factory.mktemp("rooms")
    summary = render_room_sheet([home_usd], out, rooms=2, width=W, height=H, progress=False)
    return out, summary


def _tile(image: np.ndarray, row: int, col: int) -> np.ndarray:
    x, y = PAD + col * (W + PAD), PAD + row * (H + LABEL + PAD) + LABEL
    return image[y:y + H, x:x + W].astype(np.int16)


def test_sheet_has_one_row_per_view_and_one_tile_per_preset(sheet):
    from PIL import Image

    out, summary = sheet
    assert summary["presets"] == list(RENDER_QUALITIES) and summary["objects"] == "meshes"
    assert len(summary["views"]) == 2
    assert summary["views"][0]["room"].endswith("living_room")  # living room first
    image = Image.open(out / "rooms.png")
    assert image.size == (3 * (W + PAD) + PAD, 2 * (H + LABEL + PAD) + PAD)
    assert json.loads((out / "rooms.json").read_text()) == summary
    for view in summary["views"]:
        assert view["pose"]["pitch"] == ROOM_PITCH and set(view["presets"]) == set(RENDER_QUALITIES)


def test_tiles_differ_between_presets_and_rows_show_different_rooms(sheet):
    from PIL import Image

    out, summary = sheet
    rgb = np.asarray(Image.open(out / "rooms.png").convert("RGB"))
    for row in range(2):
        fast, default, high = (_tile(rgb, row, c) for c in range(3))
        assert np.abs(fast - default).mean() > 8  # textures and lights
        assert np.abs(default - high).mean() > 0.5  # shadows, reflections, MSAA
        stats = summary["views"][row]["presets"]
        assert stats["default"]["distinct_colours"] > stats["fast"]["distinct_colours"]
    assert np.abs(_tile(rgb, 0, 1) - _tile(rgb, 1, 1)).mean() > 8


def test_the_view_stands_in_a_corner_facing_the_centroid_and_is_deterministic(home_usd, sheet, tmp_path):
    from vlnverse.scenes.usd_io import load_scene

    desc = load_scene(home_usd)
    views = corner_views(desc, rooms=2)
    out, summary = sheet
    assert [v.to_dict() for _, v in views] == [v["pose"] for v in summary["views"]]
    for (name, pose) in views:
        room = next(r for r in desc.rooms if (r.name or f"room_{r.room_id}") == name)
        corner = np.min(np.linalg.norm(room.polygon - [pose.x, pose.y], axis=1))
        assert corner <= 1.5 < np.linalg.norm(room.centroid - [pose.x, pose.y]) + 1.5
        to_centre = np.arctan2(*(room.centroid - [pose.x, pose.y])[::-1])
        assert abs(np.angle(np.exp(1j * (to_centre - pose.yaw)))) < 1e-3
    again = render_room_sheet([home_usd], tmp_path, rooms=2, width=W, height=H, progress=False)
    assert again == summary
    assert (tmp_path / "rooms.png").read_bytes() == (out / "rooms.png").read_bytes()
    assert ROOM_HFOV_DEG > 90


def test_room_sheet_needs_a_scene(tmp_path, capsys):
    from vlnverse.cli import main

    assert main(["scenes", "gallery", "--room-sheet", "--out", str(tmp_path)]) == 2
    assert "--room-sheet" in capsys.readouterr().err
