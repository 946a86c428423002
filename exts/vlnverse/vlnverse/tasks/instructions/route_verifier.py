"""The Verifier of language version 2: references unique from where they are said, and route
claims that do not repeat or contradict themselves.

``RouteVerifier.reasons(instruction, path)`` returns ``(reason, message)`` pairs (empty: verified):

* everything the base ``Verifier`` checks (``unsupported`` mention, ``ungrounded_word``,
  ``placeholder``);
* ``ambiguous_reference``: a mention with a ``scope`` does not denote exactly one object (room) of
  its scope (for an object with a ``viewpoint``, what is in view from there counts too): its
  category, claimed attributes, relation to the anchor, ordinal along the path or contents
  (with the attributes the contents' own mention claims: "the bedroom with the oak wardrobe";
  ``references.Referrer.resolve_object`` / ``resolve_room``) leave several or none. The anchor
  of a relation is a mention of its own, said from the same place: "the lamp on the nightstand"
  needs one nightstand in scope, not merely one lamp on a nightstand;
* ``enter_current_room``: entering the room the agent is in;
* ``exit_enter_same_room``: leaving a room and entering it again next;
* ``repeated_room_entry``: entering a room already entered (or started in) earlier;
* ``exit_other_room``: leaving a room the agent is not in; ``stop_elsewhere``: stopping in a room
  the agent is not in;
* ``repeated_clause``: the same clause said twice.

The route claims are the instruction's ``actions`` (``("start"|"exit"|"enter"|"stop_in", room)``).
"""
from __future__ import annotations

import re

from ...scenes.labels import GENERIC_ROOM
from .references import PathFrame, Referrer
from .types import GroundedInstruction, Mention
from .verifier import Verifier, placeholder_problems

#: Every reason ``RouteVerifier.reasons`` can give.
REASONS = ("placeholder", "unsupported", "ungrounded_word", "ambiguous_reference", "enter_current_room",
           "exit_enter_same_room", "repeated_room_entry", "exit_other_room", "stop_elsewhere", "repeated_clause")


#: The most characters between an object's words and a relation that qualifies it (" topped with ").
QUALIFIER_GAP = 13


def _qualifies(mention: Mention, relation: Mention, text: str) -> bool:
    """Whether ``relation`` is said of ``mention``: its words follow the mention's within the same
    clause ("the lamp| on the nightstand", "the desk with |a laptop on it"). The anchor of "the lamp
    on the nightstand" is not thereby "a nightstand with a lamp on it": that relation starts before
    the anchor's words end, so the anchor must be unique by its own words."""
    gap = text[mention.span[1]:relation.span[0]]
    return relation.span[0] >= mention.span[1] and len(gap) <= QUALIFIER_GAP and not re.search(r"[.,;!?]", gap)


