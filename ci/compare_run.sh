#!/usr/bin/env bash
# Runs a suite into a new run directory and compares it with a baseline; a timing change that
# compare flags is rerun once for those cases (--filter) and stands only if the rerun shows it
# too (compare --confirm): a burst of other work on a shared machine rarely hits one case twice.
#   ci/compare_run.sh BIN SUITE BASELINE RUN   (BIN: build/ptsuite or build/ptsuite_planted)
# Writes RUN/compare.json, RUN/compare.md and prints the text table; exits with compare's code
# (3 when the run was interrupted by a signal).
# Ranks: min(4, cores), so no rank shares a core.
source "$(dirname "$0")/common.sh"
bin=$1 suite=$2 baseline=$3 run=$4
cores=$(nproc)
ranks=$(( cores < 4 ? cores : 4 ))
# A failed check is compare's to report (a verdict mismatch). A run that died in a case (a
# crash, or the watchdog ending a hung one: run.json still "running") is resumed, which
# records that case as FAIL and runs the rest: one crashing strategy costs one case, not the
# night. A run interrupted by a signal ends the script with exit 3.
runsuite() {  # runsuite OUT [ARGS...]
  local out=$1 state tries=0
  shift
  "${MPIRUN[@]}" -q -np "$ranks" --mca mpi_yield_when_idle 1 "$bin" run "$suite" --out "$out" --progress none --quiet "$@" || true
  while state=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["state"])' "$out/run.json" 2>/dev/null) &&
        [[ $state == running && $tries -lt 50 ]]; do
    tries=$((tries + 1))
    echo "compare_run: the run died in a case; resuming (the case is recorded as FAIL)" >&2
    "${MPIRUN[@]}" -q -np "$ranks" --mca mpi_yield_when_idle 1 "$bin" run "$suite" --out "$out" --progress none --quiet --resume "$@" || true
  done
  if [[ ${state:-} == interrupted ]]; then
    echo "compare_run: the run was interrupted; continue it with --resume" >&2
    exit 3
  fi
}
runsuite "$run"
status=0
"$bin" compare "$baseline" "$run" --format json > "$run/compare.json" || status=$?
confirm=()
if [[ $status == 1 ]]; then
  flagged=$(python3 -c '
import json, re, sys
f = json.load(open(sys.argv[1]))["findings"]
names = sorted({x["case"] for x in f if x["kind"] in ("regression", "improvement") and x["column"] == "step_time_s"})
print("^(" + "|".join(re.escape(n) for n in names) + ")$" if names else "")' "$run/compare.json")
  if [[ -n "$flagged" ]]; then
    runsuite "$run/confirm" --filter "$flagged"
    confirm=(--confirm "$run/confirm")
  fi
fi
status=0
"$bin" compare "$baseline" "$run" "${confirm[@]}" --format json > "$run/compare.json" || status=$?
"$bin" compare "$baseline" "$run" "${confirm[@]}" --format markdown > "$run/compare.md" || true
"$bin" compare "$baseline" "$run" "${confirm[@]}" || true
exit $status
