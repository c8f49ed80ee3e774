# ptsuite diagnose as a user runs it: on a representative case of every planted bug of
# strategies/testing/planted.toml it names the step, tensor, elements and shard where the bug
# was planted (or, for a bug that moves the right numbers wrongly, says the numbers agree and
# names the failed memory/comm check); on a correct strategy it reports no divergence (exit
# 0); bad input exits 2 before anything runs.
# Usage (from CTest): bash diagnose_test.sh PTSUITE_PLANTED_BIN MPIEXEC REPO_DIR
set -u

if [ $# -ne 3 ]; then
  echo "usage: bash diagnose_test.sh PTSUITE_PLANTED_BIN MPIEXEC REPO_DIR" >&2
  exit 2
fi
PLANTED=$(realpath -- "$1") || exit 2
MPIEXEC=$(command -v -- "$2") || { echo "diagnose_test: no mpiexec '$2'" >&2; exit 2; }
REPO=$(realpath -- "$3") || exit 2
export OPENBLAS_NUM_THREADS=1
SUITE="$REPO/strategies/testing/planted.toml"

WORK=$(mktemp -d "${TMPDIR:-/tmp}/ptsuite-diagnose-test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cd "$WORK" || exit 1

failures=0
rc=0
# diag NP CASE [SUITE [ARGS...]]: runs diagnose, output in CASE.out/.err, exit status in $rc.
diag() {
  local np=$1 name=$2 suite=${3:-$SUITE}
  shift $(($# < 3 ? $# : 3))
  "$MPIEXEC" -q --allow-run-as-root --oversubscribe --bind-to none -np "$np" -x OPENBLAS_NUM_THREADS=1 \
    "$PLANTED" diagnose "$suite" --case "$name" "$@" >"$name.out" 2>"$name.err"
  rc=$?
}
# expect CASE RC PATTERN...: the exit status is RC and every (extended) regex matches a line.
expect() {
  local name=$1 want=$2
  shift 2
  local ok=1
  [ "$rc" -eq "$want" ] || { echo "  $name: exit $rc, expected $want"; ok=0; }
  for pat in "$@"; do
    grep -Eq -- "$pat" "$name.out" "$name.err" || { echo "  $name: no line matches /$pat/"; ok=0; }
  done
  if [ $ok -eq 1 ]; then
    echo "PASS  $name"
  else
    echo "FAIL  $name"
    sed 's/^/    | /' "$name.out" "$name.err" | head -40
    failures=$((failures + 1))
  fi
}

OK="$WORK/correct.toml"
cat >"$OK" <<'TOML'
[defaults]
workload = "mlp-tiny"
steps = 3
global_batch = 24
lr = 0.05

[[case]]
strategy = ["ddp", "zero2"]
dp = 2

[[case]]
name = "gpt-tp2"
strategy = "tp"
workload = "gpt-tiny"
tp = 2

[[case]]
name = "gpt-pp2"
strategy = "pp-1f1b"
workload = "gpt-tiny"
pp = 2
microbatches = 4

[[case]]
name = "gpt-cp2"
strategy = "cp"
workload = "gpt-tiny"
cp = 2
TOML

# Correct strategies: no divergence, every check passes, exit 0.
for c in ddp zero2 gpt-tp2 gpt-pp2 gpt-cp2; do
  diag 2 "$c" "$OK"
  expect "$c" 0 "^no divergence: losses and parameters agree with oracle at every one of 3 steps"
done

# ddp-sum: step 0, every tensor, the whole gradient dp times the reference's.
diag 2 ddp-sum-dp2-float64
expect ddp-sum-dp2-float64 1 "^first divergence: step 0, its update" "6 of 6 tensors differ" \
  "step 0: layers.0.weight \(grad\) rows 0-31 differ \(2048 of 2048 elements\), rel err 1.0e\+00" \
  "pattern: the whole gradient is 2 x the reference's \(dp = 2\)"
diag 2 ddp-sum-dp2-float32
expect ddp-sum-dp2-float32 1 "^first divergence: step 0, its update" "pattern: the whole gradient is 2 x the reference's"
# ddp-skip-bucket: only the first bucket (bucket_bytes 2048 = 256 float64 elements, the last
# ones in canonical order: 246 of layers.2.weight's and the 10 of layers.2.bias) differs.
diag 2 ddp-skip-bucket-dp2-float64
expect ddp-skip-bucket-dp2-float64 1 "2 of 6 tensors differ" \
  "step 0: layers.2.weight \(grad\) rows 39-63 \(row-major elements 394-639\) differ \(246 of 640 elements\)" \
  "step 0: layers.2.bias \(grad\) elements 0-9 differ \(10 of 10 elements\)"
# zero1/zero2-shard-shift: every dp shard's update is off; the shards of each unit are named.
for s in zero1 zero2; do
  diag 2 $s-shard-shift-dp2-float64
  expect $s-shard-shift-dp2-float64 1 "^first divergence: step 0, its update" \
    "step 0: layers.0.weight \(grad\) .*held by tp -, pp stage 0, dp shard 0-1" \
    "step 0: layers.0.bias \(grad\) .*dp shard 1" \
    "pattern: the update of 6 of 6 ZeRO shards \(dp 2 per unit\) landed one element after where it belongs"
done
# tp-no-row-reduce and tp-vocab-overlap: the loss of step 0 already differs (a forward bug),
# with the tensor-parallel shards named, and the first block whose output differs from the
# oracle's: the first transformer block (its row-parallel output is not summed) and the
# embedding (a token looked up twice), the blocks before it agreeing.
for s in tp-no-row-reduce tp-vocab-overlap; do
  diag 2 $s-float64
  first_block=$([ $s = tp-no-row-reduce ] && echo 'blocks\.0' || echo 'wte\+wpe')
  expect $s-float64 1 \
    "^first divergence: step 0's loss, at parameters that agree with the reference: the forward pass is wrong" \
    "blocks.0.attn.proj.weight \(grad\) .*held by tp rank 0 \(rows 0-15 shard\), tp rank 1 \(rows 16-31 shard\)" \
    "^first divergence: step 0, the forward pass \(its loss differs at parameters that agree; 53 of 53.*: $first_block's output is the first that differs \(rel_err .* on tp rank 0-1, pp stage 0, dp rank 0; samples 0-23\); the blocks before it agree"
done
grep -Eq "^    wte\+wpe: PASS, worst rel_err 0.0e\+00 over 2 outputs" tp-no-row-reduce-float64.out ||
  { echo "FAIL  tp-no-row-reduce-float64: the embedding's output is not shown agreeing"; failures=$((failures + 1)); }
# float32: the error-ratio rule on each block's output, the embedding within it.
diag 2 tp-no-row-reduce-float32
expect tp-no-row-reduce-float32 1 "^    wte\+wpe: PASS, worst err_ratio" "^    blocks\.0: FAIL, worst err_ratio" \
  "blocks\.0's output is the first that differs \(err_ratio"
# In dp 2 x tp 2 x pp 2 (8 ranks): every replica's samples and the second stage's blocks
# are compared, the bug placed in blocks.0 on stage 0 of both replicas.
diag 8 hybrid-no-row-reduce
expect hybrid-no-row-reduce 1 "^    wte\+wpe: PASS, worst rel_err 0.0e\+00 over 8 outputs" \
  "^    blocks\.2: FAIL, .*over 8 outputs; differs on tp rank 0-1, pp stage 1, dp rank 0-1; samples 0-23" \
  "blocks\.0's output is the first that differs \(rel_err .* on tp rank 0-1, pp stage 0, dp rank 0-1; samples 0-23\)"
# Context parallelism at cp 4: each block's output is compared at the rank's own token
# positions. A ring that labels blocks as if it turned the other way misplaces keys on cp
# ranks 1 and 2 only (ranks 0 and 3 hold a chunk that sees every key and one that sees only
# its own, so a permutation of the others changes nothing there); a ring that never passes
# anything on is wrong on every rank.
diag 4 cp-ring-backwards-float64
expect cp-ring-backwards-float64 1 "dp 1 x tp 1 x pp 1 x cp 4, float64" \
  "^    wte\+wpe: PASS, worst rel_err 0.0e\+00 over 4 outputs" \
  "blocks\.0's output is the first that differs \(rel_err .* on tp rank 0, pp stage 0, dp rank 0, cp rank 1-2; samples 0-23\)"
diag 4 cp-ring-stuck-float32
expect cp-ring-stuck-float32 1 "^    wte\+wpe: PASS, worst err_ratio" \
  "blocks\.0's output is the first that differs \(err_ratio .* on tp rank 0, pp stage 0, dp rank 0, cp rank 0-3; samples 0-23\)"
# The MLP under tp: the column-parallel layer's output is sharded (left out, and said so);
# the row-parallel layer after it is the first compared output that differs.
MLPTP="$WORK/mlp-tp.toml"
printf '[defaults]\nworkload = "mlp-tiny"\nsteps = 2\n\n[[case]]\nname = "mlp-no-row-reduce"\nstrategy = "tp-no-row-reduce"\ntp = 2\n' >"$MLPTP"
diag 2 mlp-no-row-reduce "$MLPTP"
expect mlp-no-row-reduce 1 "^    layers\.0: not compared \(2 column-sharded outputs not compared\)" \
  "layers\.1's output is the first that differs"
# pp-1f1b-drop-last: the gradient lacks exactly the last microbatch (6 of 24 samples each).
diag 2 pp-1f1b-drop-last-float64
expect pp-1f1b-drop-last-float64 1 "^first divergence: step 0, its update" "53 of 53 tensors differ" \
  "head.weight \(grad\) rows 0-89 differ .*pp stage 1" \
  "pattern: microbatch 3 of dp replica 0 \(samples 18-23\) is missing from the gradient"
diag 2 pp-1f1b-drop-last-float32
expect pp-1f1b-drop-last-float32 1 "pattern: microbatch 3 of dp replica 0 \(samples 18-23\) is missing"
# pp-zbv-skip-w: zbv puts the last virtual stage (blocks 6-7 and the head) on the first rank
# beside the first one, so the lost weight gradients are held by pp stage 0, not 1.
diag 2 pp-zbv-skip-w-float64
expect pp-zbv-skip-w-float64 1 "^first divergence: step 0, its update" "17 of 101 tensors differ" \
  "blocks\.6\.attn\.qkv\.weight \(grad\) rows 0-15 differ .*held by tp -, pp stage 0, dp -" \
  "head\.weight \(grad\) rows 0-63 differ .*held by tp -, pp stage 0, dp -"
# The communication-reducing family, against their twins: the update is compared.
for c in local-sgd-sum-dp2-float64 diloco-uphill-dp2-float64 diloco-no-momentum-dp2-float64; do
  diag 2 $c
  expect $c 1 "^first divergence: step 0, its update" "parameter update compared \(a twin reference"
done
# delayed-sgd-late at staleness 2: the first gradient is applied (by the twin) at step 2.
diag 2 delayed-sgd-late-dp2-staleness2
expect delayed-sgd-late-dp2-staleness2 1 "^first divergence: step 2, its update"

# Bugs that move the right numbers wrongly: the numbers agree; the failed check is named.
diag 2 ddp-leak-dp2-float64
expect ddp-leak-dp2-float64 1 "the numbers agree at every step" "rank [01] memory: grad peak 110752 bytes, expected 55376"
diag 2 ddp-scratch-copy-dp2-float64
expect ddp-scratch-copy-dp2-float64 1 "the numbers agree at every step" "rank [01] memory: workspace peak .* exceeds the bound"
diag 2 fsdp-double-gather-dp2-float64
expect fsdp-double-gather-dp2-float64 1 "the numbers agree at every step" \
  "rank [01] comm: dp/all_gather counted 36 calls, 664512 bytes; expected 24 calls, 443008 bytes"
diag 2 pp-1f1b-all-forwards-float64
expect pp-1f1b-all-forwards-float64 1 "the numbers agree at every step" "rank [01] memory: activation peak"
diag 4 fsdp-no-free-prefetch
expect fsdp-no-free-prefetch 1 "the numbers agree at every step" "rank [0-3] memory: comm peak .* exceeds the bound"

# A strategy that throws on one rank: every rank gives up (no hang), the error is named.
printf '[[case]]\nname = "throws"\nstrategy = "fsdp-throw-rank1"\ndp = 2\nsteps = 3\nglobal_batch = 8\n' >"$WORK/throws.toml"
diag 2 throws "$WORK/throws.toml"
expect throws 1 "the strategy threw in its run of 2 step\(s\).*planted fault: dp rank 1 throws in the backward of step 1"

# --format json: the same diagnosis as one object.
diag 2 pp-1f1b-drop-last-float64 "$SUITE" --format json
if [ "$rc" -eq 1 ] && python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["divergence"]["step"] == 0 and len(d["tensors"]) == 53 and "microbatch 3" in d["pattern"], d["divergence"]
' pp-1f1b-drop-last-float64.out; then
  echo "PASS  pp-1f1b-drop-last-float64 --format json"
else
  echo "FAIL  pp-1f1b-drop-last-float64 --format json"
  failures=$((failures + 1))
fi

# The parameter server's replay reference cannot be re-run: not supported, exit 2.
diag 4 ps-drop-float64
expect ps-drop-float64 2 "replay references are not supported by diagnose"

# Bad input: exit 2 before anything runs.
diag 2 no-such-case
expect no-such-case 2 "no case named 'no-such-case'; its cases: ddp-sum-dp2-float64"
diag 2 ddp-sum-dp3-float64
expect ddp-sum-dp3-float64 2 "needs dp\(3\) \* tp\(1\) \* pp\(1\) = 3 ranks; mpirun gave 2"
diag 2 missing "$WORK/missing.toml"
expect missing 2 "missing.toml"

# ptsuite run --diagnose: every failed case diagnosed into OUT/diagnose/<case>.txt after the run
# (the forward bug, a gradient bug, a memory bug), the replay case's file saying why not;
# run's own exit status (1: cases failed) and its CSV are unchanged.
"$MPIEXEC" -q --allow-run-as-root --oversubscribe --bind-to none -np 8 -x OPENBLAS_NUM_THREADS=1 "$PLANTED" run "$SUITE" \
  --filter '^(tp-no-row-reduce-float64|ddp-sum-dp2-float64|ddp-leak-dp2-float64|ps-drop-float64)$' --out "$WORK/rd" \
  --diagnose --progress none >rd.out 2>rd.err
rc=$?
rd_ok=1
[ "$rc" -eq 1 ] || { echo "  run --diagnose: exit $rc, expected 1"; rd_ok=0; }
grep -q "diagnosed 3 of 4 failed cases" rd.out || { echo "  run --diagnose: no 'diagnosed 3 of 4' line"; rd_ok=0; }
[ "$(tail -n +2 "$WORK/rd/cases.csv" | wc -l)" -eq 4 ] ||
  { echo "  run --diagnose: cases.csv does not hold the 4 cases"; rd_ok=0; }
for pair in "tp-no-row-reduce-float64:blocks\.0's output is the first that differs" \
            "ddp-sum-dp2-float64:the whole gradient is 2 x the reference's" \
            "ddp-leak-dp2-float64:rank [0-3] memory: grad peak" \
            "ps-drop-float64:^not diagnosed: .*replay references are not supported"; do
  f="$WORK/rd/diagnose/${pair%%:*}.txt"
  grep -Eq -- "${pair#*:}" "$f" 2>/dev/null || { echo "  run --diagnose: $f lacks /${pair#*:}/"; rd_ok=0; }
done
if [ $rd_ok -eq 1 ]; then echo "PASS  run --diagnose"; else echo "FAIL  run --diagnose"; cat rd.out rd.err | head -20; failures=$((failures + 1)); fi

echo "$failures failure(s)"
[ "$failures" -eq 0 ]
