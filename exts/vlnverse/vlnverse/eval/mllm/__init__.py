"""Zero-shot multimodal-LLM navigation agents (VLN-MME): chat models, observation rendering,
tolerant action parsing, the eight NavGPT / MapGPT agent variants and the cached,
simulator-free viewpoint mode. See ``docs/mllm.md``.

- ``models`` — ``MODELS`` entries ``openai``, ``ollama``, ``transformers``, ``scripted`` and the response cache;
- ``parsing`` — :func:`parse_action`;
- ``views`` — four 90° views, agent-centred stitching with numbered candidate markers;
- ``agents`` — ``AGENTS`` entries ``navgpt[_cot][_reflection]`` and ``mapgpt[_cot][_reflection]``;
- ``cache`` — ``vlnverse cache build`` and the ``viewpoints`` simulator-free backend.
"""
