"""Agents: the ``AGENTS`` registry and the baseline agents (random, forward-only, oracle, wall bumper).

A new agent is one decorated class::

    @register_agent("my_agent")
    class MyAgent(Agent):
        def act(self, observations, state):
            return DiscreteAction.MOVE_FORWARD

``reset(episode, context)`` is called at the start of each episode; ``act(observations,
state)`` returns an action (a ``DiscreteAction`` or its name/int, a ``VelocityAction``, a
``WaypointAction``, or a neighbour node id in graph mode). Whatever an agent wants logged per
step (text, reasoning, scores) goes into ``self.outputs``; the runner stores it with the episode.

An agent that talks to chat models (``vlnverse.run.chat_models.ChatModel``, wherever it keeps
them) names them by role in :meth:`Agent.chat_models`; through that hook alone the runner puts
them under the run-wide request limit (``model.concurrency``), lets the agents of one run share a
circuit breaker per role (:func:`join_run`) and names them in ``summary.json``.

Task-level answers are typed actions (``vlnverse.tasks.actions``): on decision (VLN-NF
false-premise) episodes an agent ends with ``Decision.FOUND`` or ``Decision.NOT_FOUND`` (a STOP
that states its decision; the names as strings are accepted too); for goal identification
(VCN-Bench) it returns ``SelectFrame(i)``, the prior-video frame it picks (a step that does not
move the agent). The episode's task type declares which of them it scores.
"""
from __future__ import annotations

import math
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Protocol

import numpy as np

from ..core.errors import ConfigError
from ..core.params import param, parse_params
from ..core.registry import Registry
from ..sim.api import ControlConfig
from ..sim.types import AgentPose, DiscreteAction, WaypointAction, wrap_angle
from ..tasks.chat import CircuitBreaker
from ..tasks.actions import Decision, SelectFrame  # noqa: F401  (the task-level answers agents return)
from ..tasks.scoring import has_ordered_goals  # noqa: F401  (re-exported for agents)

#: Name → agent class.
AGENTS: Registry[type["Agent"]] = Registry("agent")
# agents of optional layers: their module is imported on first use (torch only when asked for)
AGENTS.register_lazy("policy", "vlnverse.learn.agent")
AGENTS.register_lazy("graph_policy", "vlnverse.learn.graph_policy")


#: The ``AGENTS`` tag of agents whose views a vision-language model reads: ``vlnverse eval`` draws
#: their homes with ``render.objects: meshes`` unless the config says otherwise
#: (``config.default_agent_render``). Declared at registration: ``register_agent(name,
#: vision_language=True)``, or ``AGENTS.register_lazy(name, module, tags=(VISION_LANGUAGE,))``.
VISION_LANGUAGE = "vision_language"
#: The ``AGENTS`` tag of the VLN-MME zero-shot agents (``vlnverse.eval.mllm.agents.VARIANTS``:
#: family x chain-of-thought x reflection): ``AGENTS.tagged(VLN_MME)`` lists them.
VLN_MME = "vln_mme"


def register_agent(name: str, *, vision_language: bool = False, tags: tuple[str, ...] = ()):
    """Class decorator adding an agent to ``AGENTS`` under ``name`` (also set as its ``name``) with
    ``tags``; returns the class. ``vision_language``: a vision-language model reads its views (tag
    ``VISION_LANGUAGE``)."""

    def decorator(cls: type) -> type:
        cls.name = name
        return AGENTS.register(name, tags=tuple(tags) + ((VISION_LANGUAGE,) if vision_language else ()))(cls)

    return decorator


def is_vision_language(name: Any) -> bool:
    """Whether agent ``name`` (built-in or plug-in) declared ``VISION_LANGUAGE``; imports nothing."""
    return isinstance(name, str) and AGENTS.has_tag(name, VISION_LANGUAGE)


