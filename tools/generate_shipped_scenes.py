#!/usr/bin/env python3
"""Regenerate the homes shipped in ``scenes_usd/`` and their ``splits.json`` (deterministic).

The homes are written with their render meshes and baked light (``write_usd(..., objects="meshes")``:
collision primitives plus the meshes Isaac Sim draws, light maps under ``lightmaps/<scene>/``), so
Isaac Sim shows the homes MuJoCo draws with ``objects: meshes``; ``load_scene`` reads the same
description as from a primitives-only file (the default ``objects: primitives`` is unaffected).

    python tools/generate_shipped_scenes.py            # rewrite scenes_usd/
    python tools/generate_shipped_scenes.py --check    # exit 1 if the shipped files differ

Plain argparse, no console script: also runs under Isaac Sim's ``python.sh`` once the
repository's ``exts/vlnverse/`` folder is importable (it is added to ``sys.path`` below).
"""
from __future__ import annotations

import argparse
import filecmp
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "exts" / "vlnverse"))

#: Seeds of the shipped homes per split (scene id = ``home_<seed:04d>``). Chosen so that the
#: set spans 4–11 rooms, all nine room types and all 60 object categories.
SHIPPED_SEEDS = {
    "train": [1, 6, 9, 11, 12, 35],
    "val_unseen": [14, 16],
    "test": [2, 17],
}
#: How the shipped homes draw their objects (``write_usd``'s ``objects``).
OBJECTS = "meshes"
NOTE = ("Scene splits of the shipped procedural homes (disjoint). As in VLNVerse there is no val_seen "
        "scene list: val_seen episodes are drawn from the train scenes. Regenerate with "
        "'python tools/generate_shipped_scenes.py'.")


def generate(out_dir: Path, ext: str, progress: bool = True) -> list[Path]:
    """Write every shipped home with its render meshes and baked light, their textures
    (``textures/``), light maps (``lightmaps/``) and ``splits.json`` into ``out_dir``; returns the
    written paths."""
    from tqdm import tqdm

    from vlnverse.core.io import write_json_atomic
    from vlnverse.scenes.procgen import GENERATOR_VERSION, generate_home
    from vlnverse.scenes.usd_conventions import LIGHTMAP_DIR
    from vlnverse.scenes.usd_io import write_usd

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    jobs = [(split, seed) for split, seeds in SHIPPED_SEEDS.items() for seed in seeds]
    ids: dict[str, list[str]] = {split: [] for split in SHIPPED_SEEDS}
    for split, seed in tqdm(jobs, desc="shipped homes", unit="home", disable=not progress):
        desc = generate_home(seed)
        written.append(write_usd(desc, out_dir / f"{desc.scene_id}{ext}", objects=OBJECTS))
        ids[split].append(desc.scene_id)
    written += sorted((out_dir / "textures").glob("*.png"))  # the homes' shared material textures
    written += sorted((out_dir / LIGHTMAP_DIR).glob("*/*.png"))  # each home's baked light maps
    written.append(write_json_atomic(out_dir / "splits.json", {
        "description": NOTE, "generator_version": GENERATOR_VERSION,
        "seeds": SHIPPED_SEEDS, "splits": ids}))
    return written


def main(argv: list[str] | None = None) -> int:
    """Command-line entry point."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "scenes_usd", help="output folder (default: scenes_usd/)")
    parser.add_argument("--ext", default=".usd", choices=[".usd", ".usda", ".usdc"], help="file format (default: .usd crate)")
    parser.add_argument("--check", action="store_true", help="regenerate into a temporary folder and compare bytes")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    args = parser.parse_args(argv)
    if not args.check:
        paths = generate(args.out, args.ext, progress=not args.quiet)
        total = sum(p.stat().st_size for p in paths)
        print(f"wrote {len(paths)} files ({total / 1e6:.2f} MB) to {args.out}")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        fresh = generate(Path(tmp), args.ext, progress=not args.quiet)
        bad = [str(p.relative_to(tmp)) for p in fresh if not (args.out / p.relative_to(tmp)).is_file()
               or not filecmp.cmp(p, args.out / p.relative_to(tmp), shallow=False)]
        expected = {p.relative_to(tmp) for p in fresh}
        bad += sorted(str(p.relative_to(args.out)) + " (not generated)" for p in args.out.glob("lightmaps/*/*")
                      if p.relative_to(args.out) not in expected)
    if bad:
        print(f"differs from a fresh generation: {', '.join(bad)}", file=sys.stderr)
        return 1
    print(f"{len(fresh)} files identical to a fresh generation")
    return 0


if __name__ == "__main__":
    sys.exit(main())
