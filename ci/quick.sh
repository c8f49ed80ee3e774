#!/usr/bin/env bash
# One command: install dependencies, build the ptsuite binary, run suite/quick.toml on 4
# ranks into a new run directory under results/runs/, make its report and print the
# summary table. It builds only the binary and leaves build/'s options (tests on) alone,
# so ci/test.sh after it still builds and runs every test.
source "$(dirname "$0")/common.sh"
bash ci/setup.sh
configure
build ptsuite
out=${1:-results/runs/$(date -u +%Y%m%d-%H%M%S)-quick}
status=0
"${MPIRUN[@]}" -q -np 4 build/ptsuite run suite/quick.toml --out "$out" || status=$?
if [[ -f "$out/cases.csv" ]]; then
  python3 report/make_report.py "$out"
fi
exit $status
