#!/usr/bin/env bash
# Every variant of the PyTorch example against the golden kits (run_all.py): the correct
# ones must PASS, the planted bugs FAIL naming their first step and tensor. Exit 0 when all
# are as expected.
# Usage: bash examples/pytorch/run_all.sh [--kits DIR] [--out DIR]
#   PYTHON: an interpreter with torch, numpy, safetensors and ptsuite_golden (default: the
#           venv ci/golden_python.sh makes, build/golden-venv, else python3).
#   PTSUITE_BIN: a ptsuite binary; adds an AdamW kit exported on the fly.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
repo=$(cd "$here/../.." && pwd)
if [[ -z "${PYTHON:-}" ]]; then
  PYTHON=python3
  [[ -x "$repo/build/golden-venv/bin/python" ]] && PYTHON=$repo/build/golden-venv/bin/python
fi
# Absolute before the cd below, the venv's symlink kept (its target is not the venv).
[[ "$PYTHON" == */* ]] && PYTHON=$(cd "$(dirname "$PYTHON")" && pwd)/$(basename "$PYTHON")
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
cd "$here"
exec "$PYTHON" run_all.py "$@"
