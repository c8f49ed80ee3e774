# Sourced by the ci scripts: configure + build in build/ (Release), and the mpirun command.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
JOBS=${JOBS:-$(nproc)}
MPIRUN=(mpirun --oversubscribe -x OPENBLAS_NUM_THREADS=1 --bind-to none)
[[ $(id -u) -eq 0 ]] && MPIRUN+=(--allow-run-as-root)

build() {
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
  cmake --build build -j"$JOBS"
}
