"""IL batches: whole episodes from step stores, formed ``bucketed`` or ``padded`` (``il.batching``),
with VLN-CE inflection step weights."""
from __future__ import annotations

from typing import Any

import numpy as np
import torch

from ..core.errors import ConfigError
from .errors import TrainingError
from .store import StepStore
from .vocab import Vocabulary


def inflection_weights(labels: np.ndarray, coef: float) -> np.ndarray:
    """VLN-CE inflection weighting: ``coef`` at the first step and wherever the teacher action
    changes from the previous step, 1 elsewhere."""
    w = np.ones(len(labels), dtype=np.float32)
    if len(labels):
        change = np.concatenate([[True], labels[1:] != labels[:-1]])
        w[change] = coef
    return w


def inflection_coefficient(stores: list[StepStore]) -> float:
    """Total steps / inflection steps of the data (VLN-CE's ``inflection_weight_coef``)."""
    steps = inflections = 0
    for store in stores:
        for i in range(len(store)):
            e = store.episodes[i]
            labels = np.asarray(store._array(e["chunk"], "label")[e["start"]:e["start"] + e["length"]])
            steps += len(labels)
            inflections += int(inflection_weights(labels, 2.0).sum() - len(labels))
    return float(steps / inflections) if inflections else 1.0


#: IL batch formation (``il.batching``): ``bucketed`` draws each epoch's batches from pools of
#: ``BUCKET_POOL`` batches sorted by episode length (less padding) and unrolls them packed;
#: ``padded`` is the earlier path (a plain permutation, every batch unrolled to its longest episode)
BATCHINGS = ("bucketed", "padded")
#: batches per pool of the bucketed order: the pool is sorted by length, then cut into batches
BUCKET_POOL = 8


def bucketed_order(lengths: np.ndarray, batch_size: int, rng: np.random.Generator, pool: int = BUCKET_POOL) -> np.ndarray:
    """A permutation of ``range(len(lengths))`` whose consecutive ``batch_size`` slices hold
    episodes of similar length: a random permutation cut into pools of ``pool`` batches, each pool
    sorted by length (ties in permuted order), cut into batches; the full batches are shuffled and
    a partial one stays last. Every index appears once; the same ``rng`` state gives the same order."""
    perm = rng.permutation(len(lengths))
    size = batch_size * pool
    ordered = np.concatenate([p[np.argsort(lengths[p], kind="stable")] for p in np.split(perm, range(size, len(perm), size))]
                             ) if len(perm) else perm
    full = len(ordered) // batch_size
    batches = [ordered[i * batch_size:(i + 1) * batch_size] for i in range(full)]
    rest = ordered[full * batch_size:]
    shuffled = [batches[i] for i in rng.permutation(full)]
    return np.concatenate(shuffled + [rest]).astype(np.int64) if full or len(rest) else ordered


def il_batching(configured: str, policy: Any) -> str:
    """How a policy's IL batches are formed: ``il.batching``, except that a policy which does not
    unroll packed (``VLNPolicy.unrolls_packed`` False: RDP, VLN-BERT, HNR, GAMA) always gets
    ``padded``, a plain permutation."""
    return configured if policy.unrolls_packed else "padded"


