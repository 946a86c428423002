"""Video-contextualized (VCN-Bench) instructions: the target is resolved from the prior video.

Parts and slots (every R2O template ends by naming an object category to locate in the room):

* ``instance``: ``{target}`` ("the red chair"), optionally ``{room}`` ("the bedroom");
* ``count``: ``{ordinal}`` ("second"), ``{room_noun}`` ("bedroom"), ``{object}`` / ``{a_object}``;
* ``order_after`` / ``order_before``: ``{room_noun}``, ``{anchor}`` ("the kitchen"), ``{object}``;
* ``order_next`` / ``order_previous``: ``{anchor}``, ``{object}`` (the room right after / before);
* ``count_entry``: ``{ordinal}``, ``{object}`` / ``{a_object}`` (the room after the k-th entry into
  the current room);
* ``order_single_before`` / ``order_single_after``: ``{choice_a}``, ``{choice_b}`` (two rooms of
  different types), ``{anchor}``, ``{object}``;
* ``distance``: ``{extreme}`` ("closest to"/"farthest from"), ``{room_noun}``, ``{object}`` — from where
  you stand; ``distance_from``: the same measured from ``{anchor}``;
* ``orientation``: ``{side}`` ("farthest to your left"), ``{room_noun}``, ``{object}``.
"""
from ...instructions.template_sets import Template, register_templates

TABLE = {
    "instance": [
        ("natural", "Go to {target} you saw in the video."),
        ("natural", "Find {target} that appeared in the video, in {room}."),
        ("formal", "Navigate to {target} shown in the video."),
        ("formal", "Proceed to {target} observed in {room} during the video."),
        ("casual", "remember {target} from the video? Go there"),
        ("casual", "head back to {target} in {room}, the one from the video"),
    ],
    "count": [
        ("natural", "Go to the {ordinal} {room_noun} you saw in the video and find {object}."),
        ("formal", "Proceed to the {ordinal} {room_noun} visited in the video and locate {object}."),
        ("natural", "Think about the video: head to the {ordinal} {room_noun} you walked into, then find {object}."),
        ("casual", "the {ordinal} {room_noun} from the video, go there and find {a_object}"),
    ],
    "count_entry": [
        ("natural", "Go to the room you entered right after your {ordinal} entry into the room you are in now, "
                    "in the video, and find {object}."),
        ("formal", "Proceed to the room visited immediately following the {ordinal} entry into the current room "
                   "in the video. Locate {object}."),
        ("casual", "the room right after your {ordinal} time in here in the video, go find {a_object} there"),
    ],
    "order_single_before": [
        ("natural", "Of {choice_a} and {choice_b}, go to the one you visited before {anchor} in the video and "
                    "find {object}."),
        ("formal", "Go to the room that was visited before {anchor} in the video: {choice_a} or {choice_b}. "
                   "Locate {object}."),
        ("casual", "{choice_a} or {choice_b}, whichever came before {anchor} in the video, find {object} there"),
    ],
    "order_single_after": [
        ("natural", "Of {choice_a} and {choice_b}, go to the one you visited after {anchor} in the video and "
                    "find {object}."),
        ("formal", "Go to the room that was visited after {anchor} in the video: {choice_a} or {choice_b}. "
                   "Locate {object}."),
        ("casual", "{choice_a} or {choice_b}, whichever came after {anchor} in the video, find {object} there"),
    ],
    "order_after": [
        ("natural", "Go to the {room_noun} you visited after {anchor} in the video and find {object}."),
        ("formal", "Proceed to the {room_noun} that was visited after {anchor} in the video. Locate {object}."),
        ("casual", "the {room_noun} you hit after {anchor} in the video, find {object} there"),
    ],
    "order_before": [
        ("natural", "Go to the {room_noun} you visited before {anchor} in the video and find {object}."),
        ("formal", "Proceed to the {room_noun} that was visited before {anchor} in the video. Locate {object}."),
        ("casual", "go back to the {room_noun} from before {anchor} in the video and grab {a_object}"),
    ],
    "order_next": [
        ("natural", "Go to the room you entered right after leaving {anchor} in the video and find {object}."),
        ("formal", "Proceed to the room visited immediately after {anchor} in the video. Locate {object}."),
        ("casual", "whatever room came right after {anchor} in the video, go there and find {object}"),
    ],
    "order_previous": [
        ("natural", "Go to the room you were in right before {anchor} in the video and find {object}."),
        ("formal", "Proceed to the room visited immediately before {anchor} in the video. Locate {object}."),
        ("casual", "the room just before {anchor} in the video, go find {object} there"),
    ],
    "distance": [
        ("natural", "Of the rooms you saw in the video, go to the {room_noun} {extreme} where you are now and find {object}."),
        ("formal", "Proceed to the {room_noun} {extreme} your current position among the rooms visited in the video. Locate {object}."),
        ("casual", "among the rooms in the video, hit the {room_noun} {extreme} you and find {object}"),
        ("natural", "Among the rooms visited in the video, find the {room_noun} that is {extreme} you, then look for {object}."),
    ],
    "distance_from": [
        ("natural", "Among the rooms you saw in the video, go to the {room_noun} {extreme} {anchor} and find {object}."),
        ("formal", "Proceed to the {room_noun} {extreme} {anchor} among the rooms visited in the video. Locate {object}."),
        ("casual", "of the rooms in the video, the {room_noun} {extreme} {anchor}: go find {object}"),
    ],
    "orientation": [
        ("natural", "Facing the way you face now, go to the {room_noun} {side} among the rooms in the video and find {object}."),
        ("formal", "Keeping your current heading as reference, proceed to the {room_noun} {side} among the rooms visited in the video. Locate {object}."),
        ("casual", "from how you're facing right now, the {room_noun} {side} in the video, find {object} there"),
        ("natural", "Of the rooms you saw in the video, go to the {room_noun} that lies {side}, as you face now, and find {object}."),
    ],
}

TEMPLATES = [Template(f"vcn_{part}_{i:02d}", text, style=style, part=part)
             for part, rows in TABLE.items() for i, (style, text) in enumerate(rows)]

register_templates("video_contextualized", TEMPLATES)
