"""Cached, simulator-free observations (VLN-MME Sec. 3.3 "space for time").

``vlnverse cache build --scenes SPLIT`` renders the four global 90° views (east, north, west,
south) at every navigation-graph viewpoint of each scene once and stores them as one PNG strip
per viewpoint::

    <root>/<scene_id>/manifest.json      # version, view size, FoV, camera height, viewpoint positions
    <root>/<scene_id>/<node>.png         # (H, 4 W, 3): east | north | west | south
    <root>/<scene_id>/views.npy          # (N, 4, H, W, 3) uint8, rows in ``manifest["rows"]`` order

``views.npy`` is the raw array of every viewpoint's views, memory-mapped when read (no PNG
decoding per step); the PNGs stay for people and for caches built before it existed.

The views of other render settings than the default (``quality`` default, ``objects``
primitives) live in their own folder, ``<root>/render-<quality>-<objects>/<scene_id>/``
(:func:`render_folder`), with the settings in the manifest: a run with ``render.objects=meshes``
never reads primitives views, and caches built before the settings were keyed are the default's.

The ``viewpoints`` simulator backend (registered in ``vlnverse.sim.BACKENDS`` by ``eval.config.register_eval_backends``) then serves
graph-mode evaluation from disk with no physics and no rendering: ``backend: viewpoints`` in an
eval config; its observations are ``views_rgb`` (4, H, W, 3) and ``pose``. The root is
``VLNVERSE_VIEW_CACHE`` or ``<VLNVERSE_CACHE>/views``.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Iterable

import numpy as np

from ...core.errors import ConfigError
from ...core.io import write_json_atomic
from ..config import register_eval_backends
from ...sim.api import ControlConfig, Simulator
from ...sim.types import ActionResult, AgentPose, InvalidActionError

CACHE_VERSION = 1
#: the raw (N, 4, H, W, 3) uint8 array of a scene's views, memory-mapped on read
VIEWS_ARRAY = "views.npy"
#: viewpoints farther than this from the asked position are not served (metres)
MATCH_TOLERANCE = 0.05


def render_settings(options: dict | None) -> tuple[str, str]:
    """(quality, objects) of ``make_simulator`` render ``options`` (``SceneContext.render_options``),
    the backend's defaults filled in."""
    from ...run.setup import RenderConfig

    default = RenderConfig()
    options = options or {}
    return str(options.get("quality") or default.quality), str(options.get("objects") or default.objects)


def render_folder(options: dict | None) -> str | None:
    """The sub-folder of a view cache holding the views of render ``options``: None (the root
    itself) for the default settings, else ``render-<quality>-<objects>``."""
    quality, objects = render_settings(options)
    default = render_settings(None)
    return None if (quality, objects) == default else f"render-{quality}-{objects}"


def default_view_cache() -> Path:
    """``VLNVERSE_VIEW_CACHE`` or ``<VLNVERSE_CACHE>/views``."""
    env = os.environ.get("VLNVERSE_VIEW_CACHE")
    if env:
        return Path(env)
    from ...paths import cache_dir

    return cache_dir() / "views"


