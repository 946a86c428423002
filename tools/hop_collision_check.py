"""Why do an agent's episodes first collide? (``vlnverse.run.hop_collisions``)

For each eval run folder (``episodes.jsonl`` with trajectories, actions and collisions) and the
episodes file it ran (for the scene paths): the cause of each episode's first collision, the move's
heading against the RDP teacher's from the same pose (the geodesic path kept ``--clearance`` off
walls, ``learn.rdp.teacher_path``), its step and depth in the obstacle. Prints the summary JSON of
each folder; ``--out`` writes it with the per-episode rows.

    PYTHONPATH=exts/vlnverse python3 tools/hop_collision_check.py EPISODES.jsonl EVAL_DIR [EVAL_DIR ...]
"""
import argparse
import json
import math
import sys
from pathlib import Path


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("episodes", type=Path, help="the episodes file the runs evaluated (JSONL)")
    parser.add_argument("runs", type=Path, nargs="+", help="eval run folders (each with episodes.jsonl)")
    parser.add_argument("--task", default="fine_grained")
    parser.add_argument("--hfov", type=float, default=90.0, help="the camera's horizontal field of view (deg)")
    parser.add_argument("--clearance", type=float, default=0.15, help="the teacher's wall clearance (m)")
    parser.add_argument("--out", type=Path)
    args = parser.parse_args(argv)

    import numpy as np

    from vlnverse.core.errors import NoNavigableSpaceError
    from vlnverse.core.io import write_json_atomic
    from vlnverse.learn.rdp import margin_planners, resample_by_length, teacher_path
    from vlnverse.run.episodes import run_settings
    from vlnverse.run.hop_collisions import first_collision, summarize
    from vlnverse.tasks.base import load_scene_context

    settings = run_settings(args.task)
    scene_of = {}
    with open(args.episodes, encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                ep = json.loads(line)
                scene_of[ep["episode_id"]] = ep["scene_path"]
    contexts: dict = {}
    out = {}
    for run in args.runs:
        rows = []
        with open(run / "episodes.jsonl", encoding="utf-8") as fh:
            records = [json.loads(line) for line in fh if line.strip()]
        for rec in records:
            path = scene_of[rec["episode_id"]]
            if path not in contexts:
                ctx = load_scene_context(path, settings.body, settings.resolution)
                contexts[path] = (ctx, margin_planners(ctx.planner, args.clearance))
            ctx, planners = contexts[path]
            goal = np.asarray(rec["goals"][-1][:2], dtype=float)
            field = ctx.planner.distance_field(goal)

            def teacher_heading(xy, planners=planners, goal=goal):
                try:
                    points = resample_by_length(teacher_path(planners, xy, goal), 0.5)
                except NoNavigableSpaceError:  # the pose is cut off from the goal: no expert heading
                    return None
                return None if len(points) < 2 else math.atan2(points[1][1] - xy[1], points[1][0] - xy[0])

            first = first_collision(rec, ctx.planner, success_distance=settings.success_distance, hfov_deg=args.hfov,
                                    goal_distance=lambda xy, f=field: float(f.distance(xy[None])[0]),
                                    teacher_heading=teacher_heading)
            rows.append({"episode_id": rec["episode_id"], "SR": rec["metrics"].get("SR"),
                         "collisions": len(rec.get("collisions") or []), "moves": rec.get("moves"), "first": first})
        summary = summarize(r["first"] for r in rows)
        moves = sum(r["moves"] or 0 for r in rows)
        summary["CR"] = round(sum(r["collisions"] for r in rows) / max(moves, 1), 3)
        summary["SR"] = round(float(np.mean([r["SR"] or 0.0 for r in rows])), 3)
        out[str(run)] = {"summary": summary, "episodes": rows}
        print(json.dumps({str(run): summary}))
    if args.out:
        write_json_atomic(args.out, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
