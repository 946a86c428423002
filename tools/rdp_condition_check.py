"""Does a trained RDP follow its condition? (``vlnverse.learn.rdp.condition_check``)

Teacher-forced on the run's own training cache (its ``summary.json`` names the checkpoint and the
feature or observation cache): the heading error of each sampled first action against the
teacher's, with the true conditions and with the conditions shuffled across states. Prints the
JSON and writes it to ``RUN/condition_check.json``.

    PYTHONPATH=exts/vlnverse python3 tools/rdp_condition_check.py runs/train/rdp_fine_grained [--episodes 96]
"""
import argparse
import json
import sys
from pathlib import Path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="an RDP training run folder (with summary.json)")
    parser.add_argument("--checkpoint", type=Path, help="default: the run's selected checkpoint")
    parser.add_argument("--episodes", type=int, default=96)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)

    import torch

    from vlnverse.core.io import write_json_atomic
    from vlnverse.learn.checkpoint import policy_from_checkpoint, read_checkpoint
    from vlnverse.learn.rdp import RDPPolicy, condition_check
    from vlnverse.learn.store import StepStore

    torch.set_num_threads(1)
    summary_file = args.run / "summary.json"
    if not summary_file.is_file():
        sys.exit(f"{summary_file}: not found (expected the summary.json of a `vlnverse train` run)")
    summary = json.loads(summary_file.read_text(encoding="utf-8"))
    checkpoint = str(args.checkpoint or summary.get("checkpoint") or args.run / "best.pt")
    cache = (summary.get("feature_cache") or summary.get("cache") or {}).get("path")
    if not cache or not Path(cache).is_dir():
        sys.exit(f"{summary_file}: field feature_cache.path / cache.path: expected an existing cache folder, got {cache!r}")
    policy = policy_from_checkpoint(read_checkpoint(checkpoint), path=checkpoint, device="cpu")
    if not isinstance(policy, RDPPolicy):
        sys.exit(f"{checkpoint}: policy {policy.name!r}, expected rdp")
    result = {"checkpoint": checkpoint, "cache": cache, **condition_check(policy, StepStore(cache), episodes=args.episodes, seed=args.seed)}
    write_json_atomic(args.run / "condition_check.json", result)
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
