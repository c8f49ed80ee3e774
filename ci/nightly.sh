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
# measure the sharing, README "Oversubscription"). When the baseline's commit is in this
# repository, it is built beside (build-baseline/, a git worktree at that commit; ccache
# makes it quick) and the two builds are measured in alternating rounds (ci/compare_ab.sh,
# PTSUITE_NIGHTLY_ROUNDS, default 8): the verdict on timings comes from there
# (RUN/ab/arm1/compare.*), the stored baseline judges every other column (--timing-band off).
# Without the commit, timings are compared with the stored baseline, and a change compare
# flags is rerun once and stands only if the rerun shows it too (ci/compare_run.sh): that is
# coarser (a stored run from another hour moves by more than 10 % on a shared machine).
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
# The baseline's build, for the timings measured side by side.
base_bin=
sha=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1])).get("git_sha", ""))' "$baseline/env.json" 2>/dev/null || true)
if [[ -n $sha ]] && git cat-file -e "$sha^{commit}" 2>/dev/null; then
  src=build-baseline/src
  if [[ -d $src ]]; then git -C "$src" checkout -q --detach "$sha"; else git worktree add -q --detach "$src" "$sha"; fi
  # Its compiler output goes to build-baseline/build.log (an old commit's warnings are history).
  if (cd "$src" && cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DPTSUITE_TESTS=OFF -DPTSUITE_BENCH=OFF -DPTSUITE_CUDA=OFF \
        "${LAUNCHER[@]}" && cmake --build build -j"$JOBS" --target ptsuite) >build-baseline/build.log 2>&1; then
    base_bin=$src/build/ptsuite
  else
    echo "ci/nightly.sh: the baseline's commit $sha did not build (build-baseline/build.log);" \
         "timings compared with the stored baseline" >&2
  fi
fi
status=0
if [[ -n $base_bin ]]; then
  bash ci/compare_run.sh build/ptsuite suite/nightly.toml "$baseline" "$run" --timing-band off || status=$?
  if [[ $status == 3 ]]; then exit 3; fi
  ab=0
  # Each build runs its own suite file (the same cases unless the suite changed since).
  bash ci/compare_ab.sh -r "${PTSUITE_NIGHTLY_ROUNDS:-8}" "$run/ab" "$base_bin:$src/suite/nightly.toml" build/ptsuite || ab=$?
  if [[ $ab == 3 ]]; then exit 3; fi
  (( ab > status )) && status=$ab
else
  bash ci/compare_run.sh build/ptsuite suite/nightly.toml "$baseline" "$run" || status=$?
  if [[ $status == 3 ]]; then exit 3; fi
fi
python3 report/make_report.py "$run" >/dev/null
python3 ci/trend.py "$history" "$run" "$status"
# The report over the history's runs against the baseline, where report/ has it.
if [[ -f report/compare_runs.py ]]; then
  python3 report/compare_runs.py "$baseline" "$history/runs" --out "$history/report" >/dev/null || true
fi
echo "ci/nightly.sh: run $run, compare exit $status; trend report $history/trend.md"
exit $status
