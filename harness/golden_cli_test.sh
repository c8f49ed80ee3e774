# golden export / results / verify as a user runs them: the committed kits are what export
# writes today (the RNG's tensors byte for byte, the trained numbers by the kit's rule); verify passes ptsuite's own strategies (ddp, fsdp, tp, pp on
# gpt-tiny in float64, ddp in float32) and fails planted bugs naming the first failing step
# and tensor (exit 1); a kit with a missing or altered file, results with the wrong number of
# steps, a misnamed tensor or a wrong shape exit 2 with a message naming the file and
# tensor, and write nothing.
# Usage (from CTest): bash golden_cli_test.sh PTSUITE_BIN PTSUITE_PLANTED_BIN MPIEXEC REPO_DIR
set -u

if [ $# -ne 4 ]; then
  echo "usage: bash golden_cli_test.sh PTSUITE_BIN PTSUITE_PLANTED_BIN MPIEXEC REPO_DIR" >&2
  exit 2
fi
BIN=$(realpath -- "$1") || exit 2
PLANTED=$(realpath -- "$2") || exit 2
MPIEXEC=$(command -v -- "$3") || { echo "golden_cli_test: no mpiexec '$3'" >&2; exit 2; }
REPO=$(realpath -- "$4") || exit 2
MPI=("$MPIEXEC" --allow-run-as-root --oversubscribe --bind-to none -np 2 -x OPENBLAS_NUM_THREADS=1)
export OPENBLAS_NUM_THREADS=1

source "$(dirname -- "$0")/check_lib.sh"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/ptsuite-golden-test.XXXXXX")
trap 'rm -rf "$WORK"' EXIT
cd "$WORK" || exit 1

says() { has "$@"; }

GPT=$REPO/results/golden/gpt-tiny
MLP=$REPO/results/golden/mlp-tiny

# The committed kits are what export writes today. What comes from the counter RNG alone
# (initial parameters, batches) and the manifest's description are byte for byte the same on
# any machine; the trained numbers come from the CPU backend and BLAS, whose last bits may
# differ on another CPU (-march=native, OpenBLAS's kernel choice), so they are judged by the
# kit's own rule: the verify cases below pass this build's strategies against the committed
# kits, and the fresh export's single-device run passes against the committed one.
same_description() {  # same_description A B: manifest.json equal but for the trained files' hashes
  python3 - "$1/manifest.json" "$2/manifest.json" <<'PY'
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
for m in (a, b):
    for name, f in m["files"].items():
        if name not in ("params_init.safetensors", "batches.safetensors"):
            f.pop("sha256"), f.pop("bytes")
sys.exit(a != b)
PY
}
export_matches() {  # export_matches NAME FRESH COMMITTED
  check "results/golden/$1: manifest description as export writes it" same_description "$2" "$3"
  check "results/golden/$1: initial parameters byte for byte" cmp -s "$2/params_init.safetensors" "$3/params_init.safetensors"
  check "results/golden/$1: batches byte for byte" cmp -s "$2/batches.safetensors" "$3/batches.safetensors"
  python3 - "$2/losses.safetensors" >"$1-losses.csv" <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
t = json.loads(raw[8:8 + n])["losses"]
lo, hi = t["data_offsets"]
print("step,loss")
for k, v in enumerate(struct.unpack("<%dd" % ((hi - lo) // 8), raw[8 + n + lo:8 + n + hi])):
    print("%d,%r" % (k, v))
PY
  run "fresh-$1" "$BIN" golden verify "$3" --losses "$1-losses.csv" --params "$2/params.safetensors" \
    --grads "$2/grads.safetensors"
  check "results/golden/$1: the fresh export's losses, parameters and gradients pass against it" test "$rc" -eq 0
}
run exp-mlp "$BIN" golden export --workload mlp-tiny kit-mlp
check "export mlp-tiny exits 0" test "$rc" -eq 0
export_matches mlp-tiny kit-mlp "$MLP"
run exp-gpt "$BIN" golden export --workload gpt-tiny --global-batch 8 --every 4 kit-gpt
check "export gpt-tiny exits 0" test "$rc" -eq 0
export_matches gpt-tiny kit-gpt "$GPT"
run exp-again "$BIN" golden export --workload mlp-tiny kit-mlp
check "export into a used directory exits 2" test "$rc" -eq 2
check "  and says why" says exp-again.err "not an empty directory"

# ptsuite's own strategies pass.
pass_case() {  # pass_case NAME KIT DTYPE STRATEGY FLAGS...
  local name=$1 kit=$2 dtype=$3
  shift 3
  run "res-$name" "${MPI[@]}" "$BIN" golden results --dtype "$dtype" --strategy "$@" "$kit" "out-$name"
  check "results $name exits 0" test "$rc" -eq 0
  run "ver-$name" "$BIN" golden verify "$kit" --losses "out-$name/losses.csv" --params "out-$name/params.safetensors"
  check "verify $name passes (exit 0)" test "$rc" -eq 0
  check "  and says PASS" says "ver-$name.out" "summary: PASS"
}
pass_case gpt-ddp "$GPT" float64 ddp --dp 2
pass_case gpt-fsdp "$GPT" float64 fsdp --dp 2
pass_case gpt-tp "$GPT" float64 tp --tp 2
pass_case gpt-pp "$GPT" float64 pp-1f1b --pp 2
pass_case mlp-ddp "$MLP" float64 ddp --dp 2
pass_case mlp-ddp32 "$MLP" float32 ddp --dp 2
pass_case gpt-tp32 "$GPT" float32 tp --tp 2
run ver-grads "$BIN" golden verify "$MLP" --losses out-mlp-ddp/losses.csv --grads "$MLP/grads.safetensors" --format json
check "verify with the kit's own grads passes, json" test "$rc" -eq 0
check "  and the json says PASS" says ver-grads.out '"verdict": "PASS"'

# Planted bugs fail, naming the first failing step and tensor.
fail_case() {  # fail_case NAME KIT STEP STRATEGY FLAGS...
  local name=$1 kit=$2 step=$3
  shift 3
  run "res-$name" "${MPI[@]}" "$PLANTED" golden results --strategy "$@" "$kit" "out-$name"
  check "results $name (planted) exits 0" test "$rc" -eq 0
  run "ver-$name" "$BIN" golden verify "$kit" --losses "out-$name/losses.csv" --params "out-$name/params.safetensors"
  check "verify $name fails (exit 1)" test "$rc" -eq 1
  check "  naming first failing step $step" says "ver-$name.out" "FAIL: first failing step $step"
  check "  and the first failing tensor" says "ver-$name.out" "; first failing tensor "
}
fail_case ddp-sum "$GPT" 1 ddp-sum --dp 2  # step 0 is right; its doubled update shows from step 1
fail_case tp-no-row-reduce "$GPT" 0 tp-no-row-reduce --tp 2
fail_case pp-drop-last "$MLP" 0 pp-1f1b-drop-last --pp 2
fail_case zero1-shift "$MLP" 0 zero1-shard-shift --dp 2
fail_case skip-bucket "$GPT" 1 ddp-skip-bucket --dp 2
fail_case zero2-shift "$GPT" 1 zero2-shard-shift --dp 2
fail_case vocab-overlap "$GPT" 0 tp-vocab-overlap --tp 2

# Bad input: exit 2, a message naming the file (and tensor), nothing written.
bad() {  # bad NAME EXPECTED_TEXT CMD...
  local name=$1 text=$2
  shift 2
  run "bad-$name" "$@"
  check "$name exits 2" test "$rc" -eq 2
  check "  and says '$text'" says "bad-$name.err" "$text"
  check "  and prints nothing on stdout" test ! -s "bad-$name.out"
}
cp -r "$MLP" kit-missing && rm kit-missing/grads.safetensors
bad kit-missing-file "kit-missing/grads.safetensors: listed in the manifest but missing" \
  "$BIN" golden verify kit-missing --losses out-mlp-ddp/losses.csv
cp -r "$MLP" kit-altered && printf '\x01' | dd of=kit-altered/params.safetensors bs=1 seek=4000 conv=notrunc status=none
bad kit-altered-file "kit-altered/params.safetensors: sha256 differs" \
  "$BIN" golden verify kit-altered --losses out-mlp-ddp/losses.csv
head -n 4 out-mlp-ddp/losses.csv >short.csv
bad too-few-steps "short.csv: 3 steps, the kit has 4" "$BIN" golden verify "$MLP" --losses short.csv
sed 's/layers\.1\.weight/layers.1.wEight/' out-mlp-ddp/params.safetensors >misnamed.safetensors
bad misnamed-tensor "misnamed.safetensors: tensor 'step.0.layers.1.wEight' is not a kit name" \
  "$BIN" golden verify "$MLP" --losses out-mlp-ddp/losses.csv --params misnamed.safetensors
sed 's/"shape":\[32,64\]/"shape":[64,32]/' out-mlp-ddp/params.safetensors >shape.safetensors
bad shape-mismatch "shape.safetensors: tensor 'step.0.layers.0.weight' has shape [64, 32], the kit's layers.0.weight is [32, 64]" \
  "$BIN" golden verify "$MLP" --losses out-mlp-ddp/losses.csv --params shape.safetensors
head -c 100 out-mlp-ddp/params.safetensors >truncated.safetensors
bad truncated-results "truncated.safetensors: header length" \
  "$BIN" golden verify "$MLP" --losses out-mlp-ddp/losses.csv --params truncated.safetensors
bad results-bad-kit "kit-altered/params.safetensors: sha256 differs" \
  "${MPI[@]}" "$BIN" golden results --strategy ddp --dp 2 kit-altered out-never
check "  and results wrote nothing" test ! -e out-never
bad results-bad-layout "dp" "${MPI[@]}" "$BIN" golden results --strategy ddp --dp 3 "$MLP" out-never
check "  and results wrote nothing" test ! -e out-never

echo "golden_cli_test: $failures failure(s)"
[ "$failures" -eq 0 ]
