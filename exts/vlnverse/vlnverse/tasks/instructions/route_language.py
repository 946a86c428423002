"""Clause templates and connectives of the fine-grained route language, version 2.

Parts (slots): ``begin``; ``exit`` / ``enter`` ({room}); ``cross`` ({room_a} → {room_b}, leaving one
room straight into the next); ``pass`` ({landmark}); ``pass_side`` ({landmark}, {side}: the side it
is on); ``pass_far`` ({landmark}, {dist}: the distance walked before it); ``turn`` / ``turn_around``;
``turn_at`` ({dir}, {landmark}); ``turn_into`` ({dir}, {room}); ``straight`` ({dist}); ``stop_at``
({landmark}); ``stop_at_in`` ({landmark}, {room}); ``stop_in`` ({room}); ``stop``.

Every part's templates are partitioned into two *families* (``family(template_id)``: even and odd
positions in their part's list) for the language-shift split: training episodes use family 0,
``val_unseen_language`` family 1, so no clause wording of the held-out split was seen in training.

No template literal may name an object or room word (the Verifier would flag it as ungrounded);
``tests/tasks/test_instruction_grounding.py`` checks that.
"""
from __future__ import annotations

from .template_sets import Template, TemplateSet

PARTS: dict[str, list[str]] = {
    "begin": [
        "walk forward", "go straight ahead", "start walking forward", "move ahead", "head straight on",
        "set off straight ahead", "begin by walking forward", "walk on ahead", "step forward",
        "carry straight on", "make your way forward", "proceed forward", "advance a little",
        "stride forward", "press on ahead", "amble forward", "get moving straight ahead", "take a few steps forward",
        "march forward", "edge forward", "venture ahead", "start off by going forward",
    ],
    "exit": [
        "exit {room}", "leave {room}", "walk out of {room}", "head out of {room}", "step out of {room}",
        "make your way out of {room}", "get out of {room}", "go out of {room}", "find your way out of {room}",
        "depart from {room}", "move out of {room}", "slip out of {room}", "emerge from {room}",
        "pop out of {room}", "duck out of {room}", "vacate {room}", "stride out of {room}", "quit {room}",
        "wander out of {room}", "saunter out of {room}", "pass out through the doorway of {room}",
        "use the exit of {room}",
    ],
    "enter": [
        "enter {room}", "go into {room}", "walk into {room}", "step into {room}", "continue into {room}",
        "go through the doorway into {room}", "pass through the opening into {room}", "head into {room}",
        "make your way into {room}", "cross the threshold into {room}", "move on into {room}",
        "carry on into {room}", "proceed into {room}", "wander into {room}", "pop into {room}",
        "duck into {room}", "stride into {room}", "come into {room}", "arrive in {room}",
        "walk through the entrance to {room}", "pass under the archway into {room}", "get yourself into {room}",
        "venture into {room}", "follow the passage into {room}", "squeeze through into {room}",
        "stroll over into {room}", "make an entrance into {room}", "transition into {room}",
    ],
    "cross": [
        "go from {room_a} into {room_b}", "leave {room_a} for {room_b}", "pass out of {room_a} and into {room_b}",
        "exit {room_a} into {room_b}", "walk out of {room_a} into {room_b}", "move from {room_a} to {room_b}",
        "step out of {room_a} and straight into {room_b}", "head out of {room_a} toward {room_b}",
        "swap {room_a} for {room_b}", "trade {room_a} for {room_b}", "travel from {room_a} over to {room_b}",
        "make the short trip from {room_a} to {room_b}",
    ],
    "pass": [
        "walk past {landmark}", "go past {landmark}", "continue past {landmark}", "pass {landmark}",
        "keep going past {landmark}", "stroll past {landmark}", "head past {landmark}", "carry on past {landmark}",
        "make your way past {landmark}", "go by {landmark}", "move along past {landmark}", "walk by {landmark}",
        "skirt around {landmark}", "follow the path past {landmark}", "stride past {landmark}",
        "saunter past {landmark}", "amble by {landmark}", "sweep past {landmark}", "weave past {landmark}",
        "slip past {landmark}", "press on beyond {landmark}", "travel past {landmark}", "trek past {landmark}",
        "edge around {landmark}", "steer around {landmark}", "glide past {landmark}",
    ],
    "pass_side": [
        "pass {landmark} on your {side}", "walk by with {landmark} on your {side}",
        "keep {landmark} to your {side} as you go", "go past {landmark}, which will be on your {side}",
        "continue with {landmark} on your {side}", "you will see {landmark} on your {side} as you keep going",
        "walk on, leaving {landmark} to your {side}", "move past {landmark} on the {side}",
        "stay on course as {landmark} goes by on your {side}", "head on with {landmark} off to your {side}",
        "notice {landmark} on your {side} and keep moving", "let {landmark} slide by on your {side}",
        "watch for {landmark} on your {side} as you pass", "spot {landmark} to your {side} and carry on",
    ],
    "pass_far": [
        "walk {dist} until you pass {landmark}", "after {dist}, go past {landmark}",
        "continue for {dist} and pass {landmark}", "go {dist} forward, past {landmark}",
        "keep walking for {dist}, then pass {landmark}", "head {dist} ahead to get past {landmark}",
        "walk {dist} and you will pass {landmark}", "carry on {dist} beyond {landmark}",
        "cover {dist}, passing {landmark} on the way", "travel {dist} and go on beyond {landmark}",
        "journey {dist} onward past {landmark}", "stride {dist} onward and go by {landmark}",
    ],
    "turn_at": [
        "turn {dir} at {landmark}", "take a {dir} at {landmark}", "turn {dir} by {landmark}",
        "make a {dir} turn near {landmark}", "go {dir} when you reach {landmark}",
        "once you reach {landmark}, turn {dir}", "when you get to {landmark}, go {dir}",
        "hang a {dir} at {landmark}", "at {landmark}, make a {dir}", "swing {dir} beside {landmark}",
        "veer {dir} at {landmark}", "as soon as you come to {landmark}, bear {dir}",
        "pivot {dir} next to {landmark}", "upon reaching {landmark}, swing {dir}",
        "use {landmark} as your marker and turn {dir}", "right after {landmark}, head {dir}",
        "curve {dir} around {landmark}", "angle {dir} at {landmark}",
    ],
    "turn": [
        "turn {dir}", "take a {dir}", "make a {dir} turn", "bear {dir}", "swing {dir}", "hang a {dir}",
        "veer {dir}", "go {dir}", "turn to the {dir}", "head {dir}", "curve {dir}", "twist {dir}",
        "pivot {dir}", "rotate {dir}", "angle {dir}", "swivel to the {dir}", "branch off {dir}",
        "face {dir}", "cut {dir}", "steer {dir}",
    ],
    "turn_around": [
        "turn around", "turn all the way around", "make a U-turn", "spin around", "turn back the way you are facing",
        "about-face", "face the opposite direction", "reverse direction", "do a half turn", "swivel all the way round",
        "rotate to face behind you", "whirl around",
    ],
    "turn_into": [
        "turn {dir} into {room}", "take a {dir} into {room}", "go {dir} into {room}", "make a {dir} turn into {room}",
        "swing {dir} into {room}", "bear {dir} and enter {room}", "veer {dir} through to {room}",
        "hang a {dir} into {room}", "head {dir} into {room}", "turn {dir}, entering {room}",
        "pivot {dir} and step into {room}", "cut {dir} into {room}", "curve {dir} into {room}",
        "angle {dir} toward {room} and go in",
    ],
    "straight": [
        "walk straight for {dist}", "continue forward for {dist}", "go straight ahead for {dist}",
        "keep walking for {dist}", "go forward {dist}", "carry straight on for {dist}", "travel {dist} ahead",
        "head onward for {dist}", "walk {dist} in a straight line", "proceed {dist} forward",
        "cover {dist} without turning", "press on for {dist}", "keep a straight course for {dist}",
        "stride ahead {dist}", "follow the same direction for {dist}", "hold your heading for {dist}",
    ],
    "stop_at": [
        "stop by {landmark}", "wait next to {landmark}", "stop in front of {landmark}", "stop when you reach {landmark}",
        "come to a stop near {landmark}", "stop at {landmark}", "halt beside {landmark}", "wait by {landmark}",
        "make {landmark} your final stop", "finish next to {landmark}", "pause at {landmark} and wait",
        "end up beside {landmark}", "stand close to {landmark}", "come to rest by {landmark}",
        "park yourself by {landmark}", "settle near {landmark}", "stay put beside {landmark}",
        "remain standing near {landmark}", "wrap up at {landmark}", "conclude the walk at {landmark}",
        "position yourself facing {landmark}", "draw to a halt alongside {landmark}", "hover near {landmark}",
        "call it done at {landmark}", "linger beside {landmark}",
    ],
    "stop_at_in": [
        "stop by {landmark} in {room}", "wait next to {landmark} in {room}", "stop at {landmark} in {room}",
        "halt beside {landmark} in {room}", "finish at {landmark} inside {room}", "wait by {landmark} within {room}",
        "end beside {landmark} in {room}", "come to rest at {landmark} in {room}",
        "settle next to {landmark} in {room}", "stay put near {landmark} inside {room}",
    ],
    "stop_in": [
        "stop once you are in {room}", "wait inside {room}", "stop in {room}", "stop as you enter {room}",
        "halt just inside {room}", "wait once you reach {room}", "finish inside {room}",
        "you have arrived once you are in {room}", "stay put in {room}", "settle inside {room}",
        "end the walk in {room}", "remain in {room}",
    ],
    "stop": [
        "walk a few more steps and stop", "continue a little further and stop", "stop after a few steps",
        "go a bit further and wait there", "take a couple more steps and halt", "stop shortly after",
        "move a little farther, then wait", "treat that as your destination and stop", "stop right there",
        "finish a few paces on", "creep forward a touch and pause", "shuffle ahead slightly and stay",
        "advance a short distance and freeze", "inch forward and hold still",
    ],
}

