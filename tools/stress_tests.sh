#!/usr/bin/env bash
# Run the README's test command while busy processes (`yes > /dev/null`) load the cores, as on a
# shared machine. The busy processes are stopped by their PIDs when the script ends, fails or is
# interrupted (Ctrl-C).
#
#   tools/stress_tests.sh [--runs N] [--busy K] [--current]
#
# By default the command runs in a fresh virtual environment (python3 -m venv, in a temporary
# folder removed afterwards), as a newcomer's; --current runs it with the python3 on PATH as it is
# (e.g. your activated venv). --runs N: N times in a row, stopping at the first failure (default 1);
# --busy K: K busy processes (default 2). Exit status: the failing run's, else 0.
set -euo pipefail
cd "$(dirname "$0")/.."
runs=1 busy=2 current=0
while [ $# -gt 0 ]; do
    case "$1" in
        --runs) runs="${2:-}"; shift 2 || true ;;
        --busy) busy="${2:-}"; shift 2 || true ;;
        --current) current=1; shift ;;
        -h|--help) sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "tools/stress_tests.sh: unknown option '$1' (expected --runs N, --busy K, --current)" >&2; exit 2 ;;
    esac
done
for value in "$runs" "$busy"; do
    if ! [[ "$value" =~ ^[0-9]+$ ]] || [ "$value" -gt 64 ]; then
        echo "tools/stress_tests.sh: --runs and --busy take a whole number 0..64, got '$value'" >&2
        exit 2
    fi
done
TEST_COMMAND="$(tools/readme_test_command.sh)"

busy_pids=()
venv=""
cleanup() {
    for pid in "${busy_pids[@]}"; do
        kill "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
    done
    if [ -n "$venv" ]; then rm -rf "$venv"; fi
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

for _ in $(seq "$busy"); do
    yes > /dev/null &
    busy_pids+=("$!")
done
echo "stress: ${#busy_pids[@]} busy processes (PIDs ${busy_pids[*]:-none}) on $(nproc) cores" >&2
if [ "$current" = 0 ]; then
    venv="$(mktemp -d -t vlnverse-stress-XXXXXX)"
    python3 -m venv "$venv"
    # shellcheck disable=SC1091
    source "$venv/bin/activate"
    echo "stress: fresh virtual environment $venv" >&2
fi
for run in $(seq "$runs"); do
    start=$(date +%s)
    echo "stress: run $run/$runs, load average $(cut -d' ' -f1-3 /proc/loadavg 2>/dev/null || echo '?'): $TEST_COMMAND" >&2
    status=0
    eval "$TEST_COMMAND" || status=$?
    if [ "$status" != 0 ]; then
        echo "stress: run $run/$runs FAILED (exit status $status) after $(( $(date +%s) - start )) s" >&2
        exit "$status"
    fi
    echo "stress: run $run/$runs passed in $(( $(date +%s) - start )) s" >&2
done
