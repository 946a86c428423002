"""Occupancy maps of hand-built scenes: exact cell sets, height band, shapes, dilation, conversions."""
from __future__ import annotations

import math

import numpy as np
import pytest

from vlnverse.core.errors import ConfigError, NoNavigableSpaceError, SceneError
from vlnverse.scenes.description import Geom, SceneDescription
from vlnverse.scenes.occupancy import (FREE, OCCUPIED, UNKNOWN, OccupancyMap, build_navigable_map,
                                       build_occupancy_map)

RES = 0.05


def pose(x=0.0, y=0.0, z=0.0, yaw=0.0, roll=0.0):
    """4x4 transform: rotation about X by roll, then about Z by yaw, then translation."""
    cr, sr, cy, sy = math.cos(roll), math.sin(roll), math.cos(yaw), math.sin(yaw)
    rx = np.array([[1, 0, 0], [0, cr, -sr], [0, sr, cr]])
    rz = np.array([[cy, -sy, 0], [sy, cy, 0], [0, 0, 1]])
    t = np.eye(4)
    t[:3, :3] = rz @ rx
    t[:3, 3] = (x, y, z)
    return t


def floor_4x3():
    """A 4 m x 3 m floor slab with its top at z=0, spanning x in [0, 4], y in [0, 3]."""
    return Geom("box", pose(2.0, 1.5, -0.05), (2.0, 1.5, 0.05), label="floor", name="floor")


def box(cx, cy, cz, hx, hy, hz, yaw=0.0, label="box"):
    return Geom("box", pose(cx, cy, cz, yaw), (hx, hy, hz), label=label)


def scene(*geoms, **kw):
    return SceneDescription("hand_built", geoms=[floor_4x3(), *geoms], **kw)


def centres():
    """World x, y of every cell centre of the expected 4x3 m grid: origin (-0.05, -0.05), 62x82 cells."""
    rows, cols = np.mgrid[0:62, 0:82]
    return -0.05 + (cols + 0.5) * RES, -0.05 + (rows + 0.5) * RES


def occupied_cells(occ):
    return set(map(tuple, np.argwhere(occ.grid == OCCUPIED)))


def expected_cells(inside):
    return set(map(tuple, np.argwhere(inside)))


def test_grid_placement_and_unknown_outside_floor():
    occ = build_occupancy_map(scene())
    assert occ.grid.shape == (62, 82)
    np.testing.assert_allclose(occ.origin, [-0.05, -0.05])
    gx, gy = centres()
    on_floor = (gx >= 0) & (gx <= 4) & (gy >= 0) & (gy <= 3)
    np.testing.assert_array_equal(occ.grid == FREE, on_floor)
    np.testing.assert_array_equal(occ.grid == UNKNOWN, ~on_floor)
    assert occ.navigable_area_m2() == pytest.approx(80 * 60 * RES ** 2)  # 12 m2


def test_box_occupies_exactly_the_cells_whose_centres_it_covers():
    # a 0.5 x 0.5 m box at (1.0, 1.0) and a 0.3 x 0.2 m box at (3.1, 2.2)
    occ = build_occupancy_map(scene(box(1.0, 1.0, 0.4, 0.25, 0.25, 0.4), box(3.1, 2.2, 0.5, 0.15, 0.1, 0.5)))
    gx, gy = centres()
    inside = ((np.abs(gx - 1.0) <= 0.25) & (np.abs(gy - 1.0) <= 0.25)) | \
             ((np.abs(gx - 3.1) <= 0.15) & (np.abs(gy - 2.2) <= 0.1))
    assert occupied_cells(occ) == expected_cells(inside)
    assert len(occupied_cells(occ)) == 10 * 10 + 6 * 4
    # the 0.5 m box covers x in [0.75, 1.25]: columns 16..25 (centres 0.05*c - 0.025 = 0.775 .. 1.225)
    rows, cols = np.nonzero(occ.grid[:, :50] == OCCUPIED)
    assert (cols.min(), cols.max(), rows.min(), rows.max()) == (16, 25, 16, 25)


