#!/usr/bin/env bash
# The proof that the regression gate works on this machine: suite/nightly.toml is run as the
# baseline (one run and 4 reruns for the band, as ci/promote_baseline.sh does), then RERUNS times with the same binary (each must compare clean: a flag is a
# false alarm) and once with the planted build where the ddp cases run ddp-slow (ddp + 10 %
# sleep per step, strategies/testing/slow_strategies.cpp) under the same case names (compare
# must flag step_time_s of those cases and nothing else but the strategy setting).
#   ci/compare_planted.sh [RERUNS] [DIR]     default 5 reruns, DIR a new temporary directory
# Exit 0 when the planted slowdown is flagged and no rerun is; prints the false-alarm count.
source "$(dirname "$0")/common.sh"
reruns=${1:-5}
dir=${2:-$(mktemp -d)}
configure -DPTSUITE_TESTS=ON
build ptsuite ptsuite_planted
cores=$(nproc)
ranks=$(( cores < 4 ? cores : 4 ))
# The baseline as ci/promote_baseline.sh makes it: one run and 4 reruns for the timing band.
for i in 0 1 2 3 4; do
  "${MPIRUN[@]}" -q -np "$ranks" --mca mpi_yield_when_idle 1 build/ptsuite run suite/nightly.toml --out "$dir/base$i" \
    --progress none --quiet
  if [[ $i == 0 ]]; then cp -r "$dir/base0" "$dir/base"; else mkdir -p "$dir/base/reruns/$i" && cp "$dir/base$i/steps.csv" "$dir/base/reruns/$i/"; fi
done
false_alarms=0
for i in $(seq 1 "$reruns"); do
  if ! bash ci/compare_run.sh build/ptsuite suite/nightly.toml "$dir/base" "$dir/rerun$i" >"$dir/rerun$i.txt"; then
    false_alarms=$((false_alarms + 1))
    echo "rerun $i flagged (a false alarm):"; grep -E '^  (regression|mismatch|missing)' "$dir/rerun$i.txt" || true
  fi
done
sed 's/^strategy = "ddp"$/strategy = "ddp-slow"/' suite/nightly.toml > "$dir/planted.toml"
planted=0
bash ci/compare_run.sh build/ptsuite_planted "$dir/planted.toml" "$dir/base" "$dir/planted" >"$dir/planted.txt" || planted=$?
# Flagged: a regression of step_time_s on the ddp cases, and no other regression or mismatch
# than the strategy setting the swap changes.
caught=$(python3 -c '
import json, sys
f = json.load(open(sys.argv[1]))["findings"]
slow = sorted(x["case"] for x in f if x["kind"] == "regression" and x["column"] == "step_time_s")
other = [x for x in f if x["kind"] in ("regression", "mismatch", "missing-case")
         and not (x["column"] == "step_time_s" and x["case"].startswith("ddp-"))
         and not (x["column"] == "strategy" and x["case"].startswith("ddp-"))]
print(" ".join(slow) if slow and all(c.startswith("ddp-") for c in slow) and not other else "")' "$dir/planted/compare.json")
grep -E '^  regression' "$dir/planted.txt" || true
echo "reruns of the same build flagged: $false_alarms of $reruns; planted ddp-slow flagged: ${caught:-no} (compare exit $planted)"
echo "runs and compare output in $dir"
[[ $false_alarms == 0 && $planted == 1 && -n "$caught" ]]
