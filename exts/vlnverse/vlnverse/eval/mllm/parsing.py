"""Tolerant parsing of an MLLM's answer into one navigation decision (VLN-MME App. D.5).

:func:`parse_action` reads markdown, JSON, tagged (``<Reasoning>``, ``<Reflection>``) and prose
answers in any case, with numbers as digits or words. It looks for an ``Action`` declaration
(the last one wins: a reflection that revises its draft ends with the new action) and reads a
local window after it; without one it accepts a bare answer or a prose choice. Inside the window
a marker id is preferred, a direction word (left / front / right / back ...) is the fallback;
both are validated against the current candidates. STOP, FOUND / NOT_FOUND (false premise), a
frame index (VCN-Bench goal identification) and a question to the dialogue oracle are the other
decisions. A failure comes back as ``ParsedAction.error_kind`` with an error text meant for the
re-prompt.
"""
from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from typing import Any, Sequence

#: error kinds of a failed parse
PARSE_ERRORS = ("empty", "malformed", "invalid_marker", "invalid_direction", "invalid_frame", "not_allowed")

NUMBER_WORDS = {w: i for i, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen twenty".split())}
NUMBER_WORDS.update({w: i + 1 for i, w in enumerate(
    "first second third fourth fifth sixth seventh eighth ninth tenth".split())})

#: direction words → canonical direction (relative to the agent's heading)
DIRECTION_WORDS = {
    "front": "front", "forward": "front", "forwards": "front", "ahead": "front", "straight": "front",
    "left": "left", "right": "right", "back": "back", "backward": "back", "backwards": "back",
    "behind": "back", "around": "back", "rear": "back",
}
_NUM = r"(\d+|" + "|".join(sorted(NUMBER_WORDS, key=len, reverse=True)) + r")"
_ACTION = re.compile(r"(?:final\s+|next\s+|chosen\s+|selected\s+)?action(?:\s*id)?\s*(?:is)?\s*[:=\-–>]+\s*", re.I)
_TAG = {name: re.compile(rf"<\s*{name}\s*>(.*?)(?:<\s*/\s*{name}\s*>|$)", re.I | re.S)
        for name in ("reasoning", "reflection", "thought", "thinking")}
_DECISION = re.compile(r"(?:<\s*)?final\s*decision\s*(?:>|:)?\s*[:\-]?\s*\**\s*(keep|revise)", re.I)
_FRAME = re.compile(r"frame(?:\s*(?:index|id|number|no\.?))?\s*[:=#]?\s*" + _NUM, re.I)
_QUESTION = re.compile(r"(?:^|\n|\b)(?:question|ask(?:\s+the\s+oracle)?)\s*[:\-]\s*(.+)", re.I)
_MARKER = re.compile(r"(?:marker|option|viewpoint|candidate|node|id|number|no\.|#)\s*(?:id\s*)?[:#]?\s*" + _NUM, re.I)
_CHOICE = re.compile(r"\b(?:choose|chose|select|pick|go\s+to|move\s+to|head\s+to|proceed\s+to|navigate\s+to|go\s+with|take)\b"
                     r"[^.\n]{0,40}?(?:marker|option|viewpoint|candidate|node|#)\s*[:#]?\s*" + _NUM, re.I)


@dataclass
class ParsedAction:
    """One parsed decision: ``kind`` in move | stop | found | not_found | frame | ask | None (failed).

    ``marker`` is the chosen candidate's marker id (moves), ``frame`` the frame index, ``question``
    the question's text; ``reasoning`` / ``reflection`` / ``decision`` (keep / revise) are kept for
    the log. ``error_kind`` / ``error`` say why parsing failed.
    """

    kind: str | None = None
    marker: int | None = None
    direction: str | None = None
    frame: int | None = None
    question: str | None = None
    reasoning: str | None = None
    reflection: str | None = None
    decision: str | None = None
    via: str | None = None
    error_kind: str | None = None
    error: str | None = None

    @property
    def ok(self) -> bool:
        """True when a valid decision was found."""
        return self.kind is not None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict without the empty fields."""
        return {k: v for k, v in asdict(self).items() if v is not None}


def _number(token: str) -> int:
    token = token.lower()
    return int(token) if token.isdigit() else NUMBER_WORDS[token]


def clean_markdown(text: str) -> str:
    """``text`` without code fences, emphasis, headings and quote marks."""
    text = re.sub(r"```[a-zA-Z]*", "\n", text)
    text = re.sub(r"[*_`]+", "", text)
    text = re.sub(r"^\s*#+\s*", "", text, flags=re.M)
    return text.replace("“", '"').replace("”", '"')


def _json_action(text: str) -> tuple[str | None, dict]:
    """The action value of a JSON object in ``text`` (and the object), if any."""
    for match in re.finditer(r"\{[^{}]*\}", text, re.S):
        try:
            obj = json.loads(match.group(0))
        except json.JSONDecodeError:
            continue
        if not isinstance(obj, dict):
            continue
        low = {str(k).lower().replace(" ", "_"): v for k, v in obj.items()}
        for key, v in low.items():  # {"found": false}: a decision as a JSON field (markdown cleaning drops "_")
            if isinstance(v, bool) and key.replace("_", "") in ("found", "targetfound", "objectfound", "isfound"):
                return ("FOUND" if v else "NOT_FOUND"), low
        for key in ("action", "final_action", "next_action", "answer", "decision", "choice", "marker", "frame"):
            if key in low and not isinstance(low[key], (dict, list)):
                value = str(low[key])
                return (f"frame {value}" if key == "frame" else value), low
    return None, {}


def _window(text: str) -> str | None:
    """The text right after the last ``Action`` declaration (one line, at most 80 characters)."""
    matches = list(_ACTION.finditer(text))
    if not matches:
        return None
    rest = text[matches[-1].end():]
    line = rest.strip().split("\n", 1)[0] if rest.strip() else ""
    return line[:80]


def _decision_word(window: str) -> str | None:
    w = window.lower().replace("-", "_")
    if re.search(r"\bnot[\s_]*found\b|\bnot[\s_]+present\b|\bdoes\s+not\s+exist\b", w):
        return "not_found"
    if re.search(r"\bfound\b", w):
        return "found"
    if re.search(r"\bstop(?:ping)?\b|\bhalt\b|\bterminate\b|\bfinish\b|\bdone\b", w):
        return "stop"
    return None


def parse_action(text: Any, markers: Sequence[int] = (), directions: dict[str, Sequence[int]] | None = None, *,
                 decisions: bool = False, frames: int | None = None, questions: bool = False) -> ParsedAction:
    """Parse one answer.

    ``markers`` are the valid marker ids now; ``directions`` maps a direction (front, left, right,
    back) to the marker ids in it, best first, for answers naming a direction. ``decisions``
    allows FOUND / NOT_FOUND (false-premise tasks) in any case and spelling (``NOT FOUND``,
    ``not_found``, ``not-found``, ``{"decision": "FOUND"}``, ``{"found": false}``); a plain STOP is
    then read as FOUND (the ordinary stop claims the goal); ``frames`` is the number of prior-video frames a ``Frame: i`` answer may name;
    ``questions`` allows ``Question: ...`` to the dialogue oracle.
    """
    if not isinstance(text, str) or not text.strip():
        return ParsedAction(error_kind="empty", error="the answer was empty; reply with 'Action: <marker id>' or 'Action: STOP'")
    raw = text
    text = clean_markdown(text)
    out = ParsedAction()
    for name, pattern in _TAG.items():
        m = pattern.search(raw)
        if m and m.group(1).strip():
            value = m.group(1).strip()[:2000]
            if name == "reflection":
                out.reflection = value
            else:
                out.reasoning = out.reasoning or value
            # drop the tagged block so its prose cannot be taken for the action (unless the
            # action is only inside it, e.g. an unclosed tag)
            stripped = pattern.sub(" ", text)
            if _ACTION.search(stripped) or not _ACTION.search(text):
                text = stripped
    d = _DECISION.search(text)
    if d:
        out.decision = d.group(1).lower()
    markers = [int(m) for m in markers]
    valid = set(markers)

    def fail(kind: str, error: str) -> ParsedAction:
        out.error_kind, out.error = kind, error
        out.kind = None
        return out

    value, obj = _json_action(text)
    via = "json"
    if value is None:
        value, via = _window(text), "action_field"
    if value is None and questions:
        q = _QUESTION.search(text)
        if q:
            out.kind, out.question, out.via = "ask", q.group(1).strip()[:500], "question"
            return out
    if value is None and frames is not None:
        f = _FRAME.search(text)
        if f:
            value, via = f.group(0), "frame"
    if value is None:
        stripped = text.strip().strip(".!").strip()
        if len(stripped) <= 24:  # a bare answer: "3", "STOP", "Left", "option three"
            value, via = stripped, "bare"
        else:
            choice = _CHOICE.findall(text)
            if choice:
                value, via = f"marker {choice[-1]}", "prose"
            else:
                decision = _decision_word(text[-200:]) if re.search(r"\b(?:i|we)\s+(?:will|should|must)\s+(?:now\s+)?stop\b|"
                                                                      r"\bnot[\s_-]*found\b|\bfound\b", text[-200:], re.I) else None
                if decision:
                    value, via = decision, "prose"
    if value is None:
        return fail("malformed", "no 'Action:' line found; end your answer with 'Action: <marker id>' or 'Action: STOP'")
    out.via = via
    window = value.strip()
    if questions and re.match(r"(?:question|ask)\b", window, re.I):
        q = re.sub(r"^(?:question|ask(?:\s+the\s+oracle)?)\s*[:\-]?\s*", "", window, flags=re.I)
        q = q or (_QUESTION.search(text).group(1) if _QUESTION.search(text) else "")
        out.kind, out.question = "ask", q.strip()[:500]
        return out
    if frames is not None:
        f = _FRAME.search(window) or (re.fullmatch(r"\s*" + _NUM + r"\s*", window, re.I) if via != "action_field" or not markers else None)
        if f:
            idx = _number(f.group(1))
            if not 0 <= idx < frames:
                return fail("invalid_frame", f"frame {idx} does not exist; choose a frame index in [0, {frames - 1}]")
            out.kind, out.frame = "frame", idx
            return out
    word = _decision_word(window)
    if word in ("found", "not_found"):
        if not decisions:
            return fail("not_allowed", f"{word.upper()} is not an action here; use 'Action: STOP' to stop")
        out.kind = word
        return out
    number = _MARKER.search(window) or re.search(r"(?<![\d.])" + r"(\d+)" + r"(?![\d.])", window) or \
        re.search(r"\b(" + "|".join(sorted(NUMBER_WORDS, key=len, reverse=True)) + r")\b", window, re.I)
    if word == "stop":
        out.kind = "found" if decisions else "stop"  # on a decision episode the ordinary stop claims the goal
        return out
    if number:
        marker = _number(number.group(1))
        if marker not in valid:
            return fail("invalid_marker", f"marker {marker} does not exist; choose one of {sorted(valid)} or STOP")
        out.kind, out.marker = "move", marker
        return out
    for token in re.findall(r"[a-z]+", window.lower()):
        direction = DIRECTION_WORDS.get(token)
        if direction is None:
            continue
        options = list((directions or {}).get(direction, ()))
        if not options:
            return fail("invalid_direction", f"there is no navigable option to the {direction}; choose one of "
                                             f"{sorted(valid)} or STOP")
        out.kind, out.marker, out.direction = "move", int(options[0]), direction
        return out
    return fail("malformed", f"could not read an action from {window[:60]!r}; reply with 'Action: <marker id>' "
                             "(one of " + str(sorted(valid)) + ") or 'Action: STOP'")