@dataclass
class AgentState:
    """What the runner tells an agent each step besides its sensor observations.

    ``pose`` is the agent's true pose and ``context`` the scene context (maps, planner):
    privileged information that only oracle/teacher agents should read. ``goal_distance`` is
    the geodesic distance to the episode's goal (the nearest goal point; the last sub-goal of
    ordered goals), callable on (N, 2) points. ``mode`` is the collision mode; in ``graph``
    mode ``node`` is the current viewpoint and the valid actions are STOP and the node ids in
    ``neighbours`` (``(node id, (x, y))`` pairs; empty in the other modes). ``forward_step`` (m)
    and ``turn_angle_deg`` are the discrete action sizes in force (the simulator's
    ``ControlConfig``, as the collision mode applies them).
    """

    step: int
    pose: AgentPose
    max_steps: int
    success_distance: float
    episode: Any = None
    context: Any = None
    goal_distance: Any = None
    collided: bool = False
    mode: str = "strict"
    node: Any = None
    neighbours: list[Any] = field(default_factory=list)
    forward_step: float = ControlConfig.forward_step
    turn_angle_deg: float = ControlConfig.turn_angle_deg


class ChatComponent(Protocol):
    """What the runner needs of a chat model an agent talks to (``vlnverse.run.chat_models.ChatModel``
    is one): its ``kind`` and configured ``model`` name, its ``endpoint`` (no credentials), the
    ``breaker`` that counts its endpoint failures (``vlnverse.tasks.chat.CircuitBreaker``, shared
    by the agents of one run) and the run-wide ``request_limit`` it takes around each request
    it sends (a context manager, or None)."""

    kind: str
    model: str
    breaker: CircuitBreaker
    request_limit: Any

    @property
    def endpoint(self) -> str: ...


class Agent:
    """Base class of evaluation agents. ``params`` come from the eval config's ``agent.params``;
    ``Params`` (a dataclass, ``vlnverse.core.params``) declares them with their ranges, and
    ``make_agent`` checks the given ones against it before building the agent (``None``: the
    constructor alone decides)."""

    name = "agent"
    Params: ClassVar[type | None] = None
    #: the version of the agent's prompt texts, named in ``summary.json`` (None: it prompts no model)
    prompt_version: ClassVar[str | None] = None

    def __init__(self, *, seed: int = 0, model: Any = None, **params: Any):
        if params:
            raise TypeError(f"agent '{self.name}' got unknown parameter(s) {sorted(params)}")
        self.seed = int(seed)
        self.model = model
        self.outputs: list[Any] = []
        #: folders where an episode's relative asset paths (prior videos, reference images) are
        #: looked up, first first (:meth:`add_asset_root`)
        self.asset_roots: list[Path] = []

    def add_asset_root(self, folder: str | Path) -> None:
        """Look an episode's relative asset paths up in ``folder`` before the roots known so far
        (the eval runner adds the run's dataset folder: where ``episodes: generate`` wrote them,
        or the folder of ``episodes.path``)."""
        self.asset_roots.insert(0, Path(folder))

    def find_asset(self, path: str | Path, root: str | Path | None = None) -> Path:
        """An episode's asset file: ``path`` itself when absolute, else under ``root`` (an agent
        param such as ``video_root``) when given, else the first of :attr:`asset_roots` and the
        working folder that holds it (the working folder's path when none does, so the
        caller's error names it)."""
        path = Path(path)
        if path.is_absolute():
            return path
        if root is not None:
            return Path(root) / path
        for base in [*self.asset_roots, Path.cwd()]:
            if (Path(base) / path).is_file():
                return Path(base) / path
        return Path(self.asset_roots[0] if self.asset_roots else Path.cwd()) / path

    def chat_models(self) -> dict[str, ChatComponent]:
        """The chat models this agent talks to, by role: ``navigator`` (the one that decides;
        ``summary.json`` names it as the run's model), ``captioner``, ``assistant`` or a role of
        the agent's own. The runner puts each under the run-wide request limit and the run's
        shared circuit breaker of its role (:func:`join_run`) and names it in ``summary.json``.
        Default: none."""
        return {}

    def required_sensors(self, sensors: list) -> list:
        """Cameras (``CameraSpec``) this agent needs that the run's rig ``sensors`` lacks; the
        runner adds them to the rig before ``check_sensors`` (default: none). A camera whose name
        is taken in the rig by another camera is a ``ConfigError`` there, so an agent names a
        camera of its own differently."""
        return []

    def check_sensors(self, sensors: list) -> None:
        """Called once before a run with its camera rig (``CameraSpec`` list, with the cameras of
        ``required_sensors`` added): raise ``ConfigError`` when this agent cannot act on it
        (default: any rig is fine)."""

    def episodes_note(self, episodes: list) -> str | None:
        """What the run should tell its user about ``episodes`` this agent was not made for (e.g.
        worded in another instruction language than a learned policy's training data), said once
        before the run; default None."""
        return None

    def reset(self, episode: Any, context: Any) -> None:
        """Start a new episode."""
        self.outputs = []

    def act(self, observations: dict[str, Any], state: AgentState) -> Any:
        """Return the next action."""
        raise NotImplementedError

    # -- batched acting (``vlnverse eval --envs N``) ---------------------------------------

    def acts_in_batches(self) -> bool:
        """Whether this agent acts for several episodes at once (``begin_slot`` / ``act_batch``):
        batched evaluation then runs its episodes at once, one ``act_batch`` for the ready ones.
        Such an agent reads no scene context (it stays in the environment's process) and
        ``state.context`` / ``state.goal_distance`` are None. False (the default): the runner
        evaluates the agent's episodes one at a time."""
        return False

    def begin_slot(self, slot: int, episode: Any) -> None:
        """Start ``episode`` in batch slot ``slot`` (what ``reset`` is to ``act``)."""
        raise NotImplementedError(f"agent '{self.name}' does not act in batches")

    def act_batch(self, slots: list[int], observations: list[dict[str, Any]], states: list[AgentState]) -> list[Any]:
        """The next action of each episode in ``slots`` (same order as its ``observations`` and
        ``states``); each must be the action ``act`` would give that episode alone."""
        raise NotImplementedError(f"agent '{self.name}' does not act in batches")

    def slot_outputs(self, slot: int) -> list[Any]:
        """What the agent logged for the episode of ``slot`` (its record's ``agent_outputs``)."""
        raise NotImplementedError(f"agent '{self.name}' does not act in batches")

    @staticmethod
    def neighbour_xy(state: AgentState) -> np.ndarray:
        """Positions (K, 2) of the graph-mode neighbours in ``state.neighbours``."""
        return np.array([xy for _, xy in state.neighbours], dtype=float).reshape(-1, 2)

    def episode_rng(self, episode: Any) -> np.random.Generator:
        """A generator seeded by (agent seed, episode id): results do not depend on episode order."""
        key = zlib.crc32(str(getattr(episode, "episode_id", "")).encode())
        return np.random.default_rng([self.seed, key])