class ViewCache:
    """Read access to the views of one set of render settings (``render``: ``make_simulator``
    options, default the backend's) in a view cache folder (manifests are read once per scene)."""

    def __init__(self, root: str | Path | None = None, render: dict | None = None):
        self.root = Path(root) if root is not None else default_view_cache()
        self.render = render_settings(render)
        sub = render_folder(render)
        #: where the scenes of these render settings are: ``root`` or ``root/render-<quality>-<objects>``
        self.folder = self.root / sub if sub else self.root
        self._manifests: dict[str, dict | None] = {}
        self._arrays: dict[str, tuple[np.ndarray, dict[int, int]] | None] = {}

    def manifest(self, scene_id: str) -> dict | None:
        """The scene's manifest, or None when the scene is not cached with these render settings."""
        if scene_id not in self._manifests:
            path = self.folder / scene_id / "manifest.json"
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except FileNotFoundError:
                data = None
            except (OSError, json.JSONDecodeError) as exc:
                raise ConfigError(f"unreadable view cache manifest ({exc})", file=path,
                                  expected="a file written by 'vlnverse cache build'") from None
            if data is not None and data.get("version") != CACHE_VERSION:
                raise ConfigError(f"got {data.get('version')!r}", file=path, field="version", expected=CACHE_VERSION)
            if data is not None:
                got = render_settings(data)  # a manifest without the fields: the default settings
                if got != self.render:
                    raise ConfigError(f"got quality {got[0]!r}, objects {got[1]!r}", file=path, field="quality/objects",
                                      expected=f"quality {self.render[0]!r}, objects {self.render[1]!r} "
                                               "(views of other render settings belong in their own folder)")
                data["_xy"] = {int(k): np.asarray(v, dtype=float) for k, v in data["nodes"].items()}
            self._manifests[scene_id] = data
        return self._manifests[scene_id]

    def _array(self, scene_id: str) -> tuple[np.ndarray, dict[int, int]] | None:
        """The scene's memory-mapped ``views.npy`` and node -> row, or None (an older cache)."""
        if scene_id not in self._arrays:
            manifest = self.manifest(scene_id)
            path = self.folder / scene_id / VIEWS_ARRAY
            entry = None
            if manifest is not None and manifest.get("rows") and path.is_file():
                try:
                    arr = np.load(path, mmap_mode="r", allow_pickle=False)
                except (OSError, ValueError) as exc:
                    raise ConfigError(f"unreadable view array ({exc})", file=path,
                                      expected="a file written by 'vlnverse cache build'") from None
                rows = {int(n): i for i, n in enumerate(manifest["rows"])}
                if arr.dtype != np.uint8 or arr.ndim != 5 or arr.shape[0] != len(rows):
                    raise ConfigError(f"got shape {arr.shape} {arr.dtype}", file=path,
                                      expected=f"({len(rows)}, 4, H, W, 3) uint8: rebuild with 'vlnverse cache build'")
                entry = (arr, rows)
            self._arrays[scene_id] = entry
        return self._arrays[scene_id]

    def views(self, scene_id: str, node: int) -> np.ndarray:
        """(4, H, W, 3) uint8 views of viewpoint ``node`` (east, north, west, south): a copy of
        its row of the memory-mapped ``views.npy``, or decoded from its PNG strip."""
        array = self._array(scene_id)
        if array is not None and int(node) in array[1]:
            return np.array(array[0][array[1][int(node)]])
        return _read_strip(self.folder / scene_id / f"{int(node)}.png")

    def views_at(self, scene_id: str, node: Any, xy: Any) -> np.ndarray | None:
        """The views of ``node`` if cached and ``xy`` stands on it (within ``MATCH_TOLERANCE``), else None."""
        manifest = self.manifest(scene_id)
        if manifest is None or node is None:
            return None
        pos = manifest["_xy"].get(int(node))
        if pos is None or np.linalg.norm(pos - np.asarray(xy, dtype=float)[:2]) > MATCH_TOLERANCE:
            return None
        return self.views(scene_id, int(node))

    def nearest(self, scene_id: str, xy: Any) -> int | None:
        """The cached viewpoint at ``xy`` (within ``MATCH_TOLERANCE``), or None."""
        manifest = self.manifest(scene_id)
        if manifest is None:
            return None
        ids = list(manifest["_xy"])
        d = np.linalg.norm(np.array([manifest["_xy"][i] for i in ids]) - np.asarray(xy, dtype=float)[:2], axis=1)
        k = int(np.argmin(d))
        return ids[k] if d[k] <= MATCH_TOLERANCE else None


