"""Data-parallel training over N ranks with ``torch.distributed`` (DistributedDataParallel).

``torchrun --nproc_per_node N -m vlnverse train CONFIG`` (or ``vlnverse train CONFIG --nproc N``,
which runs the same through ``torch.distributed.run``; ``launch``) starts N processes; each finds
its rank in the environment torchrun sets (or an already initialised process group, e.g. Ray
Train's ``TorchTrainer``) and the trainer (``learn.trainer``) talks to the others only through a
``Ranks`` object (``current``); a plain run gets ``LocalRank``, whose every call is the
single-process behaviour.

- **Batches.** The episode order of an epoch is the single process's (seed, epoch); a batch of
  ``effective_batch`` episodes is split among the ranks (rank r takes every N-th episode from r)
  and each rank reads only its episodes from the memory-mapped observation / feature cache. The
  loss of every rank is normalised by the (step-weight) sum of the whole batch (one all-reduce of
  a few numbers), and DDP averages the gradients, so a step equals the single-process step on
  the concatenated batch (float rounding aside). A rank left without an episode (the last batch
  of an epoch) runs one of the batch's with weight 0.
- **One writer.** Rank 0 alone builds caches and datasets (the others wait, then open what it
  built: ``main_first``), writes ``config.json``, checkpoints, ``train_log.csv``, TensorBoard and
  ``summary.json``, validates (``main_only``) and collects DAgger rollouts on the parallel engine.
- **Agreement.** Before anything else every rank's config and code fingerprint are gathered;
  a rank that differs is one ``ConfigError`` line on every rank (``check_agreement``).
"""
from __future__ import annotations

import atexit
import hashlib
import os
from datetime import timedelta
from pathlib import Path
from typing import Any, Callable

import torch

from ..core.errors import ConfigError, VLNVerseError
from .config import BACKENDS, BATCH_MODES, LR_SCALINGS  # noqa: F401  (re-exported)



