"""Collision modes of the VLNVerse evaluation protocol: how an agent's action moves it.

- :class:`Strict` — every action runs through full physics; the episode ends as a *failure*
  when an obstacle displaces the agent by ``displacement_threshold`` (0.1 m) or more from the
  motion it commanded (``ActionResult.obstacle_displacement``).
- :class:`TelHop` — the agent teleports to the pose the action targets, ignoring obstacles in
  transit; physics only checks the destination: a destination inside an obstacle is resolved by
  ``Simulator.teleport`` to the nearest free pose (counted as a collision) and the episode goes on.
- :class:`Graph` — the agent hops between neighbouring viewpoints of the scene's navigation
  graph; an action is a neighbour node id, or STOP.

Each mode only talks to the backend-neutral ``vlnverse.sim`` API; a collision event is counted
per action in every mode, so CR is comparable across modes.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np

from ..core.params import param, parse_params
from ..core.registry import Registry
from ..sim.types import (ActionResult, AgentPose, DiscreteAction, InvalidActionError, VelocityAction,
                         WaypointAction, wrap_angle)

#: Name → collision-mode class (``strict``, ``telhop``, ``graph``).
MODES: Registry[type["CollisionMode"]] = Registry("collision mode")


@dataclass
class ModeParams:
    """The parameters every collision mode takes (a config's ``mode_params.<mode>``): the discrete
    action sizes. Unset, they come from the simulator's ``ControlConfig``."""

    forward_step: float = param(0.25, low=0.01, high=5.0)
    turn_angle_deg: float = param(15.0, low=0.1, high=180.0)
    look_angle_deg: float = param(15.0, low=0.1, high=90.0)


@dataclass
class StrictParams(ModeParams):
    """Strict's: the displacement (m) by an obstacle that ends an episode."""

    displacement_threshold: float = param(0.1, low=1e-6, high=10.0)


@dataclass
class TelHopParams(ModeParams):
    """Tel-Hop's (and graph's): how far (m) a teleport may land off its target before it counts
    as a resolved collision."""

    resolve_tolerance: float = param(0.01, low=0.0, high=1.0)


def check_mode_params(name: str, params: dict | None, *, file: Any = None) -> None:
    """``params`` (a config's ``mode_params.<name>``) against the mode's ``Params``: unknown keys,
    types and ranges (``ConfigError`` naming ``mode_params.<name>.<key>``); no I/O."""
    parse_params(MODES.get(name).Params, params, owner=f"collision mode '{name}'", file=file,
                 prefix=f"mode_params.{name}")


@dataclass
class StepOutcome:
    """The effect of one agent action under a collision mode."""

    observations: dict[str, Any]
    pose: AgentPose
    collided: bool = False
    contacts: list[dict[str, Any]] = field(default_factory=list)
    stop: bool = False
    failure: str | None = None
    displacement: float = 0.0
    result: ActionResult | None = None


def observe(sim: Any) -> dict[str, Any]:
    """Current observations of every attached sensor, without moving the agent."""
    return sim.get_observations()


@runtime_checkable
class CollisionModeProtocol(Protocol):
    """What the episode loop (``rollout.Rollout``) uses of a collision mode: ``CollisionMode`` and its
    subclasses have it; a graph mode also has ``node``, ``neighbours()`` and ``position(node)``."""

    #: the registered name (``strict``, ``telhop``, ``graph``)
    name: str
    #: metres of one MOVE_FORWARD
    forward_step: float
    #: radians of one TURN_LEFT / TURN_RIGHT
    turn_angle: float

    def reset(self, pose: AgentPose) -> dict[str, Any]:
        """Place the agent at ``pose`` and return the first observations."""

    def step(self, action: Any) -> StepOutcome:
        """Apply ``action``; raise ``InvalidActionError`` when it is not a valid action."""


class CollisionMode:
    """Base class: ``reset(pose)`` places the agent, ``step(action)`` applies one action.

    ``params`` are the discrete action sizes used to compute target poses: ``forward_step`` (m),
    ``turn_angle_deg`` and ``look_angle_deg`` (VLN-CE defaults 0.25 m, 15°, 15°).
    """

    name = "base"
    #: the parameters a config may give (``mode_params.<name>``), with their ranges
    Params: ClassVar[type] = ModeParams

    def __init__(self, sim: Any, *, forward_step: float = 0.25, turn_angle_deg: float = 15.0,
                 look_angle_deg: float = 15.0, **params: Any):
        if params:
            raise TypeError(f"collision mode '{self.name}' got unknown parameter(s) {sorted(params)}")
        self.sim = sim
        self.forward_step = float(forward_step)
        self.turn_angle = math.radians(turn_angle_deg)
        self.look_angle = math.radians(look_angle_deg)

    def reset(self, pose: AgentPose) -> dict[str, Any]:
        """Place the agent at ``pose`` and return the first observations."""
        return self.sim.reset(pose)

    def step(self, action: Any) -> StepOutcome:
        """Apply ``action``; raise ``InvalidActionError`` when it is not a valid action."""
        raise NotImplementedError

    # shared helpers --------------------------------------------------------------------------

    @staticmethod
    def coerce_action(action: Any) -> DiscreteAction | VelocityAction | WaypointAction:
        """Validate an agent's action; anything malformed raises ``InvalidActionError``."""
        if isinstance(action, (VelocityAction, WaypointAction)):
            action.validate()
            return action
        return DiscreteAction.coerce(action)

    def target_pose(self, pose: AgentPose, action: DiscreteAction | VelocityAction | WaypointAction) -> AgentPose:
        """The pose ``action`` commands from ``pose`` if nothing were in the way."""
        x, y, yaw, pitch = pose.x, pose.y, pose.yaw, pose.pitch
        if isinstance(action, WaypointAction):
            c, s = math.cos(yaw), math.sin(yaw)
            return AgentPose(x + c * action.dx - s * action.dy, y + s * action.dx + c * action.dy,
                             wrap_angle(yaw + action.dyaw), pitch)
        if isinstance(action, VelocityAction):
            # exact unicycle (plus lateral slide) integration of a constant body-frame twist
            t, w = action.duration, action.omega
            if abs(w * t) < 1e-9:
                fx, fy = action.v * t, action.lateral * t
            else:
                fx = (action.v * math.sin(w * t) - action.lateral * (1 - math.cos(w * t))) / w
                fy = (action.v * (1 - math.cos(w * t)) + action.lateral * math.sin(w * t)) / w
            c, s = math.cos(yaw), math.sin(yaw)
            return AgentPose(x + c * fx - s * fy, y + s * fx + c * fy, wrap_angle(yaw + w * t), pitch)
        if action == DiscreteAction.MOVE_FORWARD:
            return AgentPose(x + self.forward_step * math.cos(yaw), y + self.forward_step * math.sin(yaw), yaw, pitch)
        if action == DiscreteAction.TURN_LEFT:
            return AgentPose(x, y, wrap_angle(yaw + self.turn_angle), pitch)
        if action == DiscreteAction.TURN_RIGHT:
            return AgentPose(x, y, wrap_angle(yaw - self.turn_angle), pitch)
        if action == DiscreteAction.LOOK_UP:
            return AgentPose(x, y, yaw, pitch + self.look_angle)
        if action == DiscreteAction.LOOK_DOWN:
            return AgentPose(x, y, yaw, pitch - self.look_angle)
        return pose  # STOP


def _contacts(result: ActionResult | None) -> list[dict[str, Any]]:
    if result is None:
        return []
    return [c.to_dict() if hasattr(c, "to_dict") else dict(c) for c in result.contacts]


@MODES.register("strict")
class Strict(CollisionMode):
    """Full physics between actions; displacement by an obstacle of ``displacement_threshold``
    metres or more from the commanded motion ends the episode as a failure (VLNVerse Strict)."""

    name = "strict"
    Params = StrictParams

    def __init__(self, sim: Any, *, displacement_threshold: float = 0.1, **params: Any):
        super().__init__(sim, **params)
        if not displacement_threshold > 0:
            raise ValueError(f"displacement_threshold must be > 0, got {displacement_threshold}")
        self.displacement_threshold = float(displacement_threshold)

    def step(self, action: Any) -> StepOutcome:
        """Execute ``action`` through the simulator's physics."""
        act = self.coerce_action(action)
        if act is DiscreteAction.STOP:
            return StepOutcome(observe(self.sim), self.sim.pose, stop=True)
        obs, result = self.sim.step(act)
        failure = None
        if result.obstacle_displacement >= self.displacement_threshold:
            failure = (f"displaced {result.obstacle_displacement:.3f} m by an obstacle "
                       f"(threshold {self.displacement_threshold} m)")
        return StepOutcome(obs, result.achieved_pose, collided=bool(result.collided), contacts=_contacts(result),
                           failure=failure, displacement=float(result.obstacle_displacement), result=result)


@MODES.register("telhop")
class TelHop(CollisionMode):
    """Teleport to each action's target pose, ignoring obstacles in transit; a destination in
    collision is resolved to the nearest free pose (one collision event) and the episode goes on.

    ``resolve_tolerance`` (m) is how far ``teleport`` may move the agent off the target before
    it counts as a resolved collision.

    With the scene's ``planner`` (a ``PathPlanner`` on the navigable map) a destination off the
    navigable map — outside the building, or where no floor is — is first moved to the nearest
    navigable cell; if that cell is not reachable from where the agent stands (another connected
    component), the hop is refused and the agent stays (turning to the commanded heading). Both
    count as a collision. Without a planner only the simulator's resolution applies.
    """

    name = "telhop"
    Params = TelHopParams

    def __init__(self, sim: Any, *, resolve_tolerance: float = 0.01, planner: Any = None, **params: Any):
        super().__init__(sim, **params)
        self.resolve_tolerance = float(resolve_tolerance)
        self.planner = planner

    def _reachable_destination(self, here: AgentPose, target: AgentPose) -> tuple[AgentPose, bool]:
        """``target`` moved onto the navigable map, reachable from ``here``; flag if it was moved."""
        if self.planner is None or self.planner.is_navigable(target.xy)[0]:
            return target, False
        rows, cols, _ = self.planner.snap(np.stack([target.xy, here.xy]))
        labels = self.planner.components()[rows, cols]
        if labels[0] != labels[1]:
            return AgentPose(here.x, here.y, target.yaw, target.pitch), True
        x, y = self.planner.cell_centres(rows[:1], cols[:1])[0]
        return AgentPose(float(x), float(y), target.yaw, target.pitch), True

    def step(self, action: Any) -> StepOutcome:
        """Hop to the commanded pose; physics only at the destination."""
        act = self.coerce_action(action)
        if act is DiscreteAction.STOP:
            return StepOutcome(observe(self.sim), self.sim.pose, stop=True)
        target = self.target_pose(self.sim.pose, act)
        destination, moved = self._reachable_destination(self.sim.pose, target)
        result = self.sim.teleport(destination)
        achieved = result.achieved_pose
        moved_off = achieved.distance_to(target)
        collided = moved or bool(result.collided) or moved_off > self.resolve_tolerance
        return StepOutcome(observe(self.sim), achieved, collided=collided, contacts=_contacts(result),
                           displacement=moved_off, result=result)


@MODES.register("graph")
class Graph(CollisionMode):
    """Move between navigation-graph viewpoints: an action is a neighbouring node id (or STOP).

    ``navgraph`` is a ``networkx`` graph whose nodes carry a ``position`` (x, y[, z]). A hop
    is a teleport to the neighbour, facing the direction of travel; asking for a node that is
    not a neighbour of the current one is an invalid action. A hop the simulator had to resolve
    (destination in collision) counts as a collision. The episode starts at the viewpoint
    nearest to the start pose — along the floor when the scene's ``planner`` is given (so not
    one behind a wall), else in a straight line.
    """

    name = "graph"
    Params = TelHopParams

    def __init__(self, sim: Any, *, navgraph: Any = None, resolve_tolerance: float = 0.01, planner: Any = None,
                 **params: Any):
        super().__init__(sim, **params)
        self.planner = planner
        if navgraph is None:
            raise ValueError("graph mode needs the scene's navigation graph (navgraph=...)")
        self.graph = navgraph
        self.resolve_tolerance = float(resolve_tolerance)
        self.node: Any = None
        nodes = list(self.graph.nodes)
        self._node_ids = nodes
        self._node_xy = np.array([self.position(n) for n in nodes], dtype=float).reshape(-1, 2)

    def position(self, node: Any) -> np.ndarray:
        """The (x, y) position of viewpoint ``node``."""
        data = self.graph.nodes[node]
        pos = data.get("position", data.get("pos"))
        return np.asarray(pos, dtype=float)[:2]

    def nearest_node(self, xy: Any) -> Any:
        """The graph node closest to ``xy``: geodesically with a planner, else in a straight line."""
        xy = np.asarray(xy, dtype=float)[:2]
        if self.planner is not None:
            d = self.planner.distance_field(xy).distance(self._node_xy)
            if np.isfinite(d).any():
                return self._node_ids[int(np.argmin(d))]
        return self._node_ids[int(np.argmin(np.linalg.norm(self._node_xy - xy, axis=1)))]

    def neighbours(self) -> list[Any]:
        """Node ids reachable in one hop from the current node."""
        return list(self.graph.neighbors(self.node))

    def reset(self, pose: AgentPose) -> dict[str, Any]:
        """Snap the start to the nearest viewpoint and place the agent there."""
        self.node = self.nearest_node(pose.xy)
        x, y = self.position(self.node)
        return self.sim.reset(AgentPose(float(x), float(y), pose.yaw, pose.pitch))

    def step(self, action: Any) -> StepOutcome:
        """Hop to the neighbouring viewpoint ``action`` (a node id) or STOP."""
        if isinstance(action, (DiscreteAction, str)) and str(getattr(action, "name", action)).upper() == "STOP":
            return StepOutcome(observe(self.sim), self.sim.pose, stop=True)
        try:
            known = action in self.graph and self.graph.has_edge(self.node, action)
        except TypeError:  # unhashable garbage
            known = False
        if not known:
            raise InvalidActionError(f"graph mode: {action!r} is not a neighbour of viewpoint {self.node!r} "
                                     f"(neighbours: {self.neighbours()[:12]})")
        here = self.sim.pose
        x, y = self.position(action)
        target = AgentPose(float(x), float(y), math.atan2(y - here.y, x - here.x), here.pitch)
        result = self.sim.teleport(target)
        self.node = action
        moved_off = result.achieved_pose.distance_to(target)
        collided = bool(result.collided) or moved_off > self.resolve_tolerance
        return StepOutcome(observe(self.sim), result.achieved_pose, collided=collided, contacts=_contacts(result),
                           displacement=moved_off, result=result)


def make_mode(name: str, sim: Any, **params: Any) -> CollisionMode:
    """Instantiate the collision mode ``name`` (``UnknownNameError`` lists the registered ones)."""
    return MODES.get(name)(sim, **params)
