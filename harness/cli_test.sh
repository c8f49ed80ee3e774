# The CLI as a user runs it: bad input exits 2 before anything runs and writes nothing; a
# good run writes its five files; a used --out is refused and left as it was; a target_loss is
# timed (wall_s, steps_to_target, time_to_target_s); SIGTERM stops a run cleanly (exit 3) and
# --resume completes it. With the planted build beside it (ptsuite_planted): a rank blocked
# forever ends the job through the watchdog (exit 4), a rank that throws fails its case on
# every rank and the suite goes on, a rank that segfaults is recorded as a
# crash by --resume (exit 5).
# Usage (from CTest): bash cli_test.sh PTSUITE_BIN MPIEXEC REPO_DIR
set -u

if [ $# -ne 3 ]; then
  echo "usage: bash cli_test.sh PTSUITE_BIN MPIEXEC REPO_DIR" >&2
  exit 2
fi
# Absolute paths: the checks run in a scratch directory.
BIN=$(realpath -- "$1") || exit 2
MPIEXEC=$(command -v -- "$2") || { echo "cli_test: no mpiexec '$2'" >&2; exit 2; }
REPO=$(realpath -- "$3") || exit 2
[ -x "$BIN" ] || { echo "cli_test: '$BIN' is not an executable" >&2; exit 2; }
NP2=("$MPIEXEC" --allow-run-as-root --oversubscribe --bind-to none -np 2 -x OPENBLAS_NUM_THREADS=1 "$BIN")

source "$(dirname -- "$0")/check_lib.sh"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ptsuite-cli-test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cd "$WORK" || exit 1


# (a) unknown key: exit 2, file:line and key on stderr, --out not created.
cat >unknown_key.toml <<'EOF'
[[case]]
strategy = "single"
stpes = 3
EOF
run a "${NP2[@]}" run unknown_key.toml --out out_a --quiet
check "unknown key exits 2 (got $rc)" test "$rc" -eq 2
check "unknown key: stderr names file:line and key" has a.err "unknown_key.toml:3: key 'stpes': unknown key"
check "unknown key: --out dir not created" test ! -e out_a
[ "$rc" -eq 2 ] || show a.err

# (b) a layout needing 8 ranks on 2.
cat >too_big.toml <<'EOF'
[[case]]
strategy = "ddp"
dp = 2
tp = 2
pp = 2
EOF
run b "${NP2[@]}" run too_big.toml --out out_b --quiet
check "8-rank layout on 2 ranks exits 2 (got $rc)" test "$rc" -eq 2
check "8-rank layout: product spelled out" has b.err "too_big.toml:3: key 'dp': dp(2) * tp(2) * pp(2) = 8, but 2 ranks are running"
check "8-rank layout: --out dir not created" test ! -e out_b

# (c) a valid tiny suite runs and writes every file.
cat >tiny.toml <<'EOF'
description = "cli test: single and ddp dp 2 on mlp-tiny"
[defaults]
workload = "mlp-tiny"
steps = 3
warmup_steps = 1
global_batch = 16

[[case]]
strategy = "single"

[[case]]
strategy = "ddp"
dp = 2
EOF
run c "${NP2[@]}" run tiny.toml --out out_c --quiet
check "valid suite exits 0 (got $rc)" test "$rc" -eq 0
[ "$rc" -eq 0 ] || { show c.out; show c.err; }
for f in cases.csv steps.csv comm.csv memory.csv env.json; do
  check "valid suite wrote $f" test -s "out_c/$f"
done
check "cases.csv: header and one row per case" test "$(wc -l <out_c/cases.csv 2>/dev/null)" = 3
check "cases.csv: both cases listed, in order" \
  test "$(tail -n +2 out_c/cases.csv 2>/dev/null | cut -d, -f1 | tr '\n' ' ')" = "single ddp "
check "steps.csv: header and 3 steps per case" test "$(wc -l <out_c/steps.csv 2>/dev/null)" = 7
check "no temporary files left" test -z "$(find out_c -name '*.tmp' 2>/dev/null)"

check "cases.csv: comm_backend is mpi for host tensors" \
  test "$(python3 -c 'import csv,sys; print(" ".join(r["comm_backend"] for r in csv.DictReader(open(sys.argv[1]))))' out_c/cases.csv 2>/dev/null)" = "mpi mpi"

# (c2) --set: a key over every case (steps 2 instead of 3); a bad one exits 2 and writes nothing.
run c2 "${NP2[@]}" run tiny.toml --out out_c2 --set steps=2 --set backend=cpu --quiet
check "--set steps=2 exits 0 (got $rc)" test "$rc" -eq 0
check "--set steps=2: 2 steps per case in steps.csv" test "$(wc -l <out_c2/steps.csv 2>/dev/null)" = 5
run c3 "${NP2[@]}" run tiny.toml --out out_c3 --set backend=tpu --quiet
check "--set backend=tpu exits 2 (got $rc)" test "$rc" -eq 2
check "--set backend=tpu: stderr names the key and the known backends" has c3.err "key 'backend': unknown backend 'tpu'; known: cpu"
check "--set backend=tpu: --out dir not created" test ! -e out_c3
run c4 "${NP2[@]}" run tiny.toml --out out_c4 --set steps --quiet
check "--set without = exits 2 (got $rc)" test "$rc" -eq 2
check "--set without =: stderr says KEY=VALUE" has c4.err "expected KEY=VALUE"

# (c5) a CUDA build on a machine without a GPU: a cuda case exits 2 before anything runs.
if "$BIN" list 2>/dev/null | grep -q "^backends:.*cuda" && ! nvidia-smi -L >/dev/null 2>&1; then
  run c5 "${NP2[@]}" run tiny.toml --out out_c5 --set backend=cuda --quiet
  check "--set backend=cuda without a GPU exits 2 (got $rc)" test "$rc" -eq 2
  check "--set backend=cuda without a GPU: stderr says why" has c5.err "backend 'cuda' cannot run here: no GPU is visible"
  check "--set backend=cuda without a GPU: --out dir not created" test ! -e out_c5
fi

# (d) the same --out again: refused, cases.csv untouched.
cp out_c/cases.csv saved_cases.csv 2>/dev/null
run d "${NP2[@]}" run tiny.toml --out out_c --quiet
check "rerun into a used --out exits 2 (got $rc)" test "$rc" -eq 2
check "rerun: stderr says why" has d.err "ptsuite: error: out_c"
check "rerun: cases.csv byte-identical" cmp -s saved_cases.csv out_c/cases.csv

# (e) a filter that matches nothing.
run e "${NP2[@]}" run tiny.toml --out out_e --filter '^no-such-case$' --quiet
check "filter matching nothing exits 2 (got $rc)" test "$rc" -eq 2
check "filter matching nothing: stderr names the filter" has e.err "^no-such-case$"
check "filter matching nothing: --out dir not created" test ! -e out_e

# (f) list, without mpirun.
run f "$BIN" list
check "list exits 0 (got $rc)" test "$rc" -eq 0
check "list names workload mlp-medium" has f.out "mlp-medium"
check "list names strategy ddp" has f.out "ddp"
check "list shows gpt2-124m with its untied head" has f.out "163037184 params"
check "list names strategy hybrid" has f.out "hybrid"
check "list names the backends" has f.out "backends: cpu"
check "list names the communicators" has f.out "communicators: mpi"

# (g) unknown subcommand.
run g "$BIN" frobnicate
check "unknown subcommand exits non-zero (got $rc)" test "$rc" -ne 0

# (h) schema prints the committed file.
run h "$BIN" schema
check "schema matches results/SCHEMA.md" cmp -s h.out "$REPO/results/SCHEMA.md"

# (i) a llm.c-style uint16 token file trains single and tp 2 on gpt-tiny and passes the exact check.
python3 - <<'PY'
import struct
tokens = [(i * 37 + i // 7) % 90 for i in range(2000)]
header = [20240520, 1, len(tokens)] + [0] * 253
with open("tokens.bin", "wb") as f:
    f.write(struct.pack("<256i", *header))
    f.write(struct.pack("<%dH" % len(tokens), *tokens))
PY
cat >tokens.toml <<'EOF'
[defaults]
workload = "gpt-tiny"
data = "tokens.bin"
steps = 2
warmup_steps = 1
global_batch = 4

[[case]]
strategy = "single"

[[case]]
strategy = "tp"
tp = 2
EOF
run i "${NP2[@]}" run tokens.toml --out out_i --quiet
check "token-file suite exits 0 (got $rc)" test "$rc" -eq 0
[ "$rc" -eq 0 ] || { show i.out; show i.err; }
verdicts() { python3 -c "import csv,sys; print(' '.join(r['case']+':'+r['verdict']+':'+r['check_exact'] for r in csv.DictReader(open(sys.argv[1]))))" "$1"; }
check "token-file suite: both cases pass the exact check" test "$(verdicts out_i/cases.csv)" = "single:PASS:PASS tp:PASS:PASS"

# (j) a token past the vocabulary: exit 2 naming the file and the position; nothing runs.
python3 -c "import struct; open('bad.bin','wb').write(struct.pack('<40H', *([1]*39 + [95])))"
sed 's/tokens.bin/bad.bin/' tokens.toml >bad.toml
run j "${NP2[@]}" run bad.toml --out out_j --quiet
check "bad token file exits 2 (got $rc)" test "$rc" -eq 2
check "bad token file: stderr names the token" has j.err "bad.bin: token 95 at position 39 is out of range for vocabulary 90"
check "bad token file: --out dir not created" test ! -e out_j

# (k) output redirected to a file under mpirun: plain lines (no carriage return or escape
# sequence), the summary, env.json with the cores and a clean MPI version, no warning when
# each rank has a core.
run k "${NP2[@]}" run tiny.toml --out out_k
check "redirected run exits 0 (got $rc)" test "$rc" -eq 0
check "redirected output has no carriage return or escape" test -z "$(tr -d '\n' <k.out | tr -cd '\r\033')"
check "redirected output has one progress line per case" test "$(grep -c '^\[[12]/2\] .*ms/step' k.out)" = 2
check "redirected output ends with the summary" has k.out "2 cases, 0 failed; results in out_k"
envcheck() { python3 -c "
import json, sys
e = json.load(open('$1/env.json'))
assert isinstance(e['cores'], int) and e['cores'] >= 1, e
assert e['ranks_per_node'] == 2, e
assert e['oversubscribed'] is $2, e
assert all(c.isprintable() for c in e['versions']['mpi']), repr(e['versions']['mpi'])
"; }
check "env.json: cores, ranks_per_node 2, not oversubscribed, printable MPI version" envcheck out_k False
check "no oversubscription warning with a core per rank" test -z "$(grep -i oversubscribed k.err)"
column() { python3 -c "import csv,sys; print(' '.join(r[sys.argv[2]] for r in csv.DictReader(open(sys.argv[1]))))" "$1" "$2"; }
check "cases.csv: oversubscribed 0 for both cases" test "$(column out_k/cases.csv oversubscribed)" = "0 0"

# (l) two ranks pinned to one CPU: warned once, recorded in env.json and cases.csv.
run l taskset -c 0 "${NP2[@]}" run tiny.toml --out out_l
check "oversubscribed run exits 0 (got $rc)" test "$rc" -eq 0
check "oversubscribed run: warned once on stderr" test "$(grep -c 'ranks share a node with 1 usable cores' l.err)" = 1
check "oversubscribed run: the warning names mpi_yield_when_idle" has l.err "mpi_yield_when_idle"
check "env.json: oversubscribed true" envcheck out_l True
check "cases.csv: oversubscribed 1 for both cases" test "$(column out_l/cases.csv oversubscribed)" = "1 1"

# (m) target_loss beside an explicit check = "exact": exit 2 naming the key, nothing runs.
cat >target_exact.toml <<'EOF'
[defaults]
check = "exact"
[[case]]
strategy = "single"
target_loss = 1.5
EOF
run m "${NP2[@]}" run target_exact.toml --out out_m --quiet
check "target_loss with check exact exits 2 (got $rc)" test "$rc" -eq 2
check "target_loss with check exact: stderr names file:line and key" \
  has m.err "target_exact.toml:5: key 'target_loss': cannot be combined with check = \"exact\" (line 2)"
check "target_loss with check exact: --out dir not created" test ! -e out_m

# (n) a target every step reaches: steps_to_target 1, time_to_target_s the first wall_s, and
# wall_s the running sum of step_time_s.
sed 's/^steps = 3$/steps = 3\ntarget_loss = 1e9/' tiny.toml >target.toml
run n "${NP2[@]}" run target.toml --out out_n --quiet
check "target suite exits 0 (got $rc)" test "$rc" -eq 0
[ "$rc" -eq 0 ] || { show n.out; show n.err; }
targetcheck() { python3 -c "
import csv
cases = list(csv.DictReader(open('out_n/cases.csv')))
steps = list(csv.DictReader(open('out_n/steps.csv')))
assert len(cases) == 2 and len(steps) == 6, (cases, steps)
for c in cases:
    mine = [s for s in steps if s['case'] == c['case']]
    total = 0.0
    for s in mine:
        total += float(s['step_time_s'])
        assert abs(float(s['wall_s']) - total) <= 1e-12 * total, (s, total)
    assert float(c['target_loss']) == 1e9 and c['steps_to_target'] == '1', c
    assert c['time_to_target_s'] == mine[0]['wall_s'], (c, mine[0])
"; }
check "target suite: wall_s sums step times, the first step reaches the target" targetcheck

# (o) a [[generate]] table naming an unknown strategy: exit 2 before anything runs.
cat >bad_generate.toml <<'EOF'
[[generate]]
strategies = ["ddp", "dpp"]
EOF
run o "${NP2[@]}" run bad_generate.toml --out out_o --quiet
check "unknown generated strategy exits 2 (got $rc)" test "$rc" -eq 2
check "unknown generated strategy: stderr names file:line and key" has o.err "bad_generate.toml:2: key 'strategies': unknown strategy 'dpp'"
check "unknown generated strategy: --out dir not created" test ! -e out_o

# (p) matrix prints a strategy's conformance matrix as suite tables, or its case names.
run p "$BIN" matrix fsdp
check "matrix exits 0 (got $rc)" test "$rc" -eq 0
check "matrix shows fsdp's options entry" has p.out 'name = "fsdp-options"'
run p2 "$BIN" matrix --cases fsdp
check "matrix --cases lists fsdp's cases" has p2.out "fsdp-options-dp3-float64-prefetch-reshard_after_forward"
run p3 "$BIN" matrix fdsp
check "matrix of an unknown strategy exits 2 (got $rc)" test "$rc" -eq 2

# (inputs) hostile input: exit 2 before anything runs, naming file:line, key and the limit
# or the problem, and --out not created. A FIFO as data must not block (timeout 60).
mkfifo tokens.fifo
hostile() {  # hostile NAME EXPECTED_STDERR: runs NAME.toml on 2 ranks
  run "h_$1" timeout 60 "${NP2[@]}" run "$1.toml" --out "out_$1" --quiet
  check "hostile $1 exits 2 (got $rc)" test "$rc" -eq 2
  check "hostile $1: stderr says why" has "h_$1.err" "$2"
  check "hostile $1: --out dir not created" test ! -e "out_$1"
  [ "$rc" -eq 2 ] || show "h_$1.err"
}
printf '[[case]]\nworkload = "gpt-tiny"\ndata = "tokens.fifo"\n' >fifo_data.toml
hostile fifo_data "fifo_data.toml:3: key 'data': token file tokens.fifo: not a regular file (a FIFO)"
printf '[[case]]\nworkload = "gpt-tiny"\ndata = "/dev/zero"\n' >zero_data.toml
hostile zero_data "zero_data.toml:3: key 'data': token file /dev/zero: not a regular file (a device or socket)"
printf '[[case]]\nstrategy = "ddp"\ndp = 2\nlink = { bus_gbps = 10, latency_us = inf }\n' >inf_latency.toml
hostile inf_latency "inf_latency.toml:4: key 'link.latency_us': must be a finite, non-negative number"
printf '[[case]]\nsteps = 2147483647\n' >huge_steps.toml
hostile huge_steps "huge_steps.toml:2: key 'steps': 2147483647 steps is over the limit of 100000 (limits.max_steps)"
printf '[[case]]\nlr = inf\n' >inf_lr.toml
hostile inf_lr "inf_lr.toml:2: key 'lr': must be a finite number, got inf"
printf '[[case]]\noptimizer = "adamw"\neps = 0\n' >zero_eps.toml
hostile zero_eps "zero_eps.toml:3: key 'eps': must be positive, got 0"
printf '[[case]]\nglobal_batch = 1000000000000\n' >huge_batch.toml
hostile huge_batch "huge_batch.toml:2: key 'global_batch': 1000000000000 samples is over the limit of 65536"
run h_suite_fifo timeout 60 "${NP2[@]}" run tokens.fifo --out out_suite_fifo --quiet
check "a FIFO as the suite exits 2 (got $rc)" test "$rc" -eq 2
check "a FIFO as the suite: not a regular file" has h_suite_fifo.err "tokens.fifo: not a regular file"

# (q) SIGTERM to the ranks mid-case (as a batch system does at the end of a job's time):
# exit 3, run.json says interrupted with 1 of 3 complete; --resume runs the other two.
cat >long.toml <<'EOF'
[defaults]
workload = "mlp-tiny"
global_batch = 8
steps = 3
check = "none"

[[case]]
strategy = "single"

[[case]]
name = "long"
strategy = "ddp"
dp = 2
steps = 50000

[[case]]
strategy = "ddp"
dp = 2
EOF
"${NP2[@]}" run long.toml --out out_q --quiet >q.out 2>q.err &
launcher=$!
for _ in $(seq 100); do grep -q '"in_progress": "long"' out_q/run.json 2>/dev/null && break; sleep 0.1; done
sleep 0.5
kill -TERM $(pgrep -P "$launcher") 2>/dev/null
wait "$launcher"
rc=$?
check "SIGTERM mid-run exits 3 (got $rc)" test "$rc" -eq 3
[ "$rc" -eq 3 ] || { show q.out; show q.err; }
runjson() { python3 -c "
import json, sys
r = json.load(open(sys.argv[1] + '/run.json'))
print(r['state'], r['completed'], r['expected'], r['in_progress'])" "$1"; }
check "SIGTERM: run.json says interrupted, 1 of 3, nothing in progress" test "$(runjson out_q)" = "interrupted 1 3 None"
check "SIGTERM: cases.csv keeps the completed case only" test "$(column out_q/cases.csv case)" = "single"
cp out_q/cases.csv q_cases.csv
run q2 "${NP2[@]}" run long.toml --out out_q --quiet
check "rerun without --resume is still refused, exit 2 (got $rc)" test "$rc" -eq 2
check "rerun without --resume: cases.csv byte-identical" cmp -s q_cases.csv out_q/cases.csv
sed 's/^steps = 50000$/steps = 3/' long.toml >short.toml
run q3 "${NP2[@]}" run short.toml --out out_q --quiet --resume
check "--resume with another suite is refused, exit 2 (got $rc)" test "$rc" -eq 2
check "--resume with another suite: stderr says so" has q3.err "was started with another suite or --filter"
run q4 "${NP2[@]}" run long.toml --out out_q --quiet --resume
check "--resume completes the interrupted run, exit 0 (got $rc)" test "$rc" -eq 0
[ "$rc" -eq 0 ] || { show q4.out; show q4.err; }
check "--resume: cases.csv lists the three cases once, in order" test "$(column out_q/cases.csv case)" = "single long ddp"
check "--resume: run.json complete, 3 of 3" test "$(runjson out_q)" = "complete 3 3 None"
check "--resume: steps.csv has the long case's steps once" \
  test "$(grep -c '^long,' out_q/steps.csv)" = 50000

PLANTED=$(dirname -- "$BIN")/ptsuite_planted
if [ -x "$PLANTED" ]; then
  NP2P=("${NP2[@]:0:${#NP2[@]}-1}" "$PLANTED")
  faulty() {  # faulty STRATEGY: single, the faulty strategy on dp 2, ddp
    printf '[defaults]\nworkload = "mlp-tiny"\nglobal_batch = 8\nsteps = 3\n\n[[case]]\nstrategy = "single"\n\n'
    printf '[[case]]\nstrategy = "%s"\ndp = 2\n\n[[case]]\nstrategy = "ddp"\ndp = 2\n' "$1"
  }
  # (r) a rank blocked forever in a receive: the watchdog ends the job within seconds.
  faulty fsdp-block-rank1 >block.toml
  start=$(date +%s)
  run r "${NP2P[@]}" run block.toml --out out_r --quiet --timeout 5
  took=$(($(date +%s) - start))
  check "blocked rank: the watchdog exits 4 (got $rc)" test "$rc" -eq 4
  check "blocked rank: ended within 30 s (took ${took} s)" test "$took" -le 30
  check "blocked rank: message names rank, case, op, axis" \
    has r.err "rank 1: watchdog: case 'fsdp-block-rank1': recv on axis 'dp' (group of 2 ranks: world ranks 0,1)"
  check "blocked rank: the completed case is intact" test "$(column out_r/cases.csv case)" = "single"

  # (s) a rank that throws between two all-gathers: its message at once; its fault notice
  # makes the other rank abandon its all-gather after the grace (2 s), not the 300 s
  # --timeout; the case FAILs with the message on every rank and the suite goes on (exit 1).
  faulty fsdp-throw-rank1 >throw.toml
  start=$(date +%s)
  run s "${NP2P[@]}" run throw.toml --out out_s --quiet
  took=$(($(date +%s) - start))
  check "rank throwing mid-step: exit 1, a failed case (got $rc)" test "$rc" -eq 1
  [ "$rc" -eq 1 ] || { show s.out; show s.err; }
  check "rank throwing mid-step: ended within 30 s, not the 300 s timeout (took ${took} s)" test "$took" -le 30
  check "rank throwing mid-step: its error is shown" \
    has s.err "rank 1: case 'fsdp-throw-rank1': threw: planted fault: dp rank 1 throws in the backward of step 1"
  check "rank throwing mid-step: the waiting rank names the op it abandoned and the fault" \
    has s.err "rank 0: case 'fsdp-throw-rank1': gave up: abandoned all_gather on axis 'dp' after 2.0 s: a peer's fault notice: rank 1 threw: planted fault"
  check "rank throwing mid-step: the case FAILs with rank 1's message, the next case runs and PASSes" \
    test "$(python3 -c "import csv; print(' '.join(r['case']+':'+r['verdict'] for r in csv.DictReader(open('out_s/cases.csv'))))")" \
    = "single:PASS fsdp-throw-rank1:FAIL ddp:PASS"
  check "rank throwing mid-step: the reason names rank 1's exception" \
    test -n "$(grep -F 'fsdp-throw-rank1' out_s/cases.csv | grep -F 'rank 1 threw: planted fault: dp rank 1 throws')"
  check "rank throwing mid-step: run.json complete" test "$(runjson out_s)" = "complete 3 3 None"

  # (t) a segfault: the job dies naming the case; --resume records it as FAIL and runs the rest.
  faulty fsdp-crash-rank1 >crash.toml
  run t "${NP2P[@]}" run crash.toml --out out_t --quiet
  check "segfault: the run dies (got $rc)" test "$rc" -ne 0
  check "segfault: stderr names rank, case and signal" has t.err "rank 1: case 'fsdp-crash-rank1': crashed with signal 11"
  check "segfault: run.json names the case in progress" test "$(runjson out_t)" = "running 1 3 fsdp-crash-rank1"
  printf 'fsdp-crash-rank1,0,2.' >>out_t/steps.csv  # as if it died writing its rows
  run t2 "${NP2P[@]}" run crash.toml --out out_t --quiet --resume
  check "resume after a crash exits 5 (got $rc)" test "$rc" -eq 5
  [ "$rc" -eq 5 ] || { show t2.out; show t2.err; }
  check "resume after a crash: all three cases, the crashed one FAIL" \
    test "$(python3 -c "import csv; print(' '.join(r['case']+':'+r['verdict'] for r in csv.DictReader(open('out_t/cases.csv'))))")" \
    = "single:PASS fsdp-crash-rank1:FAIL ddp:PASS"
  check "resume after a crash: the reason says crash and the signal" \
    test -n "$(grep -F 'crash: the run died during this case' out_t/cases.csv | grep -F 'signal 11')"
  check "resume after a crash: run.json complete" test "$(runjson out_t)" = "complete 3 3 None"
  check "resume after a crash: the half-written row is gone, each case's steps once" \
    test "$(cut -d, -f1 out_t/steps.csv | LC_ALL=C sort | uniq -c | tr -s ' ' | tr '\n' ';')" = " 1 case; 3 ddp; 3 single;"
else
  echo "SKIP  watchdog and crash checks: no $PLANTED"
fi

# ptsuite schedule: the simulated table beside its closed form; a bad layout or cost exits 2.
run sa "$BIN" schedule --schedule zb-h1 --pp 4 --microbatches 8 --csv zb.csv
check "schedule zb-h1 exits 0 (got $rc)" test "$rc" -eq 0
check "schedule zb-h1: bubble (p-1)(F+B-W) = 3 of busy 24 on rank 0, one W pending" \
  test -n "$(grep -E '^ +0 +24 +3 +0.1250 +4 +1 +8$' sa.out)"
check "schedule zb-h1: the CSV has a header and 4 x 8 x 3 actions" test "$(wc -l <zb.csv)" = 97
run sb "$BIN" schedule --schedule interleaved-1f1b --pp 4 --microbatches 6 --virtual-stages 2
check "schedule: microbatches not a multiple of pp exits 2 (got $rc)" test "$rc" -eq 2
check "schedule: the message names microbatches and pp" has sb.err "needs microbatches (6) to be a multiple of pp (4)"
run sc "$BIN" schedule --costs 1,nan,1
check "schedule: a non-finite cost exits 2 (got $rc)" test "$rc" -eq 2

if [ "$failures" -ne 0 ]; then
  echo "cli_test: $failures check(s) failed"
  exit 1
fi
echo "cli_test: all checks passed"
