"""Long-horizon instructions: coarse sub-goal clauses chained in order."""
from ...instructions.template_sets import Template, register_templates

SUBGOALS = [
    "go to {room} and find {target} {rel}",
    "find {target} {rel}",
    "head to {target} in {room}",
    "go to {target} {rel} in {room}",
    "walk over to {target}",
    "locate {target} {rel}",
    "visit {target} in {room}",
    "make your way to {target} {rel}",
    "go into {room} and stop by {target}",
    "stop at {target} {rel}",
    "find {a_target} {rel} in {room}",
    "go stand next to {target}",
    "proceed to {target} in {room}",
    "look for {target} {rel}",
    "move to {target}",
    "continue to {target} {rel} in {room}",
    "go find {target} in {room}",
    "walk to {target} {rel}",
]
CHAIN2 = [
    "First, {g1}, and then {g2}.",
    "{g1}. After that, {g2}.",
    "To start, {g1}. Then {g2}.",
    "{g1}; once you are there, {g2}.",
    "{g1}, and afterwards {g2}.",
    "First {g1}. When you are done, {g2}.",
    "{g1}. Next, {g2}.",
]
CHAIN3 = [
    "First, {g1}, then {g2}, and finally {g3}.",
    "{g1}. After that, {g2}. Finally, {g3}.",
    "First {g1}; next {g2}; last of all, {g3}.",
    "{g1}, then {g2}, and to finish, {g3}.",
    "To begin, {g1}. Then {g2}, and finally {g3}.",
    "{g1}. Once there, {g2}. Lastly, {g3}.",
    "First, {g1}. Second, {g2}. Third, {g3}.",
]

register_templates("long_horizon",
                   [Template(f"lh_sub_{i:02d}", t, part="subgoal") for i, t in enumerate(SUBGOALS)]
                   + [Template(f"lh_chain2_{i:02d}", t, part="chain2") for i, t in enumerate(CHAIN2)]
                   + [Template(f"lh_chain3_{i:02d}", t, part="chain3") for i, t in enumerate(CHAIN3)])