def test_height_band_excludes_low_and_high_geometry():
    low = box(1.0, 1.0, 0.05, 0.3, 0.3, 0.05)        # top at 0.10 < step height 0.15
    high = box(3.0, 1.0, 1.5, 0.3, 0.3, 0.5)         # bottom at 1.0 > agent height 0.88
    shelf = box(2.0, 2.0, 0.80, 0.2, 0.2, 0.05)     # 0.75..0.85: inside the band
    occ = build_occupancy_map(scene(low, high, shelf))
    gx, gy = centres()
    assert occupied_cells(occ) == expected_cells((np.abs(gx - 2.0) <= 0.2) & (np.abs(gy - 2.0) <= 0.2))
    # a lower agent passes under the shelf
    assert not (build_occupancy_map(scene(low, high, shelf), agent_height=0.7).grid == OCCUPIED).any()


def test_rotated_box_footprint():
    yaw = math.radians(30)
    occ = build_occupancy_map(scene(box(2.0, 1.5, 0.5, 0.6, 0.2, 0.5, yaw=yaw)))
    gx, gy = centres()
    # express centres in the box frame
    dx, dy = gx - 2.0, gy - 1.5
    u = dx * math.cos(yaw) + dy * math.sin(yaw)
    v = -dx * math.sin(yaw) + dy * math.cos(yaw)
    assert occupied_cells(occ) == expected_cells((np.abs(u) <= 0.6 + 1e-9) & (np.abs(v) <= 0.2 + 1e-9))


def test_tilted_box_is_clipped_to_the_band():
    # a 2 m long plank (along y) leaning 45 deg about X: only the part between z=0.15 and 0.88 counts
    plank = Geom("box", pose(2.0, 1.5, 0.5, roll=math.radians(45)), (0.1, 1.0, 0.01))
    occ = build_occupancy_map(scene(plank))
    rows, cols = np.nonzero(occ.grid == OCCUPIED)
    ys = -0.05 + (rows + 0.5) * RES
    # along the plank, z = 0.5 + (y - 1.5) (45 deg): the band maps to y in [1.15, 1.88] (+- thickness)
    assert ys.min() == pytest.approx(1.15, abs=0.04) and ys.max() == pytest.approx(1.88, abs=0.04)
    xs = -0.05 + (cols + 0.5) * RES
    assert xs.min() >= 1.9 and xs.max() <= 2.1


def test_cylinder_and_sphere_discs():
    cyl = Geom("cylinder", pose(1.0, 1.0, 0.4), (0.3, 0.4, 0.0))
    ball = Geom("sphere", pose(3.0, 1.5, 1.0), (0.5, 0.0, 0.0))  # centre above the band top (0.88)
    occ = build_occupancy_map(scene(cyl, ball))
    gx, gy = centres()
    r_ball = math.sqrt(0.5 ** 2 - (1.0 - 0.88) ** 2)  # widest cross-section inside the band, at z=0.88
    inside = ((gx - 1.0) ** 2 + (gy - 1.0) ** 2 <= 0.09 + 1e-9) | ((gx - 3.0) ** 2 + (gy - 1.5) ** 2 <= r_ball ** 2 + 1e-9)
    assert occupied_cells(occ) == expected_cells(inside)


def test_lying_cylinder_footprint_is_a_rectangle():
    # a log along y (rotated 90 deg about X): radius 0.2, length 1.0, centre (2.0, 1.5, 0.5)
    log = Geom("cylinder", pose(2.0, 1.5, 0.5, roll=math.pi / 2), (0.2, 0.5, 0.0))
    occ = build_occupancy_map(scene(log))
    gx, gy = centres()
    # no cell centre lies within 1 mm of the edges, so the 32-gon approximation is exact here
    assert occupied_cells(occ) == expected_cells((np.abs(gx - 2.0) <= 0.2) & (np.abs(gy - 1.5) <= 0.5))


def _cube_mesh(cx, cy, cz, h):
    verts = np.array([[sx, sy, sz] for sx in (-h, h) for sy in (-h, h) for sz in (-h, h)], dtype=float)
    faces = np.array([[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1],
                      [2, 3, 7], [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]])
    return Geom("mesh", pose(cx, cy, cz), vertices=verts, faces=faces)


def test_closed_mesh_fills_its_cross_section():
    # a cube mesh taller than the band: no face lies inside the band, only the slices fill it
    occ = build_occupancy_map(scene(_cube_mesh(1.5, 1.5, 0.5, 1.0 / 2 * 1.2)))
    gx, gy = centres()
    assert occupied_cells(occ) == expected_cells((np.abs(gx - 1.5) <= 0.6) & (np.abs(gy - 1.5) <= 0.6))


