"""The episode kernel: everything that plays and scores episodes, between the task layer and the
commands that evaluate (``vlnverse.eval``) and train (``vlnverse.learn``).

- ``setup`` — :class:`EpisodeSetup` (task, body, sensors, render, collision mode, limits) and the
  config pieces eval and train configs share (episode source, cameras, render, named specs);
- ``episodes`` — run settings from the task config, episode generation, bounds checks;
- ``agents`` — the ``Agent`` base, the ``AGENTS`` registry, the baseline agents and the oracle;
  ``models`` / ``chat_models`` — the ``MODELS`` registry and the chat models agents talk to;
- ``rollout`` / ``modes`` / ``batched`` — one episode stepped under a collision mode, a scene's
  episodes, and episodes at once with batched agent calls;
- ``scoring`` / ``metrics`` / ``diagnostics`` / ``rooms`` — the task's metrics of a trajectory,
  first-error analysis, room semantics;
- ``records`` / ``summary`` / ``generation`` — episode records (JSONL), the run's summary and table;
- ``evaluation`` — ``evaluate(setup, episodes, agent) -> Results``: episodes, a setup and an agent
  in, records and summary out, nothing written (training validation uses it).

It imports neither ``vlnverse.eval`` nor ``vlnverse.learn`` (``tests/test_layering.py``).
"""
