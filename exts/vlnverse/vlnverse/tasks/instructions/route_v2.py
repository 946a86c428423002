"""Fine-grained route instructions, language version 2: references that need looking.

* ``RouteDescriberV2`` (a ``Describer``): landmarks are no longer limited to categories unique in
  their room, since references can now tell rivals apart, and where several could be named (a
  pass, a turn, the stop) one with rivals in its room or in view that a reference can still single
  out is preferred; the room sequence drops stretches of less than ``min_room_stay`` metres (a
  path grazing a doorway) and merges what that rejoins, so an instruction never leaves and
  re-enters a room it only touched.
* ``RouteSynthesizerV2``: each landmark is named by ``references.Referrer`` from the room the agent
  is in and what is in view where the path passes it (category, attribute, relation or ordinal,
  see there; ``RouteLanguageV2`` gives the referrer the occupancy grid's sightlines), rooms by
  type or by contents when their type is not unique next door; a doorway by an ordinal ("the
  second doorway on your left") when the room cannot be named or several doors lead into it, and
  wording that claims a single doorway ("through the doorway of the hallway") only where that
  room has one door (into that room); distances are given for long
  stretches; clauses come from ``route_language`` (more verbs, connectives and clause orders).
  It records the route claims
  (``actions``) and one record per reference (``references``: ``seen_rivals`` when rivals of
  other rooms in view had to be told apart) on the ``GroundedInstruction``;
  landmarks that cannot be made unique are left out and counted in ``dropped``.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import replace

import numpy as np

from .describer import Describer
from .grammar import capitalize_first, number_word, ordinal_word
from .lexicon import Lexicon
from .phrases import Phrase, object_phrase, render
from .references import STRUCTURE, PathFrame, Reference, Referrer, RoomReference
from .route_language import (CLOSINGS, DISTANCE_HEDGES, LAST_LINKS, LAST_LINKS_AFTER_LEAD, LEADS, MANNERS,
                             MOVING_PARTS, ONE_DOORWAY, OPENERS, PAIR_LINKS, PAIR_LINKS_AFTER_LEAD, family, template_set)
from .types import GroundedInstruction, Mention, RouteEvent, RouteFacts

#: Revision of the version-2 wording: bump when the same path, seed and families give other words
#: (caches of version-2 episodes are keyed by it: ``languages.wording_key``). 2: rooms named by what
#: their furniture looks like; short stays between rooms that share no door said.
WORDING_REVISION = 2

#: Ways to say a relation in a reference, by scene-graph relation.
RELATION_WORDS_V2: dict[str, tuple[str, ...]] = {
    "on": ("on", "on top of", "sitting on", "resting on", "that sits on", "placed on"),
    "next_to": ("next to", "beside", "right beside", "alongside", "just next to", "that stands beside"),
    "near": ("near", "close to", "by", "not far from", "over by", "that is near"),
}
CARRY_WORDS = ((" with ", " on it"), (" with ", " on top"), (" that has ", " on it"), (" holding ", ""),
               (" topped with ", ""), (" carrying ", ""))
DOOR_WORDS = ("doorway", "door", "opening")
SIDE_WORDS = ("on your {side}", "to your {side}", "on the {side}", "on your {side}-hand side", "to the {side} of you")


def _pick(rng: np.random.Generator, items):
    return items[int(rng.integers(len(items)))]


def _finish(phrase: Phrase) -> Phrase:
    text = capitalize_first(phrase.text.rstrip())
    if text[-1:] not in ".!?":
        text += "."
    return Phrase(text, phrase.mentions)


class RouteDescriberV2(Describer):
    """``Describer`` whose landmarks may share their category with others in the room (told apart by
    references later) and whose room sequence ignores stays shorter than ``min_room_stay`` m."""

    min_room_stay = 1.0
    #: At a turn or the stop, a landmark with rivals replaces the nearest one only when at most this
    #: much (m) farther from the turn or the end point (and within the radius the nearest was).
    landmark_slack = 1.0

    def __init__(self, *args, referrer: Referrer | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.referrer = referrer

    def _rivals(self, lm, room: int | None, frame: PathFrame) -> int:
        """Objects of ``lm``'s category in ``room`` and, with the referrer's sightlines, in view from
        where the path passes it (``lm`` included); 0 when the referrer cannot single it out."""
        if self.referrer is None:
            return self.view.count_in_room(lm.category, room)
        if self.referrer.refer(lm.instance_id, room, path=frame) is None:
            return 0
        return len(self.referrer.scope_objects(room, lm.category, frame.viewpoint(lm.position)))

    def _landmark_ids(self, exclude_categories: set[str]) -> np.ndarray:
        view = self.view
        extent = (self._bmax - self._bmin).max(axis=1) if len(self._ids) else np.zeros(0)
        keep = [k for k, iid in enumerate(self._ids)
                if view.objects[int(iid)]["category"] not in exclude_categories | STRUCTURE
                and extent[k] >= self.min_landmark_extent and view.room_of(int(iid)) is not None]
        return np.array(keep, dtype=np.int64)

    def describe_route(self, dense, waypoints, start_yaw=None, goal_instance=None, frames=None) -> RouteFacts:
        facts = super().describe_route(dense, waypoints, start_yaw, goal_instance, frames)
        return self.clean_rooms(self.prefer_shared_anchors(self.prefer_shared_landmarks(facts, dense), dense))

    def prefer_shared_anchors(self, facts: RouteFacts, dense) -> RouteFacts:
        """The landmark of each turn ("turn left at …") and of the stop becomes, among the landmarks
        of its room within ``landmark_radius`` of the turn (``end_radius`` of the end point) and at
        most ``landmark_slack`` m farther than it, the one with the most rivals (``_rivals``), then
        the nearest; landmarks other events name are not taken."""
        view = self.view
        frame = PathFrame(dense)
        cand = self._landmark_ids(set())
        if not len(cand):
            return facts
        ids = [int(i) for i in self._ids[cand]]
        taken = {e.landmark.instance_id for e in facts.events if e.landmark is not None}
        events = list(facts.events)
        for k, ev in enumerate(events):
            if ev.kind not in ("turn", "stop") or ev.landmark is None:
                continue
            at = frame.dense[-1] if ev.kind == "stop" else \
                frame.dense[min(int(np.searchsorted(frame.arc, ev.s)), len(frame.dense) - 1)]
            radius = self.end_radius if ev.kind == "stop" else self.landmark_radius
            dist = self._box_distances(cand, np.asarray(at, dtype=float)[None])[:, 0]
            room = view.room_of(ev.landmark.instance_id)
            mine = float(dist[ids.index(ev.landmark.instance_id)]) if ev.landmark.instance_id in ids else radius
            best, best_key = ev.landmark, (self._rivals(ev.landmark, room, frame), -mine)
            for j, iid in enumerate(ids):
                if iid in taken or view.room_of(iid) != room or dist[j] > min(radius, mine + self.landmark_slack):
                    continue
                lm = view.object_ref(iid)
                key = (self._rivals(lm, room, frame), -float(dist[j]))
                if key > best_key:
                    best, best_key = lm, key
            if best is not ev.landmark:
                taken.discard(ev.landmark.instance_id)
                taken.add(best.instance_id)
                events[k] = replace(ev, landmark=best)
        return replace(facts, events=tuple(events))

    def prefer_shared_landmarks(self, facts: RouteFacts, dense) -> RouteFacts:
        """Each ``pass`` landmark becomes, among the landmarks near the path in the same room and
        where a pass may be said, the one whose category has the most objects in that room and in
        view from the path there (``_rivals``: a reference to it must then be told apart; one the
        referrer cannot single out counts none), ties kept in path order."""
        view = self.view
        frame = PathFrame(dense)
        taken = {e.landmark.instance_id for e in facts.events if e.landmark is not None}
        events = list(facts.events)
        for k, ev in enumerate(events):
            if ev.kind != "pass":
                continue
            room = view.room_of(ev.landmark.instance_id)
            best, best_key = ev, (self._rivals(ev.landmark, room, frame), 0.0)
            for lm in facts.landmarks:
                if lm.instance_id in taken or view.room_of(lm.instance_id) != room:
                    continue
                s, _ = frame.locate(lm.position)
                if s < 0.5 or facts.length - s < 1.5:
                    continue
                key = (self._rivals(lm, room, frame), -abs(s - ev.s))
                if key > best_key:
                    best, best_key = RouteEvent("pass", s, landmark=lm), key
            if best is not ev:
                taken.discard(ev.landmark.instance_id)
                taken.add(best.landmark.instance_id)
                events[k] = best
        order = ("start", "turn", "enter", "pass", "stop")
        body = sorted((e for e in events if e.kind != "stop"), key=lambda e: (e.s, order.index(e.kind)))
        return replace(facts, events=tuple(body + [e for e in events if e.kind == "stop"]))

    def _may_skip(self, before, after) -> bool:
        """Whether a stay between rooms ``before`` and ``after`` may be left unsaid: they are one
        room or neighbours (or nothing says otherwise)."""
        if self.referrer is None or before.room_id == after.room_id:
            return True
        return self.referrer.adjacent(before.room_id, after.room_id) is not False

    def clean_rooms(self, facts: RouteFacts) -> RouteFacts:
        """Drop room stays shorter than ``min_room_stay`` (not the first or last) and merge the
        neighbours they separated; the ``enter`` events and ``rooms`` follow. A stay is kept when
        the referrer's scene graph says the rooms on either side are not neighbours (going from one
        to the other then passes through it, short or not)."""
        enters = [e for e in facts.events if e.kind == "enter"]
        start = next((e for e in facts.events if e.kind == "start"), None)
        if start is None or start.room is None or not enters:
            return facts
        stays = [(start.room, 0.0)] + [(e.room, e.s) for e in enters]
        bounds = [s for _, s in stays[1:]] + [facts.length]
        segs = [[room, s0, s1] for (room, s0), s1 in zip(stays, bounds)]
        changed = True
        while changed:
            changed = False
            for k in range(1, len(segs) - 1):
                if segs[k][2] - segs[k][1] < self.min_room_stay and self._may_skip(segs[k - 1][0], segs[k + 1][0]):
                    segs[k - 1][2] = segs[k][2]
                    del segs[k]
                    changed = True
                    break
            for k in range(1, len(segs)):
                if segs[k][0].room_id == segs[k - 1][0].room_id:
                    segs[k - 1][2] = segs[k][2]
                    del segs[k]
                    changed = True
                    break
        kept = [RouteEvent("enter", s0, room=room) for room, s0, _ in segs[1:]]
        events = [e for e in facts.events if e.kind != "enter"] + kept
        order = ("start", "turn", "enter", "pass", "stop")
        events.sort(key=lambda e: (e.s, order.index(e.kind)))
        stop = [e for e in events if e.kind == "stop"]
        events = [e for e in events if e.kind != "stop"] + stop
        return replace(facts, rooms=tuple(room for room, _, _ in segs), events=tuple(events))


class RouteSynthesizerV2:
    """Step-by-step route instructions (language version 2) from ``RouteFacts`` and the path.

    ``families`` selects the template families (``route_language.family``) for the language split;
    ``straight_min``: a stretch this long (m) with nothing to mention gets a distance clause.
    """

    straight_min = 4.0
    far_min = 2.5
    #: Chance that a reference unique by category alone still gets an attribute, relation or
    #: carried object (each), and that a room unique by type is still named by its contents.
    decorate = 0.35

    def __init__(self, referrer: Referrer, lexicon: Lexicon | None = None, families: tuple[int, ...] = (0, 1)):
        self.referrer = referrer
        self.lexicon = lexicon or Lexicon()
        self.families = tuple(families)
        self.templates = template_set(self.families)
        self._by_id = {t.template_id: t for t in self.templates.templates}
        self.dropped: Counter = Counter()

    def _words(self, items):
        """The connective words of this synthesizer's families (the empty opener always)."""
        return [w for i, w in enumerate(items) if w == "" or i % 2 in self.families] or list(items)

    # ------------------------------------------------------------------ phrases
    def distance(self, metres: float, rng) -> str:
        """"about three metres" (rounded; hedges vary)."""
        n = max(1, int(metres + 0.5))
        hedge = self._words(DISTANCE_HEDGES)[int(rng.integers(len(self._words(DISTANCE_HEDGES))))]
        return f"{hedge} {number_word(n)} metre{'s' if n != 1 else ''}"

    def reference_phrase(self, ref: Reference, rng, references: list) -> Phrase:
        """Noun phrase for ``ref`` with its mentions (head mention carries scope/ordinal)."""
        lex = self.lexicon
        variant = int(rng.integers(4))
        head = object_phrase(ref.obj, lex, attribute_keys=ref.attributes, variant=variant)
        mention = replace(head.mentions[0], scope=ref.scope_room, viewpoint=ref.viewpoint)
        if ref.ordinal is not None:
            n, side = ref.ordinal
            noun = head.text[len("the "):]
            side_text = _pick(rng, SIDE_WORDS).format(side=side)
            text = f"the {ordinal_word(n)} {noun} {side_text}"
            mention = replace(mention, span=(0, len(text)), ordinal=(n, side))
            phrase = Phrase(text, [mention])
        else:
            phrase = Phrase(head.text, [mention])
        if ref.relation is not None:
            words = RELATION_WORDS_V2.get(ref.relation.relation, (ref.relation.relation.replace("_", " "),))
            anchor = object_phrase(ref.relation.anchor, lex, variant=int(rng.integers(4)))
            anchor = Phrase(anchor.text, [replace(anchor.mentions[0], scope=ref.scope_room, viewpoint=ref.viewpoint)])
            rel = Phrase(_pick(rng, words) + " ") + anchor
            rel.mentions.append(Mention("relation", (0, len(rel.text)), relation=ref.relation.relation,
                                        subject=ref.obj.node_id, target=ref.relation.anchor.node_id))
            phrase = phrase + " " + rel
        if ref.carries is not None:
            carried = object_phrase(ref.carries, lex, determiner="a", variant=int(rng.integers(4)))
            before, after = _pick(rng, CARRY_WORDS)
            extra = Phrase(before) + carried + after
            extra.mentions.append(Mention("relation", (len(before), len(before) + len(carried.text)), relation="on",
                                          subject=ref.carries.node_id, target=ref.obj.node_id))
            phrase = phrase + extra
        record = {"instance_id": ref.obj.instance_id, "needs": ref.needs, "span": [0, len(phrase.text)]}
        if ref.seen_rivals:
            record["seen_rivals"] = ref.seen_rivals
        references.append(record)
        phrase.mentions.append(Mention("object", (0, len(phrase.text)), category="__reference__",
                                       instance_id=len(references) - 1))
        return phrase

    def room_phrase(self, rref: RoomReference, rng) -> Phrase:
        """``the kitchen`` or ``the bedroom with the desk`` (room mention over the whole phrase)."""
        lex = self.lexicon
        noun = "room" if rref.generic else \
            lex.room_phrase(rref.room.room_type, int(rng.integers(len(lex.room_variants(rref.room.room_type)))))
        text = f"the {noun}"
        mentions = []
        if rref.contents is not None:
            obj = object_phrase(rref.contents, lex, attribute_keys=rref.contents_attributes,
                                variant=int(rng.integers(4)))
            text += _pick(rng, [" with ", " that has ", " containing "])
            start = len(text)
            text += obj.text
            mentions.append(replace(obj.mentions[0], span=(start, len(text)), scope=rref.room.room_id))
            mentions.append(Mention("relation", (start, len(text)), relation="in", subject=rref.contents.node_id,
                                    target=rref.room.node_id))
        mentions.insert(0, Mention("room", (0, len(text)), category=rref.room.room_type, room_id=rref.room.room_id,
                                   scope=rref.scope_room,
                                   contents=rref.contents.category if rref.contents is not None else None))
        return Phrase(text, mentions)

    # ------------------------------------------------------------------ route
    def route(self, facts: RouteFacts, dense: np.ndarray, rng: np.random.Generator,
              style: str = "natural") -> GroundedInstruction | None:
        """One instruction along the route, or ``None`` when a room on it cannot be named uniquely
        (counted in ``dropped['ambiguous_room']``). Landmarks that cannot be made unique are left
        out (``dropped['ambiguous_landmark']``); the stop then falls back to the room."""
        path = PathFrame(dense)
        referrer = self.referrer
        clauses: list[Phrase] = []
        used: list[str] = []
        actions: list[tuple[str, int]] = []
        references: list[dict] = []

        def clause(part: str, slots: dict, one_door: bool = False) -> None:
            """A clause of ``part``; wording that claims a single doorway only when ``one_door``."""
            choices = self.templates.select(part, None, set(slots))
            choices = [t for t in choices if one_door or not ONE_DOORWAY.search(t.text)] or choices
            fresh = [t for t in choices if t.template_id not in used] or choices
            if used:   # no two clauses in a row opening with the same word
                last_first = self._by_id[used[-1]].text.split(" ", 1)[0]
                fresh = [t for t in fresh if t.text.split(" ", 1)[0] != last_first] or fresh
            tmpl = _pick(rng, fresh)
            rendered = render(tmpl.text, slots)
            if part in MOVING_PARTS and rng.random() < 0.15:
                rendered = rendered + (" " + _pick(rng, self._words(MANNERS)))
            clauses.append(rendered)
            used.append(tmpl.template_id)

        def ref(obj, room_id) -> Phrase | None:
            if obj is None:
                return None
            r = referrer.refer(obj.instance_id, room_id, path=path, rng=rng, decorate=self.decorate)
            if r is None:
                self.dropped["ambiguous_landmark"] += 1
                return None
            return self.reference_phrase(r, rng, references)

        def doorway(room_ref, from_room, into: Phrase | None) -> Phrase | None:
            """"the second doorway on your left into the kitchen": always when the room cannot be
            named or more than one door leads into it from ``from_room``, else sometimes
            (``decorate``); a room mention with the ordinal spans it all."""
            door = referrer.doorway_ordinal(from_room, room_ref.room_id, path)
            needed = into is None or referrer.doors_between(from_room, room_ref.room_id) > 1
            if door is None or (not needed and (rng.random() >= self.decorate
                                                or into.text.startswith("the room "))):
                return None
            n, side = door
            target = into if into is not None else self.room_phrase(RoomReference(room_ref, None), rng)
            phrase = Phrase(f"the {ordinal_word(n)} {_pick(rng, DOOR_WORDS)} "
                            f"{_pick(rng, SIDE_WORDS).format(side=side)} into ") + target
            phrase.mentions.insert(0, Mention("room", (0, len(phrase.text)), category=room_ref.room_type,
                                              room_id=room_ref.room_id, scope=from_room, ordinal=door))
            references.append({"instance_id": None, "room_id": room_ref.room_id, "kind": "doorway",
                               "needs": "ordinal" if needed else "category", "span": [0, len(phrase.text)]})
            phrase.mentions.append(Mention("object", (0, len(phrase.text)), category="__reference__",
                                           instance_id=len(references) - 1))
            return phrase

        def room(room_ref, from_room) -> Phrase | None:
            rref = referrer.refer_room(room_ref.room_id, from_room, by_contents=bool(rng.random() < self.decorate),
                                       generic=bool(rng.random() < 0.5))
            if rref is None:
                return None
            return self.room_phrase(rref, rng)

        def entry(room_ref) -> tuple[Phrase | None, Phrase | None] | None:
            """(room, doorway) phrases of entering ``room_ref`` from ``current``; None (counted as
            ``ambiguous_room``) when neither can be said."""
            into = room(room_ref, current)
            door = doorway(room_ref, current, into)
            if into is None and door is None:
                self.dropped["ambiguous_room"] += 1
                return None
            return into, door

        def left_room() -> Phrase | None:
            """The phrase of ``pending_exit``, the room the path is leaving."""
            return room(self.referrer.view.room_ref(pending_exit), pending_exit)

        events = list(facts.events)
        start = next((e for e in events if e.kind == "start"), None)
        events = [e for e in events if e.kind != "start"]
        current = start.room.room_id if start is not None and start.room is not None else None
        if current is not None:
            actions.append(("start", current))
        named: set[int] = set()
        stop_ev = next((e for e in events if e.kind == "stop"), None)
        stop_id = stop_ev.landmark.instance_id if stop_ev is not None and stop_ev.landmark is not None else None
        initial = [e for e in events if e.kind == "turn" and e.s <= 1e-9]
        events = [e for e in events if not (e.kind == "turn" and e.s <= 1e-9)]
        first_enter = next((k for k, e in enumerate(events) if e.kind == "enter"), None)
        pending_exit = current if first_enter is not None else None
        for ev in initial:
            clause("turn_around", {}) if ev.direction == "around" else clause("turn", {"dir": ev.direction})
        if pending_exit is None and not initial:
            clause("begin", {})
        last_s, i = 0.0, 0
        while i < len(events):
            ev = events[i]
            nxt = events[i + 1] if i + 1 < len(events) else None
            gap = ev.s - last_s
            far = None
            sayable_pass = ev.kind == "pass" and ev.landmark is not None and ev.landmark.instance_id not in named \
                and ev.landmark.instance_id != stop_id
            if sayable_pass and gap >= self.far_min:
                far = self.distance(gap, rng)
            elif gap >= self.straight_min:
                clause("straight", {"dist": self.distance(gap, rng)})
            last_s = ev.s
            if ev.kind == "enter" and ev.room is not None:
                got = entry(ev.room)
                if got is None:
                    return None
                into, door = got
                out = left_room() if pending_exit is not None else None
                one_in = referrer.doors_between(current, ev.room.room_id) == 1
                if out is not None and door is None and rng.random() < 0.3:
                    clause("cross", {"room_a": out, "room_b": into}, one_door=one_in)
                else:
                    if out is not None:
                        clause("exit", {"room": out}, one_door=referrer.doors_between(pending_exit) == 1)
                    clause("enter_door", {"doorway": door}) if door is not None else \
                        clause("enter", {"room": into}, one_door=one_in)
                if pending_exit is not None:
                    actions.append(("exit", pending_exit))
                    pending_exit = None
                actions.append(("enter", ev.room.room_id))
                current = ev.room.room_id
            elif ev.kind == "turn":
                if pending_exit is not None and nxt is not None and nxt.kind == "enter":
                    out = left_room()
                    if out is not None:
                        clause("exit", {"room": out}, one_door=referrer.doors_between(pending_exit) == 1)
                        actions.append(("exit", pending_exit))
                        pending_exit = None
                if ev.direction == "around":
                    clause("turn_around", {})
                elif nxt is not None and nxt.kind == "enter" and nxt.room is not None and nxt.s - ev.s < 2.0 \
                        and pending_exit is None:
                    got = entry(nxt.room)
                    if got is None:
                        return None
                    into, door = got
                    if door is not None:
                        clause("enter_door", {"doorway": door})
                    else:
                        clause("turn_into", {"dir": ev.direction, "room": into},
                               one_door=referrer.doors_between(current, nxt.room.room_id) == 1)
                    actions.append(("enter", nxt.room.room_id))
                    current = nxt.room.room_id
                    last_s = nxt.s
                    i += 1
                else:
                    lm = None
                    if ev.landmark is not None and ev.landmark.instance_id not in named \
                            and ev.landmark.instance_id != stop_id:
                        lm = ref(ev.landmark, current)
                    if lm is not None:
                        named.add(ev.landmark.instance_id)
                        clause("turn_at", {"dir": ev.direction, "landmark": lm})
                    else:
                        clause("turn", {"dir": ev.direction})
            elif sayable_pass:
                lm = ref(ev.landmark, current)
                if lm is None and gap >= self.straight_min:
                    clause("straight", {"dist": self.distance(gap, rng)})
                if lm is not None:
                    named.add(ev.landmark.instance_id)
                    _, side = path.locate(self.referrer.view.objects[ev.landmark.instance_id]["position"])
                    if far is not None:
                        clause("pass_far", {"landmark": lm, "dist": far})
                    elif side is not None and rng.random() < 0.4 and "side" not in lm.text.split()[-2:] \
                            and not lm.text.endswith((" left", " right")):
                        clause("pass_side", {"landmark": lm, "side": side})
                    else:
                        clause("pass", {"landmark": lm})
            elif ev.kind == "stop":
                end_room = ev.room.room_id if ev.room is not None else current
                lm = ref(ev.landmark, end_room) if ev.landmark is not None else None
                if lm is not None and ev.room is not None and rng.random() < 0.4:
                    where = room(ev.room, end_room)
                    if where is not None:
                        clause("stop_at_in", {"landmark": lm, "room": where})
                    else:
                        clause("stop_at", {"landmark": lm})
                elif lm is not None:
                    clause("stop_at", {"landmark": lm})
                elif ev.room is not None and ev.room.room_id != current:
                    where = room(ev.room, current)
                    if where is None:
                        self.dropped["ambiguous_room"] += 1
                        return None
                    clause("stop_in", {"room": where})
                    actions.append(("enter", ev.room.room_id))
                else:
                    clause("stop", {})
                if ev.room is not None:
                    actions.append(("stop_in", ev.room.room_id))
            i += 1
        phrase = self._join(clauses, rng)
        # Reference records: spans from the placeholder mentions, which are then removed.
        mentions, records = [], []
        for m in phrase.mentions:
            if m.kind == "object" and m.category == "__reference__":
                rec = dict(references[m.instance_id])
                rec["span"] = list(m.span)
                records.append(rec)
            else:
                mentions.append(m)
        return GroundedInstruction(phrase.text, mentions, style=style, task_type="fine_grained",
                                   template_ids=tuple(used), actions=tuple(actions), references=tuple(records))

    def _join(self, clauses: list[Phrase], rng: np.random.Generator) -> Phrase:
        """Sentences of 1–3 clauses; links and openers from ``route_language`` (one family)."""
        sentences: list[Phrase] = []
        used_leads: set[str] = set()
        i = 0
        while i < len(clauses):
            size = min(len(clauses) - i, int(rng.integers(1, 4)))
            group = clauses[i:i + size]
            leads = [w for w in self._words(LEADS) if w == "" or w not in used_leads]
            lead = _pick(rng, leads) if sentences else _pick(rng, self._words(OPENERS))
            used_leads.add(lead)
            pair = self._words(PAIR_LINKS_AFTER_LEAD if lead else PAIR_LINKS)
            last = self._words(LAST_LINKS_AFTER_LEAD if lead else LAST_LINKS)
            if len(group) == 1:
                sent = group[0]
            elif len(group) == 2:
                sent = group[0] + _pick(rng, pair) + group[1]
            else:
                sent = Phrase.join(group[:-1], ", ") + _pick(rng, last) + group[-1]
            sentences.append(_finish(Phrase(lead) + sent))
            i += size
        if rng.random() < 0.3:
            sentences.append(Phrase(_pick(rng, self._words(CLOSINGS))))
        return Phrase.join(sentences, " ")




