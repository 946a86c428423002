"""Evaluation layer: the ``vlnverse eval`` command over the episode kernel (``vlnverse.run``:
rollout, collision modes, metrics, agents, records and summaries), and the agents that prompt
multimodal models.

- ``config`` / ``runner`` / ``report`` — ``vlnverse eval CONFIG`` (resumable run folders, JSON + HTML outputs,
  parallel workers);
- ``mllm`` / ``roam`` / ``pixel_goal`` — the MLLM agents (VLN-MME, ROAM and Set-of-Marks, MV-DualVLN),
  registered into ``run.agents.AGENTS``;
- ``quickstart`` — ``vlnverse quickstart``. See ``docs/evaluation.md``.
"""
