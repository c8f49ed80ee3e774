#!/usr/bin/env bash
# Conformance coverage: runs suite/conformance.toml (build/ptsuite) and strategies/testing/planted.toml
# (build/ptsuite_planted, the test build with the planted bugs) on 8 ranks, then
# ci/coverage.py: every shipped strategy has conformance cases, every case of every
# strategy's conformance matrix (ptsuite matrix --cases) ran, every operation a strategy
# states is exercised with calls > 0 by some case, every case passes, and every planted bug
# fails at least one check (the table names which). Usage: ci/coverage.sh [OUT_DIR]
# (default: a temporary directory); OUT_DIR/coverage.md holds the tables.
source "$(dirname "$0")/common.sh"
out=${1:-$(mktemp -d)}
mkdir -p "$out"
"${MPIRUN[@]}" -q -np 8 build/ptsuite run suite/conformance.toml --out "$out/conformance" --progress none >"$out/conformance.log" 2>&1 ||
  { tail -20 "$out/conformance.log"; echo "coverage: the conformance suite failed" >&2; exit 1; }
# Every planted bug must fail, so this run exits 1 by design; coverage.py judges it.
"${MPIRUN[@]}" -q -np 8 build/ptsuite_planted run strategies/testing/planted.toml --out "$out/planted" --progress none >"$out/planted.log" 2>&1 || true
[[ -f "$out/planted/cases.csv" ]] || { tail -20 "$out/planted.log"; exit 1; }
# The shipped strategies (single is the oracle itself).
shipped=$(build/ptsuite list | sed -n '/^strategies:/,/^strategy options/p' | awk '/^  [a-z]/ {print $1}' | grep -vx single | paste -sd,)
build/ptsuite matrix --cases >"$out/matrix.txt"
python3 ci/coverage.py "$out/conformance" "$out/planted" --shipped "$shipped" --matrix "$out/matrix.txt" \
  --markdown "$out/coverage.md"