class RouteVerifier(Verifier):
    """``Verifier`` plus the version-2 checks (``reasons``); ``check`` returns their messages."""

    def __init__(self, scene_graph, lexicon=None, referrer: Referrer | None = None):
        super().__init__(scene_graph, lexicon)
        self.referrer = referrer or Referrer(self.view)

    def check_mention(self, mention: Mention, text: str) -> list[str]:
        """As the base, but a room named by its contents may be called just "room"."""
        if mention.kind == "room" and mention.contents is not None and mention.room_id is not None:
            segment = text[mention.span[0]:mention.span[1]]
            hits = self.lexicon.find(segment)
            if re.match(r"the room\b", segment) and not any(h.kind == "room" and h.names != {GENERIC_ROOM}
                                                             for h in hits):
                room = self.view.rooms.get(mention.room_id)
                if room is None or room["room_type"] != mention.category:
                    return [f"'{segment}' at {mention.span[0]}: room {mention.room_id} is not a {mention.category}"]
                return []
        return super().check_mention(mention, text)

    def reasons(self, instruction: GroundedInstruction, path=None) -> list[tuple[str, str]]:
        """Every problem with its reason code (see the module docstring)."""
        text = instruction.text
        out = [("placeholder", p) for p in placeholder_problems(text)]
        base = [p for p in Verifier.check(self, instruction) if p not in {m for _, m in out}]
        out += [("ungrounded_word" if "not supported by any verified mention" in p else "unsupported", p) for p in base]
        frame = path if isinstance(path, PathFrame) or path is None else PathFrame(path)
        out += [("ambiguous_reference", p) for p in self._uniqueness(instruction, frame)]
        out += self._route_claims(instruction)
        clauses = [c.strip().lower() for c in re.split(r"[.;,!?]| and then | and ", text) if c.strip()]
        for k, c in enumerate(clauses):
            if len(c.split()) >= 3 and c in clauses[:k]:
                out.append(("repeated_clause", f"'{c}' is said twice"))
        return out

    def check(self, instruction: GroundedInstruction, path=None) -> list[str]:
        """The messages of ``reasons``."""
        return [message for _, message in self.reasons(instruction, path)]

    # ------------------------------------------------------------------ references
    def _uniqueness(self, instruction: GroundedInstruction, path: PathFrame | None) -> list[str]:
        problems = []
        text = instruction.text
        for m in instruction.mentions:
            if m.scope is None:
                continue
            where = f"'{text[m.span[0]:m.span[1]]}' at {m.span[0]}"
            if m.kind == "object" and m.instance_id is not None:
                node = f"obj:{m.instance_id}"
                rel = next((r for r in instruction.mentions if r.kind == "relation" and r.subject == node
                            and r.target and r.target.startswith("obj:") and _qualifies(m, r, text)), None)
                relation = (rel.relation, int(rel.target[4:])) if rel is not None else None
                carried = next((c for c in instruction.mentions if c.kind == "relation" and c.relation == "on"
                                and c.target == node and c.subject and _qualifies(m, c, text)), None)
                carries = None
                if carried is not None:
                    carries = self.view.objects.get(int(carried.subject[4:]), {}).get("category")
                found = self.referrer.resolve_object(m.category, m.scope, dict(m.attributes), relation, m.ordinal, path,
                                                     carries, m.viewpoint)
                if m.ordinal is not None and path is None:
                    problems.append(f"{where}: an ordinal reference cannot be checked without the path")
                elif found != [m.instance_id]:
                    seen = f" and what is in view from {m.viewpoint}" if m.viewpoint is not None else ""
                    problems.append(f"{where}: denotes {len(found)} objects from room {m.scope}{seen}, not exactly one")
            elif m.kind == "room" and m.room_id is not None and m.ordinal is not None:
                if path is None:
                    problems.append(f"{where}: a doorway ordinal cannot be checked without the path")
                elif self.referrer.resolve_doorway(m.scope, m.ordinal, path) != [m.room_id]:
                    problems.append(f"{where}: the {m.ordinal[0]}. doorway on the {m.ordinal[1]} from room {m.scope} "
                                    f"does not lead into room {m.room_id} alone")
            elif m.kind == "room" and m.room_id is not None:
                said_type = any(h.kind == "room" and m.category in h.names
                                for h in self.lexicon.find(text[m.span[0]:m.span[1]]))
                said = next((o for o in instruction.mentions if o.kind == "object" and o.category == m.contents
                             and m.span[0] <= o.span[0] and o.span[1] <= m.span[1]), None)
                found = self.referrer.resolve_room(m.category if said_type else None, m.scope, m.contents,
                                                   dict(said.attributes) if said is not None else None)
                if found != [m.room_id]:
                    problems.append(f"{where}: denotes {len(found)} rooms seen from room {m.scope}, not exactly one")
        return problems

    # ------------------------------------------------------------------ route claims
    @staticmethod
    def _route_claims(instruction: GroundedInstruction) -> list[tuple[str, str]]:
        out = []
        current, visited, last = None, set(), None
        for verb, room in instruction.actions:
            if verb == "start":
                current = room
                visited.add(room)
            elif verb == "exit":
                if current is not None and room != current:
                    out.append(("exit_other_room", f"leaves room {room} while in room {current}"))
                current = None
            elif verb == "enter":
                if room == current:
                    out.append(("enter_current_room", f"enters room {room}, which it is already in"))
                elif last == ("exit", room):
                    out.append(("exit_enter_same_room", f"leaves room {room} and enters it again"))
                elif room in visited:
                    out.append(("repeated_room_entry", f"enters room {room} a second time"))
                current = room
                visited.add(room)
            elif verb == "stop_in":
                if current is not None and room != current:
                    out.append(("stop_elsewhere", f"stops in room {room} while in room {current}"))
            last = (verb, room)
        return out


__all__ = ["REASONS", "RouteVerifier"]
