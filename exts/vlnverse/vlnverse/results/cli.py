"""``vlnverse results compare RUN_A RUN_B [...]``, ``vlnverse results page RUN... --out DIR`` and
``vlnverse results best RESULTS...``."""
from __future__ import annotations

import argparse

RUN_HELP = ("eval run folders (or their summary.json / episodes.jsonl) and bench train JSON files, "
            "of results format 2")

SPLIT_HELP = "only the runs of this split (repeat for several; default: every split)"
ACROSS_HELP = ("pair runs whose protocols differ in this top-level protocol field: the condition compared, e.g. "
               "instruction_language (the same paths in two wordings); repeat or comma-separate for several")


def add_commands(sub: argparse._SubParsersAction) -> None:
    """Register ``results compare``, ``results page`` and ``results best``."""
    p = sub.add_parser("results", help="compare runs pairwise and generate results pages from results files")
    rsub = p.add_subparsers(dest="results_command", metavar="ACTION")
    rsub.required = True
    c = rsub.add_parser("compare", help="paired SR / SPL differences of runs on the same episodes, with clustered "
                                        "(by home) 95%% intervals and the probability of improvement")
    c.add_argument("runs", nargs="+", metavar="RUN", help=RUN_HELP)
    c.add_argument("--out", default=None, help="folder for compare.json and compare.png")
    c.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    c.add_argument("--across", action="append", default=[], metavar="FIELD", help=ACROSS_HELP)
    c.add_argument("--split", action="append", default=[], metavar="SPLIT", help=SPLIT_HELP)
    c.set_defaults(func=_compare)
    g = rsub.add_parser("page", help="a results page (index.md + PNGs) generated from results files, with the "
                                     "paper's numbers beside ours")
    g.add_argument("runs", nargs="+", metavar="RUN", help=RUN_HELP)
    g.add_argument("--out", required=True, help="the page's folder, e.g. docs/results/NAME/")
    g.add_argument("--name", default=None, help="the page's title (default: the folder's name)")
    g.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    g.add_argument("--across", action="append", default=[], metavar="FIELD", help=ACROSS_HELP)
    g.add_argument("--split", action="append", default=[], metavar="SPLIT", help=SPLIT_HELP)
    g.set_defaults(func=_page)
    b = rsub.add_parser("best", help="the row and seed a held-out split picks from bench train results files (best "
                                     "mean over seeds, then the best seed), with the checkpoint to ship")
    b.add_argument("runs", nargs="+", metavar="RESULTS", help="bench train --seeds JSON files")
    b.add_argument("--split", default="val_unseen", help="the split that selects (default val_unseen)")
    b.add_argument("--mode", default="telhop", help="collision mode (default telhop)")
    b.add_argument("--metric", default="SR", help="the selecting metric (default SR; ties: SPL, then nDTW)")
    b.add_argument("--work", default=None, help="the bench work folder, where it is not the files' work_dir")
    b.add_argument("--out", default=None, help="write the choice as JSON here")
    b.add_argument("--seed", type=int, default=0, help="bootstrap seed (default 0)")
    b.set_defaults(func=_best)


def across_fields(args: argparse.Namespace) -> tuple[str, ...]:
    """``--across`` as a tuple of protocol field names (repeated or comma-separated; none: ``()``)."""
    from ..core.errors import ConfigError

    fields = tuple(f.strip() for given in args.across for f in given.split(","))
    if any(not f for f in fields):
        raise ConfigError(f"got {args.across!r}", field="--across", expected="protocol field names, e.g. instruction_language")
    return fields


def _compare(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..core.errors import ConfigError
    from .compare import compare_runs, compare_text, load_runs, of_splits

    runs = of_splits(load_runs(args.runs), tuple(args.split))
    if len(runs) < 2:
        raise ConfigError(f"got {len(runs)} run(s)", field="RUN", expected="at least two runs to compare")
    result = compare_runs(runs, strict=not any(r.bench for r in runs), seed=args.seed, across=across_fields(args))
    print(compare_text(result), end="")
    if args.out:
        from ..core.io import replace_output_dir, write_json_atomic
        from .compare import plot_comparisons

        with replace_output_dir(args.out, command="results compare") as tmp:
            write_json_atomic(tmp / "compare.json", result)
            plot_comparisons(result, tmp / "compare.png")
        print(f"wrote {Path(args.out) / 'compare.json'}, {Path(args.out) / 'compare.png'}")
    return 0


def _page(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .page import build_page

    out = Path(args.out)
    data = build_page(args.runs, args.name or out.resolve().name, out, seed=args.seed, across=across_fields(args),
                      splits=tuple(args.split))
    print(f"wrote {out / 'index.md'} ({len(data['groups'])} group(s)) and its PNGs")
    return 0


def _best(args: argparse.Namespace) -> int:
    from .best import best_checkpoint, best_lines

    result = best_checkpoint(args.runs, split=args.split, mode=args.mode, metric=args.metric, work=args.work,
                             seed=args.seed)
    print("\n".join(best_lines(result)))
    if args.out:
        from ..core.io import write_json_atomic

        write_json_atomic(args.out, result)
        print(f"wrote {args.out}")
    return 0