def join_run(agent: Agent, limit: Any = None, peer: Agent | None = None) -> None:
    """Make every chat model of ``agent`` (:meth:`Agent.chat_models`) take the run-wide request
    ``limit`` (a context manager such as ``core.jobs.SharedLimit``; None: none) and, given
    ``peer`` (another agent of the same run), count its endpoint failures on the breaker of the
    peer's model of the same role, so the episode threads of a run open one breaker per role."""
    theirs = peer.chat_models() if peer is not None else {}
    for role, model in agent.chat_models().items():
        model.request_limit = limit
        other = theirs.get(role)
        if other is not None and other is not model:
            model.breaker = other.breaker


def agent_rig(agent: Agent, sensors: list, *, agent_name: str = "the agent") -> list:
    """``sensors`` (``CameraSpec`` list) plus the cameras ``agent.required_sensors(sensors)`` asks
    for; a camera whose name the rig already gives to a different camera is a ``ConfigError``."""
    out = list(sensors)
    for spec in agent.required_sensors(list(sensors)):
        same = next((s for s in out if s.name == spec.name), None)
        if same is None:
            out.append(spec)
        elif same != spec:
            raise ConfigError(f"the agent needs camera '{spec.name}' as {spec.kind} {spec.width}x{spec.height}, "
                              f"the rig has it as {same.kind} {same.width}x{same.height}", field="sensors",
                              expected=f"a rig whose camera '{spec.name}' is what {agent_name} needs, or "
                                       f"another name for the rig's camera")
    return out


def go_to_node(graph: Any, node: int, state: AgentState) -> Any:
    """The action that moves to viewpoint ``node``: the node id in graph mode, else a
    ``WaypointAction`` to its position, facing it (Tel-Hop, Strict's waypoint controller)."""
    if state.mode == "graph":
        return node
    xy = np.asarray(graph.nodes[node]["position"][:2], dtype=float)
    d = xy - np.asarray(state.pose.xy, dtype=float)
    rel = math.atan2(d[1], d[0]) - state.pose.yaw
    dist = float(np.linalg.norm(d))
    return WaypointAction(dx=dist * math.cos(rel), dy=dist * math.sin(rel), dyaw=rel, timeout=10.0)


