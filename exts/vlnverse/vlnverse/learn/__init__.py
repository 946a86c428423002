"""Learning layer: learned VLN policies trained by imitation (offline IL from an observation cache,
online DAgger in the physics simulator), and the gymnasium environment ``vlnverse/VLN-v0``.

torch is needed only here (the ``[learn]`` extra); nothing outside ``vlnverse.learn`` imports it,
and importing this package does not import torch either:

- ``vocab`` — tokenizer and ``Vocabulary`` (PAD / UNK), saved in every checkpoint;
- ``config`` — ``TrainConfig`` (``vlnverse train CONFIG``; configs in ``tasks/train/``);
- ``store`` — the chunked, memory-mapped on-disk step store (observation cache, DAgger aggregate);
- ``collect`` — teacher-labelled rollouts through the eval runner (the oracle's ``best_action``);
- ``policies_registry`` — the ``POLICIES`` registry (built-ins lazy, plug-ins on import);
- ``policies`` — the ``VLNPolicy`` base and ``seq2seq`` / ``cma`` (VLN-CE) [torch];
- ``encoder`` — ``vlnverse pretrain-encoder``: visual trunks pretrained on the toolkit's renders [torch];
- ``features`` — the feature cache of frozen trunks (IL reads features instead of pixels) [torch];
- ``trainer`` — offline IL and DAgger trainers, checkpoints [torch];
- ``distributed`` — data-parallel training on N ranks (DDP; ``torchrun`` / ``vlnverse train --nproc N``) [torch];
- ``checkpoint`` / ``tensorfile`` — checkpoints as safetensors + JSON metadata (nothing in a file runs);
- ``agent`` — the ``policy`` eval agent wrapping any checkpoint (torch imported on use);
- ``gym_env`` — ``gymnasium.make("vlnverse/VLN-v0")``: an eval ``Rollout`` per episode.

See ``docs/learning.md``.
"""
from __future__ import annotations

#: Bumped whenever the learning layer changes what it caches or how checkpoints are read: part of
#: every cache key and checkpoint.
LEARN_VERSION = 1


def code_version() -> str:
    """``<package version>+learn<LEARN_VERSION>``: stored in caches and checkpoints."""
    from .. import __version__

    return f"{__version__}+learn{LEARN_VERSION}"


def auto_threads(jobs: int = 1) -> int:
    """Torch CPU threads for one of ``jobs`` trainings running side by side: the cores this
    process may use (``os.sched_getaffinity``) shared evenly, at least 1. Chosen from the machine
    and the declared jobs only (not its load), so a run's thread count, like its weights, repeats."""
    import os

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, cores // max(1, int(jobs)))


def seed_torch(seed: int, threads: int | str | None = None, *, jobs: int = 1) -> int:
    """Seed torch's generator for a run and set its CPU threads: a number, ``auto``
    (``auto_threads(jobs)``) or None / 0 (torch's default); returns the threads torch uses."""
    import torch

    if threads == "auto":
        threads = auto_threads(jobs)
    if threads:
        torch.set_num_threads(int(threads))
    torch.manual_seed(seed)
    return torch.get_num_threads()


def _register_gym_env() -> None:
    """Register ``vlnverse/VLN-v0`` with gymnasium when it is installed (importing the layer does
    not need it; ``gym_env`` does)."""
    try:
        import gymnasium
    except ModuleNotFoundError:
        return
    if "vlnverse/VLN-v0" not in gymnasium.registry:
        gymnasium.register(id="vlnverse/VLN-v0", entry_point="vlnverse.learn.gym_env:VLNEnv")


_register_gym_env()
