"""HNR (Wang et al. 2024, "Lookahead exploration with neural radiance representation", as in the
VLNVerse paper's appendix A.1.1): the building blocks and the ``hnr`` policy in ``POLICIES``.

- ``backproject`` (Eq. 2): grid features of a view, with planar depth (the simulator's
  convention) and pinhole intrinsics, become world points with an orientation (the camera's
  heading) and a scale (the footprint of a cell at its depth, ``depth / fx`` per pixel).
- ``FeatureCloud``: the points of an episode, grown step by step, capped at ``cap`` points;
  **eviction is first-in first-out** (when full, the oldest points go first: the cloud holds the
  most recent observations).
- ``VolumeRenderer`` (Eqs. 3-4): a lookahead view at (origin, heading) is ``rows`` x ``rays``
  rays (``rays`` across ``hfov``; ``rows`` through the centres of horizontal bands of the square
  view, 1: level), ``samples`` points on each between ``near`` and ``far``; each sample
  gathers its K nearest cloud points (torch ``cdist`` + ``topk``, batched), embeds their relative
  position and orientation in the ray's frame, weighs them (softmax over K) into a latent
  feature and predicts a density; only neighbours within ``radius`` count (a sample with none is
  empty space, density 0). The ray integrates ``Σ T_i (1 - exp(-σ_i δ_i)) f_i`` (Eq. 4), plus
  with a ``background`` the transmittance left past its last sample times it, ``T_N f_bg``
  (NeRF's background colour); the view's region feature is the mean over its rays.
- ``GraphAwareAttention`` (Eq. 5): multi-head self-attention over graph nodes whose logits add a
  learnt per-head map of the node distance matrix E (E = 0: plain attention).

The ``hnr`` policy extends VLN-BERT (``learn.vlnbert``: the panorama, the waypoint predictor's
candidates, the state token and the oracle teacher). Each step the panorama goes into the cloud as
**grid features**: each view's depth image through the encoder's CNN trunk
(``WaypointPredictor.grid_features``: the 4 x 4 spatial map pooled to ``cloud_grid`` x
``cloud_grid`` cells, default 2: 12 · 4 = 48 points per step), each cell back-projected at the
median depth of its pixels (``cell_depths``, ``panorama_points``) with the camera's heading and
the cell's scale; ``cloud_grid: 0`` puts one point per view (its panorama token at its median
centre-row depth), as checkpoints from before grid features do. ``cloud_encoder`` takes the grid
features from another frozen encoder instead: a ``vlnverse pretrain-encoder`` trunk
(``PretrainedGridEncoder``) or a user's weights file, e.g. a CLIP ViT image tower
(``WeightsGridEncoder``; ``cloud_encoder_spec``). For each candidate a lookahead view is rendered
at the candidate's position facing its direction; the topological graph holds the visited nodes
(the last ``history`` positions), the current node, the candidates and one lookahead node per candidate (at the candidate's
position), encoded by ``graph_layers`` GASA layers over their geodesic distances on the graph
(``graph_distances``: shortest paths along the trajectory chain, current - candidate and
candidate - lookahead edges, each as long as the straight line between its nodes). A candidate's
token for the VLN-BERT scorer is its graph token plus its lookahead's. ``render.background``
(default true; false for checkpoints from before it, which render as they did) gives each ray the
current view's feature in the candidate's direction as its background: where the cloud holds
nothing yet (early in an episode) the lookahead falls back to that view, where it holds points
the rendered features cover it by their opacity.

Training: ``render_weight`` λ > 0 adds λ · (1 - cos) between the rendered feature of the oracle's
candidate at step t and the real panorama view the agent faces at step t + 1 (the simulator's
render at that pose, which the teacher recorded; with grid features, the mean of that view's cells): the rendering model is supervised by the
encoder's feature of the real view, jointly with the policy; or first alone, as the paper does:
``stage: render`` trains only the rendering model on that loss (one ``vlnverse train`` run), then
``stage: joint`` (the default) trains the policy with ``render.weights: <that run's checkpoint>``.

Modules by concern (every name is re-exported here): ``geometry`` (back-projection, depths,
panorama points), ``cloud`` (``FeatureCloud``, ``VolumeRenderer``), ``blocks`` (GASA and graph
distances), ``grid_encoders`` (``cloud_encoder``), ``teacher`` (``HNRPerception``,
``HNRTeacher``), ``policy`` (``HNRPolicy``, registered as ``hnr``) and ``analysis`` (lookahead
similarity, ``checkpoint_teacher``).
"""
from __future__ import annotations

from .analysis import checkpoint_teacher, lookahead_cosines, lookahead_similarity  # noqa: F401
from .blocks import GraphAwareAttention, GraphLayer, graph_distances, topological_edges  # noqa: F401
from .cloud import PARKED, UNSEEN, FeatureCloud, VolumeRenderer, integrate  # noqa: F401
from .geometry import backproject, cell_depths, panorama_points, view_at_angle, view_depths  # noqa: F401
from .grid_encoders import (CLOUD_ENCODERS, WEIGHTS_ENCODERS, GridEncoder, PretrainedGridEncoder,  # noqa: F401
                            WeightsGridEncoder, cloud_encoder_spec, encoder_file, make_grid_encoder, weights_arch)
from .policy import DEFAULT_GRID, GraphMemory, HNRParams, HNRPolicy  # noqa: F401
from .teacher import HNRPerception, HNRTeacher, HNRTeacherAgent  # noqa: F401
