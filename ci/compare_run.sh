#!/usr/bin/env bash
# Runs a suite into a new run directory and compares it with a baseline; a timing change that
# compare flags is rerun once for those cases (--filter) and stands only if the rerun shows it
# too (compare --confirm): a burst of other work on a shared machine rarely hits one case twice.
#   ci/compare_run.sh BIN SUITE BASELINE RUN [COMPARE OPTIONS...]
#   (BIN: build/ptsuite or build/ptsuite_planted; options go to ptsuite compare, e.g. --timing-band off)
# Writes RUN/compare.json, RUN/compare.md and prints the text table; exits with compare's code
# (3 when the run was interrupted by a signal).
source "$(dirname "$0")/common.sh"
bin=$1 suite=$2 baseline=$3 run=$4
shift 4
opts=("$@")
run_suite "$bin" "$suite" "$run"
status=0
"$bin" compare "$baseline" "$run" "${opts[@]}" --format json > "$run/compare.json" || status=$?
confirm=()
if [[ $status == 1 ]]; then
  flagged=$(python3 -c '
import json, re, sys
f = json.load(open(sys.argv[1]))["findings"]
names = sorted({x["case"] for x in f if x["kind"] in ("regression", "improvement") and x["column"] == "step_time_s"})
print("^(" + "|".join(re.escape(n) for n in names) + ")$" if names else "")' "$run/compare.json")
  if [[ -n "$flagged" ]]; then
    run_suite "$bin" "$suite" "$run/confirm" --filter "$flagged"
    confirm=(--confirm "$run/confirm")
  fi
fi
status=0
"$bin" compare "$baseline" "$run" "${opts[@]}" "${confirm[@]}" --format json > "$run/compare.json" || status=$?
"$bin" compare "$baseline" "$run" "${opts[@]}" "${confirm[@]}" --format markdown > "$run/compare.md" || true
"$bin" compare "$baseline" "$run" "${opts[@]}" "${confirm[@]}" || true
exit $status
