"""Candidate waypoint predictor (Hong et al. 2022, "Bridging the gap between learning in discrete
and continuous environments for VLN"), trained on the toolkit's own scenes.

**Grid.** Around the agent, ``angles`` bins (default 120, 3° each, bin a centred on a·3° CCW from
the heading) × ``distances`` bins (default 12, bin j centred on (j + 1)·``max_distance``/12, so
0.25 … 3 m).

**Ground truth.** The targets are the viewpoints of a dense navigation graph of the scene
(``tasks.navgraph.build_navgraph`` with ``node_spacing`` 0.75 m: a seeded Poisson-disk fill of the
navigable map, doors and room centres first) that are *reachable and collision-free* from the
agent: within the grid's distance range (at least one bin away) and joined to the agent by a
straight segment on navigable cells (``PathPlanner.segments_free``). Each target adds a
Gaussian blob (σ ``sigma_angle`` angle bins, ``sigma_distance`` distance bins; angles wrap) to
the (angles, distances) heatmap; overlapping blobs take the maximum (``gt_heatmap``).

**Model.** Each view of the 12-view depth panorama (optionally RGB too) goes through a small CNN
(``policies.CNNEncoder``); a view-position embedding is added and a transformer encoder mixes
the 12 view tokens; each token predicts the logits of its 30° slice of the heatmap (10 angle
bins × 12 distances). Trained with binary cross-entropy against the Gaussian targets.

**Candidates.** Non-maximum suppression (``nms``) on the sigmoid heatmap: repeatedly take the
highest cell above ``threshold`` and suppress its window (± ``nms_angle`` angle bins, wrapping,
± ``nms_distance`` distance bins), at most ``k`` candidates, each (angle rad CCW, distance m).
Then the **free-space check** (``free_space_filter``, on by default): a candidate is kept only if
the depth panorama sees no obstacle (a point between ``obstacle_floor`` 0.1 m and the body's
height above the floor) within the body's angular half-width (atan(radius / distance)) nearer than
the candidate's distance + ``clearance`` (0.2 m): a candidate behind a wall or a table the agent
can see is dropped. On held-out poses of the val_unseen homes it raised the share of candidates
on navigable cells from 0.90 to 0.99 for a 0.92 → 0.90 next-waypoint hit rate (one run,
default settings).

**Data.** Poses on navigable cells of the given scenes with a uniform heading (seeded), the
depth panorama rendered there, and a "reference path": the planner's shortest path to a random
goal at least 3 m away; the *next reference waypoint* is its first corner, or the point
``lookahead`` (2 m) along its first straight segment when the corner is farther. Metrics on held-out poses: the fraction of candidates on
navigable cells, the fraction of poses with a candidate within 1 m of the next reference
waypoint, the mean number of candidates and how often none was found; the same metrics for the
NMS of the ground-truth heatmap are reported beside them (what a perfect heatmap gives).

``vlnverse waypoints train`` trains and writes a checkpoint, ``metrics.json`` and a loss curve;
``vlnverse waypoints show`` draws candidates on the panorama strip and on the top-down map.

One module per concept: ``grid`` (bins, heatmaps, NMS, free-space check), ``model`` (the predictor and
its file), ``data`` (panoramas and targets), ``train`` (training and metrics), ``draw`` (pictures).
"""
from __future__ import annotations

from .data import PanoramaRenderer, WaypointData, build_dataset, next_reference_waypoint, sample_poses
from .draw import panorama_strip, show_predictions
from .grid import (PANORAMA_HFOV_DEG, WaypointGrid, candidates_polar, free_space_filter, graph_nodes, gt_heatmap, nms,
                   obstacle_points, target_points, to_polar, to_world)
from .model import (FORMAT, FORMAT_VERSION, WaypointPredictor, load_predictor, predictor_from_dict, read_predictor,
                    save_predictor)
from .train import WaypointTrainConfig, candidate_metrics, evaluate, run_waypoint_training, train_predictor

__all__ = ["FORMAT", "FORMAT_VERSION", "PANORAMA_HFOV_DEG", "PanoramaRenderer", "WaypointData", "WaypointGrid",
           "WaypointPredictor", "WaypointTrainConfig", "build_dataset", "candidate_metrics", "candidates_polar",
           "evaluate", "free_space_filter", "graph_nodes", "gt_heatmap", "load_predictor", "next_reference_waypoint",
           "nms", "obstacle_points", "panorama_strip", "predictor_from_dict", "read_predictor", "run_waypoint_training",
           "sample_poses", "save_predictor", "show_predictions", "target_points", "to_polar", "to_world",
           "train_predictor"]
