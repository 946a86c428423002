#!/usr/bin/env python3
"""Write the shipped benchmark definitions (``scenes_usd/benchmarks/<name>.json``), deterministically.

Each definition is made, not written by hand: its held-out homes and episodes are generated in a
temporary folder (and the train pool's homes, for their fingerprints) and what came out is
recorded (``vlnverse.tasks.benchmark.make_definition``). The same vlnverse gives the same bytes.

    python tools/make_benchmark.py proc-v1 [--workers 2]   # rewrite scenes_usd/benchmarks/proc-v1.json
    python tools/make_benchmark.py proc-v1 --check         # exit 1 if the shipped file differs

A new benchmark, or a changed recipe, is a new entry of ``RECIPES`` (a new name or version):
a published definition never changes.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "exts" / "vlnverse"))

#: How each shipped benchmark is made (``make_definition``'s arguments).
RECIPES = {
    "proc-v1": dict(
        name="proc-v1", version=1,
        description=("Procedural homes (4-12 rooms), fine-grained (R2R-style) instructions. Train pool: 400 homes "
                     "from seed 1000 (the training recipes' homes 1000.. are its first); val_unseen and test: 20 "
                     "held-out homes each, 5 episodes per home. Homes and episodes are made on first use "
                     "('vlnverse benchmark build proc-v1') and checked against the fingerprints below."),
        seed_ranges={"train": (1000, 1399), "val_unseen": (5000, 5019), "test": (6000, 6019)},
        episodes_per_home={"train": 8, "val_unseen": 5, "test": 5},
        task="fine_grained", body="r2r_ce", episode_seed=0, rooms=(4, 12)),
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", choices=sorted(RECIPES))
    parser.add_argument("--check", action="store_true", help="exit 1 if the shipped file differs")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--no-progress", action="store_true")
    args = parser.parse_args(argv)

    from vlnverse.tasks.benchmark import benchmarks_dir, definition_text, make_definition

    path = benchmarks_dir() / f"{args.name}.json"
    text = definition_text(make_definition(**RECIPES[args.name], workers=args.workers, progress=not args.no_progress,
                                           path=path))
    if args.check:
        same = path.is_file() and path.read_text(encoding="utf-8") == text
        print(f"{path}: {'matches' if same else 'differs from'} what this machine makes")
        return 0 if same else 1
    from vlnverse.core.io import write_text_atomic

    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, text)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
