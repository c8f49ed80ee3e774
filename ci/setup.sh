#!/usr/bin/env bash
# Installs ptsuite's dependencies: Debian packages for the C++ build, pip packages
# (report/requirements.txt) for the python3 on PATH. Idempotent: a no-op when present.
set -euo pipefail
cd "$(dirname "$0")/.."

DEBS=(build-essential cmake pkg-config openmpi-bin libopenmpi-dev libopenblas-dev
      libgtest-dev libgmock-dev libbenchmark-dev libcli11-dev libtomlplusplus-dev
      libfccp-dev nlohmann-json3-dev ccache
      clang)  # libFuzzer and its sanitizers, for ci/test.sh's fuzz step

missing=()
for p in "${DEBS[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""; [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The report runs under whichever python3 is first on PATH (not necessarily Debian's).
if ! python3 -c "import pandas, matplotlib, pytest" 2>/dev/null; then
  echo "setup: pip installing report/requirements.txt"
  python3 -m pip install -q -r report/requirements.txt
fi
