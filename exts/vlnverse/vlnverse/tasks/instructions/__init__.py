"""Grounded instruction generation: Describer → Verifier → Synthesizer (VLNVerse §3, App. C).

Interface for task generators (``vlnverse.tasks.types.*``)::

    from vlnverse.tasks.instructions import Describer, Verifier, Synthesizer, synthesize_verified

    describer = Describer.from_context(ctx)             # scene graph + room map + navigable grid
    verifier = Verifier(ctx.maps.scene_graph)
    synth = Synthesizer("coarse_grained")               # templates registered for that task type

    facts = describer.describe_target(instance_id)      # TargetFacts (room, attributes, relation)
    instr = synthesize_verified(lambda: synth.goal(facts, "formal", rng), verifier)
    episode_instruction = instr.to_instruction()        # vlnverse.tasks.episode.Instruction

    route = describer.describe_route(path.dense, path.waypoints, start_yaw, goal_instance=iid)
    fine = synthesize_verified(lambda: Synthesizer("fine_grained").route(route, rng), verifier)

Public types:

* ``Mention(kind, span, category, instance_id, room_id, relation, subject, target, attributes)``
  — one grounded claim (``object``/``room``/``relation``) with its ``[start, end)`` text span.
* ``GroundedInstruction(text, mentions, style, task_type, template_ids)``.
* ``TargetFacts``, ``RouteFacts``, ``RouteEvent``, ``ObjectRef``, ``RoomRef``, ``RelationFact``.
* ``Describer(scene_graph, room_map, grid, landmark_radius=1.5, captioner=None)``;
  ``FrameCaptioner`` — optional callable ``frames -> caption`` (off by default, loads nothing).
* ``Verifier(scene_graph).check(instr) -> list[str]`` (empty = every mention supported and every
  object/room word in the text covered by a verified mention).
* ``Synthesizer(task_type)`` with ``goal(facts, style, rng)``, ``route(facts, rng)``,
  ``chain(subgoals, rng)``, ``category(name, rng)``; ``synthesize_verified(make, verifier)``
  resamples until the Verifier accepts.
* ``Template(template_id, text, style, part)``, ``TEMPLATES`` (registry of ``TemplateSet`` by task
  type; a built-in task type's set lives in its folder, ``tasks/types/<type>/templates.py``),
  ``register_templates(task_type, templates)`` — new task types add their own set.
* ``Lexicon`` (category/room-type phrases and synonyms, ``find(text)``), grammar helpers in
  ``grammar``; ``LLMSynthesizer`` (``llm``) rewrites through an OpenAI-compatible endpoint and
  keeps the result only if the Verifier accepts the re-extracted mentions.

Language version 2 of fine-grained routes (opt-in, ``params.instruction_version: 2``):
``references`` (``Referrer``: references unique from where they are said), ``route_v2``
(``RouteLanguageV2`` = ``RouteDescriberV2`` → ``RouteSynthesizerV2`` → ``route_verifier.RouteVerifier``),
``route_language`` (clause templates in two families for the language-shift split); ``stats``
(``vlnverse data stats``) and ``review`` (``vlnverse data review``) work on any dataset.
"""
from .describer import Describer, FrameCaptioner, turn_direction
from .graph import SceneGraphView
from .lexicon import Lexicon
from .llm import ChatClient, LLMError, LLMSynthesizer, extract_mentions
from .synthesizer import (STYLES, TEMPLATES, InstructionError, Synthesizer, Template, TemplateSet,
                          register_templates, synthesize_verified)
from .types import (GroundedInstruction, Mention, ObjectRef, RelationFact, RoomRef, RouteEvent, RouteFacts,
                    TargetFacts)
from .verifier import Verifier

__all__ = ["ChatClient", "LLMError", "LLMSynthesizer", "extract_mentions", "Describer", "FrameCaptioner", "turn_direction", "SceneGraphView", "Lexicon", "STYLES", "TEMPLATES",
           "InstructionError", "Synthesizer", "Template", "TemplateSet", "register_templates",
           "synthesize_verified", "GroundedInstruction", "Mention", "ObjectRef", "RelationFact", "RoomRef",
           "RouteEvent", "RouteFacts", "TargetFacts", "Verifier"]