class EpisodeBatches:
    """Batches of whole episodes from one or more stores, in a seeded order per epoch.

    ``instructions`` (episode id → its instruction texts) makes every (episode, instruction) pair
    one item, as R2R trains on each of a path's instructions: the frames and teacher labels depend
    on the path only, so the other instructions cost no rendering. ``batching`` (``BATCHINGS``):
    ``bucketed`` orders items into batches of similar length and gives each batch its
    ``lengths`` (policies unroll it packed); ``padded`` keeps a plain permutation. Either way a batch
    is padded to its longest episode. Fields are copied from the stores' memory maps straight into
    the batch arrays; token ids are encoded once per item."""

    def __init__(self, stores: list[StepStore], vocab: Vocabulary, max_length: int, sensors: list[dict[str, Any]],
                 instructions: dict[str, list[str]] | None = None, batching: str = "padded"):
        if batching not in BATCHINGS:
            raise ConfigError(f"got {batching!r}", field="il.batching", expected=f"one of {list(BATCHINGS)}")
        self.stores, self.vocab, self.max_length, self.sensors = stores, vocab, max_length, sensors
        self.batching = batching
        self.items = [(s, i, text) for s in stores for i in range(len(s))
                      for text in ((instructions or {}).get(s.episodes[i]["episode_id"]) or [None])]
        if not self.items:
            raise TrainingError("no training steps: the episode stores are empty")
        self.lengths = np.array([s.episodes[i]["length"] for s, i, _ in self.items], dtype=np.int64)
        self._tokens: dict[int, np.ndarray] = {}
        self._weights: dict[tuple[int, float], np.ndarray] = {}

    def __len__(self) -> int:
        return len(self.items)

    def order(self, seed: int, epoch: int, batch_size: int | None = None) -> np.ndarray:
        """The epoch's item order (depends only on seed, epoch and batch size: resumable); bucketed
        (``bucketed_order``) when the batching is and ``batch_size`` is given."""
        rng = np.random.default_rng([seed, epoch])
        if self.batching == "bucketed" and batch_size:
            return bucketed_order(self.lengths, batch_size, rng)
        return rng.permutation(len(self.items))

    def _item_tokens(self, i: int) -> np.ndarray:
        if i not in self._tokens:
            store, k, text = self.items[i]
            self._tokens[i] = self.vocab.encode(text if text is not None else store.episodes[k]["instruction"], self.max_length)
        return self._tokens[i]

    def _item_weights(self, i: int, labels: np.ndarray, coef: float) -> np.ndarray:
        key = (i, coef)
        if key not in self._weights:
            self._weights[key] = inflection_weights(labels, coef)
        return self._weights[key]

    def batch(self, indices: np.ndarray, coef: float, device: Any) -> dict[str, Any]:
        """Tensors of a batch: tokens (B, L), frames (B, T, ...), prev (B, T), labels, weights, extras
        and the episode lengths (B,) (``lengths``: bucketed batching only)."""
        indices = [int(i) for i in indices]
        b = len(indices)
        lengths = self.lengths[indices]
        t = int(lengths.max())
        where = [(self.items[i][0], self.items[i][0].episodes[self.items[i][1]]) for i in indices]

        def gather(name: str, shape: Any, dtype: Any) -> np.ndarray:
            arr = np.zeros((b, t, *shape), dtype=dtype)
            for j, (store, e) in enumerate(where):
                arr[j, :e["length"]] = store._array(e["chunk"], name)[e["start"]:e["start"] + e["length"]]
            return arr

        frames = {}
        for spec in self.sensors:
            first = where[0][0]._array(where[0][1]["chunk"], spec["name"])
            frames[spec["name"]] = torch.from_numpy(gather(spec["name"], spec["shape"], first.dtype)).to(device)
        labels = gather("label", (), np.int64)
        executed = gather("executed", (), np.int64)
        prev = np.zeros((b, t), dtype=np.int64)
        prev[:, 1:] = 1 + executed[:, :-1]
        weights = np.zeros((b, t), dtype=np.float32)
        for j, (i, n) in enumerate(zip(indices, lengths)):
            prev[j, n:] = 0
            weights[j, :n] = self._item_weights(i, labels[j, :n], coef)
        tokens = np.stack([self._item_tokens(i) for i in indices])
        extras = {name: torch.from_numpy(gather(name, shape, np.float32)).to(device)
                  for name, shape in self.stores[0].extra_fields.items()}  # continuous-action labels (e.g. RDP)
        out = {"extras": extras, "tokens": torch.from_numpy(tokens).to(device), "frames": frames,
               "prev": torch.from_numpy(prev).to(device), "labels": torch.from_numpy(labels).to(device),
               "weights": torch.from_numpy(weights).to(device), "steps": int(lengths.sum())}
        if self.batching == "bucketed":
            out["lengths"] = torch.from_numpy(lengths.copy())
        return out


def batch_objective(policy: Any, batch: dict[str, Any]) -> tuple[torch.Tensor, float]:
    """The policy's imitation loss on a batch and the number of steps it gets right (the
    callable that data-parallel training wraps)."""
    return policy.imitation_loss(batch)
