"""ROAM (VLN-NF Sec. 4): Room-Level Navigator + In-room Explorer + FREE, and the Set-of-Marks baseline.

* **Room-Level Navigator** (Sec. 4.1): the target room type ``r*`` is parsed from the
  instruction with the toolkit's lexicon (:func:`parse_target`); every navigation-graph viewpoint
  gets a room label ``r(v)`` — from the room classifier that ``vlnverse train room_classifier``
  trains with room-level supervision only (``vlnverse.learn.room_classifier``; ``room_labels:
  classifier``, the default) or, as an ablation, the ground truth of the
  room maps (``room_labels: ground_truth``); the agent walks the graph's shortest route to
  ``argmin_{v : r(v) = r*} d_G(v_start, v)``. An instruction without a parsable room (or a room
  type no viewpoint carries) falls back to exploring from the start over the whole graph
  (``fallback`` in the agent's first output).
* **In-room Explorer** (Sec. 4.2): NavGPT-style prompting (the ``navgpt`` agent's prompts,
  parsing and re-prompts) restricted to the target room's viewpoints, actions = move to a
  neighbour, FOUND, NOT_FOUND. **The model decides**, grounded as the paper describes: each step
  the detector's score for the named object (``detector: visibility`` — the toolkit's
  line-of-sight signal: 1 when an instance of the category is in view within ``detect_range``,
  else 0 — or ``detector: model``, the MLLM asked for a 0–1 score on the four views) enters the
  prompt; the model's FOUND is accepted only where that score reaches ``tau``, its NOT_FOUND only
  once the ``stop_criterion`` holds; otherwise it is overruled (logged) and the agent moves on
  toward the nearest unvisited room viewpoint. ``stop_criterion``: ``coverage`` (at least
  ``min_room_coverage`` of the room's viewpoints visited), ``frontier`` (no unvisited room
  viewpoint left) or ``budget`` (``explore_budget`` in-room moves); frontier exhaustion and the
  budget are also hard constraints under every criterion: the model is asked for its decision
  with no move offered, and anything but a grounded FOUND ends with NOT_FOUND (a model that loops
  cannot keep it exploring). With the endpoint down no episode is evaluated.
  ``roam_detector`` is the ablation where the detector and the criterion decide alone (the
  model only picks the moves).
* **FREE** (Sec. 4.3): each candidate's clearance from :mod:`vlnverse.eval.free_space`
  (``free: false`` to ablate) is added to the option line (``clearance 2.3 m``).
* ``som``: the Set-of-Marks baseline (Sec. 5.1): numbered markers on the image, no captions and
  no per-option text (distance, angle): the model reads the image.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np

from ..core.config import require
from ..core.errors import ConfigError
from ..core.params import param
from ..run.agents import AgentState, go_to_node, register_agent
from ..run.rooms import load_room_classifier, node_room_types, semantic_features, visible_categories
from ..tasks.actions import Decision
from .mllm.agents import MLLMAgent, MLLMParams

LABEL_SOURCES = ("classifier", "ground_truth")
STOP_CRITERIA = ("coverage", "frontier", "budget")
DETECTORS = ("visibility", "model")


# ------------------------------------------------------------------------------------------
# instruction parsing


def parse_target(text: str, room_types: Iterable[str] = (), categories: Iterable[str] = ()) -> tuple[str | None, str | None]:
    """(target room type, target object category) named by an instruction; ``None`` where none is.

    The room is the first room phrase of the toolkit's lexicon; the object the first object
    phrase (a landmark, "on the coffee table", comes after the target in the task's templates).
    """
    from ..tasks.instructions.lexicon import Lexicon
    from ..tasks.types.false_premise.generator import PLAUSIBLE_OBJECTS

    cats = set(categories) | {c for v in PLAUSIBLE_OBJECTS.values() for c in v}
    rooms = set(room_types) | set(PLAUSIBLE_OBJECTS)
    hits = sorted(Lexicon(sorted(cats), sorted(rooms)).find(text or ""), key=lambda h: h.span[0])
    room = next((sorted(h.names)[0] for h in hits if h.kind == "room"), None)
    obj = next((sorted(h.names)[0] for h in hits if h.kind == "object"), None)
    return room, obj


# ------------------------------------------------------------------------------------------
# room classifier (room-level supervision only)


# ------------------------------------------------------------------------------------------
# detectors


_SCORE = re.compile(r"score\s*[:=]\s*([01](?:\.\d+)?|\.\d+)", re.I)


# ------------------------------------------------------------------------------------------
# the agent


@dataclass
class ROAMParams(MLLMParams):
    """``agent.params`` of ``roam``: the MLLM agents' and ROAM's own (see :class:`ROAMAgent`)."""

    room_labels: str = "classifier"
    room_classifier: str | None = None
    detector: str = "visibility"
    tau: float = param(0.5, low=0.0, high=1.0)
    detect_range: float = param(4.0, low=0.0, high=100.0)
    stop_criterion: str = "coverage"
    min_room_coverage: float = param(0.8, low=1e-6, high=1.0)
    explore_budget: int = param(12, low=1, high=100_000)
    free: bool = True
    free_range: float = param(5.0, low=0.0, high=100.0)

    def validate(self) -> None:
        """The MLLM agents' checks; label source, detector and stop criterion known."""
        super().validate()
        require(self.room_labels in LABEL_SOURCES, "room_labels", f"got {self.room_labels!r}", " or ".join(LABEL_SOURCES))
        require(self.stop_criterion in STOP_CRITERIA, "stop_criterion", f"got {self.stop_criterion!r}",
                " / ".join(STOP_CRITERIA))
        require(self.detector in DETECTORS, "detector", f"got {self.detector!r}", " or ".join(DETECTORS))


class ROAMAgent(MLLMAgent):
    """ROAM (see the module docstring). Parameters beyond the MLLM agents': ``room_labels``
    (``classifier`` / ``ground_truth``), ``room_classifier`` (its checkpoint),
    ``detector`` (``visibility`` / ``model``), ``tau`` (0.5), ``detect_range`` (4.0 m),
    ``stop_criterion`` (``coverage`` / ``frontier`` / ``budget``), ``min_room_coverage`` (0.8),
    ``explore_budget`` (12 moves), ``free`` (true), ``free_range`` (5.0 m)."""

    memory = "history"

    Params = ROAMParams

    def __init__(self, *, room_labels: str = "classifier", room_classifier: str | None = None,
                 detector: str = "visibility", tau: float = 0.5, detect_range: float = 4.0,
                 stop_criterion: str = "coverage", min_room_coverage: float = 0.8, explore_budget: int = 12,
                 free: bool = True, free_range: float = 5.0, **kwargs: Any):
        super().__init__(**kwargs)
        name = self.name
        self.room_labels, self.detector, self.tau = room_labels, detector, float(tau)
        self.detect_range, self.stop_criterion = float(detect_range), stop_criterion
        self.min_room_coverage, self.explore_budget = float(min_room_coverage), int(explore_budget)
        self.free, self.free_range = bool(free), float(free_range)
        self.classifier: Any = None
        if room_labels == "classifier":
            if not room_classifier:
                raise ConfigError("missing", field=f"agent.params.room_classifier ({name})",
                                  expected="the checkpoint of 'vlnverse train room_classifier', "
                                           "or room_labels: ground_truth (the ablation)")
            self.classifier = load_room_classifier(room_classifier, f"agent.params.room_classifier ({name})")
        self._depth = None
        self._labels_memo: dict[Any, dict[int, str | None]] = {}
        self._scene_cache: dict = {}
        self._evidence: tuple | None = None
        self._final: str | None = None

    # -- episode ------------------------------------------------------------------------------------

    def reset(self, episode: Any, context: Any) -> None:
        super().reset(episode, context)
        self._phase = "start"
        self._route: list[int] = []
        self._room_nodes: set[int] = set()
        self._visited_room: list[int] = []
        self._explore_moves = 0
        rooms = {r.room_type for r in context.desc.rooms}
        cats = {o.category for o in context.desc.objects if getattr(o, "category", None)}
        self.target_room, self.target_object = parse_target(getattr(episode, "instruction_text", ""), rooms, cats)

    def labels(self) -> dict[int, str | None]:
        """Room label of every viewpoint of the scene (classifier or ground truth), kept per scene."""
        key = (id(self.context.desc), self.room_labels)
        if key not in self._labels_memo:
            if self.classifier is None:
                self._labels_memo[key] = node_room_types(self.context)
            else:
                graph = self.context.navgraph.graph
                nodes = sorted(graph.nodes)
                feats = np.array([semantic_features(self.context, graph.nodes[n]["position"][:2], self.classifier.categories,
                                                    sight=self.classifier.sight, cache=self._scene_cache) for n in nodes])
                self._labels_memo[key] = dict(zip(nodes, self.classifier.predict(feats)))
        return self._labels_memo[key]

    def _plan(self, start: int, record: dict) -> None:
        """Room-Level Navigator: route to the nearest viewpoint labelled with the target room."""
        import networkx as nx

        labels = self.labels()
        record["target_room"], record["target_object"] = self.target_room, self.target_object
        record["room_labels"] = self.room_labels
        graph = self.context.navgraph.graph
        # door viewpoints stand in the wall's gap, not in a room: never a room-reaching goal
        room = {n for n, lab in labels.items() if self.target_room is not None and lab == self.target_room
                and graph.nodes[n].get("kind") != "door"}
        if not room:
            record["fallback"] = ("no room named in the instruction" if self.target_room is None
                                  else f"no viewpoint labelled {self.target_room}")
            self._room_nodes = set(labels)
            self._phase = "explore"
            return
        dist = nx.single_source_dijkstra_path_length(graph, start, weight="weight")
        reachable = [n for n in room if n in dist]
        if not reachable:
            record["fallback"] = f"no {self.target_room} viewpoint reachable from the start"
            self._room_nodes = set(labels)
            self._phase = "explore"
            return
        goal = min(reachable, key=lambda n: (dist[n], n))
        self._room_nodes = room
        self._route = self.context.navgraph.shortest_path(start, goal)[1:]
        record["room_viewpoint"], record["room_route"] = int(goal), [int(n) for n in self._route]
        self._phase = "navigate" if self._route else "explore"

    # -- acting ---------------------------------------------------------------------------------------

    def _here(self, state: AgentState) -> int:
        return int(state.node) if state.mode == "graph" and state.node is not None else \
            int(self.context.navgraph.nearest_node(state.pose.xy))

    def _go(self, node: int, state: AgentState) -> Any:
        return go_to_node(self.context.navgraph.graph, node, state)

    def _act(self, observations: dict[str, Any], state: AgentState) -> Any:
        here = self._here(state)
        if self._phase == "start":
            record = {"step": state.step, "roam": "plan"}
            self.outputs.append(record)
            self._plan(here, record)
        if self._phase == "navigate":
            if here in self._room_nodes:
                self._phase = "explore"
            else:
                nxt = self._route.pop(0) if self._route else None
                if nxt is None:  # pushed off the route (other modes): replan from here
                    self._phase = "start"
                    return self._act(observations, state)
                self.outputs.append({"step": state.step, "roam": "navigate", "node": here, "action": int(nxt)})
                return self._go(int(nxt), state)
        return self._explore(observations, state, here)

    def _frontier_hop(self, here: int) -> int | None:
        """Next viewpoint on the shortest route to the nearest unvisited room viewpoint."""
        import networkx as nx

        todo = self._room_nodes - set(self._visited_room) - {here}
        if not todo:
            return None
        dist, paths = nx.single_source_dijkstra(self.context.navgraph.graph, here, weight="weight")
        reach = [n for n in todo if n in dist]
        if not reach:
            return None
        goal = min(reach, key=lambda n: (dist[n], n))
        return int(paths[goal][1])

    def hard_stop(self) -> str | None:
        """A hard constraint that ends the search with NOT_FOUND under every criterion: no reachable
        unvisited room viewpoint left (frontier exhausted) or ``explore_budget`` in-room moves."""
        n_room = max(len(self._room_nodes), 1)
        visited = len(set(self._visited_room) & self._room_nodes)
        here = getattr(self, "_at", None)
        if here is not None and self._frontier_hop(here) is None:
            return f"frontier exhausted ({visited}/{n_room} room viewpoints visited)"
        if self._explore_moves >= self.explore_budget:
            return f"budget {self._explore_moves} moves"
        return None

    def criterion(self) -> str | None:
        """Why NOT_FOUND is backed by evidence now under ``stop_criterion`` (None: not yet)."""
        n_room = max(len(self._room_nodes), 1)
        visited = len(set(self._visited_room) & self._room_nodes)
        if self.stop_criterion == "coverage" and visited / n_room >= self.min_room_coverage:
            return f"coverage {visited}/{n_room} room viewpoints"
        return self.hard_stop()

    def detect(self, observations: dict, state: AgentState, here: int, record: dict) -> float:
        """Detector score of the named object at the current viewpoint."""
        if self.target_object is None:
            return 0.0
        if self.detector == "visibility":
            cats = visible_categories(self.context, state.pose.xy, max_range=self.detect_range, cache=self._scene_cache)
            return 1.0 if self.target_object in cats else 0.0
        from ..run.chat_models import png_bytes

        views, _ = self._views(observations, state, here)
        spoken = self.target_object.replace("_", " ")
        prompt = (f"Is there a {spoken} in these four views? Answer 'Score: <a number from 0 to 1>', the probability "
                  "that it is visible.")
        from ..run.rollout import NotEvaluated

        for _ in range(self.max_reprompts + 1):
            gen = self.model.generate([{"role": "user", "content": prompt}], [png_bytes(v) for v in views], store=False)
            if gen.endpoint_failure:
                raise NotEvaluated(gen.error_kind, gen.error or "")
            m = _SCORE.search(gen.text or "") if gen.ok else None
            record.setdefault("detector_attempts", []).append(gen.text)
            if m:
                self.model.remember(gen)
                return float(m.group(1))
        return 0.0

    def _options(self, state: AgentState) -> tuple[Any, list[tuple[Any, Any]]]:
        """In-room candidates: neighbours in the target room, plus the hop toward the nearest
        unvisited room viewpoint when every in-room neighbour has been visited; none once a hard
        constraint ended the search (the model states its decision)."""
        here = self._here(state)
        if getattr(self, "_final", None):
            return here, []
        graph = self.context.navgraph.graph
        pos = lambda n: tuple(map(float, graph.nodes[n]["position"][:2]))  # noqa: E731
        inside = [n for n in sorted(graph.neighbors(here)) if n in self._room_nodes]
        opts = [n for n in inside if n not in self._visited_room]
        hop = self._frontier_hop(here)
        if hop is not None and hop not in opts:
            opts.append(hop)
        if not opts:
            opts = inside or sorted(graph.neighbors(here))
        return here, [(int(n), pos(n)) for n in opts]

    def evidence_lines(self) -> list[str]:
        """What the explorer's prompt says about the evidence: the detector's reading here and
        whether NOT_FOUND is backed yet (the accepted decision forms are in the system prompt)."""
        obj = (self.target_object or "target").replace("_", " ")
        score, why, final = self._evidence
        lines = [f"Detector: {'a ' + obj + ' is in view here' if score >= self.tau else 'no ' + obj + ' in view here'} "
                 f"(score {score:.2f}; FOUND is accepted only where the score is at least {self.tau:g})."]
        if final:
            lines.append(f"The search of this room is over ({final}): answer 'Action: FOUND' or 'Action: NOT_FOUND'.")
        elif why is not None:
            lines.append(f"Evidence for NOT_FOUND: {why}.")
        else:
            lines.append("Keep exploring: NOT_FOUND is accepted once the room has been searched "
                         f"({self.stop_criterion}).")
        return lines

    def task_prompt(self, state: AgentState, candidates: list, node: Any, captions: list[str]) -> str:
        """The NavGPT prompt, plus the target room, the detector's evidence and FREE's clearance per option."""
        text = super().task_prompt(state, candidates, node, captions)
        extra = [f"You are in the target room ({(self.target_room or 'unknown').replace('_', ' ')}); "
                 f"search it for the {(self.target_object or 'target').replace('_', ' ')}."]
        if getattr(self, "_evidence", None) is not None:
            extra += self.evidence_lines()
        if self.free and candidates:
            from .free_space import DepthViews

            if self._depth is None:
                self._depth = DepthViews()
            heads = [state.pose.yaw + c.relative_heading for c in candidates]
            clear = self._depth.clearance(self.context, state.pose.xy, heads, max_range=self.free_range)
            self._last_free = {c.marker: float(d) for c, d in zip(candidates, clear)}
            extra.append("Free space ahead of each option (metres before an obstacle): "
                         + "; ".join(f"{c.marker}: {d:.1f} m" for c, d in zip(candidates, clear)))
        return text + "\n" + "\n".join(extra)

    #: False for the detector-only ablation (``roam_detector``): FOUND / NOT_FOUND from the
    #: detector and the stop criterion, the model only picks the moves
    model_decides = True

    def _explore(self, observations: dict, state: AgentState, here: int) -> Any:
        from .mllm.agents import GenerationError

        self._at = here
        if here in self._room_nodes and here not in self._visited_room:
            self._visited_room.append(here)
        record: dict[str, Any] = {"step": state.step, "roam": "explore", "node": here}
        score = self.detect(observations, state, here, record)
        record["detector_score"] = score
        hard = self.hard_stop()
        if not self.model_decides:  # the ablation: the detector and the criterion decide
            if score >= self.tau:
                self.outputs.append({**record, "action": "FOUND", "evidence": f"detector {score:.2f} >= {self.tau:g}"})
                return Decision.FOUND
            if hard is not None:
                self.outputs.append({**record, "action": "NOT_FOUND", "evidence": hard})
                return Decision.NOT_FOUND
        why = self.criterion()
        self._evidence = (score, why, hard if self.model_decides else None)
        self._final = self._evidence[2]
        self._last_free: dict[int, float] = {}
        try:
            action = super()._act(observations, state)  # the model's step (appends its own record)
        except GenerationError:
            if not self._final:
                raise
            # the search is over and the model gave no valid decision: the hard constraint ends it
            self.outputs[-1].update({k: v for k, v in record.items() if k != "step"})
            self.outputs[-1].update({"action": "NOT_FOUND", "evidence": self._final, "model_invalid": True})
            return Decision.NOT_FOUND
        finally:
            self._evidence = self._final = None
        step = self.outputs[-1]
        step.update({k: v for k, v in record.items() if k != "step"})
        if self._last_free:
            step["free"] = self._last_free
        if isinstance(action, Decision):
            if self.model_decides:
                if action is Decision.FOUND and score >= self.tau:
                    step["evidence"] = f"detector {score:.2f} >= {self.tau:g}"
                    return action
                if action is Decision.NOT_FOUND and why is not None:
                    step["evidence"] = why
                    return action
            # FOUND without the detector's evidence, NOT_FOUND before the room was searched
            # (or, in the ablation, any decision of the model): overruled, the search goes on
            step["overruled"] = action.name
            hop = self._frontier_hop(here)
            if hop is None or hard is not None:
                step["action"] = "NOT_FOUND"
                step["evidence"] = hard or self.criterion() or "frontier exhausted"
                return Decision.NOT_FOUND
            step["action"] = {"target": hop, "overruled": action.name}
            action = self._go(hop, state)
        self._explore_moves += 1
        return action


register_agent("roam")(ROAMAgent)


class ROAMDetectorOnlyAgent(ROAMAgent):
    """Ablation of ROAM (``roam_detector``): FOUND when the detector's score reaches ``tau``,
    NOT_FOUND once the stop criterion holds; the model only chooses the moves (its own FOUND /
    NOT_FOUND are overruled). Its rows measure the detector and the criterion, not the model."""

    model_decides = False


register_agent("roam_detector")(ROAMDetectorOnlyAgent)


class SetOfMarksAgent(MLLMAgent):
    """Set-of-Marks baseline (VLN-NF Sec. 5.1): markers on the image, the options named only by
    their numbers (no distances, angles or captions); FOUND / NOT_FOUND on decision episodes."""

    memory = "history"

    def task_prompt(self, state: AgentState, candidates: list, node: Any, captions: list[str]) -> str:
        lines = [f"Instruction: {getattr(self.episode, 'instruction_text', '')}"]
        lines.append("History:\n" + ("\n".join(self.history[-30:]) if self.history else "none yet (this is the first step)"))
        stop = "FOUND / NOT_FOUND" if self._decisions else "STOP"
        lines.append("Action options: the numbered red-circled markers in the image: "
                     + ", ".join(str(c.marker) for c in candidates) + f"; or {stop}.")
        return "\n".join(lines)


register_agent("som")(SetOfMarksAgent)
