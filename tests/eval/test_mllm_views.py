"""Legible observation marks: near-duplicate viewpoints shown once, markers numbered left to right
across the stitched image in every view (Back included), digits that survive a downsize to 512 px."""
from __future__ import annotations

import math

import numpy as np
import pytest
from PIL import Image

from vlnverse.eval.mllm.views import make_candidates, marker_layout, marker_size, stitch


def _views(size: int) -> np.ndarray:
    views = np.zeros((4, size, size, 3), np.uint8)
    for g in range(4):
        views[g, :, :, g % 3] = 40 + 20 * g  # dark tints: no green marker colour
    return views


def _green_blobs(image: np.ndarray) -> int:
    from scipy import ndimage

    green = (image[..., 1] > 150) & (image[..., 0] < 100) & (image[..., 2] < 120)
    return ndimage.label(green)[1]


def test_near_duplicate_viewpoints_are_shown_once():
    # three viewpoints ahead (east) 0.10-0.14 m apart, one to the left, one behind
    options = [("a", (2.0, 0.0)), ("a2", (2.1, 0.0)), ("a3", (2.0, 0.14)), ("b", (0.0, 2.0)), ("c", (-2.0, 0.0))]
    merged = make_candidates((0.0, 0.0), 0.0, options, merge_distance=0.5)
    assert [(c.marker, c.target, c.direction) for c in merged] == [(1, "b", "left"), (2, "a", "front"), (3, "c", "back")]
    assert merged[1].merged == ("a3", "a2") and merged[1].to_dict()["merged"] == ["a3", "a2"]
    assert len(make_candidates((0.0, 0.0), 0.0, options, merge_distance=0.0)) == 5
    image = stitch(_views(224), 0.0, merged)
    assert _green_blobs(image) == 3  # one marker each, nothing stacked


def test_numbering_is_left_to_right_in_every_view_including_back():
    # facing east: behind-right (south-west) and behind-left (north-west), plus right and front
    options = [("behind_left", (-2.0, 0.6)), ("behind_right", (-2.0, -0.6)), ("front", (2.0, 0.0)),
               ("right", (0.0, -2.0)), ("left_far", (0.3, 3.0))]
    for heading in (0.0, 0.3, -0.6):  # on and off the snapped heading
        cands = make_candidates((0.0, 0.0), heading, options)
        layout = marker_layout(cands, 224, 224)
        xs = [layout[c.marker][0] for c in cands]
        assert xs == sorted(xs), (heading, [(c.target, x) for c, x in zip(cands, xs)])
        assert [c.marker for c in cands] == list(range(1, 6))
    cands = make_candidates((0.0, 0.0), 0.0, options)
    assert [c.target for c in cands] == ["left_far", "front", "right", "behind_right", "behind_left"]
    back = [c for c in cands if c.direction == "back"]
    layout = marker_layout(cands, 224, 224)
    # in the Back view (the image's last quarter) behind-right is on the left: the smaller number
    assert all(3 * 224 <= layout[c.marker][0] < 4 * 224 for c in back)
    assert layout[back[0].marker][0] < layout[back[1].marker][0] and back[0].marker < back[1].marker


def test_markers_stay_legible_downsized_to_512_px():
    options = [("a", (2.0, 0.0)), ("b", (0.0, 2.0)), ("c", (0.0, -3.0)), ("d", (-4.0, 0.5))]
    cands = make_candidates((0.0, 0.0), 0.0, options)
    image = stitch(_views(224), 0.0, cands)
    assert image.shape[1] == 4 * 224
    scale = 512 / image.shape[1]
    small = np.asarray(Image.fromarray(image).resize((512, round(image.shape[0] * scale)), Image.LANCZOS))
    layout = marker_layout(cands, 224, 224, top=image.shape[0] - 224)
    _, radius = marker_size(224)
    for c in cands:
        x, y = (round(v * scale) for v in layout[c.marker])
        r = round(radius * scale)
        patch = small[y - r:y + r + 1, x - r:x + r + 1].astype(int)
        green_rows = ((patch[..., 1] > 150) & (patch[..., 0] < 120)).any(axis=1).sum()
        dark_rows = (patch.max(axis=2) < 90).any(axis=1).sum()
        assert green_rows >= 14, (c.marker, green_rows)  # the disc is at least 14 px across
        assert dark_rows >= 7, (c.marker, dark_rows)  # the digit is at least 7 px tall
    # the digit scales with the view: twice the view, about twice the font
    assert marker_size(448)[0] == pytest.approx(2 * marker_size(224)[0], abs=1)


