#!/usr/bin/env bash
# The proof that the timing gate works on this machine: suite/nightly.toml measured in ROUNDS
# alternating rounds (ci/compare_ab.sh) with the build, with the planted build where the ddp
# cases run ddp-slow (ddp that computes an extra 10 % of each step,
# strategies/testing/slow_strategies.cpp) under the same case names, and SAME more times with
# the build itself. Against the first arm, compare must flag step_time_s of both ddp cases
# and nothing else but the strategy setting the swap changes, and must flag nothing in the
# arms of the same build (a flag there is a false alarm).
#   ci/compare_planted.sh [ROUNDS] [DIR]     default 8 rounds, DIR a new temporary directory
#   env SAME: arms of the same build (default 2)
# Exit 0 when the planted slowdown is flagged and no same-build arm is; prints the counts.
source "$(dirname "$0")/common.sh"
rounds=${1:-8}
dir=${2:-$(mktemp -d)}
same=${SAME:-2}
configure -DPTSUITE_TESTS=ON
build ptsuite ptsuite_planted
mkdir -p "$dir"
sed 's/^strategy = "ddp"$/strategy = "ddp-slow"/' suite/nightly.toml > "$dir/planted.toml"
arms=(build/ptsuite "build/ptsuite_planted:$dir/planted.toml")
for _ in $(seq 1 "$same"); do arms+=(build/ptsuite); done
status=0
bash ci/compare_ab.sh -r "$rounds" "$dir/ab" "${arms[@]}" > "$dir/ab.txt" || status=$?
if [[ $status -ge 2 ]]; then cat "$dir/ab.txt"; exit "$status"; fi
false_alarms=0
for k in $(seq 2 $((same + 1))); do
  if ! python3 -c 'import json, sys; sys.exit(json.load(open(sys.argv[1]))["exit_code"])' "$dir/ab/arm$k/compare.json"; then
    false_alarms=$((false_alarms + 1))
    echo "same-build arm $k flagged (a false alarm):"
    python3 -c 'import json, sys
for x in json.load(open(sys.argv[1]))["regressions"]: print("  ", x["kind"], x["case"], x["column"], x["baseline"], x["current"])' \
      "$dir/ab/arm$k/compare.json"
  fi
done
# Flagged: a regression of step_time_s on both ddp cases, and no other regression or mismatch
# than the strategy setting the swap changes.
caught=$(python3 -c '
import json, sys
f = json.load(open(sys.argv[1]))["findings"]
slow = sorted(x["case"] for x in f if x["kind"] == "regression" and x["column"] == "step_time_s")
other = [x for x in f if x["kind"] in ("regression", "mismatch", "missing-case")
         and not (x["column"] == "step_time_s" and x["case"].startswith("ddp-"))
         and not (x["column"] == "strategy" and x["case"].startswith("ddp-"))]
print(" ".join(slow) if slow == ["ddp-float32", "ddp-float64"] and not other else "")' "$dir/ab/arm1/compare.json")
grep -E '^  regression' "$dir/ab.txt" || true
echo "rounds: $rounds; same-build arms flagged: $false_alarms of $same; planted ddp-slow flagged: ${caught:-no}"
echo "runs and compare output in $dir"
[[ $false_alarms == 0 && -n "$caught" ]]