@dataclass
class RandomParams:
    """``agent.params`` of ``random``."""

    min_steps: int = param(20, low=0, high=100_000)
    stop_prob: float = param(0.05, low=0.0, high=1.0)


@register_agent("random")
class RandomAgent(Agent):
    """Uniform random over MOVE_FORWARD / TURN_LEFT / TURN_RIGHT (seeded per episode).

    STOP is allowed only from step ``min_steps`` on, and then chosen with probability
    ``stop_prob`` per step, so the agent wanders a little before it may stop (a plain uniform
    choice including STOP would end most episodes within a few steps).
    """

    MOVES = (DiscreteAction.MOVE_FORWARD, DiscreteAction.TURN_LEFT, DiscreteAction.TURN_RIGHT)
    Params = RandomParams

    def __init__(self, *, min_steps: int = 20, stop_prob: float = 0.05, **kwargs: Any):
        super().__init__(**kwargs)
        if not 0.0 <= stop_prob <= 1.0:
            raise ValueError(f"random agent: stop_prob must lie in [0, 1], got {stop_prob}")
        self.min_steps = int(min_steps)
        self.stop_prob = float(stop_prob)
        self.rng = np.random.default_rng(self.seed)

    def reset(self, episode: Any, context: Any) -> None:
        """Reseed from the episode id."""
        super().reset(episode, context)
        self.rng = self.episode_rng(episode)

    def act(self, observations: dict[str, Any], state: AgentState) -> DiscreteAction:
        """A random movement, or STOP after ``min_steps`` with probability ``stop_prob``."""
        draw = self.rng.random()
        if state.step >= self.min_steps and draw < self.stop_prob:
            return DiscreteAction.STOP
        if state.mode == "graph":  # a random neighbouring viewpoint
            if not state.neighbours:
                return DiscreteAction.STOP
            return state.neighbours[int(self.rng.integers(len(state.neighbours)))][0]
        return self.MOVES[int(self.rng.integers(len(self.MOVES)))]


@dataclass
class NoAgentParams:
    """The ``agent.params`` of an agent that takes none."""


@register_agent("forward")
class ForwardAgent(Agent):
    """Forward-only baseline: MOVE_FORWARD every step, STOP on the last allowed step."""

    Params = NoAgentParams


    def act(self, observations: dict[str, Any], state: AgentState) -> DiscreteAction:
        """MOVE_FORWARD until the step budget is used up (graph mode: the straightest neighbour)."""
        if state.step >= state.max_steps - 1 or (state.mode == "graph" and not state.neighbours):
            return DiscreteAction.STOP
        if state.mode == "graph":
            delta = self.neighbour_xy(state) - state.pose.xy
            turn = np.abs(wrap_angle(np.arctan2(delta[:, 1], delta[:, 0]) - state.pose.yaw))
            return state.neighbours[int(np.argmin(turn))][0]
        return DiscreteAction.MOVE_FORWARD


@dataclass
class OracleParams:
    """``agent.params`` of ``oracle`` (distances in metres; ``turn_angle_deg`` unset: the simulator's)."""

    clearance: float = param(0.1, low=0.0, high=2.0)
    lookahead: float = param(1.0, low=0.05, high=20.0)
    stop_margin: float = param(0.5, low=0.0, high=10.0)
    stop_distance: float = param(0.5, low=0.0, high=10.0)
    replan_distance: float = param(0.4, low=0.0, high=20.0)
    turn_angle_deg: float | None = param(None, low=0.1, high=180.0)
    patience: int = param(40, low=1, high=100_000)
    waypoint_tolerance: float = param(0.35, low=0.0, high=10.0)