@pytest.mark.parametrize("deg, printed, sector", [
    (0.0, "0 degrees", "front"), (45.0, "45 degrees left", "front"), (45.4, "45 degrees left", "front"),
    (45.6, "46 degrees left", "left"), (90.0, "90 degrees left", "left"), (135.0, "135 degrees left", "left"),
    (135.4, "135 degrees left", "left"), (135.6, "136 degrees left", "back"), (179.6, "180 degrees", "back"),
    (-45.0, "45 degrees right", "front"), (-45.4, "45 degrees right", "front"), (-45.6, "46 degrees right", "right"),
    (-135.0, "135 degrees right", "right"), (-135.4, "135 degrees right", "right"),
    (-135.6, "136 degrees right", "back"), (-180.0, "180 degrees", "back"), (0.4, "0 degrees", "front"),
])
def test_sector_of_every_boundary_follows_the_printed_angle(deg, printed, sector):
    """Front [-45, 45], Left (45, 135], Right [-135, -45), Back: on the whole degrees printed."""
    from vlnverse.eval.mllm.views import angle_text, direction_of

    rad = math.radians(deg)
    assert angle_text(rad) == printed and direction_of(rad) == sector
    for heading in (0.0, 0.3, 1.2, -2.0, 3.1):  # any agent heading: the candidate's sector is the printed one
        xy = (2.0 * math.cos(heading + rad), 2.0 * math.sin(heading + rad))
        (c,) = make_candidates((0.0, 0.0), heading, [("n", xy)])
        assert c.direction == sector and angle_text(c.relative_heading) == printed


def test_prompt_labels_agree_with_their_angles():
    """The issue's cases: 'Right: [3: ... 11 degrees right]' beside 'Front: [1: ... 54 degrees left]'."""
    import re
    from types import SimpleNamespace

    from vlnverse.run.agents import make_agent
    from vlnverse.run.models import make_model

    agent = make_agent("navgpt", {}, model=make_model("scripted", {"answers": ["Action: STOP"]}))
    agent.episode, agent.history, agent.guidance, agent.dialogue, agent._decisions = \
        SimpleNamespace(instruction_text="go"), [], None, [], False
    heading = math.radians(40.0)  # snapped front: north; a candidate 54° left is still in the Front view
    options = [(k, (1.6 * math.cos(heading + math.radians(a)), 1.6 * math.sin(heading + math.radians(a))))
               for k, a in enumerate((54.0, -11.0, 7.0, 100.0, -100.0, 170.0, 45.2, -45.7))]
    candidates = make_candidates((0.0, 0.0), heading, options)
    state = SimpleNamespace(pose=SimpleNamespace(yaw=heading))
    prompt = agent.task_prompt(state, candidates, None, [])
    checked = 0
    for sector, items in re.findall(r"^\s+(Left|Front|Right|Back): \[(.*)\]$", prompt, re.M):
        for deg, side in re.findall(r"(\d+) degrees ?(left|right)?", items):
            signed = int(deg) * (-1 if side == "right" else 1)
            want = "Front" if -45 <= signed <= 45 else "Left" if 45 < signed <= 135 else \
                "Right" if -135 <= signed < -45 else "Back"
            assert sector == want, (sector, deg, side)
            checked += 1
    assert checked == len(options)
