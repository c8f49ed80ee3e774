# `ptsuite bench` as a user runs it (np 2): bad input exits 2 before anything runs and writes
# nothing; a sweep of every op writes bench.csv (the schema's columns, #wrong 0 everywhere)
# and env.json; an impossible --min-busbw exits 1 naming op and size. The sweep's numbers and
# the planted broken communicator are collective_bench_test's.
# Usage (from CTest): bash bench_cli_test.sh PTSUITE_BIN MPIEXEC
set -u

if [ $# -ne 2 ]; then
  echo "usage: bash bench_cli_test.sh PTSUITE_BIN MPIEXEC" >&2
  exit 2
fi
BIN=$(realpath -- "$1") || exit 2
MPIEXEC=$(command -v -- "$2") || { echo "bench_cli_test: no mpiexec '$2'" >&2; exit 2; }
NP2=("$MPIEXEC" --allow-run-as-root --oversubscribe --bind-to none -np 2 -x OPENBLAS_NUM_THREADS=1 "$BIN" bench)
# Input is validated alike on every rank before anything runs, so most bad-input checks run as
# one process without mpirun (a launch costs seconds on a loaded 2-core machine).
ONE=("$BIN" bench)

source "$(dirname -- "$0")/check_lib.sh"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ptsuite-bench-test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cd "$WORK" || exit 1

# bad LAUNCH NAME "MESSAGE" ARGS...: exit 2, MESSAGE on stderr, no --out directory, no results/.
bad() {
  local -n launch=$1
  local name=$2 message=$3
  shift 3
  run "$name" "${launch[@]}" --out "out_$name" "$@"
  check "$name exits 2 (got $rc)" test "$rc" -eq 2
  check "$name: stderr says '$message'" has "$name.err" "$message"
  check "$name: nothing written" test ! -e "out_$name" -a ! -e results
  [ "$rc" -eq 2 ] && has "$name.err" "$message" || show "$name.err"
}
bad NP2 min_gt_max "--min-bytes (1024) is larger than --max-bytes (8)" --min-bytes 1K --max-bytes 8
bad ONE factor "--factor (1) must be at least 2" --factor 1
bad NP2 unknown_op "unknown op 'allreduce'; known: all_reduce, reduce_scatter" --ops all_reduce,allreduce
bad ONE negative_gbps "the bandwidth '-3' must be a finite number of GB/s >= 0" --min-busbw 1M=-3
bad ONE nan_gbps "the bandwidth 'nan' must be a finite number" --min-busbw 8=nan
bad ONE malformed_size "size '12Q': give a whole number of bytes" --max-bytes 12Q
bad ONE malformed_gate "--min-busbw '64M': give SIZE=GBPS" --min-busbw 64M
bad ONE iters "--iters (0) must be at least 1" --iters 0
bad ONE comm "--comm 'gloo' is not available; available: mpi" --comm gloo
bad ONE backend "--backend 'tpu' is not available; available: cpu" --backend tpu
bad ONE dtype "--dtype 'bf16': give float32 or float64" --dtype bf16
# A CUDA build on a machine without a GPU: the GPU backend is refused before anything runs.
if "$BIN" list 2>/dev/null | grep -q "^backends:.*cuda" && ! nvidia-smi -L >/dev/null 2>&1; then
  bad ONE cuda_no_gpu "--backend 'cuda' cannot run here: no GPU is visible" --backend cuda --comm mpi-staged
fi

# A sweep of every op: exit 0, the table on stdout, bench.csv with the schema's header and
# every op's rows, #wrong 0 in and out of place, env.json.
run good "${NP2[@]}" --max-bytes 4K --iters 2 --warmup 1 --out good
check "sweep exits 0 (got $rc)" test "$rc" -eq 0
[ "$rc" -eq 0 ] || show good.err
check "sweep: table header on stdout" has good.out "#wrong"
check "sweep: bench.csv written" test -s good/bench.csv
check "sweep: env.json written" test -s good/env.json
check "sweep: bench.csv header" test "$(head -1 good/bench.csv 2>/dev/null)" = \
  "size,count,type,redop,root,op,ranks,time_us,algbw,busbw,wrong,ip_time_us,ip_algbw,ip_busbw,ip_wrong"
for op in all_reduce reduce_scatter all_gather all_to_all broadcast send_recv; do
  check "sweep: $op has 10 rows (8 B .. 4 KiB)" test "$(grep -c ",$op,2," good/bench.csv)" -eq 10
done
check "sweep: every #wrong is 0 or N/A" test "$(awk -F, 'NR > 1 && ($11 != "0" || ($15 != "0" && $15 != ""))' good/bench.csv | wc -l)" -eq 0
check "sweep: no temporary file left" test ! -e good/bench.csv.tmp -a ! -e good/env.json.tmp

# An impossible gate: exit 1 naming op, size, measured and required; the rows are still written.
run gate "${NP2[@]}" --ops all_reduce --max-bytes 64 --iters 2 --min-busbw 8=1e9 --out gate
check "impossible gate exits 1 (got $rc)" test "$rc" -eq 1
check "impossible gate: names op and size" has gate.err "all_reduce at 8 B: out-of-place busbw"
check "impossible gate: names the requirement" has gate.err "required 1000000000.000 GB/s"
check "impossible gate: bench.csv still written (4 rows)" test "$(wc -l <gate/bench.csv)" -eq 5
[ "$rc" -eq 1 ] || show gate.err

if [ "$failures" -ne 0 ]; then
  echo "bench_cli_test: $failures check(s) failed"
  exit 1
fi
echo "bench_cli_test: all checks passed"
