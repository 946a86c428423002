"""Zero-shot MLLM navigation agents (VLN-MME App. D): eight variants registered in ``AGENTS``.

=====================  ===========================================  ==============================
name                   memory                                       output
=====================  ===========================================  ==============================
navgpt                 text history (turn, distance, description)   ``Action:``
navgpt_cot             text history                                 ``<Reasoning>`` then ``Action:``
navgpt_reflection      text history                                 ``Action:``, ``<Reflection>``,
                                                                    ``Final Decision: keep|revise``
navgpt_cot_reflection  text history                                 reasoning + reflection
mapgpt[...]            text map: connectivity, visited / unvisited  as above
                       places, current place, plus the history
=====================  ===========================================  ==============================

Every step the agent builds the four-view observation (:mod:`.views`), numbers the navigable
candidates, prompts its model (``model=``, a ``MODELS`` entry) with the system and task prompt
and the stitched image, parses the answer (:func:`.parsing.parse_action`) and re-prompts with
the error at most ``max_reprompts`` times; a step still without a valid action raises
:class:`GenerationError`, which the runner records as that step's invalid action. A reflection
that decides to ``revise`` its draft without giving a new action is asked once more (replan).

Modes: in graph mode a move is the chosen neighbour viewpoint; in Strict and Tel-Hop the
candidates are the scene navigation graph's viewpoints adjacent to the nearest one, and a move
is a ``WaypointAction`` to the chosen viewpoint (the waypoint controller).

Everything is logged per step in ``self.outputs`` (stored with the episode by the runner): the
prompts, the saved image file (content-addressed PNG under ``image_dir``) and its SHA-256, every
raw answer with its tokens / latency / cache hit, the parsed action and any generation error.
"""
from __future__ import annotations

import logging
import math
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ...core.config import require
from ...core.errors import VLNVerseError
from ...core.params import param
from ...sim.types import DiscreteAction, WaypointAction
from ...tasks.actions import Decision, SelectFrame
from ...run.agents import VLN_MME, Agent, AgentState, register_agent
from ...run.rollout import NotEvaluated
from ...run.chat_models import ChatModel, image_sha256, png_bytes
from . import cache as _cache  # noqa: F401 - registers the viewpoints backend
from .parsing import parse_action
from .views import Candidate, ViewRenderer, angle_text, directions_map, make_candidates, snapped_front, stitch

log = logging.getLogger(__name__)


class GenerationError(VLNVerseError):
    """No valid action after the re-prompts; the step is recorded as invalid (the model's failure)."""


#: Version of the prompts below (system, task, re-prompt texts); named in ``summary.json`` so
#: results from different prompt revisions are not mixed. Bump it when a prompt text changes.
PROMPT_VERSION = "vln-mme-3"


SYSTEM_PROMPT = """You are an embodied agent navigating an indoor environment by following a natural-language instruction.
Each step you receive:
- the instruction;
{memory_items}- your current heading;
- one image made of four 90-degree views around you, labelled Left, Front, Right, Back; the places you can move to are green circles with marker numbers;
- the action options: marker ids grouped by direction, plus STOP.
Rules:
- Choose exactly one option, referring to it only by its marker id.
- Follow the instruction step by step; do not go back and forth between the same places.
- {stop_rule}
Output format:
{output_format}"""

#: the stop rule of false-premise (VLN-NF) episodes: the accepted decision forms, stated once
DECISION_RULE = ("The target may not exist. When you have explored the target room, end your answer with exactly one "
                 "decision line: 'Action: FOUND' if you see the target object now, or 'Action: NOT_FOUND' if it is not "
                 "in the room (also accepted: 'Action: NOT FOUND', a JSON field {\"action\": \"NOT_FOUND\"}; "
                 "'Action: STOP' counts as FOUND).")

MEMORY_ITEMS = {
    "history": "- the history of your previous steps (turn angle, distance, what you saw on arrival);\n",
    "map": ("- the history of your previous steps;\n- a text map of the places you have discovered: which places connect, "
            "which you have visited, which you have seen but not visited, and where you are;\n"),
}

FORMATS = {
    (False, False): "Action: <marker id or {stop}>",
    (True, False): "<Reasoning>your step-by-step reasoning: progress so far, what to do next, which option fits</Reasoning>\n"
                   "Action: <marker id or {stop}>",
    (False, True): "Action: <marker id or {stop}>\n<Reflection>check the action against the instruction and your history</Reflection>\n"
                   "Final Decision: keep or revise (if revise, end with a new 'Action: <marker id or {stop}>')",
    (True, True): "<Reasoning>your step-by-step reasoning</Reasoning>\nAction: <marker id or {stop}>\n"
                  "<Reflection>check the action against the instruction and your history</Reflection>\n"
                  "Final Decision: keep or revise (if revise, end with a new 'Action: <marker id or {stop}>')",
}


