"""Data types shared by the instruction pipeline stages (Describer → Verifier → Synthesizer).

* Facts (produced by the Describer from the scene-graph prior and the planned path):
  ``ObjectRef``, ``RoomRef``, ``RelationFact``, ``TargetFacts`` (a goal object, its room,
  attributes and a distinguishing relation), ``RouteEvent``/``RouteFacts`` (rooms passed,
  landmarks, turns, end point along a path).
* ``Mention``: one grounded claim inside an instruction text, with its character span.
* ``GroundedInstruction``: instruction text + the mentions that ground it; converts to the
  episode's ``Instruction`` record.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

MENTION_KINDS = ("object", "room", "relation")
RELATIONS = ("in", "on", "near", "next_to", "adjacent")
#: Relations that hold in both directions in the scene graph.
SYMMETRIC_RELATIONS = ("near", "next_to", "adjacent")


@dataclass(frozen=True)
class RoomRef:
    """A room of the scene: id and type (``kitchen``)."""

    room_id: int
    room_type: str

    @property
    def node_id(self) -> str:
        """Scene-graph node id ``room:<id>``."""
        return f"room:{self.room_id}"


@dataclass(frozen=True)
class ObjectRef:
    """An object of the scene: instance id, category, room (if known), attributes and position."""

    instance_id: int
    category: str
    room: RoomRef | None = None
    attributes: tuple[tuple[str, str], ...] = ()
    position: tuple[float, float, float] = (0.0, 0.0, 0.0)

    @property
    def node_id(self) -> str:
        """Scene-graph node id ``obj:<instance_id>``."""
        return f"obj:{self.instance_id}"

    @property
    def attribute_dict(self) -> dict[str, str]:
        """Attributes as a dict (``{"color": "red"}``)."""
        return dict(self.attributes)


@dataclass(frozen=True)
class RelationFact:
    """``subject --relation--> anchor`` as stored in the scene graph (``mug on table``)."""

    relation: str
    anchor: ObjectRef


@dataclass(frozen=True)
class TargetFacts:
    """What the Describer knows about a goal object.

    ``distinguishing_attributes`` are the attribute keys that tell the target apart from other
    objects of its category in its room (empty if it is the only one); ``relation`` is a
    scene-graph relation to another object, chosen to be distinguishing when possible;
    ``unique`` says whether category + room type + attributes + relation pick out exactly this
    object in the whole scene; ``needs_room`` / ``needs_relation`` say that a description must
    name the room / the relation to be unambiguous (templates without them are then skipped).
    """

    target: ObjectRef
    room: RoomRef | None
    relation: RelationFact | None = None
    distinguishing_attributes: tuple[str, ...] = ()
    same_category_in_room: int = 1
    unique: bool = True
    needs_room: bool = False
    needs_relation: bool = False
    caption: str | None = None


@dataclass(frozen=True)
class RouteEvent:
    """One thing that happens along a path, at arc length ``s`` (m).

    ``kind``: ``start`` (the room you start in), ``pass`` (a landmark you walk past),
    ``turn`` (``direction`` left/right/around, optional ``landmark`` near the turn),
    ``enter`` (a new room), ``stop`` (the end point: ``room`` and optional ``landmark``).
    """

    kind: str
    s: float
    room: RoomRef | None = None
    landmark: ObjectRef | None = None
    direction: str | None = None


@dataclass(frozen=True)
class RouteFacts:
    """Grounded description of a path: rooms in order, landmarks near it, ordered events."""

    rooms: tuple[RoomRef, ...]
    landmarks: tuple[ObjectRef, ...]
    events: tuple[RouteEvent, ...]
    length: float
    caption: str | None = None


@dataclass(frozen=True)
class Mention:
    """A grounded claim in an instruction's text.

    * ``kind="object"``: an object of ``category`` (instance ``instance_id`` when resolved) with
      the claimed ``attributes``.
    * ``kind="room"``: a room of type ``category`` (``room_id`` when resolved).
    * ``kind="relation"``: ``subject`` --``relation``--> ``target`` (node ids ``obj:<id>`` /
      ``room:<id>``); relation ``in`` with a room target claims the object is in that room.

    ``span`` is the ``[start, end)`` character range of the supporting words in the text.

    Language version 2 adds where a reference is said and what it claims beyond category and
    attributes: ``scope`` (the room id whose objects, or whose neighbouring rooms, the words must
    single out), ``viewpoint`` (the point the words are said at: objects of other rooms in view
    from there are in scope too), ``ordinal`` (``(n, side)``: "the second chair on your left") and
    ``contents`` (a category the room contains: "the bedroom with the desk"); the ``Verifier``
    checks that such a mention denotes exactly one object or room (``references.Referrer``).
    """

    kind: str
    span: tuple[int, int]
    category: str | None = None
    instance_id: int | None = None
    room_id: int | None = None
    relation: str | None = None
    subject: str | None = None
    target: str | None = None
    attributes: tuple[tuple[str, str], ...] = ()
    scope: int | None = None
    ordinal: tuple[int, str] | None = None
    contents: str | None = None
    viewpoint: tuple[float, float] | None = None

    def shifted(self, offset: int) -> "Mention":
        """The same mention with its span moved by ``offset`` characters."""
        from dataclasses import replace

        return replace(self, span=(self.span[0] + offset, self.span[1] + offset))

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly record (``None`` fields omitted)."""
        out: dict[str, Any] = {"kind": self.kind, "span": list(self.span)}
        for key in ("category", "instance_id", "room_id", "relation", "subject", "target", "scope", "contents"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        if self.attributes:
            out["attributes"] = dict(self.attributes)
        if self.ordinal is not None:
            out["ordinal"] = list(self.ordinal)
        if self.viewpoint is not None:
            out["viewpoint"] = list(self.viewpoint)
        return out


@dataclass
class GroundedInstruction:
    """Instruction text plus the mentions grounding it in the scene graph."""

    text: str
    mentions: list[Mention] = field(default_factory=list)
    style: str = "natural"
    task_type: str = ""
    template_ids: tuple[str, ...] = ()
    language: str = "en"
    #: Version 2: route claims in order (``("start"|"exit"|"enter"|"stop_in", room_id)``) and one
    #: record per object reference (``span``, ``instance_id``, ``needs``), for the Verifier and stats.
    actions: tuple[tuple[str, int], ...] = ()
    references: tuple[dict, ...] = ()

    def to_instruction(self):
        """The episode-level ``Instruction`` record (text, style, language)."""
        from ..episode import Instruction

        return Instruction(text=self.text, style=self.style, language=self.language)

    def mentioned_instances(self) -> set[int]:
        """Instance ids of every object mention."""
        return {m.instance_id for m in self.mentions if m.kind == "object" and m.instance_id is not None}
