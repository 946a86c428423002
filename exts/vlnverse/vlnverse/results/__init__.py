"""Results files read back: paired comparisons between runs (``vlnverse results compare``) and
results pages generated from them (``vlnverse results page``).

Reads eval run folders (``summary.json`` + ``episodes.jsonl``) and ``bench train`` JSON files of
results format 2 (``run.summary.RESULTS_FORMAT``); older files are refused with one line.
"""
