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
  LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
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
