# `ptsuite plan` as a user runs it: a plan writes its table, plan.csv and plan-top.toml, and
# `ptsuite run` accepts that suite as is; gpt2-124m on 512 ranks plans in seconds; a
# calibration written by --calibrate is read back; --validate on 2 ranks writes validate.csv
# with every layout's memory equal to the statement; cp and ep layouts are planned and move
# the bytes planned when run; bad input (a memory limit no layout fits, an unknown workload, a
# malformed calibration file, ranks < 1, a bad link) exits 2 with a clear message before
# anything runs and writes nothing.
# Usage (from CTest): bash plan_cli_test.sh PTSUITE_BIN MPIEXEC
set -u

if [ $# -ne 2 ]; then
  echo "usage: bash plan_cli_test.sh PTSUITE_BIN MPIEXEC" >&2
  exit 2
fi
BIN=$(realpath -- "$1") || exit 2
MPIEXEC=$(command -v -- "$2") || { echo "plan_cli_test: no mpiexec '$2'" >&2; exit 2; }
[ -x "$BIN" ] || { echo "plan_cli_test: '$BIN' is not an executable" >&2; exit 2; }
MPI=("$MPIEXEC" --allow-run-as-root --oversubscribe --bind-to none -x OPENBLAS_NUM_THREADS=1)
export OPENBLAS_NUM_THREADS=1

source "$(dirname -- "$0")/check_lib.sh"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ptsuite-plan-test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cd "$WORK" || exit 1

# A calibration: --calibrate measures this machine (the grid plus gpt-tiny's shapes).
run cal "$BIN" plan --calibrate --workload gpt-tiny --ranks 4 --global-batch 16 --out cal.csv
check "calibrate exits 0 (got $rc)" test "$rc" -eq 0
check "calibrate writes gemm and elementwise rows" sh -c 'grep -q "^gemm," cal.csv && grep -q "^elementwise," cal.csv'
[ "$rc" -eq 0 ] || show cal.err

# (a) a plan: table, plan.csv, plan-top.toml; ptsuite run accepts the suite as is.
run a "$BIN" plan --workload gpt-tiny --ranks 4 --global-batch 16 --link 1,20 --calibration cal.csv --top 3 --out out_a
check "plan exits 0 (got $rc)" test "$rc" -eq 0
check "plan prints the table" has a.out "chosen: fastest predicted"
check "plan.csv has a header and more than 20 layouts" sh -c '[ "$(head -1 out_a/plan.csv | cut -d, -f1,2)" = "rank,layout" ] && [ "$(wc -l <out_a/plan.csv)" -gt 21 ]'
check "plan-top.toml holds the top 3" test "$(grep -c '^\[\[case\]\]' out_a/plan-top.toml 2>/dev/null)" -eq 3
[ "$rc" -eq 0 ] || show a.err
run a_run "${MPI[@]}" -np 4 "$BIN" run out_a/plan-top.toml --out out_a_run --quiet
check "ptsuite run accepts plan-top.toml (got $rc)" test "$rc" -eq 0
check "the run wrote 3 cases" test "$(($(wc -l <out_a_run/cases.csv 2>/dev/null || echo 0) - 1))" -eq 3
[ "$rc" -eq 0 ] || show a_run.err
# --action-overhead o adds o per microbatch and chunk to each stage's compute: compute_s grows
# by m o (2 m o for the two-chunk schedules), layout by layout.
run a_o "$BIN" plan --workload gpt-tiny --ranks 4 --global-batch 16 --link 1,20 --calibration cal.csv \
  --action-overhead 0.01 --out out_a_o
check "--action-overhead: compute grows by m v o in every layout" python3 - <<'PY'
import csv
base = {r["layout"]: r for r in csv.DictReader(open("out_a/plan.csv"))}
rows = list(csv.DictReader(open("out_a_o/plan.csv")))
assert len(rows) == len(base) > 20
for r in rows:
    v = 2 if r["schedule"] in ("interleaved-1f1b", "zbv") and r["pp"] != "1" else 1
    grown = float(r["compute_s"]) - float(base[r["layout"]]["compute_s"])
    assert abs(grown - 0.01 * int(r["microbatches"]) * v) < 1e-9, (r["layout"], grown)
    assert float(r["predicted_step_s"]) > float(base[r["layout"]]["predicted_step_s"]), r["layout"]
PY
# --cores C: ranks sharing C cores run at processor-sharing speed. With a core per rank nothing
# changes; on one core, a layout without a pipeline computes on all its ranks at once (the
# calibration's own sharing: its prediction is unchanged), while every pipeline is faster (a
# rank in its bubble leaves the core to the others).
run a_c4 "$BIN" plan --workload gpt-tiny --ranks 4 --global-batch 16 --link 1,20 --calibration cal.csv --cores 4 --out out_a_c4
run a_c1 "$BIN" plan --workload gpt-tiny --ranks 4 --global-batch 16 --link 1,20 --calibration cal.csv --cores 1 --out out_a_c1
check "--cores: equal with a core per rank; on one core, equal without pp and faster with it" python3 - <<'PY'
import csv
base = {r["layout"]: float(r["predicted_step_s"]) for r in csv.DictReader(open("out_a/plan.csv"))}
c4 = {r["layout"]: float(r["predicted_step_s"]) for r in csv.DictReader(open("out_a_c4/plan.csv"))}
c1 = list(csv.DictReader(open("out_a_c1/plan.csv")))
assert c4 == base and len(c1) == len(base) > 20
assert sum(r["pp"] != "1" for r in c1) > 10
for r in c1:
    x, b = float(r["predicted_step_s"]), base[r["layout"]]
    assert (x < b * (1 - 1e-9)) if r["pp"] != "1" else abs(x - b) <= 1e-12 * b, (r["layout"], x, b)
PY
run a_bad "$BIN" plan --workload gpt-tiny --ranks 4 --calibration cal.csv --action-overhead -1
check "--action-overhead -1: exits 2 (got $rc)" test "$rc" -eq 2

# (b) a cluster: gpt2-124m on 512 ranks of 80 GB over 100 GB/s plans in seconds.
run b timeout 60 "$BIN" plan --workload gpt2-124m --ranks 512 --global-batch 512 --mem-per-rank 80000000000 \
  --link 100,5 --calibration cal.csv --top 3
check "512 ranks: exits 0 within 60 s (got $rc)" test "$rc" -eq 0
check "512 ranks: says how long it planned" has b.out "512 ranks (global batch 512)"
[ "$rc" -eq 0 ] || show b.err

# A pipeline balanced around gpt2-124m's heavy head (V = 50257): uneven stage splits listed.
run b8 "$BIN" plan --workload gpt2-124m --ranks 8 --global-batch 64 --link 100,5 --calibration cal.csv --out out_b8
check "gpt2-124m on 8 ranks: exits 0 (got $rc)" test "$rc" -eq 0
check "gpt2-124m on 8 ranks: plan.csv lists uneven stage_layers" grep -Eq '"dp[0-9]+ tp[0-9]+ pp[0-9]+ [^"]*\[' out_b8/plan.csv

# A link fitted to a `ptsuite bench` sweep (alpha-beta per op by least squares).
run bench "${MPI[@]}" -np 2 "$BIN" bench --ops all_reduce,all_gather,reduce_scatter,send_recv --min-bytes 1K \
  --max-bytes 1M --iters 5 --warmup 1 --out out_bench
run bcsv "$BIN" plan --workload gpt-tiny --ranks 2 --global-batch 8 --bench-csv out_bench/bench.csv \
  --calibration cal.csv --top 2
check "--bench-csv: exits 0 (got $rc)" test "$rc" -eq 0
check "--bench-csv: plans with the fitted link" has bcsv.out "chosen: fastest predicted"
check "--bench-csv: communication is not free" sh -c '! grep -q "communication is free" bcsv.out'
[ "$rc" -eq 0 ] || show bcsv.err

# (c) --validate on 2 ranks: validate.csv, memory equal to the statement on every rank.
run c "${MPI[@]}" -np 2 "$BIN" plan --workload gpt-tiny --ranks 2 --global-batch 8 --link 1,20 --calibration cal.csv \
  --top 2 --sample 2 --steps 3 --warmup-steps 1 --validate --repeat 2 --out out_c
check "validate exits 0 (got $rc)" test "$rc" -eq 0
check "validate --repeat 2 ran two rounds" test -s out_c/run-2/cases.csv
# measured_step_s is the least of the two rounds' medians, case by case.
check "validate --repeat 2: measured step = least round median" python3 - <<'PY'
import csv
rounds = [{r["case"]: float(r["step_time_s"]) for r in csv.DictReader(open(f"out_c/{d}/cases.csv"))} for d in ("run", "run-2")]
rows = list(csv.DictReader(open("out_c/validate.csv")))
assert len(rows) == 4 and all(abs(float(r["measured_step_s"]) - min(x[r["case"]] for x in rounds)) <= 1e-9 * float(r["measured_step_s"]) for r in rows), rows
PY
check "validate.csv has 4 layouts" test "$(($(wc -l <out_c/validate.csv 2>/dev/null || echo 0) - 1))" -eq 4
check "validate: memory exact on every rank of every layout" has c.out "on every rank for 4 of 4"
check "validate prints MAPE, tau and regret" has c.out "Kendall tau"
# The printed figures are validate.csv's: MAPE, Kendall's tau-b (pairs tied in either order
# count against it) and regret, recomputed here.
check "validate: MAPE, tau-b and regret recomputed from validate.csv" python3 - <<'PY'
import csv, math, re
rows = list(csv.DictReader(open("out_c/validate.csv")))
p = [float(r["predicted_step_s"]) for r in rows]
m = [float(r["measured_step_s"]) for r in rows]
n = len(p)
pairs = [(i, j) for i in range(n) for j in range(i + 1, n)]
s = [(p[i] - p[j]) * (m[i] - m[j]) for i, j in pairs]
tied_p = sum(p[i] == p[j] for i, j in pairs)
tied_m = sum(m[i] == m[j] for i, j in pairs)
tau = (sum(x > 0 for x in s) - sum(x < 0 for x in s)) / math.sqrt((len(pairs) - tied_p) * (len(pairs) - tied_m))
mape = 100 * sum(abs(a - b) / b for a, b in zip(p, m)) / n
regret = m[[r["predicted_rank"] for r in rows].index("1")] / min(m)
line = re.search(r"median step\): MAPE ([0-9.]+) %, Kendall tau ([-0-9.]+), regret \(top-1 measured / best measured\) ([0-9.]+)",
                 open("c.out").read())
assert line, "no median-step figures printed"
got = [float(x) for x in line.groups()]
assert abs(got[0] - mape) <= 0.051 and abs(got[1] - tau) <= 0.0006 and abs(got[2] - regret) <= 0.0006, (got, mape, tau, regret)
PY
[ "$rc" -eq 0 ] || show c.err

# (d) bad input: exit 2, a clear message, nothing written.
bad() {  # bad TAG MESSAGE ARGS...
  local tag=$1 msg=$2
  shift 2
  run "$tag" "$BIN" plan "$@" --out "out_$tag"
  check "$tag: exits 2 (got $rc)" test "$rc" -eq 2
  check "$tag: says '$msg'" has "$tag.err" "$msg"
  check "$tag: writes nothing" test ! -e "out_$tag"
}
bad mem "the smallest" --workload gpt-tiny --ranks 4 --global-batch 16 --calibration cal.csv --mem-per-rank 1000
bad workload "unknown workload 'gpt-huge'" --workload gpt-huge --ranks 4 --calibration cal.csv
bad ranks "--ranks must be at least 1" --workload gpt-tiny --ranks 0 --calibration cal.csv
bad link "give bus_gbps,latency_us" --workload gpt-tiny --ranks 4 --link fast
printf 'op,m,n,k,seconds,rate\ngemm,1,1,1,1,1\n' >badhead.csv
bad calhead "badhead.csv:1: not a calibration file" --workload gpt-tiny --ranks 4 --calibration badhead.csv
printf 'op,m,n,k,seconds,rate,backend,dtype\ngemm,64,64,x,1,1,cpu,float32\n' >badrow.csv
bad calrow "badrow.csv:2: 'x' is not a number" --workload gpt-tiny --ranks 4 --calibration badrow.csv
bad calmissing "cannot be read" --workload gpt-tiny --ranks 4 --calibration missing.csv
printf 'size,time_us\n8,1\n' >badbench.csv
bad benchcsv "badbench.csv:1: not a bench.csv: no column 'op'" --workload gpt-tiny --ranks 4 --calibration cal.csv \
  --bench-csv badbench.csv
# Under mpirun, --validate with bad input runs nothing either.
run e "${MPI[@]}" -np 2 "$BIN" plan --workload gpt-tiny --ranks 2 --calibration cal.csv --mem-per-rank 1000 \
  --validate --out out_e
check "validate with bad input exits 2 (got $rc)" test "$rc" -eq 2
check "validate with bad input writes nothing" test ! -e out_e

# (f) context and expert parallelism: cp layouts of a GPT workload and ep layouts of a MoE one
# are planned; run as planned, a cp layout moves exactly the planned bus bytes, and an ep
# layout's routed rows (which the plan counts at balanced routing) are within 20 % of them.
run f "$BIN" plan --workload gpt-tiny --ranks 4 --global-batch 16 --link 1,20 --calibration cal.csv --out out_f
run g "$BIN" plan --workload moe-tiny --ranks 4 --global-batch 16 --link 1,20 --calibration cal.csv --out out_g
check "cp planned on gpt-tiny, ep on moe-tiny" python3 - <<'PY'
import csv
gpt = list(csv.DictReader(open("out_f/plan.csv")))
moe = list(csv.DictReader(open("out_g/plan.csv")))
assert {r["cp"] for r in gpt} == {"1", "2", "4"} and {r["ep"] for r in gpt} == {"1"}, "gpt-tiny: cp 1, 2, 4; no ep"
assert {r["ep"] for r in moe} == {"1", "2", "4"} and {r["cp"] for r in moe} == {"1"}, "moe-tiny: ep 1, 2, 4; no cp"
for rows in (gpt, moe):
    for r in rows:
        assert int(r["dp"]) * int(r["tp"]) * int(r["pp"]) * int(r["cp"]) * int(r["ep"]) == 4, r["layout"]
# The ring's and the all-to-alls' link time enter the step (at least the ring's last hop).
for rows, axis in ((gpt, "cp"), (moe, "ep")):
    for r in rows:
        assert (float(r[axis + "_s"]) > 0) == (r[axis] != "1"), (r["layout"], r[axis + "_s"])
# ZeRO shards over dp's group, the dp x cp ranks: dp 1 x cp 2 x pp 2 offers ZeRO-3.
assert any(r["layout"].startswith("dp1 cp2 tp1 pp2 z3") for r in gpt)
PY
cat >cpep.toml <<'TOML'
[defaults]
strategy = "hybrid"
dtype = "float32"
global_batch = 16
steps = 2
check = "none"
link = { bus_gbps = 1, latency_us = 20 }
[[case]]
name = "cp"
workload = "gpt-tiny"
dp = 2
cp = 2
[[case]]
name = "ep"
workload = "moe-tiny"
dp = 2
ep = 2
TOML
run cpep "${MPI[@]}" -np 4 "$BIN" run cpep.toml --out out_cpep --quiet
check "cp and ep layouts run (got $rc)" test "$rc" -eq 0
[ "$rc" -eq 0 ] || show cpep.err
check "bus bytes: cp exactly as planned; ep's routed rows within 20 % at balanced routing" python3 - <<'PY'
import csv
def planned(path, layout):
    return float(next(r for r in csv.DictReader(open(path)) if r["layout"] == layout)["bus_bytes_per_step"])
ran = [r for r in csv.DictReader(open("out_cpep/comm.csv")) if r["axis"] != "world"]
cp = planned("out_f/plan.csv", "dp2 cp2 tp1 pp1 z0 m1")
ran_cp = sum(float(r["bus_bytes"]) for r in ran if r["case"] == "cp")
assert abs(ran_cp - cp) <= 1e-9 * cp, (ran_cp, cp)
# Every ep op but the all_to_allv is stated exactly; what the plan adds beyond them is its
# estimate of the routed rows, against the rows the routing sent.
ep = planned("out_g/plan.csv", "dp2 ep2 tp1 pp1 z0 m1")
routed = sum(float(r["bus_bytes"]) for r in ran if r["case"] == "ep" and r["op"] == "all_to_allv")
rest = sum(float(r["bus_bytes"]) for r in ran if r["case"] == "ep" and r["op"] != "all_to_allv")
assert routed > 0 and ep > rest, (routed, ep, rest)
ratio = routed / (ep - rest)
print(f"ep: routed rows measured / planned at balanced routing {ratio:.3f}")
assert 0.8 <= ratio <= 1.25, ratio
PY

if [ "$failures" -ne 0 ]; then
  echo "plan_cli_test: $failures check(s) failed"
  exit 1
fi
echo "plan_cli_test: all checks passed"
