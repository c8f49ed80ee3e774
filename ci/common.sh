# Sourced by the ci scripts: configure + build in build/ (Release), and the mpirun command.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
JOBS=${JOBS:-$(nproc)}
MPIRUN=(mpirun --oversubscribe -x OPENBLAS_NUM_THREADS=1 --bind-to none)
[[ $(id -u) -eq 0 ]] && MPIRUN+=(--allow-run-as-root)

# ccache (installed by setup.sh) makes a second checkout's build, or a rebuild after a
# small change, cost seconds: paths under this checkout are hashed relative to it.
LAUNCHER=()
if command -v ccache >/dev/null; then
  export CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1
  LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi

# configure [CMAKE ARGS...]: (re)configures build/. Options passed here override the cache,
# so a script that needs a setting forces it rather than inheriting another script's.
configure() {
  cmake -S . -B build -DCMAKE_BUILD_TYPE=Release "${LAUNCHER[@]}" "$@" >/dev/null
}
# build [TARGET...]: builds the targets (all when none) of the configured build/.
build() {
  local targets=()
  for t in "$@"; do targets+=(--target "$t"); done
  cmake --build build -j"$JOBS" "${targets[@]}"
}

# run_suite BIN SUITE OUT [ARGS...]: the suite on min(4, cores) ranks, so no rank shares a
# core (oversubscribed step times measure the sharing). A failed check is compare's to
# report (a verdict mismatch). A run that died in a case (a crash, or the watchdog ending a
# hung one: run.json still "running") is resumed, which records that case as FAIL and runs
# the rest: one crashing strategy costs one case, not the night. A run interrupted by a
# signal ends the script with exit 3.
run_suite() {
  local bin=$1 suite=$2 out=$3 state tries=0 cores ranks
  shift 3
  cores=$(nproc)
  ranks=$(( cores < 4 ? cores : 4 ))
  "${MPIRUN[@]}" -q -np "$ranks" --mca mpi_yield_when_idle 1 "$bin" run "$suite" --out "$out" --progress none --quiet "$@" || true
  while state=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["state"])' "$out/run.json" 2>/dev/null) &&
        [[ $state == running && $tries -lt 50 ]]; do
    tries=$((tries + 1))
    echo "run_suite: the run died in a case; resuming (the case is recorded as FAIL)" >&2
    "${MPIRUN[@]}" -q -np "$ranks" --mca mpi_yield_when_idle 1 "$bin" run "$suite" --out "$out" --progress none --quiet --resume "$@" || true
  done
  if [[ ${state:-} == interrupted ]]; then
    echo "run_suite: the run was interrupted; continue it with --resume" >&2
    exit 3
  fi
}
