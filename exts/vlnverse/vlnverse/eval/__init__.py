"""Evaluation layer: metrics, collision modes, agents and models, the eval runner and the quickstart.

- ``metrics`` — TL, NE, SR, OSR, SPL, DTW/nDTW/sDTW, CLS, CR, SR_n, VLN-NF and VCN-Bench metrics, ``aggregate``;
- ``modes`` — Strict, Tel-Hop and graph collision modes over the backend-neutral ``vlnverse.sim`` API;
- ``agents`` / ``models`` — the ``AGENTS`` / ``MODELS`` registries and the random, forward, oracle
  and wall-bumper agents;
- ``config`` / ``runner`` / ``report`` — ``vlnverse eval CONFIG`` (resumable, JSON + HTML outputs);
- ``quickstart`` — ``vlnverse quickstart``. See ``docs/evaluation.md``.
"""