def scaling(cfg: Any, world_size: int) -> dict[str, Any]:
    """The run's batch and rate: ``world_size``, ``batch_per_rank`` (the largest share),
    ``effective_batch`` (episodes per optimizer step over all ranks), ``lr`` (``il.lr`` scaled by
    ``distributed.lr_scaling`` with effective batch / ``il.batch_size``) and ``lr_scaling``."""
    d, bs = cfg.distributed, cfg.il.batch_size
    effective = bs if d.batch == "global" else bs * world_size
    ratio = effective / bs
    factor = {"none": 1.0, "linear": ratio, "sqrt": ratio ** 0.5}[d.lr_scaling]
    return {"world_size": world_size, "batch": d.batch, "batch_per_rank": -(-effective // world_size),
            "effective_batch": effective, "base_lr": cfg.il.lr, "lr_scaling": d.lr_scaling, "lr": cfg.il.lr * factor}


def batch_norm(policy: Any, batch: dict[str, Any]) -> torch.Tensor:
    """What a policy's loss averages over: the step weights' sum (``uses_step_weights``) or the
    number of valid steps."""
    w = batch["weights"]
    return w.sum() if policy.uses_step_weights else (w > 0).sum().to(w.dtype)


def code_fingerprint() -> str:
    """``code_version()`` and the sha256 of the package's Python sources (ranks on other nodes
    must run the same code)."""
    from . import code_version

    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256(code_version().encode())
    for path in sorted(root.rglob("*.py")):
        h.update(str(path.relative_to(root)).encode())
        h.update(path.read_bytes())
    return f"{code_version()}:{h.hexdigest()[:16]}"


def _differences(a: Any, b: Any, prefix: str = "") -> list[str]:
    """Dotted keys where two JSON values differ."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in sorted(set(a) | set(b), key=str):
            out += _differences(a.get(k), b.get(k), f"{prefix}.{k}" if prefix else str(k))
        return out
    return [] if a == b else [prefix or "config"]


def _at(data: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        data = data.get(part) if isinstance(data, dict) else None
    return data


class CollectiveError(VLNVerseError):
    """An error every rank raised together (rank 0's, or a disagreement): ranks > 0 need not print it."""


class LocalRank:
    """One process: every call is what the trainer does without torch.distributed."""

    rank, world_size, is_main, backend = 0, 1, True, None

    def check_agreement(self, cfg: Any) -> None:
        """Nothing to agree with."""

    def device(self, device: torch.device) -> torch.device:
        """The configured device."""
        return device

    def main_first(self, fn: Callable[[], Any], *, others: Callable[[], Any] | None = None) -> Any:
        """``fn()``."""
        return fn()

    def main_only(self, fn: Callable[[], Any]) -> Any:
        """``fn()``."""
        return fn()

    def share(self, value: Any) -> Any:
        """``value``."""
        return value

    def shard(self, indices: Any) -> Any:
        """All of the batch."""
        return indices

    def model(self, policy: Any, objective: Callable) -> Callable:
        """``objective(policy, batch)`` as a function of the batch."""
        return lambda batch: objective(policy, batch)

    def whole_batch(self, policy: Any, loss: torch.Tensor, batch: dict, correct: float, steps: float):
        """(loss to back-propagate, its value, correct, steps) of the batch."""
        return loss, loss.item(), correct, steps

    def any(self, flag: bool) -> bool:
        """``flag``."""
        return bool(flag)


class Ranks(LocalRank):
    """Rank ``rank`` of ``world_size`` in the default process group (see the module docstring)."""

    def __init__(self, rank: int, world_size: int, local_rank: int, backend: str):
        self.rank, self.world_size, self.local_rank, self.backend = rank, world_size, local_rank, backend
        self.is_main = rank == 0
        self._ddp: tuple[int, Any] | None = None
        self._placeholder = False

    # ---------------------------------------------------------------- collectives on Python values

    def _broadcast(self, value: Any = None) -> Any:
        import torch.distributed as dist

        box = [value]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    def barrier(self) -> None:
        """Wait for every rank."""
        import torch.distributed as dist

        dist.barrier()

    def check_agreement(self, cfg: Any) -> None:
        """Gather every rank's config and code fingerprint; a rank that differs from rank 0 is a
        ``CollectiveError`` (one line, the same on every rank) naming the rank and the fields."""
        import torch.distributed as dist

        mine = {"config": cfg.to_dict(), "code": code_fingerprint()}
        everyone: list[Any] = [None] * self.world_size
        dist.all_gather_object(everyone, mine)
        ref = everyone[0]
        for r, got in enumerate(everyone):
            if got["code"] != ref["code"]:
                raise CollectiveError(str(ConfigError(
                    f"ranks disagree on the code version: rank {r} runs {got['code']}, rank 0 {ref['code']}",
                    field="code_version", expected="the same vlnverse version and sources on every node")))
            diff = _differences(ref["config"], got["config"])
            if diff:
                shown = ", ".join(f"{k}={_at(got['config'], k)!r} (rank 0: {_at(ref['config'], k)!r})" for k in diff[:3])
                raise CollectiveError(str(ConfigError(
                    f"ranks disagree on the config: rank {r} has {shown}", field=diff[0],
                    expected="the same config and overrides on every rank")))

    def device(self, device: torch.device) -> torch.device:
        """``cuda:<local rank>`` for a CUDA device (one GPU per rank), else ``device``."""
        if device.type == "cuda":
            device = torch.device("cuda", self.local_rank)
            torch.cuda.set_device(device)
        return device

    def _run_shared(self, fn: Callable[[], Any]) -> tuple[Any, Any]:
        """Rank 0 runs ``fn``; every rank learns whether it failed (its one-line message)."""
        if self.is_main:
            try:
                out = fn()
            except BaseException as exc:
                self._broadcast({"error": str(exc) if isinstance(exc, VLNVerseError) else
                                 f"rank 0 failed: {type(exc).__name__}: {exc}"})
                raise
            self._broadcast({"error": None})
            return out, None
        status = self._broadcast()
        if status["error"] is not None:
            raise CollectiveError(status["error"])
        return None, status

    def main_first(self, fn: Callable[[], Any], *, others: Callable[[], Any] | None = None) -> Any:
        """Rank 0 runs ``fn`` (builds caches, creates stores); once it is done the other ranks run
        ``others`` (default ``fn``, which then only opens what rank 0 built). An error of rank 0
        is raised on every rank."""
        out, _ = self._run_shared(fn)
        return out if self.is_main else (others or fn)()

    def main_only(self, fn: Callable[[], Any]) -> Any:
        """Rank 0 runs ``fn`` (validation, writing files); the others wait and get None."""
        out, _ = self._run_shared(fn)
        return out

    def share(self, value: Any) -> Any:
        """Rank 0's ``value`` (a small JSON-like value) on every rank."""
        return self._broadcast(value if self.is_main else None)

    # ---------------------------------------------------------------- training

    def shard(self, indices: Any) -> Any:
        """This rank's episodes of a batch (every N-th from its rank); a rank left without one
        gets the batch's first as a placeholder whose loss counts 0."""
        mine = indices[self.rank::self.world_size]
        self._placeholder = len(mine) == 0
        return indices[:1] if self._placeholder else mine

    def model(self, policy: Any, objective: Callable) -> Callable:
        """``objective(policy, batch)`` through DistributedDataParallel (made once per policy)."""
        if self._ddp is None or self._ddp[0] != id(policy):
            from torch.nn.parallel import DistributedDataParallel

            wrapper = _Objective(policy, objective)
            ids = [self.local_rank] if next(policy.parameters()).device.type == "cuda" else None
            self._ddp = (id(policy), DistributedDataParallel(wrapper, device_ids=ids, find_unused_parameters=True))
            if self.rank > 0:  # the weights are rank 0's (DDP broadcast them); training draws differ per rank
                torch.manual_seed(torch.initial_seed() + 1_000_003 * self.rank)
        return self._ddp[1]

    def whole_batch(self, policy: Any, loss: torch.Tensor, batch: dict, correct: float, steps: float):
        """Sum (loss × norm, norm, correct, steps) over the ranks; the loss to back-propagate is
        this rank's share of the whole batch's mean (× N: DDP averages the gradients)."""
        import torch.distributed as dist

        norm = 0.0 if self._placeholder else float(batch_norm(policy, batch))
        if self._placeholder:
            correct = steps = 0.0
        totals = torch.tensor([loss.item() * norm if norm else 0.0, norm, correct, steps], dtype=torch.float64,
                              device=loss.device if self.backend == "nccl" else "cpu")
        dist.all_reduce(totals)
        t = totals.tolist()
        scale = self.world_size * norm / t[1] if t[1] > 0 else 0.0
        return loss * scale, (t[0] / t[1] if t[1] > 0 else float("nan")), t[2], t[3]

    def any(self, flag: bool) -> bool:
        """Whether ``flag`` holds on any rank (a budget every rank stops at together)."""
        import torch.distributed as dist

        t = torch.tensor([1.0 if flag else 0.0], device=f"cuda:{self.local_rank}" if self.backend == "nccl" else "cpu")
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return bool(t.item() > 0)


class NullLogger:
    """The run log of ranks > 0: rank 0 alone writes ``train_log.csv`` and TensorBoard."""

    def log(self, global_step: int, **values: Any) -> None:
        """Nothing."""

    def close(self) -> None:
        """Nothing."""


class _Objective(torch.nn.Module):
    """The policy's training objective as a module's ``forward`` (what DDP wraps)."""

    def __init__(self, policy: Any, objective: Callable):
        super().__init__()
        self.policy, self.objective = policy, objective

    def forward(self, batch: dict) -> Any:
        return self.objective(self.policy, batch)


def rank_from_env() -> tuple[int, int, int]:
    """(rank, world size, local rank) of this process: an initialised process group's, else
    torchrun's ``RANK`` / ``WORLD_SIZE`` / ``LOCAL_RANK``, else (0, 1, 0)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size(), int(os.environ.get("LOCAL_RANK", 0))
    return int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1)), int(os.environ.get("LOCAL_RANK", 0))


def current(cfg: Any, device: torch.device) -> LocalRank:
    """This process's ``Ranks`` (initialising the default process group from torchrun's
    environment when needed: NCCL for CUDA, gloo on CPU, ``distributed.backend`` to choose), or
    ``LocalRank`` for a single process."""
    import torch.distributed as dist

    rank, world, local = rank_from_env()
    if world <= 1:
        return LocalRank()
    if not dist.is_initialized():
        backend = cfg.distributed.backend
        if backend == "auto":
            backend = "nccl" if device.type == "cuda" else "gloo"
        if backend == "nccl" and (device.type != "cuda" or not dist.is_nccl_available()):
            raise ConfigError("nccl needs CUDA devices", field="distributed.backend", expected="auto or gloo on CPU")
        if device.type == "cuda" and torch.cuda.device_count() <= local:
            raise ConfigError(f"local rank {local} has no GPU ({torch.cuda.device_count()} on this node)",
                              field="--nproc", expected="at most one rank per GPU")
        timeout = timedelta(seconds=cfg.distributed.timeout)
        attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT")
        if attempt is None:
            dist.init_process_group(backend, timeout=timeout)
        else:  # torchrun: keys of this attempt only (a restarted group would read the dead ranks' addresses)
            store, _, _ = next(dist.rendezvous("env://", timeout=timeout))
            dist.init_process_group(backend, store=dist.PrefixStore(f"vlnverse/attempt_{attempt}", store),
                                    rank=rank, world_size=world, timeout=timeout)
        atexit.register(_destroy)
    return Ranks(rank, world, local, dist.get_backend())


def _destroy() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        dist.destroy_process_group()


def launch(nproc: int, command: list[str], *, max_restarts: int = 0, log_dir: str | Path | None = None) -> None:
    """Run ``command`` (``["-m", "vlnverse", "train", ...]`` or a script and its arguments) on
    ``nproc`` local ranks through ``torch.distributed.run`` (torchrun ``--standalone``); a rank
    that fails restarts the group up to ``max_restarts`` times (the job resumes from
    ``last.pt``). ``log_dir``: the ranks' stdout and stderr go to files there instead of this
    terminal. A job that still fails is one ``VLNVerseError`` line (the ranks' errors are printed
    above it, or are in ``log_dir``)."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import parse_args, run

    if not isinstance(nproc, int) or nproc < 1:
        raise ConfigError(f"got {nproc!r}", field="--nproc", expected="an integer >= 1")
    if not isinstance(max_restarts, int) or max_restarts < 0:
        raise ConfigError(f"got {max_restarts!r}", field="--max-restarts", expected="an integer >= 0")
    if rank_from_env()[1] > 1:
        raise ConfigError("already inside a distributed launch (torchrun)", field="--nproc",
                          expected="either torchrun or --nproc, not both")
    logs = ["--log-dir", str(log_dir), "--redirects", "3"] if log_dir is not None else []
    args = parse_args(["--standalone", "--nproc_per_node", str(nproc), "--max_restarts", str(max_restarts),
                       "--monitor_interval", "0.5", *logs, *command])
    try:
        run(args)
    except ChildFailedError as exc:
        failures = exc.failures
        first = min(failures) if failures else None
        code = failures[first].exitcode if first is not None else "?"
        raise VLNVerseError(f"distributed training on {nproc} ranks failed: rank {first} exited with status {code}"
                            + (f" after {max_restarts} restart(s)" if max_restarts else "")
                            + " (its error is above; run again to resume from last.pt)") from None


def describe(s: dict[str, Any], backend: str | None) -> str:
    """The log line of a run's batch and rate."""
    if s["world_size"] == 1:
        return (f"training in one process: batch {s['effective_batch']} episodes, lr {s['lr']:.6g} "
                f"(distributed.batch {s['batch']}, lr_scaling {s['lr_scaling']})")
    ranks = f"{s['world_size']} ranks" + (f" ({backend})" if backend else "")
    per = (f"{s['effective_batch']} episodes split over the ranks" if s["batch"] == "global"
           else f"{s['effective_batch'] // s['world_size']} per rank x {s['world_size']}")
    return (f"data-parallel: {ranks}, effective batch {s['effective_batch']} ({per}), lr {s['lr']:.6g} "
            f"(il.lr {s['base_lr']:.6g}, lr_scaling {s['lr_scaling']})")


__all__ = ["BATCH_MODES", "LR_SCALINGS", "BACKENDS", "scaling", "batch_norm", "code_fingerprint", "CollectiveError",
           "LocalRank", "Ranks", "current", "rank_from_env", "launch", "describe"]
