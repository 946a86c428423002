"""``vlnverse bench train``: each policy row (``recipe.ROWS``: Seq2Seq, CMA, RDP, VLN-BERT, HNR, GAMA,
each with the recipe of its ``tasks/train/<row>_fine_grained.yaml``) trained by imitation, then one DAgger round (VLN-BERT: one online fine-tuning round), each with the same
budget (``--epochs`` IL epochs per policy, default ``IL_EPOCHS``; the DAgger round retrains for
``DAGGER_EPOCH_SHARE`` of them; ``--budget SECONDS`` optionally caps each row's wall-clock time:
IL 50%, DAgger retraining 10%), evaluated on the same splits against random and forward-only.
An epoch budget gives the same weights on any machine load; the seconds each row took are reported.

Steps:
1. Data. Training homes: ``--train-homes N`` (default ``TRAIN_HOMES``) procedurally generated
   homes (``learn.homes``: seeds 1000 …, ``--episodes-per-home`` each, generated on demand into the
   work folder's cache; ``VAL_SEEN_HOMES_EPISODES`` of their held-out episodes as ``val_seen``:
   same homes, disjoint episodes), the recipe of ``tasks/train/cma_fine_grained.yaml``; or with
   ``--train-homes 0`` the 6 shipped ``train`` scenes (``fine_grained`` episodes, ``--seed``, a
   quarter held out as ``val_seen``). Held-out homes: ``--eval-episodes`` episodes on each shipped
   ``val_unseen`` scene (``--seed`` + 1) and ``--test-episodes`` (default the same) on each
   ``test`` scene (``--seed`` + 2). The split guard refuses training homes shared with them.
   ``--language v2`` generates every split with the version-2 instructions; ``v2-split`` also
   partitions their template families: all splits in family 0, and ``val_unseen_language``: the
   val_unseen paths in family-1 wording (``tasks.instructions.languages.LANGUAGES``).
2. Render paths (``render``): the teacher cache of the first ``RENDER_COMPARE_EPISODES`` training
   episodes built in one run by physics (the rollout renders every sensor), teleport
   (``learn.collect``) with the reference full depth pass and as shipped, and teleport on
   ``--workers`` processes, twice each in alternation, best of each (``compare_render_paths``) --
   frames/s, their ratios, and whether labels, poses and frames agree (``render``). ``--render-only
   --episodes FILE [--limit N]`` measures only this, on any training episodes.
3. Encoder (``--encoder pretrained``, default): one visual encoder pretrained on renders of the
   training homes (``row.pretrain_encoder``: ``learn.encoder.RECIPE_PRETRAINING``), frozen and shared by every row
   that reads RGB-D frames, which then train from its cached features; ``--encoder cnn``: each row
   trains small CNNs from scratch.
4. Per policy row: the teacher cache (RGB-D 64x64, Tel-Hop, teleport-rendered for the discrete
   oracle teacher), IL on every instruction of each path (the policy's loss, Adam at the row's
   rate and batch size, weights averaged with decay ``IL_EMA``: ``il.ema``), validated on
   ``--validation-episodes`` (``VALIDATION_EPISODES``) val_seen episodes every ``VALIDATION_EVERY`` epochs and at the end: ``best.pt`` is the best val_seen nDTW (a continuous
   score; SR ties at 0 early on). Then one DAgger round from it (β = p = 0.5 on a quarter of the
   training episodes). The waypoint rows (VLN-BERT, HNR, GAMA) share one waypoint predictor
   trained first on panoramas of the train scenes (outside the budget). ``--no-dagger``: IL only.
   The ``gama`` row is single-task (fine-grained, the same data as every row). The
   ``gama_multitask`` row (only with ``--policies gama_multitask``: about twice the ``gama`` row's
   training and five times its held-out evaluation) is the same GAMA, config, budget, predictor and DAgger
   round trained as one model on the task mix of ``tasks/train/gama_multitask.yaml``
   (``recipe.multitask_tasks``: fine-grained, coarse-grained, visual-reference, long-horizon,
   object-goal, each with that config's observation setup: visual-reference sees a monocular 90°
   camera). Its fine-grained task is the rows' data; each other task is generated on the same
   training homes (``--task-episodes`` per home or shipped train scene, val_seen held out alike)
   and on the same val_unseen / test scenes (``--task-eval-episodes`` per scene); both default to
   ``TASK_SHARE`` of the rows' counts (``data.task_counts``, ``data.multitask_data``). Validation selects
   by the mean over tasks of val_seen nDTW.
5. Evaluate random, forward-only (they read no frames: evaluated without sensors, same metrics),
   and per row IL (``<row>_il``, the val_seen-selected checkpoint) and IL + DAgger
   (``<row>_il_dagger``) on all of val_seen, val_unseen and test under Tel-Hop; the row agent with
   the best val_seen SR (ties: nDTW) also under Strict on val_unseen and test. val_unseen and test
   are touched only here (``--no-strict``: Tel-Hop only, to save time). With the VLN-BERT row, its
   online fine-tuning is also measured as the paper's Table 7 does (``TABLE7_STAGE``: a model
   trained elsewhere, zero-shot in a new domain, then fine-tuned online there; ``--no-transfer``
   or ``--no-dagger`` skips it). The multi-task row's
   agents also on each other task's val_unseen and test (Tel-Hop, the task's settings and
   observation setup; ``evaluation.evaluate_multitask``; val_seen per task: the trainer's ``tasks.json``),
   with what the row's policy reports on those runs' records (``VLNPolicy.multitask_report``,
   files in ``<work>/eval/<agent>/``: GAMA's experts fired per task and decision step).
6. The table (``"format": 2``): per agent, split and mode SR / SPL / nDTW with a 95% percentile-bootstrap CI
   (``bootstrap_ci``, seeded, ``BOOTSTRAP_SAMPLES`` resamples of the episodes) beside the
   clustered one (homes, then episodes within them: ``core.stats``, docs/statistics.md), the
   episode and home counts, the training seeds, per-home results, the MDE of SR and the eval
   protocol (``row_design``); per split its homes and episodes (``design``); between rows on the
   same split and mode, paired SR / SPL differences with clustered CIs and the probability of
   improvement, "A > B" only when the SR interval excludes 0, else "not separated"
   (``comparisons``, ``pairwise_comparisons``); with ``--language v2-split`` every agent's paired
   SR drop val_unseen - val_unseen_language, clustered by home (``language_drop``,
   ``report.language_drops``); the episode
   count (a task column with the multi-task row; its per-task results, episode counts and expert
   usage under ``multitask``); ``--out FILE.json`` also writes ``FILE.png`` (learning curves and
   the table).

With ``--budget``, a budget too small for one IL (or DAgger) epoch stops with one line giving the
smallest ``--budget`` that fits. Torch runs on CUDA when present (``device: auto``), else on 1 CPU
thread (fastest on a loaded shared machine); the figures state the device and threads, the
machine's load average and the seconds of every phase. The work folder is ``FILE`` without its suffix.

Modules: ``options`` (the command line, checked once: ``TrainBenchOptions``), ``recipe`` (the
rows and what they share), ``data`` (episodes), ``row`` (one row for one seed), ``evaluation``,
``report`` (tables, comparisons, figures), ``render`` (the render-path figure), ``single`` (the
run without ``--seeds``) and ``jobs`` (``--seeds``: (row, seed) jobs on the parallel engine).
"""
from __future__ import annotations

from typing import Any


def run(args: Any) -> dict:
    """``vlnverse bench train``: the options of ``args`` checked before any work, then the
    render-path figure alone (``--render-only``), the (row, seed) jobs (``--seeds``) or the single
    run; returns the JSON-ready figures."""
    from vlnverse.learn.agent import require_torch

    from .options import TrainBenchOptions

    require_torch("vlnverse bench train", field=None)
    options = TrainBenchOptions.from_args(args)
    if options.render_only:
        from .render import render_only

        return render_only(options)
    if options.seeds is not None:
        from .jobs import run as run_jobs

        return run_jobs(options)
    from .single import run as run_single

    return run_single(options)
