#!/usr/bin/env bash
# One command: install what is needed, build, run every test (unit, MPI integration,
# report) and the quick suite as a smoke test. .ci/run calls exactly this.
source "$(dirname "$0")/common.sh"
bash ci/setup.sh
# Forced on: a build/ configured by hand (or an older ci/quick.sh) with tests off must not
# turn this into a green run of no tests; --no-tests=error makes an empty run a failure.
configure -DPTSUITE_TESTS=ON -DPTSUITE_BENCH=ON
build
if [[ "${PTSUITE_CI_CTEST_LIST_ONLY:-0}" == 1 ]]; then
  # ci/order_test.sh: every test configured and built (the build above) is what it asks; the
  # outer run has run them all already.
  (cd build && ctest -N | tail -1)
else
  (cd build && ctest --output-on-failure --no-tests=error --timeout 600)
fi
PTSUITE_BIN=$PWD/build/ptsuite PTSUITE_REQUIRE_BIN=1 python3 -m pytest -q report/
# The golden kits from Python: the ptsuite_golden package (regeneration bit for bit, verify
# against `ptsuite golden verify`) and the PyTorch example (single, DDP on gloo, a
# tensor-parallel split; planted bugs caught), in a venv over Debian's python3-torch.
if [[ "${PTSUITE_CI_GOLDEN_PY:-1}" == 1 ]]; then
  bash ci/golden_python.sh "$PWD/build/ptsuite"
fi
bash ci/quick.sh "$(mktemp -d)/quick"
if [[ "${PTSUITE_CI_COVERAGE:-1}" == 1 ]]; then
  bash ci/coverage.sh >/dev/null  # prints only its problems (stderr) and fails on any
fi
if [[ "${PTSUITE_CI_ORDER:-1}" == 1 ]]; then
  # The README's two commands in either order, in a fresh copy: every test still runs.
  bash ci/order_test.sh "$(cd build && ctest -N | sed -n 's/^Total Tests: //p')"
fi
if [[ "${PTSUITE_CI_SANITIZE:-1}" == 1 ]]; then
  # The unit tests, the model-parallel MPI test (tensor-parallel shards, pipeline buffers,
  # every layout), the parameter server's (asynchronous receives, the abort path) and the
  # communication-reducing dp algorithms' (diloco's bf16 blocks, delayed-sgd's buffers) again
  # under AddressSanitizer + UndefinedBehaviorSanitizer.
  # -O1 without debug info: the sanitizers' checks, at half the compile time of -O2 -g.
  # Leak checking is off for the MPI test: Open MPI keeps its allocations until exit.
  cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Sanitize -DCMAKE_CXX_FLAGS_SANITIZE=-O1 -DPTSUITE_SANITIZE=ON \
        -DPTSUITE_BENCH=OFF -DPTSUITE_CUDA=OFF "${LAUNCHER[@]}" >/dev/null
  unit_tests=$(cd build-asan && ctest -N -L unit | sed -n 's/^ *Test *#[0-9]*: //p')
  # shellcheck disable=SC2086
  cmake --build build-asan -j"$JOBS" --target $unit_tests model_parallel_test param_server_test async_test ptsuite
  (cd build-asan && ctest --output-on-failure --no-tests=error -L unit)
  (cd build-asan && ASAN_OPTIONS=detect_leaks=0 ctest --output-on-failure --no-tests=error -R '^(model_parallel|param_server|async)_test_')
  # Hostile suites (inf, nan, absurd sizes, a FIFO or /dev/zero as data): exit 2, no report.
  bash fuzz/hostile_cli.sh build-asan/ptsuite
fi
if [[ "${PTSUITE_CI_FUZZ:-1}" == 1 ]]; then
  # The suite parser, the token-file and the safetensors readers under libFuzzer with ASan/UBSan, each for
  # PTSUITE_FUZZ_SECONDS from fuzz/corpus/. New inputs go to a scratch directory (the
  # committed corpus changes by hand only); a crash leaves its input in build-fuzz/.
  cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Sanitize -DCMAKE_CXX_FLAGS_SANITIZE=-O1 -DCMAKE_CXX_COMPILER=clang++ \
        -DPTSUITE_FUZZ=ON -DPTSUITE_TESTS=OFF -DPTSUITE_BENCH=OFF -DPTSUITE_NATIVE=OFF -DPTSUITE_CUDA=OFF "${LAUNCHER[@]}" >/dev/null
  cmake --build build-fuzz -j"$JOBS" --target suite_fuzz tokens_fuzz safetensors_fuzz
  for target in suite tokens safetensors; do
    scratch=$(mktemp -d)
    if ! ASAN_OPTIONS=detect_leaks=0 build-fuzz/${target}_fuzz -max_total_time="${PTSUITE_FUZZ_SECONDS:-20}" \
         -timeout=10 -rss_limit_mb=2048 -artifact_prefix=build-fuzz/ -dict=fuzz/$target.dict \
         "$scratch" "fuzz/corpus/$target" >"$scratch.log" 2>&1; then
      tail -60 "$scratch.log"
      echo "fuzz: ${target}_fuzz failed; its input is in build-fuzz/ (crash-*, timeout-*)" >&2
      exit 1
    fi
    grep -E '^Done|^#[0-9]+ *DONE' "$scratch.log" | tail -1
  done
fi
