"""Report artefacts made while the simulator is alive: an episode's top-down map and key frames."""
from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any

import numpy as np

log = logging.getLogger(__name__)


def _safe_name(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text)[:120]


def save_episode_visuals(record: dict, ctx: Any, sim: Any, out: Path, *, rgb_sensor: Any, frames: bool) -> None:
    """Top-down map (occupancy, reference, agent path, collisions) and first-person RGB frames at
    key steps (start, middle, end, collisions); file paths are stored in ``record``."""
    from PIL import Image

    from ..sim.types import AgentPose

    stem = _safe_name(record["episode_id"])
    try:
        from ..scenes.render_map import render_map_png

        traj = np.asarray(record["trajectory"], dtype=float)
        markers = [{"xy": traj[0, :2], "color": "tab:green", "label": "start", "size": 50},
                   {"xy": np.asarray(record["goals"]), "color": "tab:red", "marker": "*", "label": "goal", "size": 90}]
        if record["collisions"]:
            markers.append({"xy": np.array([c["position"] for c in record["collisions"]]), "color": "black",
                            "marker": "x", "label": "collision", "size": 45})
        error = record.get("first_error")
        if error:
            markers.append({"xy": np.asarray(error["position"]), "color": "tab:purple", "marker": "X",
                            "label": f"first error: {error['category']} (step {error['step']})", "size": 110})
        map_path = out / "maps" / f"{stem}.png"
        render_map_png(ctx.desc, ctx.maps, map_path,
                       paths=[{"xy": np.asarray(record["reference_path"])[:, :2], "color": "tab:blue", "label": "reference"},
                              {"xy": traj[:, :2], "color": "tab:orange", "label": "agent"}],
                       markers=markers, title=f"{record['episode_id']} ({record['termination']})", dpi=90)
        record["map"] = str(map_path.relative_to(out))
    except ImportError:
        log.warning("vlnverse.scenes.render_map is unavailable: no top-down map in the report")
    except Exception as exc:  # noqa: BLE001 - a failed picture must not lose the episode
        log.warning("map for %s failed: %s", record["episode_id"], exc)
    if not frames or rgb_sensor is None:
        return
    traj = record["trajectory"]
    last = len(traj) - 1
    keys = {0: "start", last // 2: "middle", last: "end"}
    for c in record["collisions"][:3]:
        idx = min(last, 1 + sum(1 for a in record["actions"][:c["step"]] if a not in (None, "STOP")))
        keys.setdefault(idx, "collision")
    saved = []
    for idx in sorted(keys):
        x, y, yaw = traj[idx]
        try:
            image = sim.render_at(AgentPose(x, y, yaw), rgb_sensor)
        except Exception as exc:  # noqa: BLE001
            log.warning("frame %d of %s failed: %s", idx, record["episode_id"], exc)
            continue
        rgb = image.get(rgb_sensor.name, next(iter(image.values())))
        path = out / "frames" / stem / f"{idx:04d}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        Image.fromarray(np.asarray(rgb, dtype=np.uint8)).save(path)
        saved.append({"index": idx, "label": keys[idx], "file": str(path.relative_to(out))})
    record["frames"] = saved
