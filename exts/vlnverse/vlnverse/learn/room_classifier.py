"""ROAM's room classifier as a policy of ``vlnverse train`` (``policy.name: room_classifier``).

Observation → room type, trained with room-level supervision only: the samples are the
navigation-graph viewpoints of the training scenes that lie in a room, each labelled with its
room type from the room maps (no trajectories). The observation is what the semantic panorama
shows at the viewpoint: the object categories in line of sight within ``sight`` m (3 m), multi-hot
over the categories seen in training (``run.rooms.semantic_features``). The model is an MLP
(``hidden_size``; 0 = softmax regression) trained with Adam on the cross-entropy (``il.epochs``,
``il.batch_size``, ``il.lr``, ``il.weight_decay``; seeded order).

Scenes: those of ``train`` (a ``generate`` block's ``scenes`` — no episodes are generated — or
the scenes of an episode file) and, for the accuracy report, of each ``val`` split. The run
folder holds ``best.pt`` (a safetensors policy checkpoint: the category vocabulary, the room
classes and the weights; ``vlnverse checkpoint info`` reads it) and ``summary.json`` (train and
per-split accuracy, per room type). ROAM loads it with ``room_classifier: <out>/best.pt``.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

from ..core.errors import ConfigError, VLNVerseError
from ..core.io import to_jsonable, write_json_atomic
from ..core.params import param
from ..run.rooms import ROOM_CLASSIFIERS, ROOM_SIGHT, multi_hot, room_accuracy, scene_samples
from . import seed_torch
from .policies import POLICIES, check_policy_params
from .vocab import Vocabulary


@dataclass
class RoomClassifierParams:
    """``policy.params`` of ``room_classifier`` (``sight`` in metres; ``hidden_size`` 0: softmax
    regression). ``classes`` come from the training data (and the checkpoint), never the config."""

    classes: list[str] | None = None
    hidden_size: int = param(64, low=0, high=8192)
    sight: float = param(ROOM_SIGHT, low=0.1, high=100.0)

    def validate(self) -> None:
        """At least two room classes, when given."""
        if self.classes is not None and len(self.classes) < 2:
            raise ConfigError(f"got {self.classes!r}", field="classes", expected="at least 2 room types")


@POLICIES.register("room_classifier")
class RoomClassifier(nn.Module):
    """Multi-hot categories in sight → room-type logits. ``vocab`` holds the categories (one
    "word" each), ``classes`` the room types; ``sensors`` is empty (the observation is semantic)."""

    name = "room_classifier"
    Params = RoomClassifierParams

    def __init__(self, vocab: Vocabulary, sensors: list | None = None, *, classes: list[str] | None = None,
                 hidden_size: int = 64, sight: float = ROOM_SIGHT):
        super().__init__()
        self.vocab, self.sensors = vocab, list(sensors or [])
        self.categories = list(vocab.words[2:])
        self.classes = [str(c) for c in classes]
        self.sight = float(sight)
        n, c, h = len(self.categories), len(self.classes), int(hidden_size)
        self.net = nn.Linear(n, c) if h == 0 else nn.Sequential(nn.Linear(n, h), nn.ReLU(), nn.Linear(h, c))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(N, categories) multi-hot → (N, classes) logits."""
        return self.net(x)

    @torch.no_grad()
    def predict(self, features: np.ndarray) -> list[str]:
        """Room type of each multi-hot row (columns: ``categories``)."""
        x = torch.as_tensor(np.atleast_2d(np.asarray(features, dtype=np.float32)))
        self.eval()
        return [self.classes[i] for i in self(x).argmax(1).tolist()] if len(x) else []

    # ---------------------------------------------------------------- checkpoints

    def checkpoint_extras(self) -> dict[str, Any]:
        """The room classes travel in the checkpoint (they come from the data, not the config)."""
        return {"room_classes": list(self.classes)}

    @classmethod
    def params_from_checkpoint(cls, params: dict[str, Any], data: dict[str, Any], path: Any) -> dict[str, Any]:
        """The config's parameters plus the saved room classes."""
        classes = data.get("room_classes")
        if not isinstance(classes, list) or len(classes) < 2:
            raise ConfigError("no room classes", file=path, field="room_classes",
                              expected="a checkpoint written by 'vlnverse train room_classifier'")
        return {**params, "classes": [str(c) for c in classes]}

    # ---------------------------------------------------------------- training

    @classmethod
    def run_training(cls, cfg: Any, *, scene_loader: Callable | None = None, progress: bool = True,
                     report: Callable[[str], None] = print) -> dict[str, Any]:
        """Train on ``cfg.train``'s scenes, report accuracy on every ``cfg.val`` split; writes
        ``best.pt`` and ``summary.json`` into ``cfg.out`` and returns the summary."""
        from .checkpoint import save_checkpoint

        if cfg.mode != "il":
            raise ConfigError(f"got {cfg.mode!r}", field="mode", expected="il (the room classifier trains supervised, in one pass)")
        if cfg.init:
            raise ConfigError(f"got {cfg.init!r}", field="init", expected="no init: the room classifier trains from scratch")
        params = dict(cfg.policy.params or {})
        if "classes" in params:
            raise ConfigError("set from the training data", field="policy.params.classes",
                              expected="no classes in the config (the room types of the training scenes)")
        sight = check_policy_params(cls, params).sight
        seed_torch(cfg.seed, cfg.threads)
        memo: dict[int, tuple[list, list]] = {}

        def samples(source: Any, field: str) -> list[tuple[list, list]]:
            out = []
            for ctx in scene_contexts(cfg, source, field, scene_loader):
                if id(ctx) not in memo:
                    memo[id(ctx)] = scene_samples(ctx, sight)[:2]
                out.append(memo[id(ctx)])
            return out

        train = samples(cfg.train, "train")
        seen = [s for scene, _ in train for s in scene]
        labels = [lab for _, scene in train for lab in scene]
        classes = sorted(set(labels))
        if len(classes) < 2:
            raise ConfigError(f"{len(labels)} in-room viewpoints of room types {classes}", field="train",
                              expected="scenes with viewpoints in at least 2 room types")
        vocab = Vocabulary(sorted({c for s in seen for c in s}))
        model = cls(vocab, [], classes=classes, **params)
        x = torch.as_tensor(multi_hot(seen, model.categories), dtype=torch.float32)
        y = torch.as_tensor([classes.index(lab) for lab in labels])
        opt = torch.optim.Adam(model.parameters(), lr=cfg.il.lr, weight_decay=cfg.il.weight_decay)
        bs, losses = cfg.il.batch_size, []
        model.train()
        for epoch in range(cfg.il.epochs):
            order = torch.as_tensor(np.random.default_rng([cfg.seed, epoch]).permutation(len(y)))
            total = 0.0
            for b in range(0, len(y), bs):
                idx = order[b:b + bs]
                loss = F.cross_entropy(model(x[idx]), y[idx])
                opt.zero_grad()
                loss.backward()
                opt.step()
                total += float(loss.detach()) * len(idx)
            losses.append(round(total / len(y), 6))
        train_acc = room_accuracy(model, train)
        val = {name: room_accuracy(model, samples(src, f"val.{name}")) for name, src in cfg.val.items()}
        out = Path(cfg.out)
        out.mkdir(parents=True, exist_ok=True)
        best = out / "best.pt"
        save_checkpoint(best, model, config=cfg.to_dict(), run=out, extra={
            "provenance": {"train_viewpoints": len(y), "seed": cfg.seed, "train_accuracy": train_acc["accuracy"],
                           "val_accuracy": {k: v["accuracy"] for k, v in val.items()}}})
        for name, acc in val.items():
            report(f"room classifier: {name} accuracy {acc['accuracy']} on {acc['viewpoints']} in-room viewpoints")
        summary = {"mode": "il", "policy": cls.name, "classes": classes, "categories": len(model.categories),
                   "train": {"viewpoints": len(y), **train_acc}, "val": val, "final_loss": losses[-1] if losses else None,
                   "epochs": cfg.il.epochs, "best": {"metric": "accuracy", "tag": "last",
                                                    "value": next(iter(val.values()), train_acc)["accuracy"]},
                   "checkpoint": str(best)}
        write_json_atomic(out / "summary.json", to_jsonable(summary))
        return summary


