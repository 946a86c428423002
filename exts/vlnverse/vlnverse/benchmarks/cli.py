"""``vlnverse bench NAME``: run one benchmark and print its JSON figures."""
from __future__ import annotations

import argparse
import importlib
import json

from ..core.jobs import ENGINES
from . import BENCHMARKS


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Register the ``bench`` subcommand."""
    p = sub.add_parser("bench", help="run a speed benchmark and print JSON figures")
    p.add_argument("name", choices=BENCHMARKS)
    p.add_argument("--repeat", type=int, default=3, help="repetitions per figure (the best is reported; scale: back-to-back "
                                                          "repetitions, the median paired speed-up is reported)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="also write the JSON to this file")
    p.add_argument("--budget", type=float, default=None, help="CPU budget in seconds, for benchmarks that take one "
                                                             "(train: an optional cap per policy row)")
    p.add_argument("--epochs", type=int, default=None, help="train: IL epochs per policy row (default 15; the DAgger "
                                                           "round retrains for a fifth of them); transfer: the source "
                                                           "model's IL epochs (default 10); il: epochs per run (default 2)")
    p.add_argument("--policies", default=None, help="train: comma-separated policy rows to run (default: seq2seq,cma,rdp,"
                                                    "vlnbert,hnr,gama; also gama_multitask, GAMA on the five-task mix)")
    p.add_argument("--task-episodes", type=int, default=None,
                   help="train, gama_multitask: episodes of each other task per generated home (per shipped train scene "
                        "with --train-homes 0; default a quarter of the fine-grained count)")
    p.add_argument("--task-eval-episodes", type=int, default=None,
                   help="train, gama_multitask: episodes of each other task per val_unseen and per test scene "
                        "(default a quarter of --eval-episodes / --test-episodes)")
    p.add_argument("--train-homes", type=int, default=None,
                   help="train: N procedurally generated training homes (made on demand, reused; default 30); "
                        "0: the 6 shipped train scenes")
    p.add_argument("--episodes-per-home", type=int, default=None, help="train: episodes per generated home (default 8)")
    p.add_argument("--eval-episodes", type=int, default=None,
                   help="train: episodes per val_unseen and per test scene (default 50: 100 per split)")
    p.add_argument("--test-episodes", type=int, default=None, help="train: episodes per test scene (default: --eval-episodes)")
    p.add_argument("--val-seen-episodes", type=int, default=None,
                   help="train: with --train-homes, val_seen episodes kept of the homes' held-out ones (default 40)")
    p.add_argument("--encoder", choices=("pretrained", "cnn"), default="pretrained",
                   help="train: the rows' visual encoder: one pretrained on renders of the training homes, frozen "
                        "(default), or small CNNs trained from scratch by each row")
    p.add_argument("--language", default=None, metavar="v1|v2|v2-split",
                   help="train: the instructions' language (default v1, the shipped data's); v2: version 2 "
                        "(instruction_version 2); v2-split: version 2 with its template families partitioned, training "
                        "on one and evaluating also on val_unseen_language (the val_unseen paths in the other), "
                        "reporting each agent's paired SR drop")
    p.add_argument("--task", default=None, metavar="fine_grained|coarse_grained",
                   help="train: the rows' task (default fine_grained); coarse_grained with --language v2-split trains "
                        "on formal descriptions of the target and reports the drop on natural/casual ones (on a "
                        "benchmark its episodes are generated on the same held-out homes)")
    p.add_argument("--il-batching", choices=("bucketed", "padded"), default=None,
                   help="train: how IL batches of the rows that read episode lengths (CMA, Seq2Seq) are formed: "
                        "bucketed by length, unrolled packed (default, the recipe's) or padded to the longest "
                        "(an A/B of the two; the others always get plain permutations)")
    p.add_argument("--waypoint-epochs", type=int, default=None, metavar="N",
                   help="train, transfer: training epochs of the waypoint rows' predictor (VLN-BERT, HNR, GAMA) and of "
                        "Table 7's target-body predictor (default the recipe's 15; given, it joins the work identity: "
                        "docs/results/log.md measures 15 against 60)")
    p.add_argument("--no-strict", action="store_true", help="train: skip the Strict evaluation of the best row")
    p.add_argument("--no-dagger", action="store_true", help="train: IL only (no DAgger / online fine-tuning round)")
    p.add_argument("--no-transfer", action="store_true",
                   help="train: skip the VLN-BERT row's Table 7 stage (trained elsewhere, zero-shot here, fine-tuned "
                        "online: 'bench transfer' on this run's work folder; also skipped by --no-dagger)")
    p.add_argument("--render-only", action="store_true",
                   help="train: only the teacher cache's render-path figure, on the training episodes of --episodes "
                        "FILE (the first --limit), with --workers")
    p.add_argument("--work", default=None, help="train: the work folder (default --out without its suffix, else a new "
                                                "temporary one), e.g. to write a table carried with --jobs-from into "
                                                "another --out without preparing a new folder; transfer: the work "
                                                "folder of 'bench train --policies vlnbert --out FILE.json' (FILE)")
    p.add_argument("--body", default=None, help="transfer: the target body, a preset name or YAML path (default low_base); "
                                                  "lookahead: the body (default the checkpoint's)")
    p.add_argument("--checkpoint", default=None, help="lookahead: an hnr or gama checkpoint (vlnverse train)")
    p.add_argument("--episodes", default=None, help="lookahead: the held-out episodes (a JSONL file); train --render-only: "
                                                      "the training episodes to render")
    p.add_argument("--limit", type=int, default=None,
                   help="lookahead: at most N episodes, taken in turn from each scene (default all); train --render-only: "
                        "the first N episodes")
    p.add_argument("--rounds", type=int, default=None, help="transfer: online fine-tuning rounds (default 3)")
    p.add_argument("--round-epochs", type=int, default=None, help="transfer: retraining epochs per online round (default 4)")
    p.add_argument("--stop-weight", type=float, default=None,
                   help="transfer: weight of STOP steps in the online rounds' loss (il.stop_weight, default 1)")
    p.add_argument("--validation-every", type=int, default=None,
                   help="il: also validate every N epochs and report both batch paths' val_seen curves (default: no "
                        "validation; il also takes --policies (default cma), --train-homes (default 4), "
                        "--episodes-per-home, --val-seen-episodes, --validation-episodes, --encoder, --repeat)")
    p.add_argument("--validation-episodes", type=int, default=None,
                   help="train: val_seen episodes of each IL validation and of the DAgger round's, which select "
                        "best.pt (default 6); transfer: val_seen episodes validating each online round (default 6)")
    p.add_argument("--source-render", default=None, metavar="QUALITY:OBJECTS",
                   help="transfer: how the source's training frames are drawn (default default:primitives)")
    p.add_argument("--target-render", default=None, metavar="QUALITY:OBJECTS",
                   help="transfer: how everything in the target domain is drawn: evaluations, online rounds, the "
                        "predictor's panoramas (default default:primitives); differing from --source-render, "
                        "--body may be the source body (a visual shift alone)")
    p.add_argument("--adapt-predictor", action="store_true",
                   help="transfer: also train a waypoint predictor on the target body's panoramas, evaluate the source "
                        "with it zero-shot, and start the online rounds from that checkpoint")
    p.add_argument("--nproc", type=int, default=None,
                   help="train: data-parallel IL samples/s with 1 and with N ranks in one run (--budget: seconds per row, "
                        "default 60)")
    p.add_argument("--envs", type=int, default=None,
                   help="eval: environments of the batched learned-policy run (default 4)")
    p.add_argument("--workers", type=int, default=None,
                   help="train: processes for generating homes, rendering caches, collecting DAgger rollouts and "
                        "evaluating (default: the usable cores, shared among $VLNVERSE_JOBS; with --seeds: jobs run "
                        "at once, each with 1); lookahead: processes rendering its teacher store (default 1)")
    p.add_argument("--seeds", default=None, metavar="S,S,...",
                   help="train: one (row, seed) job per policy row and training seed on the parallel engine, resumable "
                        "in the work folder, aggregated over seeds (instead of the single run of --seed)")
    p.add_argument("--benchmark", default=None, metavar="NAME",
                   help="train: train on the benchmark's train pool, evaluate on its val_unseen and test episodes "
                        "(default: the shipped small splits)")
    p.add_argument("--engine", choices=ENGINES.names(), default="local",
                   help="train --seeds: local worker processes (default) or a Ray cluster (pip install 'vlnverse[ray]')")
    p.add_argument("--address", default=None,
                   help="train --seeds: Ray cluster HOST:PORT (from `ray start --head`) or auto; default a local Ray instance")
    p.add_argument("--rebuild", action="store_true",
                   help="train --seeds: start a work folder made by another benchmark, code version or settings afresh")
    p.add_argument("--jobs-from", action="append", default=None, metavar="FILE",
                   help="train --seeds: carry the finished jobs of an earlier run's results file (same benchmark, code "
                        "version and settings) into the work folder, e.g. to continue a table on another machine; "
                        "repeatable")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from ..core.io import write_json_atomic

    name = args.name
    if name == "train" and args.nproc is not None:  # data-parallel throughput (train_ddp)
        name = "train_ddp"
    module = importlib.import_module(f"vlnverse.benchmarks.{name}")
    figures = module.run(args)
    print(json.dumps(figures, indent=2, sort_keys=True))
    if args.out:
        write_json_atomic(args.out, figures)
    return 1 if figures.get("failed_jobs") else 0  # bench train --seeds: jobs that failed (also on stderr)
