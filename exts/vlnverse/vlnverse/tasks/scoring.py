"""What a task type declares about how its episodes are scored.

Every task type (a registered ``TaskGenerator``) carries a :class:`TaskScoring`: whether its goals
are ordered sub-goals, whether the agent ends with a FOUND / NOT_FOUND :class:`~vlnverse.tasks.actions.Decision`, whether
it picks a prior-video frame (:class:`~vlnverse.tasks.actions.SelectFrame`), how its goal region is measured, which
success rate is its headline, and optionally its own metrics and success rule. The evaluator
(``vlnverse.run.scoring``) reads the declaration; it holds no task names::

    @register_task("my_task")
    class MyTask(TaskGenerator):
        scoring = TaskScoring(headline="SR", metrics=my_metrics, success=my_success_rule)

``metrics(outcome, ctx) -> dict`` and ``success(outcome, ctx) -> bool`` receive the finished
episode as an :class:`EpisodeOutcome`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable

import numpy as np

#: How a goal region is measured: ``point`` — the geodesic distance to the nearest goal point;
#: ``object_viewpoints`` — the Euclidean distance to the nearest viewpoint of a goal object
#: (VCN-Bench App. C.1, :func:`object_viewpoints`).
GOAL_REGIONS = ("point", "object_viewpoints")


@dataclass
class EpisodeOutcome:
    """A finished (or running) episode as a task's scoring rule sees it.

    ``poses`` are the visited poses (N, 3: x, y, yaw; start first); ``decision`` is the stated
    ``"FOUND"`` / ``"NOT_FOUND"`` (or None), ``selected_frame`` the picked prior-video frame.
    ``metrics`` holds the navigation metrics computed so far (TL, NE, SR, ...).
    """

    episode: Any
    poses: np.ndarray
    stopped: bool
    failure: str | None
    decision: str | None
    selected_frame: int | None
    collisions: int
    moves: int
    metrics: dict[str, Any]

    @property
    def path_xy(self) -> np.ndarray:
        """The visited positions (N, 2)."""
        return np.asarray(self.poses, dtype=float)[:, :2]


@dataclass(frozen=True)
class TaskScoring:
    """A task type's scoring declaration (read by the evaluator; see the module docstring).

    - ``ordered_goals``: the goals are sub-goals to reach in order; SR needs all of them and the
      per-goal flags give SR_n;
    - ``decision``: episodes whose ``info`` holds the expected ``decision`` end with a typed
      FOUND / NOT_FOUND and report the VLN-NF metrics (reach_SR, decision_SR, RD_SR, coverage,
      REV_SPL) instead of the point-goal SR / SPL / sDTW;
    - ``frame_selection``: the agent may pick a prior-video frame (Rid_SR / Oid_SR against
      ``info["target_frames"]``);
    - ``goal_region``: one of :data:`GOAL_REGIONS`;
    - ``room_success``: report RSR for the target room (``info["target_room_id"]`` or the first
      goal's ``room_id``);
    - ``headline``: the success rate shown while a run progresses;
    - ``metrics`` / ``success``: the task's own metrics and success rule (replacing SR, with SPL
      and sDTW weighted by it), called with an :class:`EpisodeOutcome` and the scene context.
    """

    ordered_goals: bool = False
    decision: bool = False
    frame_selection: bool = False
    goal_region: str = "point"
    room_success: bool = False
    headline: str = "SR"
    metrics: Callable[[EpisodeOutcome, Any], dict[str, Any]] | None = None
    success: Callable[[EpisodeOutcome, Any], bool] | None = None

    def __post_init__(self) -> None:
        if self.goal_region not in GOAL_REGIONS:
            raise ValueError(f"TaskScoring.goal_region must be one of {GOAL_REGIONS}, got {self.goal_region!r}")

    def applies_decision(self, episode: Any) -> bool:
        """Whether ``episode`` is scored on its FOUND / NOT_FOUND decision."""
        return self.decision and "decision" in episode.info


#: The scoring of a task type that declares nothing (point goals, SR headline).
DEFAULT_SCORING = TaskScoring()


def scoring_for(task: Any) -> TaskScoring:
    """The scoring declaration of ``task``: a ``TaskScoring``, a task generator (class or
    object) or a registered task-type name; a name no task type is registered under (e.g.
    episodes of a removed type) gets :data:`DEFAULT_SCORING`."""
    if isinstance(task, TaskScoring):
        return task
    if isinstance(task, str):
        from .registry import TASKS, load_task_types

        if task not in TASKS:
            load_task_types()
        if task not in TASKS:
            return DEFAULT_SCORING
        task = TASKS.get(task)
    scoring = getattr(task, "scoring", None)
    return scoring if isinstance(scoring, TaskScoring) else DEFAULT_SCORING


def has_ordered_goals(episode: Any) -> bool:
    """Whether ``episode``'s goals are sub-goals to visit in order (its task type declares
    ``ordered_goals``, or the episode sets ``info["ordered_goals"]``)."""
    return scoring_for(episode.task_type).ordered_goals or bool(episode.info.get("ordered_goals"))


def object_viewpoints(ctx: Any, goals: Iterable[Any], **kwargs: Any) -> np.ndarray:
    """The goal objects' viewpoints (VCN-Bench App. C.1); defined once in
    :func:`vlnverse.tasks.types.goals.object_viewpoints`, which the generators also use."""
    from .types.goals import object_viewpoints as viewpoints

    return viewpoints(ctx, goals, **kwargs)


__all__ = ["DEFAULT_SCORING", "EpisodeOutcome", "GOAL_REGIONS", "TaskScoring",
           "has_ordered_goals", "object_viewpoints", "scoring_for"]
