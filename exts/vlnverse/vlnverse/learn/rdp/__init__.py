"""RDP: a recurrent diffusion policy for continuous VLN (VLNVerse appendix A.2.3), in ``POLICIES``.

Per step the policy encodes the instruction (word embeddings + bidirectional LSTM), the RGB frame
(CNN → 4×4 spatial tokens) and the depth frame (CNN global feature). Two multi-head cross-modal
attention modules fuse language and vision (instruction tokens attend over the RGB tokens, RGB
tokens attend over the instruction tokens); their pooled outputs, the depth feature and the
previous executed motion feed a GRU that keeps the history. Conditioned on the GRU state, a small
transformer denoiser predicts the noise of the next ``horizon`` continuous actions
(Δx, Δy, Δyaw — each relative to the pose the previous one reaches, agent frame), trained with the
DDPM objective (squared-cosine schedule of ``diffusion_steps`` steps; the MSE of the noise,
``prediction: epsilon``, the paper's eq. 29, or of the clean chunk, ``sample``) and sampled
with DDPM ancestral sampling (``sampler: ddpm``) or deterministic DDIM (``sampler: ddim``, η = 0,
``ddim_steps`` evenly spaced steps; the default — deterministic given the initial noise, and
faster). Each visited state is trained with ``noise_samples`` (noise, step) draws. A stop-progress head (sigmoid; 0 at the start → 1 at the
goal) is trained with MSE weighted by ``progress_weight`` (λ); the agent stops when predicted
progress exceeds ``stop_threshold`` (0.95: it stops where d - r <= 0.05 (d0 - r), within the
success distance when r is half of it on paths up to ~15 m; 0.9 stopped short of the success
circle on the tests' 8 m corridor paths). Otherwise it executes the first action of the sampled chunk
(the medoid of ``action_samples`` samples when more than one)
as a ``WaypointAction`` — through the waypoint controller under physics (Strict) or by teleport
(Tel-Hop) — and re-plans at the next step (receding horizon). With ``hop_view_deg: A`` (inference
only) a first action that moves the agent to a bearing more than A degrees off its heading — out of
the camera's view when A is half its field of view — is executed as a turn in place onto that
bearing (``look_before_hop``): the agent looks where it would go and re-plans from that view.

Teacher (``WaypointTeacher``): at every visited pose, the geodesic shortest path to the goal
(the scene planner's A* path from the current pose) that keeps ``teacher_clearance`` metres (default
0.15) from the edge of the navigable map where the map allows it — planned on the navigable map
shrunk by that margin, else by half of it, else on the map itself; a taut shortest path grazes
every corner at zero margin, so a 0.1 m tracking error puts the commanded waypoint into a wall,
which ends a Strict episode — is resampled by arc length every ``waypoint_spacing`` metres; the first ``horizon`` points, each
headed along its segment, give the action chunk (padded with zero motion at the goal). With
``turn_in_place_deg: A`` a first segment more than A degrees off the agent's heading starts the
chunk with a turn in place onto it (Δx = Δy = 0), as the discrete agents turn before they walk: the
agent sees where it is going before it hops there. Progress is
``1 - max(d - r, 0) / max(d0 - r, ε)`` with d the geodesic distance to the goal, d0 that at the
start and r the teacher's stop radius (``stop_radius``, default half the success distance); the
teacher stops within r. Long-horizon episodes (goals that count in order,
``tasks.scoring.has_ordered_goals``): the teacher heads for the next unreached sub-goal
(``vlnbert.ordered_subgoals``, as the VLN-BERT oracle and the discrete oracle do), drops it once
within r of it and stops only within r of the last goal; d is then the remaining route length —
the geodesic distance to the next sub-goal plus the geodesic legs between the remaining sub-goals
and the goal — so progress runs over the whole route (non-decreasing as the agent advances: by the
triangle inequality, dropping a sub-goal never lengthens the route, up to the map's resolution)
and is 1 at the final stop. A chunk that would end at a sub-goal goes on along the path from it towards the next target
instead of padding with zero motion, which would teach a halt there. Single-goal episodes are
labelled as before. Actions are diffused in a 4-d space: Δx, Δy divided by the spacing and Δyaw as (sin, cos), so a
turn of +π and one of −π are the same point.

Modules by concern (every name is re-exported here): ``teacher`` (the path with clearance, action
chunks, ``WaypointTeacher`` and its recording agent), ``diffusion`` (noise schedule, ``Denoiser``,
``medoid``), ``policy`` (``RDPParams``, ``RDPPolicy``, registered as ``rdp``) and
``diagnostics`` (``condition_check``).
"""
from __future__ import annotations

from .diagnostics import condition_check, heading_error_deg  # noqa: F401
from .diffusion import LATENT_DIM, PREDICTIONS, Denoiser, cosine_betas, medoid, timestep_embedding  # noqa: F401
from .policy import MIN_HOP, RDPParams, RDPPolicy, look_before_hop  # noqa: F401
from .teacher import (ACTION_DIM, WaypointTeacher, WaypointTeacherAgent, geodesic, margin_planners,  # noqa: F401
                      motion_vector, path_length, relative_chunk, resample_by_length, teacher_path)
