#!/usr/bin/env bash
# One command: install dependencies, build, run suite/quick.toml on 4 ranks into a new run
# directory under results/runs/, make its report and print the summary table.
source "$(dirname "$0")/common.sh"
bash ci/setup.sh
build -DPTSUITE_TESTS=OFF
out=${1:-results/runs/$(date -u +%Y%m%d-%H%M%S)-quick}
status=0
"${MPIRUN[@]}" -np 4 build/ptsuite run suite/quick.toml --out "$out" || status=$?
if [[ -f "$out/cases.csv" ]]; then
  python3 report/make_report.py "$out"
fi
exit $status
