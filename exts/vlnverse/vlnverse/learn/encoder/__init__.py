"""A visual encoder pretrained on the toolkit's own renders (``vlnverse pretrain-encoder``).

**Data.** Seeded poses on navigable cells of the given scenes (uniform heading), each rendered
by the simulator (``render_at``: no physics) as RGB, depth and semantic frames of one camera rig.
The labels come free with the render: per cell of the encoder's 4×4 spatial grid, the histogram
of semantic classes (``SEMANTIC_CLASSES``: the scene's label names mapped onto one vocabulary
shared by every scene, unknown names → ``other``) and the mean depth; per frame, the room type of
the agent's cell (``ROOM_CLASSES``, from the room map; ``none`` outside every room).

**Model.** Two ``encoders.CNNEncoder`` trunks (the architecture the policies use): RGB and depth.
Per objective a small head reads a trunk:

- ``semantic`` — each trunk's spatial cells → class logits; soft cross-entropy against the cell's
  class histogram (accuracy: argmax = the cell's dominant class);
- ``depth`` — the RGB trunk's spatial cells → mean depth / ``max_depth``; L1 (reported in metres);
- ``room`` — each trunk's global vector → room type; cross-entropy.

The loss is the sum over the chosen objectives and trunks. Adam, batch order seeded per epoch.

**Probe.** How much each objective leaves in the features is measured the same way for every
run: fresh heads of all three objectives are trained on the *frozen* trunks (``probe_epochs``)
and scored on the held-out frames, for the pretrained trunks and for randomly initialised ones
(``metrics.json``: ``probe``).

**Files.** ``encoder.safetensors`` holds only the trunks' tensors (``rgb.*``, ``depth.*``);
``encoder.json`` beside it: format, architecture, the sensor rig (kinds, sizes, FoV, depth range),
objectives, code version, held-out metrics and the weights' sha256. ``metrics.json`` and
``loss.png`` (train and held-out loss per epoch) complete the run folder.

Policies read the file through ``rgb_encoder`` / ``depth_encoder: {type: pretrained, path: FILE,
frozen: true}``; a file made for another rig is one ``ConfigError`` (``check_rig``).

Modules by concern (every name is re-exported here): ``files`` (the weights and sidecar, rig checks,
``pretrained_trunk``), ``data`` (rendered, labelled frames), ``model`` (heads, losses, ``fit``)
and ``pretraining`` (``EncoderTrainConfig``, ``run_pretraining``, the recipes' ``pretrain_on_homes``).
"""
from __future__ import annotations

from .data import (GRID, ROOM_CLASSES, SEMANTIC_CLASSES, FrameData, FrameRenderer, build_frames,  # noqa: F401
                   cell_histograms, room_class)
from .files import (FORMAT, FORMAT_VERSION, arch_of, check_encoders, check_rig, pretrained_trunk,  # noqa: F401
                    read_encoder, save_encoder)
from .model import OBJECTIVES, Heads, evaluate_heads, fit  # noqa: F401
from .pretraining import (RECIPE_PRETRAINING, EncoderTrainConfig, expand_scenes, pretrain_on_homes,  # noqa: F401
                          probe, resolve_auto_encoders, run_pretraining)