@register_agent("oracle")
class OracleAgent(Agent):
    """Shortest-path follower with the discrete action set (the imitation-learning teacher).

    It plans on the scene occupancy dilated by ``body radius + clearance`` (a little more than
    the body, so it does not scrape walls under physics), follows the planned path by turning
    toward the farthest path point within ``lookahead`` metres that it can reach in a straight
    line on that map (so it never cuts corners) and moving forward, replans when
    pushed more than ``replan_distance`` off the path, and STOPs once the goal's geodesic
    distance is below ``min(stop_distance, success_distance - stop_margin)`` — at the goal, as
    a teacher should, not merely inside the success radius. Where the clearance closes a narrow
    passage it plans with half the clearance, then on the plain navigable map; if ``patience``
    actions in a row bring it no closer it STOPs (a gap too tight for 15° / 0.25 m actions).
    ``best_action(pose)`` gives the teacher action for any pose. Its turn size is the one in
    force (``state.turn_angle_deg``: the simulator's ``ControlConfig``), read at every ``act``;
    a driver calling ``best_action`` without ``act`` sets it with ``use_control(control)``.
    ``turn_angle_deg`` overrides it (a teacher deliberately out of step with the simulator).

    Routes: on long-horizon episodes it visits the sub-goals in order (each counts once its
    geodesic distance is below ``success_distance - stop_margin``) before the final goal; on
    false-premise (VLN-NF) episodes it follows the reference exploration
    (``info["reference_exploration_path"]``: the target room's entry, then the viewpoints that
    see its objects), passing each viewpoint within ``waypoint_tolerance``, and ends with the
    ground-truth FOUND / NOT_FOUND decision.
    """

    Params = OracleParams

    def __init__(self, *, clearance: float = 0.1, lookahead: float = 1.0, stop_margin: float = 0.5,
                 stop_distance: float = 0.5, replan_distance: float = 0.4, turn_angle_deg: float | None = None, patience: int = 40,
                 waypoint_tolerance: float = 0.35, **kwargs: Any):
        super().__init__(**kwargs)
        self.patience = int(patience)
        self.waypoint_tolerance = float(waypoint_tolerance)
        self.route: list[tuple[np.ndarray, float | None]] = []
        self._stop_after_route = False
        self.clearance = float(clearance)
        self.lookahead = float(lookahead)
        self.stop_margin = float(stop_margin)
        if not stop_distance > 0:
            raise ValueError(f"oracle agent: stop_distance must be > 0, got {stop_distance}")
        self.stop_distance = float(stop_distance)
        self.replan_distance = float(replan_distance)
        self._turn_override = None if turn_angle_deg is None else math.radians(float(turn_angle_deg))
        self.turn_angle = math.radians(ControlConfig.turn_angle_deg) if turn_angle_deg is None else self._turn_override
        self._planner_context: Any = None
        self.planner: Any = None
        self.goal_distance: Any = None
        self.goal_xy: np.ndarray | None = None
        self.success_distance = 3.0
        self.path: np.ndarray = np.zeros((0, 2))
        self._progress = 0
        self._goal_node: Any = None
        self._fallbacks: list[Any] = []
        self._best = (math.inf, 0)
        self._final_goal: np.ndarray | None = None
        #: ``best_action``'s last goal distance and aim point, with what they were computed from
        self._remaining_memo: tuple | None = None
        self._aim_memo: tuple | None = None

    def use_control(self, control: Any) -> None:
        """Take the turn size from ``control`` (a ``ControlConfig``, or an ``AgentState``) unless
        ``turn_angle_deg`` was given."""
        if self._turn_override is None:
            self.turn_angle = math.radians(float(control.turn_angle_deg))

    def _planner_for(self, context: Any) -> Any:
        """A planner on the context's occupancy grown by body radius + clearance (kept while the scene maps stay the same)."""
        from ..tasks.pathing import PathPlanner

        if self._planner_context is not context.maps:
            radius = float(context.body.radius)
            planners = []
            for margin in (self.clearance, self.clearance / 2):
                navigable = context.maps.occupancy.dilate(radius + margin)
                if navigable.free_mask().any():
                    planners.append(PathPlanner(navigable))
            self._planner_context, self._fallbacks = context.maps, planners + [context.planner]
        return self._fallbacks[0]

    def reset(self, episode: Any, context: Any) -> None:
        """Plan the episode's shortest path on the clearance map."""
        super().reset(episode, context)
        self._goal_node = None
        self._best = (math.inf, 0)
        self.planner = self._planner_for(context)
        goals = np.array([g.position[:2] for g in episode.goals], dtype=float)
        self.route, self._stop_after_route = [], False
        if Decision.parse(episode.info.get("decision")) is not None:
            self.route = [(np.asarray(p[:2], dtype=float), self.waypoint_tolerance)
                          for p in episode.info.get("reference_exploration_path", [])]
            self._stop_after_route = bool(self.route)
        elif has_ordered_goals(episode) and len(goals) > 1:
            self.route = [(g, None) for g in goals[:-1]]  # None: the success-distance rule
            goals = goals[-1:]
        fields = [context.planner.distance_field(g) for g in goals]  # the metric's own geodesic
        self.goal_distance = lambda pts: np.min([f.distance(np.atleast_2d(pts)) for f in fields], axis=0)
        start = np.asarray(episode.start_position[:2], dtype=float)
        # aim at the goal whose geodesic distance from the start is smallest
        self._final_goal = goals[int(np.argmin([f.distance(start[None])[0] for f in fields]))]
        self.goal_xy = self.route[0][0] if self.route else self._final_goal
        self._replan(start)

    def _replan(self, xy: np.ndarray) -> None:
        """Plan from ``xy`` on the clearance map; where the extra clearance closes a narrow passage,
        fall back to the plain navigable map (then to a straight line)."""
        from ..core.errors import NoNavigableSpaceError

        self.path = np.zeros((0, 2))
        base = self._fallbacks[-1]
        for planner in self._fallbacks:
            # a clearance map snaps a start inside its margin to its nearest free cell, which may
            # lie across a wall or past an obstacle: use it only when that cell is close (a step
            # sideways at most) and in plain sight on the navigable map
            if planner is not base:
                snapped = planner.snap_point(xy)
                if np.linalg.norm(snapped - xy) > 0.1 or not base.segment_free(xy, snapped):
                    continue
            try:
                self.path = np.asarray(planner.shortest_path(xy, self.goal_xy).dense, dtype=float)[:, :2]
                self.planner = planner
                break
            except NoNavigableSpaceError:
                continue
        if len(self.path) == 0:
            self.path = np.asarray([xy, self.goal_xy], dtype=float)
        self._progress = 0

    def _advance_route(self, xy: np.ndarray, threshold: float, replan: bool = True) -> bool:
        """Drop the route points reached from ``xy`` and aim at the next one (or the final goal);
        True when a route that ends the episode (exploration) is complete."""
        base = self._fallbacks[-1]
        while self.route:  # route points (sub-goals, viewpoints) in order, then the final goal
            point, tolerance = self.route[0]
            reach = threshold - self.stop_margin if tolerance is None else tolerance
            if base.geodesic_distance(xy, point) >= reach:
                break
            self.route.pop(0)
            if not self.route and self._stop_after_route:
                return True
            self.goal_xy = self.route[0][0] if self.route else self._final_goal
            self._goal_node = None
            if replan:
                self._replan(xy)
        return False

    def _goal_remaining(self, xy: np.ndarray) -> float:
        """``goal_distance`` at ``xy``; the last value again while the position (bit for bit) and
        the goal's distance function are the same (the agent turned in place)."""
        key = (xy.tobytes(), self.goal_distance)
        memo = self._remaining_memo
        if memo is not None and memo[0] == key[0] and memo[1] is key[1]:
            return memo[2]
        remaining = float(self.goal_distance(xy[None])[0])
        self._remaining_memo = (*key, remaining)
        return remaining

    def _aim_at(self, xy: np.ndarray) -> np.ndarray:
        """The path point to head for from ``xy`` (``best_action``): the farthest one within
        ``lookahead`` in plain sight, else the one ~0.3 m ahead. A function of ``xy``, the path,
        the progress index, the planners and ``lookahead``, so it is reused while all are the
        same (the agent turned in place: ~40% of a teacher's steps)."""
        key = (xy.tobytes(), self._progress, self.lookahead, self.path, self.planner, self._fallbacks[-1])
        memo = self._aim_memo
        if memo is not None and memo[:3] == key[:3] and all(m is k for m, k in zip(memo[3:6], key[3:])):
            return memo[6]
        ahead = self.path[self._progress:]
        along = np.concatenate(([0.0], np.cumsum(np.linalg.norm(np.diff(ahead, axis=0), axis=1))))
        # pursue the farthest path point within ``lookahead`` whose straight line from here stays
        # on the clearance map (on the navigable map while inside the clearance margin): the
        # agent never cuts a corner into a door jamb
        cand = ahead[:max(1, int(np.searchsorted(along, self.lookahead, side="right")))]
        checker = self.planner if self.planner.is_navigable(xy)[0] else self._fallbacks[-1]
        free = checker.segments_free(np.repeat(xy[None], len(cand), axis=0), cand)
        free &= np.linalg.norm(cand - xy, axis=1) >= 0.5 * self.lookahead  # too close: no heading
        if free.any():
            target = cand[np.flatnonzero(free)[-1]]
        else:  # a one-cell-wide passage or inside the margin: the path point ~0.3 m ahead
            target = ahead[min(int(np.searchsorted(along, 0.3)), len(ahead) - 1)]
        self._aim_memo = (*key, target)
        return target

    def best_action(self, pose: AgentPose, success_distance: float | None = None) -> DiscreteAction:
        """The teacher's action at ``pose``: STOP near the goal, else turn toward / move along the path."""
        threshold = self.success_distance if success_distance is None else success_distance
        xy = pose.xy
        if self._advance_route(xy, threshold):
            return DiscreteAction.STOP
        base = self._fallbacks[-1]
        if self.route:
            # progress: route points left, then the distance to the current one along the floor
            remaining = 1000.0 * len(self.route) + float(base.geodesic_distance(xy, self.goal_xy))
        else:
            remaining = self._goal_remaining(xy)
            if remaining < min(self.stop_distance, threshold - self.stop_margin):
                return DiscreteAction.STOP
        # give up (STOP) when ``patience`` actions brought it no 0.1 m closer: stuck in a
        # passage too tight for the discrete action set
        best, since = self._best
        self._best = (remaining, 0) if remaining < best - 0.1 else (best, since + 1)
        if self._best[1] >= self.patience:
            return DiscreteAction.STOP
        # progress along the dense path: nearest point at or after the last progress index
        d = np.linalg.norm(self.path[self._progress:] - xy, axis=1)
        if d.size == 0 or d.min() > self.replan_distance:
            self._replan(xy)
            d = np.linalg.norm(self.path - xy, axis=1)
        self._progress += int(np.argmin(d))
        target = self._aim_at(xy)
        ahead = self.path[self._progress:]
        if np.linalg.norm(target - xy) < 1e-6:
            target = ahead[-1] if np.linalg.norm(ahead[-1] - xy) > 1e-6 else self.goal_xy
        error = wrap_angle(math.atan2(target[1] - xy[1], target[0] - xy[0]) - pose.yaw)
        # a little over half a turn, so that a turn that over/undershoots by a fraction of a
        # degree under physics cannot make the agent flip between TURN_LEFT and TURN_RIGHT
        if abs(error) <= 0.55 * self.turn_angle:
            return DiscreteAction.MOVE_FORWARD
        return DiscreteAction.TURN_LEFT if error > 0 else DiscreteAction.TURN_RIGHT

    def act(self, observations: dict[str, Any], state: AgentState) -> DiscreteAction:
        """``best_action`` at the true pose (privileged state), or ``best_graph_action`` in graph
        mode; on false-premise episodes it stops with the ground-truth FOUND / NOT_FOUND."""
        self.success_distance = state.success_distance
        self.use_control(state)
        action = self.best_graph_action(state) if state.mode == "graph" else self.best_action(state.pose)
        decision = Decision.parse(getattr(state.episode, "info", {}).get("decision"))
        if action is DiscreteAction.STOP and decision is not None:
            return decision  # privileged: the ground-truth answer of a decision (false-premise) episode
        return action

    def best_graph_action(self, state: AgentState) -> Any:
        """Graph mode: STOP near the goal (after any route), else the next viewpoint on the
        shortest graph route to the viewpoint geodesically closest to the current target."""
        import networkx as nx

        xy = state.pose.xy
        if self._advance_route(xy, state.success_distance, replan=False):
            return DiscreteAction.STOP
        if not self.route and float(self.goal_distance(xy[None])[0]) < state.success_distance - self.stop_margin:
            return DiscreteAction.STOP
        nav = state.context.navgraph
        if self._goal_node is None:
            ids = sorted(nav.graph.nodes)
            target = self._fallbacks[-1].distance_field(self.goal_xy)
            self._goal_node = ids[int(np.argmin(target.distance(nav.positions())))]
        here = state.node if state.node is not None else nav.nearest_node(xy)
        try:
            route = nav.shortest_path(here, self._goal_node)
        except nx.NetworkXNoPath:
            return DiscreteAction.STOP
        return DiscreteAction.STOP if len(route) < 2 else route[1]


