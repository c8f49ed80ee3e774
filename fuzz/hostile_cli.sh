#!/usr/bin/env bash
# Runs `ptsuite run` on every hostile suite in fuzz/hostile/ (one rank, no mpirun) and on a
# FIFO as the suite itself: each must exit 2 with the message its `# expect:` line states,
# within 60 s, and without a sanitizer report. ci/test.sh runs it on the ASan/UBSan build.
# Usage: bash fuzz/hostile_cli.sh PTSUITE_BIN
set -u
[ $# -eq 1 ] || { echo "usage: bash fuzz/hostile_cli.sh PTSUITE_BIN" >&2; exit 2; }
BIN=$(realpath -- "$1") || exit 2
HERE=$(cd "$(dirname "$0")" && pwd)
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ptsuite-hostile.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cd "$WORK" || exit 1
mkfifo tokens.fifo
printf '\001\000\002\000\003' >odd.bin
# Open MPI keeps its allocations until exit: leak checking would report those.
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
failures=0
expect_refusal() {  # expect_refusal NAME SUITE EXPECTED
  timeout 60 "$BIN" run "$2" --out "out_$1" --quiet >"$1.out" 2>"$1.err"
  local rc=$? problem=""
  [ "$rc" -eq 2 ] || problem="exit $rc, not 2"
  grep -qF -- "$3" "$1.err" || problem="${problem:+$problem; }stderr lacks '$3'"
  grep -qE "Sanitizer|runtime error:" "$1.err" && problem="${problem:+$problem; }a sanitizer report"
  [ -e "out_$1" ] && problem="${problem:+$problem; }--out was created"
  if [ -z "$problem" ]; then
    echo "PASS  $1"
  else
    echo "FAIL  $1: $problem"
    sed 's/^/    | /' "$1.err" | head -20
    failures=$((failures + 1))
  fi
}
for f in "$HERE"/hostile/*.toml; do
  name=$(basename "$f" .toml)
  expect_refusal "$name" "$f" "$(sed -n 's/^# expect: //p' "$f" | head -1)"
done
expect_refusal fifo_suite tokens.fifo "tokens.fifo: not a regular file"
expect_refusal dev_zero_suite /dev/zero "/dev/zero: not a regular file"
if [ "$failures" -ne 0 ]; then
  echo "hostile_cli: $failures hostile input(s) not refused cleanly"
  exit 1
fi
echo "hostile_cli: every hostile input refused with exit 2"
