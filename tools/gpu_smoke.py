"""GPU smoke check: a tiny ``vlnverse bench train`` (the CMA row, 1 IL epoch, its DAgger round, a few
episodes) with ``device: auto``, then the device it recorded. On a machine with CUDA every row must
have run there: exit status 1 otherwise (and 2 when the bench itself failed).

    python tools/gpu_smoke.py [--out DIR] [--policies cma]

Prints one JSON object: the bench's ``device_info`` and each row's, its IL / DAgger samples/s and
seconds; the whole bench JSON is ``DIR/smoke.json`` (default a temporary folder).
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="work folder (default: a temporary one)")
    parser.add_argument("--policies", default="cma", help="bench train rows (default cma)")
    args = parser.parse_args()
    out = Path(args.out or tempfile.mkdtemp(prefix="vlnverse-gpu-smoke-"))
    out.mkdir(parents=True, exist_ok=True)
    result = out / "smoke.json"
    command = [sys.executable, "-m", "vlnverse", "bench", "train", "--policies", args.policies, "--epochs", "1",
               "--train-homes", "2", "--episodes-per-home", "4", "--val-seen-episodes", "4", "--validation-episodes", "2",
               "--eval-episodes", "2", "--no-strict", "--no-transfer", "--out", str(result)]
    print("running:", " ".join(command), file=sys.stderr)
    if subprocess.run(command, stdout=subprocess.DEVNULL).returncode != 0 or not result.is_file():
        print(f"bench train failed (its log is above); work folder {out}", file=sys.stderr)
        return 2
    figures = json.loads(result.read_text(encoding="utf-8"))
    rows = {name: {"device_info": f.get("device_info"), "samples_per_s": f.get("samples_per_s"),
                   "seconds_train": f.get("seconds_train")} for name, f in figures["rows"].items()}
    report = {"device_info": figures.get("device_info"), "rows": rows, "seconds": figures.get("seconds"),
              "json": str(result)}
    print(json.dumps(report, indent=2))
    cuda = (figures.get("device_info") or {}).get("cuda") is not None
    off = [n for n, r in rows.items() if not str((r["device_info"] or {}).get("device", "")).startswith("cuda")]
    if cuda and off:
        print(f"CUDA is present but rows {off} trained elsewhere", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
