"""Room semantics of a scene for agents and the room classifier: which object categories are in
line of sight at a viewpoint, every viewpoint's ground-truth room type, and the ``ROOM_CLASSIFIERS``
registry (the learned classifier, ``vlnverse.learn.room_classifier``, registers by name).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from ..core.errors import ConfigError
from ..core.registry import Registry


#: line-of-sight range (m) of the room classifier's observation
ROOM_SIGHT = 3.0

#: Loaders of room classifiers (path -> classifier with ``categories``, ``classes``, ``sight`` and
#: ``predict(multi-hot features) -> room types``). The learned one (``vlnverse train
#: room_classifier``, ``vlnverse.learn.room_classifier``) needs torch and is imported on first use.
ROOM_CLASSIFIERS: Registry[Any] = Registry("room classifier")
ROOM_CLASSIFIERS.register_lazy("learned", "vlnverse.learn.room_classifier")


def load_room_classifier(path: str | Path, field: str = "agent.params.room_classifier") -> Any:
    """The room classifier checkpoint at ``path`` (``vlnverse train room_classifier``); without
    torch, a ``ConfigError`` naming the ground-truth ablation."""
    try:
        loader = ROOM_CLASSIFIERS.get("learned")
    except ModuleNotFoundError as exc:
        raise ConfigError(f"the learned room classifier needs {exc.name}, which is not installed", field=field,
                          expected="the [learn] extra (torch), or room_labels: ground_truth (the ablation)") from None
    return loader(path, field=field)


def semantic_features(ctx: Any, xy: Sequence[float], vocab: Sequence[str], *, sight: float = ROOM_SIGHT,
                      cache: dict | None = None) -> np.ndarray:
    """The room classifier's observation at ``xy``: which categories of ``vocab`` the semantic
    panorama shows — objects in line of sight at camera height within ``sight`` m in any
    direction (the scene's semantic labels, as the simulator's semantic views give them) —
    as a multi-hot vector."""
    seen = visible_categories(ctx, xy, max_range=sight, cache=cache)
    return np.array([c in seen for c in vocab], dtype=float)


def node_room_types(ctx: Any) -> dict[int, str | None]:
    """Ground-truth room type of every navigation-graph viewpoint (from the room maps); ``None``
    for a viewpoint outside every room polygon (a door centre in the wall's gap)."""
    out: dict[int, str | None] = {}
    for n, data in ctx.navgraph.graph.nodes(data=True):
        rid = data.get("room_id")
        try:
            room = ctx.desc.room_by_id(int(rid)) if rid is not None and int(rid) >= 0 else None
        except KeyError:
            room = None
        inside = room is not None and bool(room.contains(np.asarray(data["position"][:2], dtype=float)[None])[0])
        out[int(n)] = room.room_type if inside else None
    return out


def scene_samples(ctx: Any, sight: float = ROOM_SIGHT) -> tuple[list[set[str]], list[str], list[int]]:
    """(categories seen within ``sight`` m, room type, node id) of the scene's viewpoints that lie in a room."""
    labels = node_room_types(ctx)
    cache: dict = {}
    seen, labs, nodes = [], [], []
    for n in sorted(labels):
        if labels[n] is None:
            continue
        seen.append(visible_categories(ctx, ctx.navgraph.graph.nodes[n]["position"][:2], max_range=sight, cache=cache))
        labs.append(labels[n])
        nodes.append(n)
    return seen, labs, nodes


def multi_hot(seen: Sequence[set[str]], vocab: Sequence[str]) -> np.ndarray:
    """(N, len(vocab)) multi-hot rows of category sets."""
    return np.array([[c in s for c in vocab] for s in seen], dtype=float).reshape(len(seen), len(vocab))


def room_accuracy(classifier: Any, samples: Iterable[tuple[Sequence[set[str]], Sequence[str]]]) -> dict[str, Any]:
    """Room-classification accuracy of ``classifier`` on ``samples``: per scene, the categories
    seen at its in-room viewpoints and their room types (:func:`scene_samples` with the
    classifier's ``sight``): ``{"viewpoints", "accuracy", "per_room"}``."""
    hits: dict[str, list[bool]] = {}
    for seen, labels in samples:
        if not len(labels):
            continue
        for lab, pred in zip(labels, classifier.predict(multi_hot(seen, classifier.categories))):
            hits.setdefault(lab, []).append(pred == lab)
    flat = [h for v in hits.values() for h in v]
    return {"viewpoints": len(flat), "accuracy": round(float(np.mean(flat)), 4) if flat else None,
            "per_room": {k: round(float(np.mean(v)), 4) for k, v in sorted(hits.items())}}


def visible_categories(ctx: Any, xy: Sequence[float], *, max_range: float = 4.0, cache: dict | None = None) -> set[str]:
    """Categories of the scene's objects in line of sight at camera height within ``max_range`` of ``xy``."""
    from ..tasks.tours import object_visibility
    from .scoring import view_blocking

    objects = [o for o in ctx.desc.objects if getattr(o, "category", None)]
    if not objects:
        return set()
    grid, origin = view_blocking(ctx, cache)
    vis = object_visibility(grid, origin, ctx.planner.resolution, np.asarray(xy, dtype=float)[None, :2],
                            np.array([o.bounds_min for o in objects]), np.array([o.bounds_max for o in objects]),
                            max_range=max_range)
    return {o.category for o, v in zip(objects, vis[0]) if v}
