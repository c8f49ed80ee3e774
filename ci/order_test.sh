#!/usr/bin/env bash
# The README's two commands in both orders, in a fresh copy of this checkout: ci/quick.sh
# then ci/test.sh must configure and build every CTest entry and run every report test, and ci/quick.sh after
# ci/test.sh must leave the build able to (it does not switch tests off).
# Usage: bash ci/order_test.sh EXPECTED_CTEST_COUNT   (ci/test.sh passes its own count)
set -euo pipefail
cd "$(dirname "$0")/.."
expected=${1:?usage: bash ci/order_test.sh EXPECTED_CTEST_COUNT}
(( expected > 0 )) || { echo "order_test: expected count '$expected' is not positive" >&2; exit 2; }
expected_py=$(python3 -m pytest -q --collect-only report/ 2>/dev/null | sed -n 's/^\([0-9]\+\) tests\? collected.*/\1/p')
(( expected_py > 0 )) || { echo "order_test: pytest collected no report tests" >&2; exit 2; }

work=$(mktemp -d "${TMPDIR:-/tmp}/ptsuite-order.XXXXXX")
trap 'rm -rf "$work"' EXIT
# The working tree as a user would clone it: tracked and untracked files, not ignored ones.
git ls-files -z --cached --others --exclude-standard | tar --null -T - --ignore-failed-read -cf - 2>/dev/null |
  tar -xf - -C "$work"
cd "$work"

fail=0
echo "order_test: ci/quick.sh, then ci/test.sh, in $work"
bash ci/quick.sh "$work/quick1" >quick1.log 2>&1 || { echo "order_test: ci/quick.sh failed"; tail -20 quick1.log; exit 1; }
# Only the counts are at stake here: the coverage gate, the sanitizers, the fuzzers, the
# golden kits from Python and the CTest entries themselves ran in the outer ci/test.sh
# already, so the CTest entries are configured, built and counted here, not run again.
PTSUITE_CI_ORDER=0 PTSUITE_CI_SANITIZE=0 PTSUITE_CI_COVERAGE=0 PTSUITE_CI_FUZZ=0 PTSUITE_CI_GOLDEN_PY=0 \
  PTSUITE_CI_CTEST_LIST_ONLY=1 bash ci/test.sh >test.log 2>&1 || {
  echo "order_test: ci/test.sh after ci/quick.sh failed"; tail -40 test.log; exit 1; }
ran=$(sed -n 's/^Total Tests: \([0-9]\+\)$/\1/p' test.log | head -1)
py=$(sed -n 's/^\([0-9]\+\) passed.*/\1/p' test.log | head -1)
if [[ "$ran" != "$expected" ]]; then
  echo "FAIL  quick then test: ctest lists '${ran:-none}' built tests, expected $expected"; fail=1
else
  echo "PASS  quick then test: ctest lists all $ran tests, every one built"
fi
if [[ "$py" != "$expected_py" ]]; then
  echo "FAIL  quick then test: pytest passed '${py:-none}' tests, expected $expected_py"; fail=1
else
  echo "PASS  quick then test: pytest passed $py of $expected_py report tests"
fi
echo "order_test: ci/test.sh, then ci/quick.sh"
bash ci/quick.sh "$work/quick2" >quick2.log 2>&1 || { echo "order_test: ci/quick.sh after ci/test.sh failed"; tail -20 quick2.log; exit 1; }
left=$(cd build && ctest -N | sed -n 's/^Total Tests: //p')
if [[ "$left" != "$expected" ]]; then
  echo "FAIL  test then quick: build/ lists '${left:-none}' tests afterwards, expected $expected"; fail=1
else
  echo "PASS  test then quick: build/ still lists all $left tests"
fi
exit $fail