def build_scene_cache(ctx: Any, root: str | Path, *, size: int = 224, hfov_deg: float = 90.0,
                      progress: bool = False) -> dict[str, Any]:
    """Render and store the views of every viewpoint of ``ctx``'s navigation graph (skipping those
    already stored with the same settings) with ``ctx``'s render options
    (``SceneContext.render_options``, in their own folder: :func:`render_folder`); returns
    counts and timing."""
    from PIL import Image
    from tqdm import tqdm

    from ...core.io import atomic_path
    from ...tasks.base import render_options
    from .views import ViewRenderer

    options = render_options(ctx)
    sub = render_folder(options)
    folder = (Path(root) / sub if sub else Path(root)) / ctx.scene_id
    nav = ctx.navgraph
    nodes = {int(n): [round(float(v), 4) for v in nav.graph.nodes[n]["position"][:2]] for n in sorted(nav.graph.nodes)}
    manifest = {"version": CACHE_VERSION, "scene_id": ctx.scene_id, "size": int(size), "hfov_deg": float(hfov_deg),
                "camera_height": float(ctx.body.camera_height), "views": ["east", "north", "west", "south"],
                "nodes": {str(k): v for k, v in nodes.items()}}
    if sub:  # the default settings' manifest stays what it was before they were recorded
        manifest["quality"], manifest["objects"] = render_settings(options)
    old = None
    try:
        old = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        pass
    same = old is not None and {k: v for k, v in old.items() if k not in ("nodes", "rows")} == \
        {k: v for k, v in manifest.items() if k != "nodes"}
    renderer = ViewRenderer(size, hfov_deg)
    rendered, t_render = 0, 0.0
    try:
        for node, xy in tqdm(nodes.items(), desc=f"cache {ctx.scene_id}", unit="vp", disable=not progress):
            path = folder / f"{node}.png"
            if same and path.is_file() and old["nodes"].get(str(node)) == xy:
                continue
            t0 = time.perf_counter()
            views = renderer.render(ctx.desc, ctx.body, xy, options)
            t_render += time.perf_counter() - t0
            with atomic_path(path) as tmp:
                Image.fromarray(np.concatenate(list(views), axis=1)).save(tmp, format="PNG")
            rendered += 1
    finally:
        renderer.close()
    if rendered or not (folder / VIEWS_ARRAY).is_file() or not (old or {}).get("rows"):
        stack = np.stack([_read_strip(folder / f"{node}.png") for node in nodes])
        with atomic_path(folder / VIEWS_ARRAY) as tmp:
            with open(tmp, "wb") as fh:
                np.save(fh, stack, allow_pickle=False)
    manifest["rows"] = list(nodes)
    write_json_atomic(folder / "manifest.json", manifest)
    return {"scene_id": ctx.scene_id, "viewpoints": len(nodes), "rendered": rendered,
            "render_ms_per_viewpoint": round(1000 * t_render / rendered, 2) if rendered else None}


def _read_strip(path: Path) -> np.ndarray:
    """(4, H, W, 3) views from a stored PNG strip."""
    from PIL import Image

    with Image.open(path) as im:
        strip = np.asarray(im.convert("RGB"))
    w = strip.shape[1] // 4
    return strip.reshape(strip.shape[0], 4, w, 3).transpose(1, 0, 2, 3)


def build_cache(scenes: Any, root: str | Path | None = None, *, size: int = 224, hfov_deg: float = 90.0,
                body: str = "r2r_ce", progress: bool = True, quality: str | None = None,
                objects: str | None = None) -> dict[str, Any]:
    """``vlnverse cache build``: cache every scene of ``scenes`` (a split name, ``all``, ids or
    paths), rendered with ``quality`` and ``objects`` (an eval run's ``render`` settings; None:
    the defaults)."""
    from ...sim.body import load_body
    from ...tasks.base import load_scene_context
    from ...tasks.dataset import resolve_scene_paths
    from ...run.setup import RenderConfig

    render = RenderConfig(*render_settings({"quality": quality, "objects": objects}))
    render.validate()
    root = Path(root) if root is not None else default_view_cache()
    agent_body = load_body(body)
    out = []
    for path in resolve_scene_paths(scenes):
        ctx = load_scene_context(path, agent_body).with_render_options(render.sim_options())
        out.append(build_scene_cache(ctx, root, size=size, hfov_deg=hfov_deg, progress=progress))
    summary = {"root": str(root), "scenes": out, "viewpoints": sum(s["viewpoints"] for s in out),
               "rendered": sum(s["rendered"] for s in out)}
    sub = render_folder(render.sim_options())
    if sub:
        summary["folder"] = str(root / sub)
    write_json_atomic(root / (sub or "") / "build_summary.json", summary)
    return summary


