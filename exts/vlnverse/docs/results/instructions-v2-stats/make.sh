#!/usr/bin/env bash
# Regenerates stats.json: 1,020 fine-grained instructions (34 episodes x 3 on each of the 10 shipped
# homes, seed 0) in language version 1 (today's default) and version 2, measured on the first 1,000
# of each by `vlnverse data stats` (issue 57). Run from the repository root.
set -euo pipefail
here=$(dirname "$0")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for v in 1 2; do
  python -m vlnverse data generate --task fine_grained --scenes all --episodes-per-scene 34 --seed 0 \
    --workers 1 --no-progress --set params.instruction_version=$v --out "$tmp/v$v"
done
cd "$tmp"
python -m vlnverse data stats v2 --max-instructions 1000 --baseline v1 --out stats.json
cd - >/dev/null
cp "$tmp/stats.json" "$here/stats.json"
