"""One content hash of a scene (``scenes.description.scene_content_hash``): its two byte layouts
are pinned (the maps cache key and the split guard's fingerprints written before they were one
function), and each tells what it should."""
from __future__ import annotations

import dataclasses

import numpy as np

from vlnverse.scenes.description import Door, Geom, Room, SceneDescription, SceneObject, scene_content_hash

#: computed by the two functions this one replaced (scenes.maps.scene_content_hash, learn.homes.home_fingerprint)
GOLDEN_FULL = "87fd8e7f326463e7564c458fd45b030e3636bc8c1e31338f98340b631478d6ef"
GOLDEN_PORTABLE = "95463eb4a1907fe7f944b91e62d98b0339a51e3f2c433a51c8e854233eeb3437"


def _scene(scene_id: str = "home_x", prim: str = "/World/table_1") -> SceneDescription:
    t = np.eye(4)
    t[:3, 3] = [1.25, -0.5, 0.4]
    cube = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1.0]]) * 0.3
    geoms = [Geom("box", np.eye(4), np.array([2.0, 1.5, 0.05]), label="floor", instance_id=1),
             Geom("box", t, np.array([0.6, 0.4, 0.02]), label="table", instance_id=2),
             Geom("mesh", t, label="vase", instance_id=3, collides=False, vertices=cube,
                  faces=np.array([[0, 1, 2], [0, 1, 3]]))]
    objects = [SceneObject(2, "table", prim, np.array([0.65, -0.9, 0.0]), np.array([1.85, -0.1, 0.42]), [1],
                           room_id=0, attributes={"color": "oak"})]
    rooms = [Room(0, "kitchen", np.array([[-2.0, -1.5], [2.0, -1.5], [2.0, 1.5], [-2.0, 1.5]]), name="kitchen_0")]
    doors = [Door(0, (0, 1), np.array([2.0, 0.0]), 0.9, "y")]
    return SceneDescription(scene_id, geoms, objects, rooms, doors, floor_z=0.0, source_path="/a/home_x.usd")


def test_both_layouts_keep_the_bytes_of_the_keys_already_written():
    desc = _scene()
    assert scene_content_hash(desc) == GOLDEN_FULL
    assert scene_content_hash(desc, portable=True) == GOLDEN_PORTABLE


def test_the_full_hash_sees_ids_and_paths_the_portable_one_does_not():
    desc = _scene()
    renamed = _scene("gen_00042", "/World/Furniture/table_7")
    moved_file = dataclasses.replace(_scene(), source_path="/elsewhere/home_x.usdc")
    assert scene_content_hash(moved_file) == scene_content_hash(desc)  # never the file path
    assert scene_content_hash(renamed) != scene_content_hash(desc)
    assert scene_content_hash(renamed, portable=True) == scene_content_hash(desc, portable=True)
    # float32 noise of a USD round trip (below 0.1 mm) leaves the portable hash alone, not the full one
    noisy = _scene()
    noisy.geoms[1].transform = noisy.geoms[1].transform + 1e-7
    assert scene_content_hash(noisy, portable=True) == scene_content_hash(desc, portable=True)
    assert scene_content_hash(noisy) != scene_content_hash(desc)


def test_a_content_change_changes_both():
    desc, moved = _scene(), _scene()
    moved.geoms[1].transform[0, 3] += 0.01
    relabelled = _scene()
    relabelled.rooms[0].room_type = "bedroom"
    for other in (moved, relabelled):
        assert scene_content_hash(other) != scene_content_hash(desc)
        assert scene_content_hash(other, portable=True) != scene_content_hash(desc, portable=True)