class RouteLanguageV2:
    """The version-2 pipeline for one scene: ``RouteDescriberV2`` → ``RouteSynthesizerV2`` →
    ``RouteVerifier``, with rejection counts.

    ``instructions(path, start_yaw, rng, k, families)`` returns up to ``k`` distinct verified
    instructions and an ``info`` record for the episode: ``references`` (per instruction, the
    reference records), ``verifier`` (``accepted`` and ``rejected`` counts by reason, over every
    attempt) and ``dropped`` (references that could not be made unique, by kind).
    """

    def __init__(self, scene_graph, room_map=None, grid=None, *, occupancy=None, landmark_radius: float = 1.5,
                 lexicon: Lexicon | None = None):
        from .graph import SceneGraphView
        from .references import Sightlines
        from .route_language import EXTRA_OBJECT_FORMS, EXTRA_ROOM_FORMS
        from .route_verifier import RouteVerifier

        view = scene_graph if isinstance(scene_graph, SceneGraphView) else SceneGraphView(scene_graph)
        lexicon = lexicon or Lexicon(view.categories(), view.room_types(), extra_object_forms=EXTRA_OBJECT_FORMS,
                                     extra_room_forms=EXTRA_ROOM_FORMS)
        sightlines = Sightlines(occupancy, view) if occupancy is not None else None
        self.referrer = Referrer(view, sightlines)
        self.verifier = RouteVerifier(view, lexicon, self.referrer)
        self.describer = RouteDescriberV2(view, room_map, grid, landmark_radius=landmark_radius,
                                          referrer=self.referrer)

    @classmethod
    def from_context(cls, ctx, **kwargs) -> "RouteLanguageV2":
        """Built from a task ``SceneContext`` (scene graph, room map, navigable grid, and the
        occupancy grid for what is in view)."""
        return cls(ctx.maps.scene_graph, ctx.maps.room_map, ctx.maps.navigable, occupancy=ctx.maps.occupancy,
                   **kwargs)

    def describe(self, dense, waypoints, start_yaw) -> RouteFacts:
        """The route facts (rooms, landmarks, turns, end) of a path."""
        return self.describer.describe_route(dense, waypoints, start_yaw)

    def instructions(self, facts: RouteFacts, dense, rng: np.random.Generator, k: int,
                     families: tuple[int, ...] = (0, 1), attempts: int | None = None):
        """Up to ``k`` distinct verified instructions for the route and the episode's ``info``."""
        synth = RouteSynthesizerV2(self.referrer, self.verifier.lexicon, families)
        frame = PathFrame(dense)
        texts: dict[str, GroundedInstruction] = {}
        rejected: Counter = Counter()
        accepted = 0
        for _ in range(attempts or k * 4):
            grounded = synth.route(facts, dense, rng)
            if grounded is None:
                rejected["ambiguous_room"] += 1
                continue
            reasons = self.verifier.reasons(grounded, frame)
            if reasons:
                rejected.update(sorted({r for r, _ in reasons}))
                continue
            accepted += 1
            texts.setdefault(grounded.text, grounded)
            if len(texts) == k:
                break
        chosen = list(texts.values())
        info = {"language": {"version": 2, "families": list(families)},
                "references": [[dict(r) for r in g.references] for g in chosen],
                "verifier": {"accepted": accepted, "rejected": dict(sorted(rejected.items()))},
                "dropped": dict(sorted(synth.dropped.items()))}
        return chosen, info


__all__ = ["WORDING_REVISION", "RELATION_WORDS_V2", "RouteDescriberV2", "RouteLanguageV2", "RouteSynthesizerV2", "family"]
