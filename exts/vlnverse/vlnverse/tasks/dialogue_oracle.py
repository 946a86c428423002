"""Oracles for dialogue navigation: answer an agent's questions about where its target is.

``DialogueOracle.answer(question, agent_position, agent_yaw) -> str`` is the interface.

* ``SceneGraphOracle`` (default) answers from the scene graph and the geodesic path from the
  agent to the goal: which room the target is in, how many rooms ahead along the path it is,
  which way to go (left/right/ahead/behind: the bearing of the next path waypoint relative to
  the agent's yaw), what the target is on or near, and how far it is. Example: "The mug is in
  the kitchen, two rooms ahead on your left."
* ``LLMOracle`` sends the question and the scene-graph oracle's facts to an OpenAI-compatible
  chat endpoint and falls back to the scene-graph answer if the endpoint fails.

``oracle_for_episode(episode, ctx)`` builds the oracle a dialogue episode asks for from
``episode.info["oracle"]`` and the episode's scene context.
"""
from __future__ import annotations

import math
import os
import re
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from ..core.errors import ConfigError, NoNavigableSpaceError
from .instructions.grammar import capitalize_first, number_word
from .instructions.lexicon import Lexicon, attribute_adjectives
from .instructions.llm import ChatClient, LLMError
from .instructions.phrases import RELATION_WORDS

#: Bearings (deg, |relative yaw|) separating "ahead" / "on your left|right" / "behind".
AHEAD_DEG = 30.0
BEHIND_DEG = 135.0


class DialogueOracle(Protocol):
    """Answers an agent's question given its pose (position [x, y(, z)], yaw in rad CCW from +X)."""

    def answer(self, question: str, agent_position, agent_yaw: float) -> str:
        """A short natural-language answer to ``question`` for the agent's current pose."""
        ...


def relative_direction(agent_xy, agent_yaw: float, point_xy) -> str:
    """``ahead``, ``behind``, ``left`` or ``right``: where ``point_xy`` lies seen from the agent."""
    dx, dy = float(point_xy[0]) - float(agent_xy[0]), float(point_xy[1]) - float(agent_xy[1])
    if math.hypot(dx, dy) < 1e-9:
        return "ahead"
    rel = math.degrees((math.atan2(dy, dx) - agent_yaw + math.pi) % (2 * math.pi) - math.pi)
    if abs(rel) <= AHEAD_DEG:
        return "ahead"
    if abs(rel) >= BEHIND_DEG:
        return "behind"
    return "left" if rel > 0 else "right"


@dataclass
class OracleTarget:
    """What the oracle knows about the target (from ``info["oracle"]["target"]``)."""

    instance_id: int
    category: str
    room_id: int | None
    room_type: str | None
    goal_xy: np.ndarray
    attributes: dict
    relation: str | None = None
    anchor_category: str | None = None

    @classmethod
    def from_info(cls, target: dict, *, source: str = "episode info") -> "OracleTarget":
        """Build from a ``target_info`` record; a missing key raises ``ConfigError``."""
        try:
            rel = target.get("relation") or {}
            return cls(instance_id=int(target["instance_id"]), category=str(target["category"]),
                       room_id=None if target.get("room_id") is None else int(target["room_id"]),
                       room_type=target.get("room_type"), goal_xy=np.asarray(target["goal_point"], float)[:2],
                       attributes=dict(target.get("attributes") or {}), relation=rel.get("relation"),
                       anchor_category=rel.get("anchor_category"))
        except (KeyError, TypeError, ValueError) as exc:
            raise ConfigError(f"oracle target record is incomplete ({exc})", file=source, field="info.oracle.target",
                              expected="instance_id, category, room_id, room_type, goal_point") from None