@dataclass
class WallBumperParams:
    """``agent.params`` of ``wall_bumper`` (metres)."""

    hop: float = param(1.0, low=0.01, high=20.0)
    stop_margin: float = param(0.5, low=0.0, high=10.0)


@register_agent("wall_bumper")
class WallBumperAgent(Agent):
    """Test agent: faces the goal in a straight line and hops ``hop`` metres toward it with a
    ``WaypointAction``, walls or not. Under Strict physics a wall in the way stops it (failure);
    under Tel-Hop it hops through thin walls. STOPs when Euclidean-close to the goal."""

    Params = WallBumperParams

    def __init__(self, *, hop: float = 1.0, stop_margin: float = 0.5, **kwargs: Any):
        super().__init__(**kwargs)
        self.hop = float(hop)
        self.stop_margin = float(stop_margin)
        self.goal_xy = np.zeros(2)

    def reset(self, episode: Any, context: Any) -> None:
        """Remember the (first) goal."""
        super().reset(episode, context)
        self.goal_xy = np.asarray(episode.goals[0].position[:2], dtype=float)

    def act(self, observations: dict[str, Any], state: AgentState) -> Any:
        """Straight toward the goal, ignoring everything in between."""
        delta = self.goal_xy - state.pose.xy
        dist = float(np.linalg.norm(delta))
        if dist < state.success_distance - self.stop_margin:
            return DiscreteAction.STOP
        dyaw = wrap_angle(math.atan2(delta[1], delta[0]) - state.pose.yaw)
        c, s = math.cos(dyaw), math.sin(dyaw)
        step = min(self.hop, dist)
        return WaypointAction(dx=c * step, dy=s * step, dyaw=dyaw, timeout=10.0)


