#!/usr/bin/env bash
# The GPU checks in one go, for the lent GPU machine (README "On a GPU"): builds with CUDA,
# runs the GPU unit tests, the quick suite on the GPU (4 ranks sharing it over staged MPI, and
# the single-rank cases on NCCL), the GPU step benchmarks and the collective sweep on NCCL, and
# prints one short table. Its machine has CUDA, nvcc, CMake and ninja but none of our Debian
# libraries: ci/gpu-debs.sh fetches them here into .gpu-debs/, which this script unpacks.
#   here:   bash ci/gpu-debs.sh
#   device: run(command="bash ci/gpu-check.sh", carry=[".gpu-debs"], timeout_s=540)
# Results (CSV, logs) go to /tmp/gpu-check, packed into $OUT/gpu-check.tar.gz where $OUT is set.
# Also runs on a machine with the libraries installed (no .gpu-debs): then it uses them.
# GPU_CHECK_DRY=1 GPU_CHECK_TARGETS="rng_test comm_test" builds only those and stops: a dry run
# of the relocated build where there is no GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
# The device tool brings back at most 8 files from $OUT: everything is written under
# /tmp/gpu-check and packed into one $OUT/gpu-check.tar.gz on exit.
DEST=${OUT:-}
OUT=/tmp/gpu-check
rm -rf "$OUT" && mkdir -p "$OUT"
[[ -n $DEST ]] && trap 'tar czf "$DEST/gpu-check.tar.gz" -C /tmp gpu-check' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OPENBLAS_NUM_THREADS=1
export PMIX_MCA_pcompress_base_silence_warning=1
declare -A RESULT
note() { RESULT[$1]=$2; printf 'gpu-check: %-28s %s\n' "$1" "$2"; }
T0=$SECONDS
# One device call runs 600 s at most: every step gets what is left of GPU_CHECK_BUDGET, and
# a step with under 20 s left is skipped (and said so) rather than cut off mid-way.
BUDGET=${GPU_CHECK_BUDGET:-540}
# GPU_CHECK_SKIP="nccl-1rank bench-staged ...": steps left out (a short rerun of the rest).
skip() { [[ " ${GPU_CHECK_SKIP:-} " == *" $1 "* ]] && { note "$1" "skipped (GPU_CHECK_SKIP)"; return 0; }; return 1; }
left() {  # MAX -> seconds this step may take (0: skip it)
  local rest=$((BUDGET - (SECONDS - T0)))
  ((rest > $1)) && rest=$1
  ((rest < 20)) && rest=0
  echo "$rest"
}