#: Manner words sometimes added after a movement clause, openers of the first sentence, and
#: closing remarks after the last one.
MANNERS = ("slowly", "carefully", "steadily", "calmly", "at an easy pace", "without hurrying", "briskly",
           "quietly", "gently", "at a steady pace", "cautiously", "unhurriedly", "smoothly", "confidently",
           "at a relaxed pace", "with care")
MOVING_PARTS = frozenset({"begin", "pass", "straight", "enter", "exit"})
OPENERS = ("", "", "", "please ", "okay, ", "alright, ", "first, ", "to begin, ", "now then, ", "so, ",
           "from where you stand, ", "from your starting spot, ", "to start with, ", "here is the route: ",
           "listen closely: ", "follow me: ")
CLOSINGS = ("You have arrived.", "That is your destination.", "You are done.", "This is the end of the route.",
            "That is where the route ends.", "Your journey ends here.", "Well done, you made it.",
            "Nothing more after that.", "That spot is the goal.", "The route finishes there.", "Job done.",
            "That completes the walk.", "Mission accomplished.", "That is it.")

#: Openers of a sentence after the first (empty: none), and links between clauses of a sentence.
LEADS = ("", "", "", "then ", "after that, ", "next, ", "from there, ", "now ", "afterwards, ", "after this, ",
         "following that, ", "once you have done that, ", "subsequently, ", "when that is done, ",
         "from this point, ")