def make_agent(name: str, params: dict[str, Any] | None = None, *, seed: int = 0, model: Any = None) -> Agent:
    """Instantiate the registered agent ``name`` (``UnknownNameError`` lists the names)."""
    cls = AGENTS.get(name)
    if cls.Params is not None:  # unknown keys, types and ranges, before anything is built
        parse_params(cls.Params, params, owner=f"agent '{name}'", prefix="agent.params")
    try:
        return cls(seed=seed, model=model, **dict(params or {}))
    except (TypeError, ValueError) as exc:
        from ..core.errors import ConfigError

        raise ConfigError(str(exc), field="agent.params") from None


# The eight VLN-MME agents (``VLN_MME``; ``vlnverse.eval.mllm.agents.VARIANTS``), registered by
# their module, which is imported on first use (it imports this one).
for _name in (f"{family}{cot}{refl}" for family in ("navgpt", "mapgpt") for cot in ("", "_cot")
              for refl in ("", "_reflection")):
    AGENTS.register_lazy(_name, "vlnverse.eval.mllm.agents", tags=(VISION_LANGUAGE, VLN_MME))
# ROAM (VLN-NF) and the Set-of-Marks baseline; the MV-DualVLN pixel-goal agent (VCN-Bench). ROAM's
# room classifier reads object categories in line of sight, not pixels; its in-room explorer
# prompts an MLLM.
for _name, _module in (("roam", "vlnverse.eval.roam"), ("roam_detector", "vlnverse.eval.roam"), ("som", "vlnverse.eval.roam"),
                       ("mv_dualvln", "vlnverse.eval.pixel_goal")):
    AGENTS.register_lazy(_name, _module, tags=(VISION_LANGUAGE,))
#: The built-in agents that declare ``VISION_LANGUAGE`` (plug-ins: ``is_vision_language``).
VISION_LANGUAGE_AGENTS = tuple(AGENTS.tagged(VISION_LANGUAGE))
