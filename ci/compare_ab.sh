#!/usr/bin/env bash
# The timing comparison of two builds measured side by side: the suite runs ROUNDS times with
# each build, alternating (round r starts with arm r mod ARMS), so that whatever this machine
# does over the minutes (other jobs, drift) falls on both. Each arm's first run is its run
# directory and its later runs its reruns/<n>/, so `ptsuite compare` tests the runs' medians
# (harness/compare.hpp, run_level): on this shared machine a stored baseline from hours ago
# moves by more than 10 %, two builds measured in alternation do not.
#   ci/compare_ab.sh [-r ROUNDS] DIR BASE_BIN[:SUITE] CUR_BIN[:SUITE] [CUR_BIN[:SUITE]...]
# SUITE defaults to suite/nightly.toml. Every arm after the first is compared with the first
# (compare of that arm's binary): DIR/arm<k>/compare.{json,md}. Exits with the highest
# compare exit (0 clean, 1 a regression or mismatch, 2 bad input; 3 when a run was
# interrupted). Default 8 rounds: about 2 s per case per arm on this machine.
source "$(dirname "$0")/common.sh"
rounds=8
if [[ ${1:-} == -r ]]; then rounds=$2; shift 2; fi
dir=${1:?usage: ci/compare_ab.sh [-r ROUNDS] DIR BASE_BIN[:SUITE] CUR_BIN[:SUITE]...}
shift
arms=("$@")
if (( ${#arms[@]} < 2 )); then echo "ci/compare_ab.sh: give a baseline and at least one current build" >&2; exit 2; fi
if ! [[ $rounds =~ ^[0-9]+$ ]] || (( rounds < 5 )); then
  echo "ci/compare_ab.sh: ROUNDS must be at least 5 (the runs' test needs 5 runs a side)" >&2
  exit 2
fi
bin_of() { echo "${1%%:*}"; }
suite_of() { [[ $1 == *:* ]] && echo "${1#*:}" || echo suite/nightly.toml; }
for a in "${arms[@]}"; do
  [[ -x $(bin_of "$a") ]] || { echo "ci/compare_ab.sh: '$(bin_of "$a")' is not an executable" >&2; exit 2; }
  [[ -f $(suite_of "$a") ]] || { echo "ci/compare_ab.sh: no suite file '$(suite_of "$a")'" >&2; exit 2; }
done
mkdir -p "$dir"
n=${#arms[@]}
for r in $(seq 1 "$rounds"); do
  for i in $(seq 0 $((n - 1))); do
    k=$(( (i + r) % n ))
    a=${arms[$k]}
    if [[ $r == 1 ]]; then out=$dir/arm$k; else out=$dir/arm$k/reruns/$r; fi
    run_suite "$(bin_of "$a")" "$(suite_of "$a")" "$out"
  done
done
status=0
for k in $(seq 1 $((n - 1))); do
  bin=$(bin_of "${arms[$k]}")
  s=0
  "$bin" compare "$dir/arm0" "$dir/arm$k" --format json > "$dir/arm$k/compare.json" || s=$?
  "$bin" compare "$dir/arm0" "$dir/arm$k" --format markdown > "$dir/arm$k/compare.md" || true
  echo "== arm $k (${arms[$k]}) against arm 0 (${arms[0]}): compare exit $s"
  "$bin" compare "$dir/arm0" "$dir/arm$k" || true
  (( s > status )) && status=$s
done
exit $status