class SceneGraphOracle:
    """Rule-based oracle over the scene graph, the room map and geodesic paths to the goal."""

    def __init__(self, target: OracleTarget, planner, room_map: np.ndarray, room_types: dict[int, str],
                 lexicon: Lexicon | None = None):
        self.target = target
        self.planner = planner
        self.room_map = np.asarray(room_map)
        self.room_types = dict(room_types)
        self.lexicon = lexicon or Lexicon()

    @classmethod
    def from_context(cls, target: OracleTarget, ctx) -> "SceneGraphOracle":
        """Oracle for ``target`` in the scene of a task ``SceneContext``."""
        room_types = {int(r["room_id"]): str(r["room_type"]) for r in ctx.maps.scene_graph.rooms()}
        return cls(target, ctx.planner, ctx.room_map, room_types)

    # ------------------------------------------------------------------ facts
    def _room_at(self, xy: np.ndarray) -> np.ndarray:
        rows, cols, _ = self.planner.snap(np.atleast_2d(xy))
        return self.room_map[rows, cols]

    def facts(self, agent_position, agent_yaw: float) -> dict:
        """Everything the oracle can say for this pose: room, rooms ahead, direction, distance."""
        agent = np.asarray(agent_position, dtype=float)[:2]
        current = int(self._room_at(agent)[0])
        try:
            path = self.planner.shortest_path(agent, self.target.goal_xy)
        except NoNavigableSpaceError:   # the agent stands where the goal cannot be reached
            return {"current_room": current, "rooms_on_path": [], "rooms_ahead": None, "reachable": False,
                    "direction": relative_direction(agent, agent_yaw, self.target.goal_xy),
                    "distance": float("inf"),
                    "in_target_room": self.target.room_id is not None and current == self.target.room_id}
        rooms = self._room_at(path.dense)
        sequence: list[int] = []
        for r in rooms[rooms >= 0]:
            if not sequence or sequence[-1] != int(r):
                sequence.append(int(r))
        # Rooms ahead: transitions along the path until the target's room (0 = already there).
        if current >= 0 and (not sequence or sequence[0] != current):
            sequence.insert(0, current)
        ahead = sequence.index(self.target.room_id) if self.target.room_id in sequence else None
        # Next waypoint at least 0.3 m away decides the direction.
        direction = "ahead"
        for wp in path.waypoints[1:]:
            if np.hypot(*(wp - agent)) >= 0.3:
                direction = relative_direction(agent, agent_yaw, wp)
                break
        return {"current_room": current, "rooms_on_path": sequence, "rooms_ahead": ahead, "reachable": True,
                "direction": direction, "distance": float(path.length),
                "in_target_room": self.target.room_id is not None and current == self.target.room_id}

    # ------------------------------------------------------------------ phrasing
    def _target_phrase(self) -> str:
        adjectives = attribute_adjectives(self.target.attributes, ("color",))
        return "the " + " ".join(adjectives + [self.lexicon.object_phrase(self.target.category)])

    def _room_phrase(self) -> str:
        return "the " + self.lexicon.room_phrase(self.target.room_type) if self.target.room_type else "this house"

    @staticmethod
    def _direction_phrase(direction: str) -> str:
        return {"ahead": "straight ahead", "behind": "behind you"}.get(direction, f"on your {direction}")

    def _rooms_ahead_phrase(self, ahead: int | None) -> str:
        if not ahead:
            return ""
        return "in the next room" if ahead == 1 else f"{number_word(ahead)} rooms ahead"

    def room_answer(self, f: dict) -> str:
        """Where the target is (room and rooms ahead), with the direction to go."""
        target, room = self._target_phrase(), self._room_phrase()
        direction = self._direction_phrase(f["direction"])
        if f["in_target_room"]:
            return f"{capitalize_first(target)} is here in {room}, {direction}."
        ahead = self._rooms_ahead_phrase(f["rooms_ahead"])
        if ahead and f["direction"] in ("left", "right"):
            return f"{capitalize_first(target)} is in {room}, {ahead} {direction}."
        if ahead:
            hint = "keep going straight" if f["direction"] == "ahead" else "turn around first"
            return f"{capitalize_first(target)} is in {room}, {ahead}; {hint}."
        return f"{capitalize_first(target)} is in {room}; go {direction.replace('on your ', '')} from here."

    def direction_answer(self, f: dict) -> str:
        """Which way to go next."""
        go = {"ahead": "Keep going straight ahead", "behind": "Turn around, it is behind you"}.get(
            f["direction"], f"Turn {f['direction']}")
        return f"{go}; {self._target_phrase()} is about {f['distance']:.0f} metres away along the way."

    def describe_answer(self, f: dict) -> str:
        """What the target looks like and what it is on or near."""
        target = self._target_phrase()
        if self.target.relation and self.target.anchor_category:
            prep = RELATION_WORDS.get(self.target.relation, (self.target.relation.replace("_", " "),))[0]
            anchor = self.lexicon.object_phrase(self.target.anchor_category)
            return f"{capitalize_first(target)} is {prep} the {anchor} in {self._room_phrase()}."
        return f"{capitalize_first(target)} is in {self._room_phrase()}."

    def distance_answer(self, f: dict) -> str:
        """How far the target is along the path."""
        if f["distance"] < 1.0:
            return f"You are right next to {self._target_phrase()}."
        where = self._direction_phrase(f["direction"])
        return f"{capitalize_first(self._target_phrase())} is about {f['distance']:.0f} metres away, {where}."

    def answer(self, question: str, agent_position, agent_yaw: float) -> str:
        """Answer ``question`` for an agent at ``agent_position`` facing ``agent_yaw``."""
        f = self.facts(agent_position, agent_yaw)
        if not f["reachable"]:
            return (f"{capitalize_first(self._target_phrase())} is in {self._room_phrase()}, but there is no way "
                    f"there from where you are; it lies {self._direction_phrase(f['direction'])}.")
        q = question.lower()
        if re.search(r"\b(how far|distance|close|near enough|there yet)\b", q):
            return self.distance_answer(f)
        if re.search(r"\b(which way|direction|turn|left|right|go next|where (do|should) i go)\b", q):
            return self.direction_answer(f)
        if re.search(r"\b(what does|look like|on top|on what|what is it (on|near|next to)|near what|colou?r)\b", q):
            return self.describe_answer(f)
        return self.room_answer(f)