# --- the carried Debian libraries, relocated under $ROOT -------------------------------
CMAKE_ARGS=()
MPIRUN=mpirun
if [[ -d .gpu-debs ]]; then
  ROOT=/tmp/ptsdeb
  rm -rf "$ROOT" && mkdir -p "$ROOT"
  for f in .gpu-debs/*.deb; do dpkg -x "$f" "$ROOT"; done
  A=x86_64-linux-gnu
  ln -sf mpirun.openmpi "$ROOT/usr/bin/mpirun"
  ln -sf mpicxx.openmpi "$ROOT/usr/bin/mpicxx"
  export OPAL_PREFIX=$ROOT/usr  # Open MPI finds its plugins and help files under it
  export PMIX_MCA_mca_base_component_path=$ROOT/usr/lib/$A/pmix2/lib/pmix  # not the image's PMIx plugins
  export PATH=$ROOT/usr/bin:$PATH
  export LD_LIBRARY_PATH=$ROOT/usr/lib/$A:$ROOT/usr/lib/$A/openblas-pthread:$ROOT/usr/lib/$A/openmpi/lib:${LD_LIBRARY_PATH:-}
  export PKG_CONFIG_PATH=$ROOT/usr/lib/$A/pkgconfig:$ROOT/usr/lib/$A/openblas-pthread/pkgconfig:$ROOT/usr/share/pkgconfig
  export PKG_CONFIG_SYSROOT_DIR=$ROOT
  CMAKE_ARGS+=(-DCMAKE_PREFIX_PATH="$ROOT/usr" -DPKG_CONFIG_EXECUTABLE="$ROOT/usr/bin/pkgconf"
               -DMPI_CXX_COMPILER="$ROOT/usr/bin/mpicxx.openmpi" -DMPIEXEC_EXECUTABLE="$ROOT/usr/bin/mpirun.openmpi")
  MPIRUN=$ROOT/usr/bin/mpirun.openmpi
fi
MPIRUN=("$MPIRUN" --oversubscribe --bind-to none -x OPENBLAS_NUM_THREADS=1 -x LD_LIBRARY_PATH -x OPAL_PREFIX
        -x PMIX_MCA_pcompress_base_silence_warning)
[[ $(id -u) -eq 0 ]] && MPIRUN+=(--allow-run-as-root)

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1 | sed 's/^/gpu-check: gpu /'
nvcc --version | tail -1 | sed 's/^/gpu-check: /'

# --- build ------------------------------------------------------------------------------
GEN=(); command -v ninja >/dev/null && GEN=(-G Ninja)
if cmake -S . -B build-gpu "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release -DPTSUITE_CUDA=ON -DPTSUITE_TESTS=ON \
     -DPTSUITE_BENCH=ON "${CMAKE_ARGS[@]}" >"$OUT/configure.log" 2>&1 &&
   cmake --build build-gpu -j"$(nproc)" --target ${GPU_CHECK_TARGETS:-ptsuite ptsuite_bench cuda_backend_test} \
     >"$OUT/build.log" 2>&1; then
  note build "ok ($((SECONDS - T0)) s)"
else
  tail -40 "$OUT/configure.log" "$OUT/build.log"
  note build "FAILED (logs in $OUT)"
  exit 1
fi
for bin in build-gpu/*; do
  [[ -f $bin && -x $bin ]] || continue
  missing=$(ldd "$bin" | grep "not found")
  [[ -z $missing ]] || echo "gpu-check: $bin misses libraries: $missing"
done
[[ -n ${GPU_CHECK_DRY:-} ]] && exit 0  # a dry run of the build alone (tried where there is no GPU)
build-gpu/ptsuite list | grep -E '^(backends|communicators):' | sed 's/^/gpu-check: /'

# --- GPU unit tests (CTest label gpu: they skip without a GPU, so count the skips) ---------
(cd build-gpu && ctest -L gpu --output-on-failure --timeout "$(left 120)") >"$OUT/gpu-tests.log" 2>&1
status=$?
summary=$(grep -E "tests passed|tests failed" "$OUT/gpu-tests.log" | tail -1)
skipped=$(grep -c "Skipped\|SKIPPED" "$OUT/gpu-tests.log")
note gpu-unit-tests "$([[ $status == 0 ]] && echo ok || echo FAILED): $summary; $skipped skip lines"
grep -E "max rel err|rel_err" "$OUT/gpu-tests.log" | head -40 > "$OUT/gpu-op-errors.txt"

# --- the quick suite on the GPU ----------------------------------------------------------
verdicts() {  # DIR -> "N cases: P PASS, F FAIL; comm_backend ..."
  python3 - "$1/cases.csv" <<'PY'
import csv, sys, collections
rows = list(csv.DictReader(open(sys.argv[1])))
v = collections.Counter(r["verdict"] for r in rows)
c = collections.Counter(r.get("comm_backend", "?") for r in rows)
fails = [r["case"] for r in rows if r["verdict"] == "FAIL"]
print(f"{len(rows)} cases: {v['PASS']} PASS, {v['FAIL']} FAIL; comm {dict(c)}" + (f"; failed: {' '.join(fails[:6])}" if fails else ""))
PY
}
# One GPU: NCCL refuses two ranks on one device, so NCCL runs the one-rank cases (single, and
# DDP's all_reduce over a one-rank communicator) of this suite; 4 ranks share the GPU staged.
cat >"$OUT/one-rank.toml" <<'TOML'
description = "one rank on NCCL: single and ddp dp 1 on mlp-tiny and gpt-tiny"
[defaults]
steps = 6
warmup_steps = 2
global_batch = 32
lr = 0.05
seed = 1234
[[case]]
strategy = ["single", "ddp"]
workload = ["mlp-tiny", "gpt-tiny"]
dtype = ["float64", "float32"]
TOML
run_quick() {  # NAME NP SUITE ARGS...
  local name=$1 np=$2 suite=$3 t; shift 3
  skip "$name" && return
  t=$(left 150)
  ((t > 0)) || { note "$name" "skipped: the time budget is spent"; return; }
  rm -rf "$OUT/$name"
  timeout "$t" "${MPIRUN[@]}" -np "$np" build-gpu/ptsuite run "$suite" --out "$OUT/$name" --progress none "$@" \
    >"$OUT/$name.log" 2>&1
  local s=$?
  if [[ -f $OUT/$name/cases.csv ]]; then note "$name" "exit $s, $(verdicts "$OUT/$name")"
  else tail -20 "$OUT/$name.log"; note "$name" "exit $s, no cases.csv"; fi
}
run_quick quick-cuda-4ranks 4 suite/quick.toml --set backend=cuda
run_quick nccl-1rank 1 "$OUT/one-rank.toml" --set backend=cuda
run_quick quick-tf32-4ranks 4 suite/quick.toml --set backend=cuda-tf32 --filter 'float32'
run_quick quick-bf16-4ranks 4 suite/quick.toml --set backend=cuda-bf16 --filter 'float32'

# --- benchmarks ---------------------------------------------------------------------------
# The per-op profile first (one iteration set, its own cap): where the step's time goes.
if [[ -x build-gpu/ptsuite_bench && $(left 60) -gt 0 ]] && ! skip step-profile; then
  timeout "$(left 60)" build-gpu/ptsuite_bench --benchmark_filter='CudaStepProfile' >"$OUT/step-profile.log" 2>&1
  note step-profile "exit $? ($(grep -c '^profile' "$OUT/step-profile.log") lines; $OUT/step-profile.log)"
  grep '^profile' "$OUT/step-profile.log" | sed 's/^/gpu-check:   /'
fi
if [[ -x build-gpu/ptsuite_bench && $(left 120) -gt 0 ]] && ! skip step-bench; then
  timeout "$(left 120)" build-gpu/ptsuite_bench --benchmark_filter='Cuda(Gemm|Step/)' --benchmark_min_time=0.5 \
    --benchmark_out="$OUT/step-bench.json" --benchmark_out_format=json >"$OUT/step-bench.log" 2>&1
  note step-bench "exit $? ($(grep -c '^BM_' "$OUT/step-bench.log") rows; $OUT/step-bench.log)"
  grep '^BM_' "$OUT/step-bench.log" | sed 's/^/gpu-check:   /'
fi
# The planner's calibration of this GPU (issue 13): gemm and elementwise throughput at the
# shapes of gpt2-124m's layouts on 64 ranks, for ptsuite plan --calibration.
if [[ $(left 60) -gt 0 ]] && ! skip plan-calibrate; then
  for b in cuda-tf32 cuda-bf16; do
    timeout "$(left 45)" "${MPIRUN[@]}" -np 1 build-gpu/ptsuite plan --calibrate --backend "$b" --workload gpt2-124m \
      --ranks 64 --global-batch 512 --out "$OUT/calibration-$b.csv" >"$OUT/plan-calibrate-$b.log" 2>&1
    note "plan-calibrate-$b" "exit $? ($(wc -l <"$OUT/calibration-$b.csv" 2>/dev/null || echo no) lines)"
  done
fi
if build-gpu/ptsuite bench --help >/dev/null 2>&1 && [[ $(left 60) -gt 0 ]] && ! skip bench-nccl; then
  timeout "$(left 60)" "${MPIRUN[@]}" -np 1 build-gpu/ptsuite bench --backend cuda --comm nccl --max-bytes 1G \
    --out "$OUT/bench-nccl" >"$OUT/bench-nccl.log" 2>&1
  note bench-nccl-1rank "exit $? ($OUT/bench-nccl.log)"
fi
if build-gpu/ptsuite bench --help >/dev/null 2>&1 && [[ $(left 60) -gt 0 ]] && ! skip bench-staged; then
  timeout "$(left 60)" "${MPIRUN[@]}" -np 4 build-gpu/ptsuite bench --backend cuda --comm mpi-staged --max-bytes 4M \
    --out "$OUT/bench-staged" >"$OUT/bench-staged.log" 2>&1
  note bench-staged-4ranks "exit $? ($OUT/bench-staged.log)"
fi

echo
echo "gpu-check summary ($((SECONDS - T0)) s):"
for k in "${!RESULT[@]}"; do printf '  %-28s %s\n' "$k" "${RESULT[$k]}"; done | sort
