"""Built-in instruction templates, one module per task type (importing registers them).

Slots available to goal templates: ``{target}`` ("the red mug"), ``{a_target}`` ("a red mug"),
``{target_noun}`` ("red mug"), ``{target_plain}`` ("the mug"), ``{rel}`` ("on the dining
table"), ``{room}`` ("the kitchen"), ``{room_noun}`` ("kitchen"). Route templates use
``{room}``, ``{landmark}``, ``{dir}`` (left/right). Chain frames use ``{g1}``…``{g3}``. Object-goal
templates use ``{a_category}``, ``{category}``, ``{the_category}``, ``{categories}``.
"""
from . import (coarse_grained, dialogue, false_premise, fine_grained, long_horizon, object_goal,  # noqa: F401
               video_contextualized, visual_reference)

#: The task types with a built-in template set (each module above registers its own).
BUILTIN_TEMPLATE_SETS = ("coarse_grained", "dialogue", "false_premise", "fine_grained", "long_horizon", "object_goal",
                         "video_contextualized", "visual_reference")
