#!/usr/bin/env bash
# The Python half of the golden kits: installs what it needs on a fresh Debian (bookworm)
# machine, then runs python/tests (the ptsuite_golden package) and the PyTorch example
# (examples/pytorch/run_all.sh). Idempotent: a few seconds when everything is present.
#
#   bash ci/golden_python.sh [PTSUITE_BIN]
#
# torch comes from Debian (python3-torch, 1.13, for /usr/bin/python3), which has no
# safetensors package: a venv with --system-site-packages sees Debian's torch and numpy and
# gets safetensors, pytest and ptsuite_golden from pip (no --break-system-packages, nothing
# outside the venv changed). The venv lives in build/golden-venv (PTSUITE_GOLDEN_VENV).
# With PTSUITE_BIN (argument or environment) the tests also export kits with it and
# compare verdicts with `ptsuite golden verify`. Takes about 1 minute on 2 cores, most of
# it DDP's process start-ups.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${1:-${PTSUITE_BIN:-}}
VENV=${PTSUITE_GOLDEN_VENV:-$PWD/build/golden-venv}
SYS_PY=/usr/bin/python3
t0=$SECONDS

SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
need=()
$SYS_PY -c "import torch" 2>/dev/null || need+=(python3-torch)
$SYS_PY -c "import venv, ensurepip" 2>/dev/null || need+=(python3-venv)
if ((${#need[@]})); then
  echo "golden_python: installing ${need[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi

if [[ ! -x "$VENV/bin/python" ]]; then
  echo "golden_python: making $VENV"
  $SYS_PY -m venv --system-site-packages "$VENV"
fi
PY=$VENV/bin/python
# wheel: setuptools < 70 needs it to build ./python without build isolation (Debian's comes
# with python3-pip, which a fresh machine may lack).
"$PY" -c "import safetensors, pytest, wheel" 2>/dev/null || "$PY" -m pip install -q safetensors pytest wheel
# The package as a user installs it, from this checkout (no build isolation: no download of
# setuptools on every run); reinstalled every time so the tests see the current source.
"$PY" -m pip install -q --no-deps --no-build-isolation --force-reinstall ./python >/dev/null
rm -rf python/build python/*.egg-info
echo "golden_python: torch $("$PY" -c 'import torch; print(torch.__version__)'), setup $((SECONDS - t0)) s"

export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
env_bin=()
[[ -n "$BIN" ]] && env_bin=(PTSUITE_BIN="$(realpath "$BIN")")
# -P: the checkout is not put on sys.path, so the tests import the installed package.
env "${env_bin[@]}" "$PY" -P -m pytest -q -p no:cacheprovider python/tests
env "${env_bin[@]}" PYTHON="$PY" bash examples/pytorch/run_all.sh
echo "golden_python: PASS in $((SECONDS - t0)) s"