class LLMOracle:
    """Oracle answering through an OpenAI-compatible chat endpoint, grounded by a ``SceneGraphOracle``.

    The endpoint sees the question and the scene-graph oracle's facts and answer; on any endpoint
    failure the scene-graph answer is returned.
    """

    SYSTEM_PROMPT = ("You are a helpful guide for a robot navigating a home. Answer the robot's question in one "
                     "or two sentences using only the facts given. Never invent objects or rooms.")

    def __init__(self, client: ChatClient, fallback: SceneGraphOracle):
        self.client = client
        self.fallback = fallback

    def answer(self, question: str, agent_position, agent_yaw: float) -> str:
        """The LLM's answer, or the scene-graph oracle's when the endpoint fails."""
        grounded = self.fallback.answer(question, agent_position, agent_yaw)
        f = self.fallback.facts(agent_position, agent_yaw)
        facts = (f"Target: {self.fallback._target_phrase()} in {self.fallback._room_phrase()}. "
                 f"Direction to go: {f['direction']}. Distance: {f['distance']:.1f} m. "
                 f"Reference answer: {grounded}")
        messages = [{"role": "system", "content": self.SYSTEM_PROMPT},
                    {"role": "user", "content": f"Facts: {facts}\nQuestion: {question}"}]
        try:
            return self.client.complete(messages) or grounded
        except LLMError:
            return grounded


def oracle_for_episode(episode, ctx) -> DialogueOracle:
    """The oracle described by ``episode.info["oracle"]`` for the episode's scene context."""
    info = episode.info.get("oracle") if isinstance(episode.info, dict) else None
    source = f"episode {episode.episode_id}"
    if not isinstance(info, dict) or "target" not in info:
        raise ConfigError("dialogue episode has no oracle record", file=source, field="info.oracle",
                          expected="a mapping with 'type' and 'target' (generate with task 'dialogue')")
    base = SceneGraphOracle.from_context(OracleTarget.from_info(info["target"], source=source), ctx)
    kind = info.get("type", "scene_graph")
    if kind == "scene_graph":
        return base
    if kind == "llm":
        if not info.get("url"):
            raise ConfigError("llm oracle without endpoint", file=source, field="info.oracle.url",
                              expected="an OpenAI-compatible base URL")
        return LLMOracle(ChatClient(info["url"], model=info.get("model") or "default",
                                    api_key=os.environ.get("VLNVERSE_LLM_API_KEY")), base)
    raise ConfigError(f"unknown oracle type '{kind}'", file=source, field="info.oracle.type",
                      expected="scene_graph or llm")