def test_open_mesh_thin_wall_leaves_no_gap():
    # a single vertical quad from (1, 0) to (1, 3), 2 m tall: zero thickness, must block every row
    verts = np.array([[1.0, 0.0, 0.0], [1.0, 3.0, 0.0], [1.0, 3.0, 2.0], [1.0, 0.0, 2.0]])
    wall = Geom("mesh", np.eye(4), vertices=verts, faces=np.array([[0, 1, 2], [0, 2, 3]]))
    occ = build_occupancy_map(scene(wall))
    rows = np.nonzero(occ.grid == OCCUPIED)[0]
    # every row over the floor (1..60); y = 3.0 is the lower edge of row 61, which it touches
    assert set(range(1, 61)) <= set(rows) <= set(range(0, 62))
    assert set(np.nonzero(occ.grid == OCCUPIED)[1]) <= {20, 21}  # x = 1.0 is the edge of columns 20/21


def test_sloped_open_mesh_is_clipped_to_the_band():
    # a ramp z = x - 1 over x in [1, 3], y in [0.5, 2.5]: inside the band only for x in [1.15, 1.88]
    verts = np.array([[1.0, 0.5, 0.0], [3.0, 0.5, 2.0], [3.0, 2.5, 2.0], [1.0, 2.5, 0.0]])
    ramp = Geom("mesh", np.eye(4), vertices=verts, faces=np.array([[0, 1, 2], [0, 2, 3]]))
    occ = build_occupancy_map(scene(ramp))
    gx, gy = centres()
    assert occupied_cells(occ) == expected_cells((gx >= 1.15) & (gx <= 1.88) & (gy >= 0.5) & (gy <= 2.5))


def test_mesh_only_floor_and_table():
    # third-party style: floor as a mesh quad, a table top mesh (horizontal quad) inside the band
    floor = Geom("mesh", np.eye(4), vertices=np.array([[0, 0, 0], [4, 0, 0], [4, 3, 0], [0, 3, 0.]]),
                 faces=np.array([[0, 1, 2], [0, 2, 3]]), label="unknown")
    top = Geom("mesh", pose(2.0, 1.5, 0.7), vertices=np.array([[-0.5, -0.3, 0], [0.5, -0.3, 0], [0.5, 0.3, 0], [-0.5, 0.3, 0.]]),
               faces=np.array([[0, 1, 2], [0, 2, 3]]))
    occ = build_occupancy_map(SceneDescription("mesh_only", geoms=[floor, top]))
    gx, gy = centres()
    assert occ.grid.shape == (62, 82)
    assert occupied_cells(occ) == expected_cells((np.abs(gx - 2.0) <= 0.5) & (np.abs(gy - 1.5) <= 0.3))
    assert (occ.grid == FREE).sum() == 80 * 60 - 20 * 12


def test_dilation_grows_an_obstacle_by_the_radius():
    occ = build_occupancy_map(scene(box(2.025, 1.525, 0.4, 0.02, 0.02, 0.4)))  # covers one cell centre
    (r, c), = np.argwhere(occ.grid == OCCUPIED)
    radius = 0.3
    nav = occ.dilate(radius)
    assert nav.radius == radius
    blocked = np.argwhere((nav.grid == OCCUPIED))
    dist = np.hypot(blocked[:, 0] - r, blocked[:, 1] - c) * RES
    reach_m = radius + RES  # conservative by one cell: geometry may reach almost to the next centre
    assert dist.max() < reach_m - 1e-9
    for dr, dc in ((1, 0), (-1, 0), (0, 1), (0, -1), (1, 1), (-1, 1)):
        reach = 0
        while nav.grid[r + dr * (reach + 1), c + dc * (reach + 1)] == OCCUPIED:
            reach += 1
        assert abs(reach * RES * math.hypot(dr, dc) - radius) <= RES * math.hypot(dr, dc) + 1e-9
    # 0.3 m away (6 cells: 0.30 < radius + cell = 0.35) is blocked; 0.35 m away stays free
    assert nav.grid[r, c + 6] == OCCUPIED and nav.grid[r, c + 7] == FREE
    # diagonal (4, 5): centre distance 0.320 m < 0.35 -> blocked; with radius 0.27 (0.32) free
    assert nav.grid[r + 4, c + 5] == OCCUPIED and occ.dilate(0.27).grid[r + 4, c + 5] == FREE
    # unknown grows too: the free band along the floor edge is now UNKNOWN
    assert nav.grid[1:61, 1:7].max() == UNKNOWN and nav.grid[30, 7] == FREE