PAIR_LINKS = (" and ", ", then ", " and then ", ", and after that ", "; then ", ", and next ")
PAIR_LINKS_AFTER_LEAD = (" and ", " and then ", "; ")
LAST_LINKS = (", and ", ", then ", ", and finally ", ", and then ", ", and lastly ")
LAST_LINKS_AFTER_LEAD = (", and ", ", and then ")

#: Extra spoken forms of object categories and room types in version 2 (added to the lexicon's).
EXTRA_OBJECT_FORMS: dict[str, tuple[str, ...]] = {
    "sofa": ("settee", "loveseat"), "armchair": ("easy chair", "club chair"), "nightstand": ("night table",),
    "wardrobe": ("armoire", "clothes press"), "dresser": ("bureau", "chest"), "desk": ("writing desk", "work desk"),
    "office_chair": ("swivel chair", "computer chair"), "sink": ("washbasin", "basin"), "bathtub": ("bath",),
    "counter": ("worktop", "work surface"), "stove": ("cooker", "hob"), "tv_stand": ("media console",),
    "sideboard": ("credenza",), "washing_machine": ("laundry machine",), "laundry_basket": ("laundry hamper",),
    "coat_rack": ("coat stand", "hat stand"), "trash_can": ("garbage can", "rubbish bin"),
    "mirror": ("looking glass",), "piano": ("upright piano", "keyboard instrument"), "microwave": ("microwave oven",),
    "bookshelf": ("book shelf",), "kitchen_cabinet": ("kitchen unit",), "dining_table": ("dinner table",),
    "potted_plant": ("pot plant", "indoor plant"), "floor_lamp": ("floor light", "tall lamp"), "toilet": ("WC",),
    "storage_shelf": ("storage rack",), "shoe_rack": ("shoe stand",), "bench": ("long seat",),
    "fridge": ("icebox",), "coffee_table": ("low coffee table",), "chair": ("seat",), "dryer": ("clothes dryer",),
    "bed": ("double bed",), "towel_rack": ("towel holder",), "mug": ("coffee mug",),
    "vase": ("flower vase",), "book": ("paperback",), "bowl": ("dish",), "kettle": ("electric kettle",),
    "laptop": ("notebook computer",), "toaster": ("bread toaster",), "clock": ("timepiece",),
}
EXTRA_ROOM_FORMS: dict[str, tuple[str, ...]] = {
    "living_room": ("sitting room", "family room"), "office": ("home office", "workroom"),
    "hallway": ("passageway",), "dining_room": ("dining area",), "laundry_room": ("laundry",),
    "bedroom": ("sleeping quarters",), "kitchen": ("cooking area",), "bathroom": ("bath room",),
}

#: Spoken distances: hedges before the number and the unit after it.
DISTANCE_HEDGES = ("about", "roughly", "around", "approximately", "some")


def family(template_id: str) -> int:
    """The language-split family (0 or 1) of a v2 template id (``fine2_<part>_<index>``)."""
    return int(template_id.rsplit("_", 1)[1]) % 2


def template_set(families: tuple[int, ...] = (0, 1)) -> TemplateSet:
    """The v2 clause templates of the given families (both by default)."""
    templates = [Template(f"fine2_{part}_{i:02d}", text, part=part)
                 for part, texts in PARTS.items() for i, text in enumerate(texts)]
    return TemplateSet("fine_grained_v2", [t for t in templates if family(t.template_id) in families])


__all__ = ["CLOSINGS", "DISTANCE_HEDGES", "EXTRA_OBJECT_FORMS", "EXTRA_ROOM_FORMS", "LAST_LINKS", "LEADS", "MANNERS", "MOVING_PARTS", "OPENERS", "PAIR_LINKS",
           "PARTS", "family", "template_set"]
