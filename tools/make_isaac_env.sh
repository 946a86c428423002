#!/usr/bin/env bash
# Make a Python 3.12 environment holding the Isaac Sim 6.2.0.0 pip packages that ship real wheels,
# for tools/check_isaac_api.py and the slow Isaac tests. Idempotent; lives outside the repository.
#
#   tools/make_isaac_env.sh [ENV_DIR]        # default /work/isaac-py312 (or $VLNVERSE_ISAAC_ENV)
#
# ~645 MB of wheels, ~2.6 GB installed. No GPU needed. The Kit-side packages isaacsim-extscache-kit
# and -kit-sdk are placeholders on the index, so Kit in this environment lacks omni.usd/omni.physx:
# SimulationApp cannot finish starting; the kernel, the Python modules and their signatures can be
# checked. Using Kit needs NVIDIA's Omniverse EULA accepted (OMNI_KIT_ACCEPT_EULA=YES); this script
# installs only and accepts nothing. usd-core is deliberately NOT installed: inside Kit the toolkit uses Kit's own pxr (note that
# urdf-usd-converter, pinned by isaacsim-core, pulls usd-exchange, which ships a pip OpenUSD pxr too).
set -euo pipefail

ENV_DIR="${1:-${VLNVERSE_ISAAC_ENV:-/work/isaac-py312}}"
PY312="${PY312:-/root/.pyenv/versions/3.12.1/bin/python3.12}"
ISAAC_VERSION="6.2.0.0"
PACKAGES=(isaacsim isaacsim-kernel isaacsim-app isaacsim-core isaacsim-sensor isaacsim-utils
          isaacsim-gui isaacsim-storage isaacsim-replicator isaacsim-extscache-physics)
# Requirements the wheels pin that the index cannot satisfy, and what stands in for them.
#   opencv-python-headless-noffmpeg==4.14.0.94rc3 (isaacsim-core) -> opencv-python-headless
SUBSTITUTE_SED='s/^opencv-python-headless-noffmpeg\b.*/opencv-python-headless/'

case "$ENV_DIR" in
  "$(cd "$(dirname "$0")/.." && pwd)"/*) echo "make_isaac_env: $ENV_DIR is inside the repository; choose a path outside it" >&2; exit 2;;
esac
[ -x "$PY312" ] || { echo "make_isaac_env: no Python 3.12 at $PY312 (set PY312=...)" >&2; exit 2; }

if [ ! -x "$ENV_DIR/bin/python" ]; then
  echo "make_isaac_env: creating venv $ENV_DIR from $PY312"
  "$PY312" -m venv "$ENV_DIR"
fi
PY="$ENV_DIR/bin/python"
PIP=("$PY" -m pip --disable-pip-version-check)

# 1. the Isaac wheels themselves, without their dependency closure (which holds placeholders)
missing=()
for p in "${PACKAGES[@]}"; do
  v="$("$PY" -c "import importlib.metadata as m,sys
try: print(m.version(sys.argv[1]))
except m.PackageNotFoundError: print('')" "$p")"
  [ "$v" = "$ISAAC_VERSION" ] || missing+=("$p==$ISAAC_VERSION")
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "make_isaac_env: installing ${missing[*]}"
  "${PIP[@]}" install --no-deps --only-binary=:all: "${missing[@]}"
else
  echo "make_isaac_env: Isaac Sim $ISAAC_VERSION packages already installed"
fi

# 2. their pinned third-party requirements (not isaacsim-*/omniverse-*, no extras, markers honoured)
REQS="$ENV_DIR/isaac-requirements.txt"
"$PY" -c "import packaging" 2>/dev/null || "${PIP[@]}" install packaging
"$PY" - "${PACKAGES[@]}" > "$REQS" <<'EOF'
import importlib.metadata as md, re, sys
from packaging.requirements import Requirement
out = set()
for name in sys.argv[1:]:
    for line in md.requires(name) or ():
        r = Requirement(line)
        if r.marker is not None and not r.marker.evaluate({"extra": ""}):
            continue  # an extra's requirement, or a marker that does not hold here
        if re.match(r"(isaacsim|omniverse)", r.name):
            continue
        r.marker = None
        out.add(str(r))
print("\n".join(sorted(out)))
EOF
sed -i -E "$SUBSTITUTE_SED" "$REQS"
echo "make_isaac_env: installing $(wc -l < "$REQS") pinned requirements from $REQS"
"${PIP[@]}" install -r "$REQS"

# 3. what Kit's omni.kit.pipapi would install for the vlnverse extension ([python.pipapi] requirements of
#    the manifest: never usd-core, inside Kit the toolkit uses Kit's pxr) and pytest. vlnverse itself is not
#    installed: run it from a checkout with PYTHONPATH=exts/vlnverse (as tests/test_isaac_real.py does).
MANIFEST="$(cd "$(dirname "$0")/.." && pwd)/exts/vlnverse/config/extension.toml"
mapfile -t KIT_REQS < <("$PY" -c "import sys, tomllib; print('\n'.join(tomllib.load(open(sys.argv[1], 'rb'))['python']['pipapi']['requirements']))" "$MANIFEST")
"${PIP[@]}" install "${KIT_REQS[@]}" pytest

"$PY" - <<EOF
import importlib.metadata as m
print("make_isaac_env: ready:", "$ENV_DIR", "isaacsim", m.version("isaacsim"))
EOF
