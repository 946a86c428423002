#!/usr/bin/env bash
# Regenerates stats.json (fine-grained) and stats_coarse.json (coarse-grained): 34 episodes on each
# of the 10 shipped homes (seed 0) in instruction language version 1 (today's default) and
# version 2, measured on the first 1,000 instructions of each by `vlnverse data stats` (issue 57).
# Run from the repository root.
set -euo pipefail
here=$(dirname "$0")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for task in fine_grained coarse_grained; do
  for v in 1 2; do
    python -m vlnverse data generate --task $task --scenes all --episodes-per-scene 34 --seed 0 \
      --workers 1 --no-progress --set params.instruction_version=$v --out "$tmp/${task}_v$v"
  done
done
(cd "$tmp" && python -m vlnverse data stats fine_grained_v2 --max-instructions 1000 --baseline fine_grained_v1 \
   --out stats.json && python -m vlnverse data stats coarse_grained_v2 --max-instructions 1000 \
   --baseline coarse_grained_v1 --out stats_coarse.json)
cp "$tmp/stats.json" "$tmp/stats_coarse.json" "$here/"