def scene_contexts(cfg: Any, source: Any, field: str, scene_loader: Callable | None = None) -> list[Any]:
    """Scene contexts of a train/val source: a ``generate`` block's ``scenes`` (nothing is
    generated), or the scenes of an episode file / folder. ``scene_loader(path)`` stands in for
    loading (tests)."""
    from ..core.body import load_body
    from ..tasks.base import load_scene_context, load_task_config
    from ..tasks.dataset import resolve_scene_paths
    from .homes import HomesSource

    if isinstance(source, HomesSource):
        raise ConfigError("generated homes are not a source of room labels here", field=field,
                          expected="a 'generate' block with scenes, or an episode file")
    if source.generate is not None:
        try:
            paths = resolve_scene_paths(source.generate.scenes)
        except VLNVerseError as exc:  # an unknown scene or split names the known ones
            raise ConfigError(getattr(exc, "problem", None) or str(exc), field=f"{field}.generate.scenes",
                              expected=getattr(exc, "expected", None) or "a split name, 'all', scene ids or paths") from None
        paths = paths[:source.generate.max_scenes] if source.generate.max_scenes else paths
    else:
        from ..tasks.episode import load_episodes
        from ..tasks.scene_roots import resolve_episode_scenes, scene_roots

        where = Path(source.path)
        if not where.exists():
            raise ConfigError("episode file or folder not found", field=f"{field}.path", file=where,
                              expected="an existing JSONL file/folder")
        episodes = load_episodes(where)
        if not episodes:
            raise ConfigError("no episodes", field=f"{field}.path", file=where, expected="at least one episode")
        if scene_loader is None:
            episodes = resolve_episode_scenes(episodes, scene_roots(cfg.scene_root, where if where.is_dir() else where.parent))
        paths = list(dict.fromkeys(e.scene_path for e in episodes))
    if scene_loader is not None:
        return [scene_loader(p) for p in paths]
    task = load_task_config(cfg.task)
    body = load_body(cfg.body or task.body)
    return [load_scene_context(p, body, task.map_resolution) for p in paths]


def load_room_classifier(path: str | Path, field: str = "agent.params.room_classifier") -> RoomClassifier:
    """A room classifier checkpoint; missing, pickled, damaged files, or a checkpoint of another
    policy, are a one-line ``ConfigError`` naming ``field`` and the file."""
    from .checkpoint import policy_from_checkpoint, read_checkpoint

    try:
        data = read_checkpoint(path, expected_policy="room_classifier")
        model = policy_from_checkpoint(data, path=path)
    except ConfigError as exc:
        raise ConfigError(exc.problem, file=path, field=field if exc.field in ("checkpoint", "policy.name") else exc.field,
                          expected=exc.expected or "the best.pt of 'vlnverse train room_classifier'") from None
    model.eval()
    return model


ROOM_CLASSIFIERS.register("learned")(load_room_classifier)