@dataclass
class MLLMParams:
    """``agent.params`` of the MLLM agents (see :class:`MLLMAgent`), with their ranges."""

    max_reprompts: int = param(2, low=0, high=100)
    views: str = "auto"
    view_cache: str | None = None
    image_dir: str | None = None
    view_size: int = param(224, low=8, high=4096)
    caption_model: dict | None = None
    max_questions: int = param(3, low=0, high=1000)
    video_root: str | None = None
    video_frames: int = param(8, low=1, high=10_000)
    merge_distance: float = param(0.5, low=0.0, high=100.0)
    assistant: dict | None = None
    max_consultations: int = param(3, low=0, high=10_000)
    consult_away_steps: int = param(3, low=0, high=100_000)
    consult_off_reference: float = param(2.0, low=0.0, high=1000.0)

    def validate(self) -> None:
        """``views`` names a source of views."""
        require(self.views in VIEW_SOURCES, "views", f"got {self.views!r}", " or ".join(VIEW_SOURCES))


#: where an MLLM agent's views come from (``views``)
VIEW_SOURCES = ("auto", "observations", "cache", "render")


class MLLMAgent(Agent):
    """Base of the eight VLN-MME agents (see the module docstring). Parameters:

    ``max_reprompts`` (re-prompts with the parse error per step), ``views`` (``auto``: the
    observations' ``views_rgb``, else the view cache, else rendering; or one of
    ``observations`` / ``cache`` / ``render``), ``view_cache`` (folder of ``vlnverse cache
    build``; default ``$VLNVERSE_VIEW_CACHE`` or the user cache's ``views``: the
    ``viewpoints`` backend's), ``image_dir`` (where the stitched images are saved;
    default ``<VLNVERSE_CACHE>/mllm_images``), ``view_size`` (pixels of a rendered view),
    ``caption_model`` (``{name, params}`` of a ``MODELS`` entry that describes each view in one
    sentence; none by default), ``max_questions`` (questions to the dialogue oracle per episode),
    ``video_root`` (folder that relative prior-video paths of VCN-Bench episodes start from;
    default the run's dataset folder, where ``episodes: generate`` wrote them, then the working folder), ``video_frames`` (window frames shown for goal identification)
    and ``merge_distance`` (m, default 0.5: candidate viewpoints closer than this to a nearer one
    are shown once, as one marker).

    Goal identification (VCN-Bench, task types whose scoring declares ``frame_selection``): when
    the agent stops, it shows the model ``video_frames`` evenly spaced frames of the prior-video
    window and asks which frame shows the goal (``Frame: <index>``); it returns that answer as
    ``SelectFrame(index)`` (a step that does not move), then STOP. Decision tasks (VLN-NF) end
    with ``Decision.FOUND`` / ``Decision.NOT_FOUND`` instead of STOP.
    """

    memory = "history"
    cot = False
    reflection = False
    prompt_version = PROMPT_VERSION
    Params = MLLMParams

    def __init__(self, *, max_reprompts: int = 2, views: str = "auto", view_cache: str | None = None,
                 image_dir: str | None = None, view_size: int = 224, caption_model: dict | None = None,
                 max_questions: int = 3, video_root: str | None = None, video_frames: int = 8,
                 merge_distance: float = 0.5, assistant: dict | None = None, max_consultations: int = 3,
                 consult_away_steps: int = 3, consult_off_reference: float = 2.0, **kwargs: Any):
        super().__init__(**kwargs)
        if self.model is None:
            raise ValueError(f"agent '{self.name}' needs a model: set 'model: {{name: openai, params: {{...}}}}' "
                             "(or ollama / transformers / scripted)")
        if not isinstance(self.model, ChatModel):
            raise ValueError(f"agent '{self.name}': the model is a {type(self.model).__name__}, not a chat model "
                             "(a MODELS entry built on vlnverse.run.chat_models.ChatModel)")
        from ...paths import cache_dir

        self.max_reprompts, self.max_questions = int(max_reprompts), int(max_questions)
        self.video_root = Path(video_root) if video_root else None  # None: the run's dataset folder, then cwd
        self.video_frames = int(video_frames)
        self.views_source = views
        self.view_cache_root = Path(view_cache) if view_cache else _cache.default_view_cache()
        self.image_dir = Path(image_dir) if image_dir else cache_dir() / "mllm_images"
        self.view_size = int(view_size)
        self.merge_distance = float(merge_distance)
        self._logged_size: tuple[int, int] | None = None
        self.captioner: ChatModel | None = None
        if caption_model:
            from ...run.models import make_model

            self.captioner = make_model(caption_model["name"], caption_model.get("params", {}))
        self.assistant: ChatModel | None = None
        if assistant:
            from ...run.models import make_model

            self.assistant = make_model(assistant["name"], assistant.get("params", {}))
        self.max_consultations, self.consult_away_steps = int(max_consultations), int(consult_away_steps)
        self.consult_off_reference = float(consult_off_reference)
        self._renderer = ViewRenderer(self.view_size)
        self._view_cache: Any = None
        self._captions: dict[str, list[str]] = {}
        self.episode: Any = None
        self.context: Any = None

    def chat_models(self) -> dict[str, ChatModel]:
        """The navigator model, and the caption model and the assistant when configured."""
        return {"navigator": self.model, **({"captioner": self.captioner} if self.captioner is not None else {}),
                **({"assistant": self.assistant} if self.assistant is not None else {})}

    # -- episode ---------------------------------------------------------------------------------

    def reset(self, episode: Any, context: Any) -> None:
        """Start an episode: empty history and map, the dialogue oracle if the task has one."""
        super().reset(episode, context)
        self.episode, self.context = episode, context
        self.history: list[str] = []
        self.places: dict[Any, int] = {}      # node id -> place number (discovery order)
        self.edges: set[tuple[int, int]] = set()
        self.visited: list[int] = []
        self.descriptions: dict[int, str] = {}
        self.questions = 0
        self.dialogue: list[tuple[str, str]] = []
        self._oracle: Any = None
        if "oracle" in getattr(episode, "info", {}) or getattr(episode, "task_type", "") == "dialogue":
            try:
                from ...tasks.dialogue_oracle import oracle_for_episode

                self._oracle = oracle_for_episode(episode, context)
            except Exception as exc:  # noqa: BLE001 - no oracle: questions are simply not offered
                log.info("no dialogue oracle for %s: %s", getattr(episode, "episode_id", "?"), exc)
        from ...tasks.scoring import scoring_for

        scoring = scoring_for(getattr(episode, "task_type", ""))
        self._decisions = scoring.applies_decision(episode)  # FOUND / NOT_FOUND instead of STOP
        self._video: tuple[np.ndarray, np.ndarray] | None = None  # (shown frames, their window indices)
        self._pending_stop = False
        self.consultations = 0
        self.guidance: str | None = None  # the oracle assistant's latest guidance
        self._track: tuple[list, list] = ([], [])  # positions and goal distances since the last consultation
        self._landmarks: dict | None = None
        info = getattr(episode, "info", {})
        if scoring.frame_selection and "video" in info and "window" in info:
            from ...tasks.tours import load_prior_video

            path = Path(info["video"])
            path = self.find_asset(path, self.video_root)
            try:
                frames, _ = load_prior_video(path)
            except VLNVerseError as exc:
                log.warning("episode %s: no goal identification (%s)", getattr(episode, "episode_id", "?"), exc)
            else:
                start, end = (int(v) for v in info["window"])
                window = frames[start:end]
                if len(window):
                    idx = np.unique(np.linspace(0, len(window) - 1, min(self.video_frames, len(window))).round().astype(int))
                    self._video = (window[idx], idx)

    # -- observation --------------------------------------------------------------------------------

    def _options(self, state: AgentState) -> tuple[Any, list[tuple[Any, Any]]]:
        """(current node, [(target, xy)]) of the navigable candidates."""
        if state.mode == "graph":
            return state.node, [(n, tuple(map(float, xy))) for n, xy in state.neighbours]
        nav = getattr(state.context, "navgraph", None)
        if nav is None:
            raise GenerationError("no navigation graph in the scene context: candidates need one outside graph mode")
        here = nav.nearest_node(state.pose.xy)
        opts = [(n, tuple(map(float, nav.graph.nodes[n]["position"][:2]))) for n in sorted(nav.graph.neighbors(here))]
        if np.linalg.norm(np.asarray(nav.graph.nodes[here]["position"][:2]) - state.pose.xy) > 0.5:
            opts.append((here, tuple(map(float, nav.graph.nodes[here]["position"][:2]))))  # off the graph: go back on it
        return here, opts

    def _views(self, observations: dict, state: AgentState, node: Any) -> tuple[np.ndarray, str]:
        """The four global views at the agent's position and where they came from."""
        if self.views_source in ("auto", "observations") and "views_rgb" in observations:
            return np.asarray(observations["views_rgb"]), "observations"
        if self.views_source == "observations":
            raise GenerationError("the observations hold no 'views_rgb' (use the 'viewpoints' backend or views: render)")
        from ...tasks.base import render_options

        options = render_options(self.context)  # the run's render settings: cached or rendered views use them
        if self.views_source in ("auto", "cache") and node is not None:
            from .cache import ViewCache, render_settings

            if self._view_cache is None or self._view_cache.root != self.view_cache_root or \
                    self._view_cache.render != render_settings(options):
                self._view_cache = ViewCache(self.view_cache_root, options)
            views = self._view_cache.views_at(self.context.scene_id, node, state.pose.xy)
            if views is not None:
                return views, "cache"
            if self.views_source == "cache":
                raise GenerationError(f"no cached views of scene {self.context.scene_id!r} viewpoint {node!r} in "
                                      f"{self._view_cache.folder} (run 'vlnverse cache build')")
        return self._renderer.render(self.context.desc, self.context.body, state.pose.xy, options), "render"

    def _caption(self, views: np.ndarray, key: str) -> list[str]:
        """One-sentence descriptions of the four global views (cached per viewpoint)."""
        if self.captioner is None:
            return []
        if key not in self._captions:
            out = []
            for view in views:
                gen = self.captioner.generate([{"role": "user", "content": "Describe this indoor view in one short "
                                                "sentence: the room type and the main objects."}], [view])
                if gen.endpoint_failure:
                    raise NotEvaluated(gen.error_kind, f"caption model: {gen.error}", component="captioner")
                out.append(gen.text.strip().split("\n")[0][:200] if gen.ok else "")
            self._captions[key] = out
        return self._captions[key]

    # -- prompting ---------------------------------------------------------------------------------

    def system_prompt(self) -> str:
        """The variant's system prompt."""
        stop = "FOUND or NOT_FOUND" if self._decisions else "STOP"
        stop_rule = (DECISION_RULE if self._decisions else "Choose STOP only when you have reached the destination.")
        if self._oracle is not None and self.max_questions:
            stop_rule += (f" You may ask the guide at most {self.max_questions} questions in total, "
                          "by answering 'Question: <your question>' instead of an action.")
        return SYSTEM_PROMPT.format(memory_items=MEMORY_ITEMS[self.memory], stop_rule=stop_rule,
                                    output_format=FORMATS[(self.cot, self.reflection)].format(stop=stop))

    def _place(self, node: Any) -> int:
        if node not in self.places:
            self.places[node] = len(self.places)
        return self.places[node]

    def task_prompt(self, state: AgentState, candidates: list[Candidate], node: Any, captions: list[str]) -> str:
        """The step's task prompt: instruction, memory, heading, options."""
        lines = [f"Instruction: {getattr(self.episode, 'instruction_text', '')}"]
        history = "\n".join(self.history[-30:]) if self.history else "none yet (this is the first step)"
        lines.append(f"History:\n{history}")
        if self.memory == "map":
            here = self._place(node)
            for c in candidates:
                if self._place(c.target) != here:
                    self.edges.add(tuple(sorted((here, self._place(c.target)))))
            adjacency: dict[int, set[int]] = {}
            for a, b in self.edges:
                adjacency.setdefault(a, set()).add(b)
                adjacency.setdefault(b, set()).add(a)
            conn = "; ".join(f"Place {p} is connected with Places {', '.join(map(str, sorted(adjacency[p])))}"
                             for p in sorted(adjacency))
            unvisited = sorted(set(adjacency) - set(self.visited) - {here})
            lines.append(f"Map: {conn}.")
            lines.append(f"Visited places: {', '.join(map(str, self.visited)) or 'none'}. "
                         f"Unvisited places: {', '.join(map(str, unvisited)) or 'none'}. You are at Place {here}.")
            if captions:
                self.descriptions[here] = captions[snapped_front(state.pose.yaw)]
            if self.descriptions:
                lines.append("Place descriptions: " + "; ".join(f"Place {p}: {d}" for p, d in sorted(self.descriptions.items()) if d))
        if captions:
            front = snapped_front(state.pose.yaw)
            names = {0: "Front", 1: "Left", 2: "Back", 3: "Right"}
            lines.append("Views: " + "; ".join(f"{names[(g - front) % 4]}: {captions[g]}" for g in range(4)))
        yaw = math.degrees(state.pose.yaw) % 360
        lines.append(f"Current heading: {yaw:.0f} degrees (0 = east, counter-clockwise); elevation: 0 degrees.")
        options: dict[str, list[str]] = {}
        for c in candidates:  # the sector (c.direction) comes from the very angle printed here
            place = f", Place {self._place(c.target)}" if self.memory == "map" else ""
            options.setdefault(c.direction.capitalize(), []).append(
                f"{c.marker}: {c.distance:.1f} m away, {angle_text(c.relative_heading)}{place}" + (f" - {c.caption}" if c.caption else ""))
        option_lines = [f"  {d}: [{'; '.join(items)}]" for d, items in sorted(options.items(), key=lambda kv: "LFRB".find(kv[0][0]))]
        stop = "FOUND / NOT_FOUND" if self._decisions else "STOP"
        option_lines.append(f"  Stop: {stop}")
        lines.append("Action options:\n" + "\n".join(option_lines))
        if self.guidance:
            lines.append(f"Assistant's guidance: {self.guidance}")
        if self.dialogue:
            lines.append("Guide's answers so far: " + " ".join(f"Q: {q} A: {a}" for q, a in self.dialogue))
        return "\n".join(lines)

    # -- the step -----------------------------------------------------------------------------------

    def _save_image(self, png: bytes, sha: str) -> str:
        from ...core.io import write_bytes_atomic

        path = self.image_dir / f"{sha[:24]}.png"
        if not path.is_file():
            write_bytes_atomic(path, png)
        return str(path)

    def _ask(self, messages: list[dict[str, str]], png: bytes, record: dict) -> Any:
        gen = self.model.generate(messages, [png], store=False)
        usage = record["generation"]
        usage["requests"] += gen.requests
        usage["cache_hits"] += int(gen.cached)
        usage["prompt_tokens"] += gen.prompt_tokens
        usage["completion_tokens"] += gen.completion_tokens
        usage["latency_ms"] += round(1000 * gen.latency_s, 2)
        usage["calls"] += 1
        return gen

    def act(self, observations: dict[str, Any], state: AgentState) -> Any:
        """Prompt the model with the step's observation and return the parsed action; raises
        :class:`~vlnverse.run.rollout.NotEvaluated` when the endpoint gives no answer. All model
        calls of the step end within the model's ``step_timeout``."""
        if self._pending_stop:
            return self._act(observations, state)
        if self.model.circuit_open is not None:
            raise NotEvaluated("circuit_open", self.model.circuit_open)
        with self.model.step(self.model.step_timeout):
            return self._act(observations, state)

    def _act(self, observations: dict[str, Any], state: AgentState) -> Any:
        if self._pending_stop:  # the frame was selected last step: now the STOP it preceded
            self._pending_stop = False
            self.outputs.append({"step": state.step, "action": "STOP", "after_frame_selection": True})
            return DiscreteAction.STOP
        record: dict[str, Any] = {"step": state.step, "prompt_version": PROMPT_VERSION, "generation": {"requests": 0, "cache_hits": 0, "prompt_tokens": 0,
                                                                     "completion_tokens": 0, "latency_ms": 0.0,
                                                                     "calls": 0, "reprompts": 0, "error_kind": None}}
        self.outputs.append(record)
        node, options = self._options(state)
        record["node"] = node
        candidates = make_candidates(state.pose.xy, state.pose.yaw, options, merge_distance=self.merge_distance)
        t0 = time.perf_counter()
        views, source = self._views(observations, state, node)
        record["observation"] = {"source": source, "access_ms": round(1000 * (time.perf_counter() - t0), 3)}
        captions = self._caption(views, f"{getattr(self.context, 'scene_id', '')}/{node}")
        camera_height = float(getattr(getattr(self.context, "body", None), "camera_height", 1.25))
        image = stitch(views, state.pose.yaw, candidates, camera_height=camera_height)
        png = png_bytes(image)
        record["image_size"] = [int(image.shape[1]), int(image.shape[0])]  # width, height in pixels as sent
        if self._logged_size != tuple(record["image_size"]):
            self._logged_size = tuple(record["image_size"])
            log.info("%s: sending %d x %d px observation images (4 views of %d px)", self.name, *self._logged_size,
                     image.shape[1] // 4)
        sha = image_sha256(png)
        record["image"], record["image_sha256"] = self._save_image(png, sha), sha
        record["candidates"] = [c.to_dict() for c in candidates]
        if state.step == 0:
            record["system_prompt"] = self.system_prompt()
        if self.assistant is not None:
            self._consult(state, record)
        prompt = self.task_prompt(state, candidates, node, captions)
        record["prompt"] = prompt
        messages = [{"role": "system", "content": self.system_prompt()}, {"role": "user", "content": prompt}]
        by_marker = {c.marker: c for c in candidates}
        directions = directions_map(candidates)
        allow_questions = self._oracle is not None and self.questions < self.max_questions
        attempts: list[dict[str, Any]] = []
        record["attempts"] = attempts
        parsed = None
        budget = self.max_reprompts
        while True:
            gen = self._ask(messages, png, record)
            attempt = {"raw": gen.text, "cached": gen.cached, "latency_ms": round(1000 * gen.latency_s, 2),
                       "tokens": [gen.prompt_tokens, gen.completion_tokens]}
            if gen.served_model:
                attempt["served_model"] = gen.served_model
            if gen.truncated:
                attempt["truncated"] = True
            attempts.append(attempt)
            if gen.endpoint_failure:
                attempt["error"] = {"kind": gen.error_kind, "message": gen.error}
                record["generation"]["error_kind"] = gen.error_kind
                raise NotEvaluated(gen.error_kind, gen.error or "")
            parsed = parse_action(gen.text, list(by_marker), directions, decisions=self._decisions, questions=allow_questions)
            attempt["parsed"] = parsed.to_dict()
            if parsed.ok:
                self.model.remember(gen)  # only usable answers are cached: a failed step is asked again
            if parsed.ok and parsed.kind == "ask":
                answer = self._oracle.answer(parsed.question, state.pose.xy, state.pose.yaw)
                self.questions += 1
                self.dialogue.append((parsed.question, answer))
                attempt["oracle_answer"] = answer
                allow_questions = self.questions < self.max_questions
                messages += [{"role": "assistant", "content": gen.text},
                             {"role": "user", "content": f"Guide: {answer}\nNow choose your action."}]
                continue
            if parsed.ok and self.reflection and parsed.decision == "revise" and len(
                    [ln for ln in gen.text.splitlines() if "action" in ln.lower() and ":" in ln]) < 2:
                # the reflection rejected its draft without a new action: replan once
                record["generation"]["revised"] = True
                messages += [{"role": "assistant", "content": gen.text},
                             {"role": "user", "content": "You decided to revise your action. Give your new choice as "
                                                         "'Action: <marker id>' (or STOP)."}]
                if budget > 0:
                    budget -= 1
                    record["generation"]["reprompts"] += 1
                    continue
            if parsed.ok:
                break
            if budget == 0:
                record["generation"]["error_kind"] = parsed.error_kind
                raise GenerationError(f"{parsed.error_kind}: {parsed.error}")
            budget -= 1
            record["generation"]["reprompts"] += 1
            messages += [{"role": "assistant", "content": gen.text or "(no answer)"},
                         {"role": "user", "content": f"Your answer could not be used: {parsed.error}"}]
        return self._to_action(parsed, by_marker, state, node, captions, record)

    # -- the oracle assistant (VLN-MME) ---------------------------------------------------------------

    def _consult(self, state: AgentState, record: dict) -> None:
        """Ask the assistant for guidance when the navigator looks stuck
        (:func:`vlnverse.run.diagnostics.stuck_reason`), at most ``max_consultations`` times."""
        from ...run.diagnostics import stuck_reason

        points, dists = self._track
        points.append([float(v) for v in state.pose.xy])
        goal_distance = getattr(state, "goal_distance", None)
        dists.append(float(goal_distance(np.asarray(state.pose.xy)[None])[0]) if callable(goal_distance) else 0.0)
        if self.consultations >= self.max_consultations:
            return
        reason = stuck_reason(points, dists if callable(goal_distance) else [], getattr(self.episode, "reference_path", None),
                              away_steps=self.consult_away_steps, off_reference=self.consult_off_reference)
        if reason is None:
            return
        prompt = self.assistant_prompt(state, reason, dists[-1] if callable(goal_distance) else None)
        gen = self.assistant.generate([{"role": "user", "content": prompt}])
        entry = {"trigger": reason, "prompt": prompt, "raw": gen.text, "cached": gen.cached,
                 "latency_ms": round(1000 * gen.latency_s, 2), "requests": gen.requests}
        record["assistant"] = entry
        self.consultations += 1
        self._track = ([points[-1]], [dists[-1]])  # a new consultation needs new evidence
        if gen.endpoint_failure:  # the navigator carries on without guidance; the step says why
            entry["unavailable"] = {"kind": gen.error_kind, "message": (gen.error or "")[:300]}
            log.info("assistant unavailable at step %d (%s): the navigator goes on without guidance",
                     state.step, gen.error_kind)
            return
        guidance, removed = guard_guidance(gen.text.strip()[:600]) if gen.ok else ("", [])
        entry["guidance"], entry["removed"] = guidance, removed
        entry["ids_removed"] = any(r["kind"] == "id" for r in removed)
        self.guidance = guidance or self.guidance

    def assistant_prompt(self, state: AgentState, reason: str, goal_distance: float | None) -> str:
        """What the assistant knows (privileged: the reference route from the navigator's pose,
        the turns and landmarks ahead, the distance to the goal), never a viewpoint id."""
        from ...run.diagnostics import _polyline, clauses, project, scene_landmarks
        from .views import direction_of

        why = {"loop": "it came back to a place it had already left",
               "moving_away": f"it has moved away from the goal for {self.consult_away_steps} steps",
               "off_reference": "it has left the route"}[reason]
        lines = [f"A navigator is following this instruction: \"{getattr(self.episode, 'instruction_text', '')}\"",
                 f"It seems stuck: {why}."]
        reference = getattr(self.episode, "reference_path", None)
        if reference is not None and len(reference) >= 2:
            if self._landmarks is None:
                self._landmarks = scene_landmarks(self.episode, self.context)
            path, arc = _polyline(reference)
            s, _ = project(np.asarray(state.pose.xy)[None], path, arc)
            ahead = min(float(s[0]) + 2.0, float(arc[-1]))
            k = int(np.searchsorted(arc, ahead, side="right")) - 1
            k = min(k, len(path) - 2)
            t = (ahead - arc[k]) / max(arc[k + 1] - arc[k], 1e-9)
            target = path[k] + t * (path[k + 1] - path[k])
            d = target - np.asarray(state.pose.xy, dtype=float)
            if np.linalg.norm(d) > 0.2:
                rel = math.atan2(d[1], d[0]) - state.pose.yaw
                word = {"front": "ahead of it", "left": "to its left", "right": "to its right", "back": "behind it"}
                lines.append(f"The correct route continues {word[direction_of(rel)]}.")
            later = [c["action"].replace("_", " ") + (f" at the {c['landmark']['category']}" if c["landmark"] else "")
                     for c in clauses(reference, self._landmarks) if c["start_s"] > float(s[0]) + 0.5]
            later = [t for k, t in enumerate(later) if k == 0 or t != later[k - 1]]  # one bend, one turn
            if later:
                lines.append("After that: " + ", then ".join(later) + ".")
        if goal_distance is not None and math.isfinite(goal_distance):
            lines.append(f"The goal is about {goal_distance:.0f} m away along walkable space.")
        lines.append("Give the navigator one or two sentences of high-level guidance (directions relative to it, "
                     "landmarks of the instruction). Do not mention marker numbers, place numbers or viewpoint ids.")
        return "\n".join(lines)

    def _to_action(self, parsed: Any, by_marker: dict[int, Candidate], state: AgentState, node: Any,
                   captions: list[str], record: dict) -> Any:
        """The runner action for a parsed decision; updates the history and the map."""
        if parsed.kind in ("found", "not_found"):
            record["action"] = parsed.kind.upper()
            return Decision.parse(parsed.kind)
        if parsed.kind != "move":
            record["action"] = "STOP"
            if self._video is not None:
                frame = self._identify_goal(record)
                if frame is not None:  # answer first (a step that does not move), then STOP
                    self._pending_stop = True
                    return SelectFrame(frame)
            return DiscreteAction.STOP
        c = by_marker[parsed.marker]
        record["action"] = {"marker": c.marker, "target": c.target}
        turn = math.degrees(c.relative_heading)
        desc = captions[snapped_front(state.pose.yaw + c.relative_heading)] if captions else ""
        self.history.append(f"Step {len(self.history) + 1}: turned {abs(turn):.0f} degrees "
                            f"{'left' if turn >= 0 else 'right'}, moved {c.distance:.1f} m"
                            + (f" to Place {self._place(c.target)}" if self.memory == "map" else "")
                            + (f"; saw {desc}" if desc else "") + ".")
        if self.memory == "map":
            here = self._place(node)
            if here not in self.visited:
                self.visited.append(here)
            if self._place(c.target) not in self.visited:
                self.visited.append(self._place(c.target))
        if state.mode == "graph":
            return c.target
        rel, dist = c.relative_heading, c.distance
        return WaypointAction(dx=dist * math.cos(rel), dy=dist * math.sin(rel), dyaw=rel, timeout=10.0)


    def identify_goal_prompt(self, shown: np.ndarray) -> str:
        """The goal-identification question over the shown prior-video frames."""
        listing = ", ".join(f"image {k + 1} = frame {int(i)}" for k, i in enumerate(shown))
        return (f"Instruction: {getattr(self.episode, 'instruction_text', '')}\n"
                f"The images are frames of the video you watched before navigating ({listing}). "
                "Which frame shows the goal of the instruction? Answer 'Frame: <frame index>'.")

    def _identify_goal(self, record: dict) -> int | None:
        """VCN-Bench goal identification: the prior-video frame the model says shows the goal (None: no valid answer)."""
        frames, idx = self._video
        messages = [{"role": "user", "content": self.identify_goal_prompt(idx)}]
        n_window = int(idx[-1]) + 1
        entry: dict[str, Any] = {"prompt": messages[0]["content"], "frames": [int(i) for i in idx], "attempts": []}
        record["goal_identification"] = entry
        for _ in range(self.max_reprompts + 1):
            gen = self.model.generate(messages, list(frames), store=False)
            if gen.endpoint_failure:
                entry["attempts"].append({"raw": gen.text, "error": gen.error_kind})
                raise NotEvaluated(gen.error_kind, gen.error or "")
            for key, value in (("requests", gen.requests), ("cache_hits", int(gen.cached)), ("calls", 1),
                               ("prompt_tokens", gen.prompt_tokens), ("completion_tokens", gen.completion_tokens)):
                record["generation"][key] += value
            parsed = parse_action(gen.text, [], frames=n_window) if gen.ok else None
            entry["attempts"].append({"raw": gen.text, "parsed": parsed.to_dict() if parsed else None,
                                      **({"error": gen.error_kind} if not gen.ok else {})})
            if parsed is not None and parsed.kind == "frame":
                self.model.remember(gen)
                entry["selected_frame"] = parsed.frame
                return parsed.frame
            messages += [{"role": "assistant", "content": gen.text or "(no answer)"},
                         {"role": "user", "content": f"Your answer could not be used: "
                                                     f"{parsed.error if parsed else 'empty'}. Answer 'Frame: <index>'."}]
        return None


_IDS = re.compile(r"\b(?:markers?|options?|viewpoints?|nodes?|places?|candidates?|ids?|waypoints?)\s*(?:id\s*)?"
                  r"(?:#|no\.?|number)?\s*\d+(?:\s*(?:,|and|or)\s*\d+)*|#\s*\d+\b", re.I)
#: the navigator's output format and action commands, never guidance: (kind, pattern)
_NOT_GUIDANCE = (
    ("format", re.compile(r"<\s*(reasoning|reflection|thought|thinking)\s*>.*?(?:<\s*/\s*\1\s*>|$)", re.I | re.S)),
    ("format", re.compile(r"```.*?(?:```|$)", re.S)),
    ("format", re.compile(r"\{[^{}]*\"(?:action|decision|marker|frame|answer)\"[^{}]*\}", re.I)),
    ("action", re.compile(r"\**\b(?:final\s+|next\s+)?action\b\**\s*(?:id\s*)?[:=][^\n.;]*[.;]?", re.I)),
    ("format", re.compile(r"\**\b(?:final\s+decision|frame|view|pixel|question)\b\**\s*[:=][^\n.;]*[.;]?", re.I)),
    ("action", re.compile(r"(?:^|(?<=[.!?;\n]))\s*\**(?:NOT[\s_-]?FOUND|FOUND|STOP)\**\s*(?:[.!;]|$)", re.M)),
    ("action", re.compile(r"\b(?:you\s+(?:should|must|can|may)\s+(?:now\s+)?)?stop\s+(?:here|now|immediately|right\s+here)\b"
                          r"[^.!?\n]*[.!?]?", re.I)),
)
#: a decision word in capitals inside a sentence ("STOP when you see the fridge"): said in prose
_COMMAND_WORD = re.compile(r"\b(NOT[\s_-]?FOUND|FOUND|STOP)\b")


def guard_guidance(text: str) -> tuple[str, list[dict[str, str]]]:
    """The assistant's answer filtered to guidance: ``Action: ...`` lines and bare action
    commands (``STOP``, ``FOUND``, ``NOT_FOUND`` as a sentence of their own, ``stop here`` / ``stop
    now``; inside a sentence the capitals become prose), the navigator's output format
    (``Final Decision:``, ``Frame:``, ``View:``, ``Pixel:``, ``Question:``, tagged reasoning,
    JSON actions, code blocks) are removed; marker / viewpoint / place numbers become
    ``[id removed]``. Returns (guidance, removals ``[{"kind": action|format|id, "text"}]``)."""
    removed: list[dict[str, str]] = []

    def cut(kind: str, replacement: str):
        def sub(m: re.Match) -> str:
            removed.append({"kind": kind, "text": m.group(0).strip()[:200]})
            return replacement
        return sub

    for kind, pattern in _NOT_GUIDANCE:
        text = pattern.sub(cut(kind, " "), text)
    text = _COMMAND_WORD.sub(lambda m: cut("action", m.group(0).lower().replace("_", " "))(m), text)
    text = _IDS.sub(cut("id", "[id removed]"), text)
    text = re.sub(r"[ \t]+", " ", text)
    text = re.sub(r"\s+([.,;:!?])", r"\1", text)
    text = "\n".join(ln.strip() for ln in text.splitlines() if re.search(r"[A-Za-z]{2}", ln.replace("id removed", "")))
    return text.strip(" \n,;:"), removed


#: the eight VLN-MME agent variants: name -> (memory, CoT, reflection)
VARIANTS = {
    f"{family}{'_cot' if cot else ''}{'_reflection' if refl else ''}": (memory, cot, refl)
    for family, memory in (("navgpt", "history"), ("mapgpt", "map"))
    for cot in (False, True) for refl in (False, True)
}

for _name, (_memory, _cot, _refl) in VARIANTS.items():
    _doc = (f"VLN-MME {_name}: {'text-map' if _memory == 'map' else 'text-history'} memory"
            f"{', chain-of-thought' if _cot else ''}{', reflection (keep / revise)' if _refl else ''}.")
    register_agent(_name, tags=(VLN_MME,))(type(f"MLLM_{_name}", (MLLMAgent,), {"memory": _memory, "cot": _cot, "reflection": _refl,
                                                                "__doc__": _doc}))
