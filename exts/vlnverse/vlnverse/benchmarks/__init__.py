"""Speed benchmarks run by ``vlnverse bench NAME``; each module ``NAME.py`` defines ``run(args) -> dict``.

Benchmarks print JSON figures; they are measurements, never pass/fail tests.
"""
BENCHMARKS = ("scenes", "sim", "paths", "eval", "mllm", "study", "train", "il", "transfer", "lookahead", "scale")
