#!/usr/bin/env bash
# The nightly regression run: suite/nightly.toml, compared with the committed baseline of this
# machine class (results/baselines/<class>/), appended to a history (HISTORY_DIR/runs/<run id>/
# with its compare.json, and HISTORY_DIR/history.csv) and the trend report rebuilt from it.
# Exit: compare's (0 nothing regressed, 1 a regression, 2 bad input or no baseline for this
# machine class), 3 when the run was interrupted by a signal (mpirun's own exit status is 1
# then; run.json says "interrupted"). A case that crashes or hangs is resumed past
# (ci/compare_run.sh): it is a FAIL in the comparison and the rest of the suite runs.
#   ci/nightly.sh [HISTORY_DIR]     default results/runs/history (results/runs/ is not committed)
#   ci/nightly.sh --machine-class   prints this machine's class and exits
# Timings: ranks = min(4, usable cores), so no rank shares a core (oversubscribed step times
# measure the sharing, README "Oversubscription"); a timing change compare flags is rerun
# once for those cases and stands only if the rerun shows it too (ci/compare_run.sh).
source "$(dirname "$0")/common.sh"

# The machine class: what makes timings comparable. CPU model, usable cores and the ranks
# the nightly runs on; PTSUITE_MACHINE_CLASS overrides it (a CI runner pool's name).
cores=$(nproc)
ranks=$(( cores < 4 ? cores : 4 ))
machine_class() {
  local cpu
  cpu=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -1 | tr -cs 'A-Za-z0-9' '-' | sed 's/-$//')
  echo "${PTSUITE_MACHINE_CLASS:-${cpu:-cpu}-${cores}c-${ranks}r}"
}
if [[ "${1:-}" == --machine-class ]]; then machine_class; exit 0; fi

history=${1:-results/runs/history}
class=$(machine_class)
baseline=results/baselines/$class
configure
build ptsuite
mkdir -p "$history"
run=$history/runs/$(date -u +%Y%m%d-%H%M%S)-nightly
if [[ ! -f "$baseline/cases.csv" ]]; then
  "${MPIRUN[@]}" -q -np "$ranks" --mca mpi_yield_when_idle 1 build/ptsuite run suite/nightly.toml --out "$run" --quiet || true
  echo "ci/nightly.sh: no baseline for machine class '$class' (results/baselines/$class/);" \
       "check the run and promote it (4 more runs measure the timing band): ci/promote_baseline.sh $run" >&2
  exit 2
fi
status=0
bash ci/compare_run.sh build/ptsuite suite/nightly.toml "$baseline" "$run" || status=$?
if [[ $status == 3 ]]; then exit 3; fi
python3 report/make_report.py "$run" >/dev/null
python3 ci/trend.py "$history" "$run" "$status"
# The report over the history's runs against the baseline, where report/ has it.
if [[ -f report/compare_runs.py ]]; then
  python3 report/compare_runs.py "$baseline" "$history/runs" --out "$history/report" >/dev/null || true
fi
echo "ci/nightly.sh: run $run, compare exit $status; trend report $history/trend.md"
exit $status
