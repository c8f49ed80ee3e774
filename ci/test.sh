#!/usr/bin/env bash
# One command: install what is needed, build, run every test (unit, MPI integration,
# report) and the quick suite as a smoke test. .ci/run calls exactly this.
source "$(dirname "$0")/common.sh"
bash ci/setup.sh
# Forced on: a build/ configured by hand (or an older ci/quick.sh) with tests off must not
# turn this into a green run of no tests; --no-tests=error makes an empty run a failure.
configure -DPTSUITE_TESTS=ON -DPTSUITE_BENCH=ON
build
(cd build && ctest --output-on-failure --no-tests=error --timeout 600)
PTSUITE_BIN=$PWD/build/ptsuite PTSUITE_REQUIRE_BIN=1 python3 -m pytest -q report/
bash ci/quick.sh "$(mktemp -d)/quick"
bash ci/coverage.sh >/dev/null  # prints only its problems (stderr) and fails on any
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
        -DPTSUITE_BENCH=OFF "${LAUNCHER[@]}" >/dev/null
  unit_tests=$(cd build-asan && ctest -N -L unit | sed -n 's/^ *Test *#[0-9]*: //p')
  # shellcheck disable=SC2086
  cmake --build build-asan -j"$JOBS" --target $unit_tests model_parallel_test param_server_test async_test
  (cd build-asan && ctest --output-on-failure --no-tests=error -L unit)
  (cd build-asan && ASAN_OPTIONS=detect_leaks=0 ctest --output-on-failure --no-tests=error -R '^(model_parallel|param_server|async)_test_')
fi
