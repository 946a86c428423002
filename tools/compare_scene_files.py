#!/usr/bin/env python3
"""Check that two folders of homes describe the same scenes (e.g. ``scenes_usd/`` before and after
a regeneration that only changes how they are drawn).

    python tools/compare_scene_files.py OLD_DIR NEW_DIR [--bodies r2r_ce,stretch] [--work DIR]

For every ``*.usd`` in OLD_DIR, the file of the same name in NEW_DIR must load (``load_scene``, no
parse cache) to the same description (every geom's fields and arrays, objects, rooms, doors,
metadata; content hashes, portable too) and give, for each body, the same occupancy, navigable and
room maps and scene graph (``compute_scene_maps`` without its cache; saved files compared byte for
byte, ``.npz`` arrays except ``source``, the path read). Prints one line per home; exit 1 when one
differs. Episodes, splits and checkpoints made on the old files then stay valid for the new ones.
"""
from __future__ import annotations

import argparse
import filecmp
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "exts" / "vlnverse"))


def _same_file(x: Path, y: Path) -> bool:
    """Same bytes, or for ``.npz`` the same arrays except ``source`` (the path the scene was read from)."""
    import numpy as np

    if x.suffix != ".npz":
        return filecmp.cmp(x, y, shallow=False)
    with np.load(x, allow_pickle=False) as a, np.load(y, allow_pickle=False) as b:
        return sorted(a.files) == sorted(b.files) and all(
            k == "source" or (a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k])) for k in a.files)


def description_difference(a, b) -> str | None:
    """The first field in which two ``SceneDescription``s differ, or None."""
    import numpy as np

    if (a.scene_id, a.floor_z, a.metadata) != (b.scene_id, b.floor_z, b.metadata):
        return "scene id, floor or metadata"
    if len(a.geoms) != len(b.geoms):
        return "number of geoms"
    for i, (g, h) in enumerate(zip(a.geoms, b.geoms)):
        for f in ("kind", "label", "instance_id", "color", "collides", "friction", "material", "name"):
            if getattr(g, f) != getattr(h, f):
                return f"geom {i} {f}"
        for f in ("transform", "size", "vertices", "faces"):
            x, y = getattr(g, f), getattr(h, f)
            if (x is None) != (y is None) or (x is not None and not np.array_equal(np.asarray(x), np.asarray(y))):
                return f"geom {i} {f}"
    for name in ("objects", "rooms", "doors"):
        if repr([vars(o) for o in getattr(a, name)]) != repr([vars(o) for o in getattr(b, name)]):
            return name
    return None


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("old", type=Path)
    parser.add_argument("new", type=Path)
    parser.add_argument("--bodies", default="r2r_ce,stretch,turtlebot4,low_base", help="comma-separated body presets")
    parser.add_argument("--work", type=Path, default=None, help="where the maps are saved (default: a temp folder)")
    args = parser.parse_args(argv)
    os.environ["VLNVERSE_SCENE_CACHE"] = "0"
    from vlnverse.scenes.description import scene_content_hash
    from vlnverse.scenes.maps import compute_scene_maps
    from vlnverse.scenes.usd_io import load_scene

    olds = sorted(args.old.glob("*.usd"))
    if not olds:
        print(f"{args.old}: no .usd files", file=sys.stderr)
        return 2
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        work = args.work or Path(tmp)
        for old in olds:
            new = args.new / old.name
            if not new.is_file():
                print(f"{old.stem}  missing in {args.new}")
                bad += 1
                continue
            a, b = load_scene(old), load_scene(new)
            diff = description_difference(a, b)
            ok = diff is None and scene_content_hash(a) == scene_content_hash(b) \
                and scene_content_hash(a, portable=True) == scene_content_hash(b, portable=True)
            line = [old.stem, "description same" if ok else f"description DIFFERS ({diff or 'content hash'})"]
            for body in args.bodies.split(","):
                saved = [compute_scene_maps(d, body, cache=False).save(work / old.stem / body / tag)
                         for tag, d in (("old", a), ("new", b))]
                same = all(_same_file(Path(saved[0][k]), Path(saved[1][k])) for k in saved[0])
                line.append(f"{body}: maps and graph {'same' if same else 'DIFFER'}")
                ok &= same
            line.append(f"{old.stat().st_size} -> {new.stat().st_size} B")
            print("  ".join(line), flush=True)
            bad += not ok
    print("every home the same" if not bad else f"{bad} of {len(olds)} homes differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
