#!/usr/bin/env bash
# Print the README's test command (its one line `python3 -m pip install ... && python3 -m pytest ...`),
# so that .ci/run and tools/stress_tests.sh run exactly what a newcomer copies from README.md.
set -euo pipefail
readme="$(cd "$(dirname "$0")/.." && pwd)/README.md"
lines="$(grep -E '^python3 -m pip install .+ && python3 -m pytest ' "$readme" || true)"
if [ -z "$lines" ] || [ "$(printf '%s\n' "$lines" | wc -l)" -ne 1 ]; then
    echo "$readme: expected exactly one line 'python3 -m pip install ... && python3 -m pytest ...' (the test command)" >&2
    exit 2
fi
printf '%s\n' "$lines"
