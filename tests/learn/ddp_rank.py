"""One rank of the distributed-training tests, launched N times by ``vlnverse.learn.distributed.launch``
(torchrun): runs the jobs of a JSON spec (``small_config`` keyword sets) on the corridor scene and
writes what each job gave to ``<results>.rank<R>.json`` (outside the runs' folders)."""
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "eval"), str(HERE)]

from eval_scenes import corridor_scene  # noqa: E402
from learn_helpers import small_config  # noqa: E402


def main() -> None:
    import vlnverse.learn.distributed as D
    from vlnverse.core.errors import VLNVerseError
    from vlnverse.learn.trainer import run_training
    from vlnverse.sim.body import load_body
    from vlnverse.tasks.base import context_from_description

    spec = json.loads(Path(sys.argv[1]).read_text())
    rank = int(os.environ["RANK"])
    pids = Path(spec["results"] + ".pids")
    pids.mkdir(exist_ok=True)
    (pids / f"rank{rank}.try{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}").write_text(str(os.getpid()))
    ctx = context_from_description(corridor_scene(), load_body("r2r_ce"), 0.05, scene_path="corridor.usda")
    results = []
    real_fingerprint = D.code_fingerprint
    for job in spec["jobs"]:
        kw = dict(job["kw"])
        if rank == 1:
            kw.update(job.get("rank1", {}))
        D.code_fingerprint = (lambda: "0.0.0+learn0:other") if (rank == 1 and job.get("rank1_code")) else real_fingerprint
        cfg = small_config(job["out"], spec["episodes"], policy=job.get("policy", "seq2seq"), **kw)
        try:
            summary = run_training(cfg, scene_loader=lambda *a: ctx, progress=False, report=lambda s: None)
            results.append({"ok": True, **{k: summary.get(k) for k in ("world_size", "effective_batch", "distributed",
                                                                          "cache", "il")}})
        except VLNVerseError as exc:
            results.append({"ok": False, "type": type(exc).__name__, "error": str(exc)})
    Path(f"{spec['results']}.rank{rank}.json").write_text(json.dumps(results))


if __name__ == "__main__":
    main()