def test_navigable_map_keeps_the_body_clear_of_a_box_corner():
    """Hand-computed: a box over x, y in [1.0, 1.57] marks centres up to 1.525 (1.575 lies outside),
    so its corner (1.57, 1.57) reaches 0.045 m beyond the last marked centre in x and y — almost
    a cell diagonally. Stretch's radius 0.17 m; cell centre (1.725, 1.625):
    grid rule (``dilate``): distance to the nearest marked centre (1.525, 1.525) = √(0.2² + 0.1²)
    = 0.2236 >= 0.17 + 0.05, so the grid dilation keeps it FREE; but the true distance to the
    corner is √(0.155² + 0.055²) = 0.1645 < 0.17: the body would overlap the box."""
    desc = scene(box(1.285, 1.285, 0.4, 0.285, 0.285, 0.4))
    occ = build_occupancy_map(desc)
    nav = build_navigable_map(desc, 0.17, occupancy=occ)
    assert nav.radius == 0.17
    corner_cell, beside = np.array([[1.725, 1.625]]), np.array([[1.725, 1.675]])  # beside: 0.1872 m away
    assert occ.dilate(0.17).is_free(corner_cell)[0]  # the grid rule's blind spot at corners
    assert not nav.is_free(corner_cell)[0] and nav.is_free(beside)[0]
    # along the faces the exact rule and the grid rule agree: 0.155 m from the x face blocked, 0.205 m free
    assert not nav.is_free(np.array([[1.725, 1.275]]))[0] and nav.is_free(np.array([[1.775, 1.275]]))[0]
    assert nav.grid[occ.world_to_cell(corner_cell)[0][0], occ.world_to_cell(corner_cell)[0][1]] == OCCUPIED


@pytest.mark.parametrize("yaw", [0.0, 0.5, math.pi / 4])
def test_navigable_cells_are_exactly_the_cells_at_least_a_radius_from_every_footprint(yaw):
    """Every FREE cell of the raw map away from the floor edge is navigable iff its centre's exact
    distance to each footprint (a rotated box, an upright cylinder) is at least the radius."""
    radius = 0.18
    b = box(1.2, 1.3, 0.4, 0.31, 0.17, 0.4, yaw=yaw)
    disc = Geom("cylinder", pose(2.9, 1.6, 0.4), (0.23, 0.4, 0.0), label="table")
    desc = scene(b, disc)
    occ = build_occupancy_map(desc)
    nav = build_navigable_map(desc, radius, occupancy=occ)
    rows, cols = np.nonzero(occ.grid == FREE)
    xy = occ.cell_to_world(np.stack([rows, cols], axis=1))
    c, s = math.cos(yaw), math.sin(yaw)
    local = (xy - [1.2, 1.3]) @ np.array([[c, -s], [s, c]])  # world -> box frame
    d_box = np.hypot(np.maximum(np.abs(local[:, 0]) - 0.31, 0), np.maximum(np.abs(local[:, 1]) - 0.17, 0))
    d_disc = np.maximum(np.hypot(xy[:, 0] - 2.9, xy[:, 1] - 1.6) - 0.23, 0)
    # the UNKNOWN cells outside the floor have centres half a cell beyond its edges
    margin = radius + RES - RES / 2
    inland = (xy[:, 0] >= margin) & (xy[:, 0] <= 4 - margin) & (xy[:, 1] >= margin) & (xy[:, 1] <= 3 - margin)
    clear = np.minimum(d_box, d_disc) >= radius
    navigable = nav.grid[rows, cols] == FREE
    np.testing.assert_array_equal(navigable[inland], clear[inland])
    assert (nav.grid[rows, cols][inland & ~clear] == OCCUPIED).all()
    # the floor edge grows as before (grid margin radius + one cell): UNKNOWN, never navigable
    assert not navigable[~inland].any() and (nav.grid[rows, cols][~inland] != OCCUPIED).any()


def test_navigable_map_bad_input():
    desc = scene(source_path="/data/tiny.usda")
    with pytest.raises(NoNavigableSpaceError, match=r"/data/tiny.usda.*radius 2\.000"):
        build_navigable_map(desc, 2.0)
    with pytest.raises(ConfigError, match="radius"):
        build_navigable_map(desc, -0.1)
    with pytest.raises(ConfigError, match="occupancy"):
        build_navigable_map(desc, 0.18, occupancy=build_occupancy_map(desc, resolution=0.1))


