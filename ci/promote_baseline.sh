#!/usr/bin/env bash
# Promotes a nightly run to the committed baseline of this machine class:
#   ci/promote_baseline.sh RUN_DIR      (RUN_DIR: a run of suite/nightly.toml, e.g. from ci/nightly.sh)
# copies its CSV files and env.json into results/baselines/<class>/ (replacing the old
# baseline), runs the nightly suite RERUNS more times with the same build (env
# PTSUITE_BASELINE_RERUNS, default 4) and keeps their step times in reruns/<n>/steps.csv:
# compare's timing band covers how far apart these runs lie. Prints the git command that
# commits the baseline. Refuses a run with a failed case.
source "$(dirname "$0")/common.sh"
run=${1:?usage: ci/promote_baseline.sh RUN_DIR}
reruns=${PTSUITE_BASELINE_RERUNS:-4}
[[ -f "$run/cases.csv" && -f "$run/env.json" ]] || { echo "ci/promote_baseline.sh: '$run' is not a run directory" >&2; exit 2; }
if grep -q ',FAIL,' "$run/cases.csv"; then
  echo "ci/promote_baseline.sh: '$run' has a failed case; a baseline must pass" >&2
  exit 1
fi
class=$(bash ci/nightly.sh --machine-class)
dest=results/baselines/$class
rm -rf "$dest"
mkdir -p "$dest/reruns"
cp "$run"/{cases,steps,comm,memory,stages,staleness}.csv "$run/env.json" "$dest/"
configure
build ptsuite
cores=$(nproc)
ranks=$(( cores < 4 ? cores : 4 ))
tmp=$(mktemp -d)
for i in $(seq 1 "$reruns"); do
  "${MPIRUN[@]}" -q -np "$ranks" --mca mpi_yield_when_idle 1 build/ptsuite run suite/nightly.toml --out "$tmp/$i" \
    --progress none --quiet
  mkdir -p "$dest/reruns/$i"
  # Only what the band needs: the step times, and the timing probe's and CPU waits beside them.
  python3 -c 'import sys, pandas as pd
s = pd.read_csv(sys.argv[1])
s[[c for c in ("case", "step", "step_time_s", "cpu_wait_s", "probe_time_s", "probe_cpu_wait_s") if c in s]].to_csv(sys.argv[2], index=False)' \
    "$tmp/$i/steps.csv" "$dest/reruns/$i/steps.csv"
done
rm -rf "$tmp"
sha=$(python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["git_sha"])' "$dest/env.json")
echo "promoted $run to $dest with $reruns reruns; commit it with:"
echo "  git add $dest && git commit -m 'baseline $class: $sha'"
