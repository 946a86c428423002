"""VLN-BERT: a recurrent, waypoint-based navigator (Hong et al. 2021/2022, as fine-tuned online in
the VLNVerse paper), in ``POLICIES`` as ``vlnbert``.

Each step the agent's 12-view depth panorama (rendered at the agent's pose: a panorama sensor on
the agent) goes through the **candidate waypoint predictor** (``learn.waypoints``, frozen), which
gives per-view features and K candidate waypoints (angle, distance). A transformer reads
``[state token, instruction tokens, candidate tokens, STOP token]``: the instruction through a
small transformer text encoder trained from scratch (``text_encoder.weights: PATH`` loads a local
state dict of that encoder, nothing is downloaded); each candidate token is the panorama feature
at its angle (interpolated between the two nearest views) plus an encoding of (sin θ, cos θ,
distance). The output state token, mixed with the previous state, is the new state carried to the
next step (recurrence); a scorer over [state, token] scores each candidate and STOP.

The chosen candidate becomes ``WaypointAction(r cos θ, r sin θ, θ)`` (agent frame): the
simulator's waypoint controller under Strict physics, a teleport under Tel-Hop. When the
predictor finds no candidate the agent turns in place by ``no_candidate_turn_deg`` and predicts
again next step (counted: ``agent_outputs[step].no_candidates``).

**Teacher / oracle** (``VLNBertTeacher``): the candidate with the shortest geodesic distance to
the goal (on long-horizon episodes, whose sub-goals count in order, to the next sub-goal not yet
reached, as the discrete oracle routes; STOP only at the last); STOP when the geodesic distance is below ``stop_distance`` (1.5 m, at most the success
distance) and the agent is in open space (navigable cells all around it within
``open_space_radius``), or when no candidate leads closer to the goal and the agent is within
the success distance. Only candidates on navigable cells joined to the agent by a collision-free
segment count; when there is none, the candidate nearest (in a straight line) to the goal.

**Monocular turns**: a monocular setup (``ObservationSetup``) sees candidates in its field of view
only, so ``Perception`` adds three turn candidates (distance 0, at ±90° and 180°: ``TURN_ANGLES_DEG``)
after the predicted ones; the chosen turn is ``WaypointAction(0, 0, θ)``, a rotation in place.
Where no candidate leads closer and the agent may not STOP, the oracle picks the turn nearest the
direction of the planner's shortest path when that direction is out of view, once per place; a
turn keeps the predictor's relaxed threshold (``relax_after``). The policies read a
turn like any candidate (the blank view feature at its angle, distance 0); GAMA's map never makes
one a node (``topomap.TopoMap.observe``).
Training: cross-entropy between the scores and the oracle action, over
teacher-forced episodes (IL) and then online (``mode: dagger``) with schedule sampling: at each
step the executed action is the oracle's with probability β = p^round, else the policy's; β is
logged per round (``dagger.jsonl``, ``train_log.csv``, TensorBoard).

Modules by concern (every name is re-exported here): ``text`` (``TextEncoder``), ``perception``
(``Perception``, turn candidates, candidate actions), ``teacher`` (``VLNBertTeacher``, its
recording agent, ``ordered_subgoals``) and ``policy`` (``candidate_loss``, ``VLNBertPolicy``,
registered as ``vlnbert``).
"""
from __future__ import annotations

from .perception import (TURN_ANGLES_DEG, Perception, candidate_action, in_open_space, is_turn,  # noqa: F401
                         relax_after)
from .policy import VLNBertParams, VLNBertPolicy, candidate_loss  # noqa: F401
from .teacher import (PATH_AHEAD, TURN_PLACE, VLNBertTeacher, VLNBertTeacherAgent, ordered_subgoals,  # noqa: F401
                      self_goal)
from .text import TextEncoder  # noqa: F401