def test_dilation_with_no_space_left_names_the_radius_and_file():
    occ = build_occupancy_map(scene(source_path="/data/tiny.usda"))
    with pytest.raises(NoNavigableSpaceError, match=r"/data/tiny.usda.*radius 2\.000"):
        occ.dilate(2.0)


def test_world_cell_round_trip_and_corners():
    occ = OccupancyMap(np.zeros((30, 40), np.uint8), 0.1, np.array([-1.0, 2.0]))
    # the outer corner of cell (0, 0) is the origin; its centre is half a cell in
    np.testing.assert_array_equal(occ.world_to_cell([[-1.0, 2.0]]), [[0, 0]])
    np.testing.assert_allclose(occ.cell_to_world([[0, 0]]), [[-0.95, 2.05]])
    # row follows y, column follows x
    np.testing.assert_array_equal(occ.world_to_cell([[-0.85, 2.35], [2.999, 4.999]]), [[3, 1], [29, 39]])
    assert occ.in_bounds(occ.world_to_cell([[3.0, 5.0], [-1.01, 2.5]])).tolist() == [False, False]
    rng = np.random.default_rng(0)
    cells = np.stack([rng.integers(0, 30, 100), rng.integers(0, 40, 100)], axis=1)
    np.testing.assert_array_equal(occ.world_to_cell(occ.cell_to_world(cells)), cells)
    xy = rng.uniform([-1, 2], [3, 5], size=(100, 2))
    back = occ.cell_to_world(occ.world_to_cell(xy))
    assert np.abs(back - xy).max() <= 0.05 + 1e-9


def test_save_load_round_trip(tmp_path):
    occ = build_occupancy_map(scene(box(1.0, 1.0, 0.4, 0.25, 0.25, 0.4), source_path="x.usda"))
    path = occ.save(tmp_path / "occ.npz")
    back = OccupancyMap.load(path)
    np.testing.assert_array_equal(back.grid, occ.grid)
    np.testing.assert_allclose(back.origin, occ.origin)
    assert back.resolution == occ.resolution and back.source == "x.usda"
    assert [p.name for p in tmp_path.iterdir()] == ["occ.npz"]
    (tmp_path / "bad.npz").write_bytes(b"not a zip")
    with pytest.raises(ConfigError, match="bad.npz"):
        OccupancyMap.load(tmp_path / "bad.npz")


def test_bad_input_errors():
    with pytest.raises(ConfigError, match=r"scene.usda: resolution: got 0"):
        build_occupancy_map(scene(source_path="scene.usda"), resolution=0)
    with pytest.raises(ConfigError, match="resolution"):
        build_occupancy_map(scene(), resolution=-0.1)
    no_floor = SceneDescription("nofloor", geoms=[box(1, 1, 1.0, 0.5, 0.5, 0.5)], source_path="nofloor.usda")
    with pytest.raises(SceneError, match=r"nofloor.usda: no floor"):
        build_occupancy_map(no_floor)
    no_collision = SceneDescription("empty", geoms=[Geom("box", pose(), (1, 1, 0.1), collides=False)],
                                    source_path="empty.usda")
    with pytest.raises(SceneError, match=r"empty.usda: no collision geometry"):
        build_occupancy_map(no_collision)


def test_thin_obstacles_between_cell_centres_are_not_lost():
    """A footprint that covers no cell centre (a floor lamp's pole, a towel rack's 1.5 cm bar, a
    standing mirror) marks the cells it overlaps instead of vanishing from the map."""
    bar = box(1.0125, 1.0, 0.4, 0.0075, 0.49, 0.1)  # x in [1.005, 1.02]: between centre columns
    pole = Geom("cylinder", pose(2.0, 1.5, 0.75), (0.015, 0.75, 0.0), label="floor_lamp")
    occ = build_occupancy_map(scene(bar, pole))
    bar_cells = {(r, 21) for r in range(11, 31)}  # x cell [1.00, 1.05); y from 0.51 to 1.49
    pole_cells = {(30, 40), (30, 41), (31, 40), (31, 41)}  # the disc straddles the corner at (2.0, 1.5)
    assert occupied_cells(occ) == bar_cells | pole_cells
    # and the dilated map keeps the body away from them
    nav = occ.dilate(0.18)
    assert not nav.is_free(np.array([[2.0, 1.5], [2.1, 1.5], [1.0125, 1.0]])).any()