class ViewpointSimulator(Simulator):
    """Simulator-free backend for graph mode: the agent hops between cached viewpoints.

    No physics, no rendering: ``teleport`` moves the pose (a hop along a navigation-graph edge,
    collision-free by construction), ``get_observations`` reads the cached views of the viewpoint
    the agent stands on (``views_rgb``, plus ``pose``). Discrete / velocity actions are invalid.
    Instances share nothing, so several may step in threads of one process.
    """

    threadsafe_instances = True

    def __init__(self, scene: Any, body: Any, *, sensors: Iterable[Any] = (), control: Any = None,
                 cache: str | Path | None = None, quality: str | None = None, objects: str | None = None):
        # ``quality`` and ``objects`` (the run's render options) choose the cached views of those settings
        self.scene, self.body = scene, body
        self.control = control or ControlConfig()
        self.cache = ViewCache(cache, {"quality": quality, "objects": objects})
        if self.cache.manifest(scene.scene_id) is None:
            q, o = self.cache.render
            raise ConfigError(f"no cached views of scene {scene.scene_id!r} in {self.cache.folder}", field="backend",
                              expected=f"run 'vlnverse cache build --quality {q} --objects {o}' for the split first")
        self._sensors = {s.name: s for s in sensors}
        self._pose = AgentPose(0.0, 0.0, 0.0)
        self._time = 0.0
        self.access_s: list[float] = []

    def reset(self, pose: Any) -> dict[str, np.ndarray]:
        """Place the agent at ``pose`` (a viewpoint for observations to exist)."""
        self._pose, self._time = AgentPose.coerce(pose), 0.0
        return self.get_observations()

    def step(self, action: Any) -> tuple[dict[str, np.ndarray], ActionResult]:
        """Not supported: the cached mode only hops between viewpoints (graph collision mode)."""
        raise InvalidActionError("the 'viewpoints' backend only supports graph mode (hops between viewpoints)")

    def teleport(self, pose: Any) -> ActionResult:
        """Move to ``pose`` (no collision checks: graph edges are collision-free)."""
        target = AgentPose.coerce(pose)
        self._pose = target
        return ActionResult(action="teleport", commanded_pose=target, achieved_pose=target)

    @property
    def pose(self) -> AgentPose:
        """The agent's pose."""
        return self._pose

    @property
    def time(self) -> float:
        """Always 0: no simulation clock."""
        return self._time

    @property
    def semantic_labels(self) -> list[str]:
        """No semantic sensor: empty."""
        return []

    def attach_sensor(self, spec: Any) -> None:
        """Sensors are recorded but not rendered (the cached views are the observation)."""
        self._sensors[spec.name] = spec

    def detach_sensor(self, name: str) -> None:
        """Forget sensor ``name``."""
        self._sensors.pop(name, None)

    @property
    def sensors(self) -> dict[str, Any]:
        """Attached (unrendered) sensor specs."""
        return dict(self._sensors)

    def get_observations(self) -> dict[str, np.ndarray]:
        """``views_rgb`` of the viewpoint under the agent (absent off the viewpoints) and ``pose``."""
        t0 = time.perf_counter()
        obs: dict[str, np.ndarray] = {}
        node = self.cache.nearest(self.scene.scene_id, self._pose.xy)
        if node is not None:
            obs["views_rgb"] = self.cache.views(self.scene.scene_id, node)
        obs["pose"] = np.array([self._pose.x, self._pose.y, self._pose.yaw, self._pose.pitch], np.float32)
        self.access_s.append(time.perf_counter() - t0)
        return obs

    def render_at(self, pose: Any, spec: Any) -> dict[str, np.ndarray]:
        """The cached view nearest to ``pose``'s heading, resized to ``spec`` (report frames)."""
        from PIL import Image

        from .views import snapped_front

        pose = AgentPose.coerce(pose)
        node = self.cache.nearest(self.scene.scene_id, pose.xy)
        if node is None:
            raise InvalidActionError(f"no cached viewpoint at ({pose.x:.2f}, {pose.y:.2f})")
        view = self.cache.views(self.scene.scene_id, node)[snapped_front(pose.yaw)]
        size = (int(getattr(spec, "width", view.shape[1])), int(getattr(spec, "height", view.shape[0])))
        return {spec.name: np.asarray(Image.fromarray(view).resize(size))}

    def object_positions(self) -> dict[int, np.ndarray]:
        """Object centres from the scene description."""
        return {o.instance_id: (np.asarray(o.bounds_min) + np.asarray(o.bounds_max)) / 2 for o in self.scene.objects}

    def close(self) -> None:
        """Nothing to release."""


register_eval_backends()
