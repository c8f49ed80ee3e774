"""Runs every variant of the PyTorch example against the golden kits and asserts the
verdicts: the correct implementations PASS the kit's rule (float64 exact, float32 error
ratio), the planted bugs FAIL naming the expected first step and tensor. Writes
OUT/summary.json and OUT/summary.md (the figures of the README section).

  python3 run_all.py [--kits DIR] [--out DIR]

DIR holds mlp-tiny/ and gpt-tiny/ (default: $PTSUITE_GOLDEN_DIR, else results/golden of
this checkout). With PTSUITE_BIN set, an AdamW kit is exported and trained too.
"""
import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import numpy as np

import ptsuite_golden as pg
from train import run

REPO = pathlib.Path(__file__).resolve().parents[2]

# (kit, variant, dtype, init, bug, expected): expected is "PASS" or (step, tensor, file) of
# the first failure the report must name.
CASES = [
    ("mlp-tiny", "single", "float64", "kit", "none", "PASS"),
    ("mlp-tiny", "single", "float64", "regen", "none", "PASS"),
    ("mlp-tiny", "single", "float32", "kit", "none", "PASS"),
    ("mlp-tiny", "ddp", "float64", "kit", "none", "PASS"),
    ("mlp-tiny", "ddp", "float32", "kit", "none", "PASS"),
    ("mlp-tiny", "tp2", "float64", "kit", "none", "PASS"),
    ("mlp-tiny", "tp2", "float32", "kit", "none", "PASS"),
    ("gpt-tiny", "single", "float64", "kit", "none", "PASS"),
    ("gpt-tiny", "single", "float64", "regen", "none", "PASS"),
    ("gpt-tiny", "single", "float32", "kit", "none", "PASS"),
    ("gpt-tiny", "ddp", "float64", "kit", "none", "PASS"),
    ("gpt-tiny", "ddp", "float32", "kit", "none", "PASS"),
    # (a) DDP gradients summed, not averaged: step 0's loss is right (it comes before any
    # update), its gradients are twice the golden ones: the first tensor in canonical order.
    ("mlp-tiny", "ddp", "float64", "kit", "ddp-sum", (0, "layers.0.weight", "grads")),
    ("gpt-tiny", "ddp", "float64", "kit", "ddp-sum", (0, "wte", "grads")),
    # (b) the column-parallel shard 1 of layer 0 starts one column early: the forward is
    # wrong from step 0, and the first tensor whose gradient is off is layers.0.weight.
    ("mlp-tiny", "tp2", "float64", "kit", "tp-offset", (0, "layers.0.weight", "grads")),
]
# The committed kits' export flags (harness/golden_cli_test.sh), used when DIR lacks them.
KIT_EXPORTS = {"mlp-tiny": ["--workload", "mlp-tiny"],
               "gpt-tiny": ["--workload", "gpt-tiny", "--global-batch", "8", "--every", "4"]}
ADAMW_EXPORT = ["--workload", "mlp-tiny", "--steps", "3", "--optimizer", "adamw", "--lr", "0.01",
                "--weight-decay", "0.1"]
ADAMW_CASES = [
    ("mlp-tiny-adamw", "single", "float64", "kit", "none", "PASS"),
    ("mlp-tiny-adamw", "ddp", "float64", "kit", "none", "PASS"),
    ("mlp-tiny-adamw", "single", "float32", "kit", "none", "PASS"),
]


def check(report, expected):
    """'' when the report is what the case expects, else why not."""
    if expected == "PASS":
        return "" if report.passed else f"expected PASS, got {report.summary}"
    step, tensor, file = expected
    t = report.first_failing_tensor
    got = (report.first_failing_step, t and t.name, t and t.file)
    return "" if got == (step, tensor, file) else f"expected FAIL at step {step} naming {tensor} ({file}), got {report.summary}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kits", default=os.environ.get("PTSUITE_GOLDEN_DIR", str(REPO / "results" / "golden")))
    ap.add_argument("--out", default=None, help="results directory (default: a temporary one)")
    a = ap.parse_args()
    out = pathlib.Path(a.out or tempfile.mkdtemp(prefix="ptsuite-pytorch-"))
    binary = os.environ.get("PTSUITE_BIN")

    def export(flags, where):
        if not where.exists():
            subprocess.run([binary, "golden", "export", *flags, str(where)], check=True,
                           env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
        return where

    kits = {}
    for name, flags in KIT_EXPORTS.items():
        kits[name] = pathlib.Path(a.kits) / name
        if not (kits[name] / "manifest.json").is_file():
            if not binary:
                print(f"run_all: no kit {kits[name]}; pass --kits DIR or set PTSUITE_BIN to export it", file=sys.stderr)
                return 2
            kits[name] = export(flags, out / f"kit-{name}")
    cases = list(CASES)
    if binary:
        kits["mlp-tiny-adamw"] = export(ADAMW_EXPORT, out / "kit-mlp-tiny-adamw")
        cases += ADAMW_CASES
    t_all = time.time()
    rows, failures = [], 0
    for kit, variant, dtype, init, bug, expected in cases:
        name = f"{kit}-{variant}-{dtype}" + ("-regen" if init == "regen" else "") + ("" if bug == "none" else f"-bug-{bug}")
        try:
            report = run(str(kits[kit]), str(out / name), variant, dtype, init, bug)
        except TimeoutError as e:  # a hung gloo rendezvous is the machine's, not a verdict: once more
            print(f"    {name}: {e}; running it again", flush=True)
            report = run(str(kits[kit]), str(out / (name + "-again")), variant, dtype, init, bug)
        why = check(report, expected)
        failures += bool(why)
        whole = max((r.value for r in report.whole), default=float("nan"))
        rows.append({"case": name, "verdict": "PASS" if report.passed else "FAIL",
                     "rule": report.rule.name, "max_loss": report.max_loss_value, "max_whole": whole,
                     "loss_per_step": [r.value for r in report.losses],
                     "first_failure": None if report.passed else report.summary,
                     "seconds": round(report.seconds, 2), "as_expected": not why})
        print(f"{'ok ' if not why else 'BAD'} {name:<40} {rows[-1]['verdict']} max loss {report.rule.name} "
              f"{report.max_loss_value:.3e}, max whole-vector {whole:.3e}, {report.seconds:.1f} s"
              + (f"\n    {report.summary}" if not report.passed else "") + (f"\n    {why}" if why else ""), flush=True)
    # Regeneration equals the kit's files, so the two float64 runs of a kit agree bitwise.
    for kit in ("mlp-tiny", "gpt-tiny"):
        a_, b_ = (np.loadtxt(out / f"{kit}-single-float64{s}" / "losses.csv", delimiter=",", skiprows=1)
                  for s in ("", "-regen"))
        same = np.array_equal(a_, b_)
        failures += not same
        print(f"{'ok ' if same else 'BAD'} {kit}: losses from the kit's init and from regeneration are bitwise equal")
    total = time.time() - t_all
    (out / "summary.json").write_text(json.dumps({"cases": rows, "seconds": total}, indent=1))
    lines = ["| case | verdict | max loss rel_err / err_ratio | max whole-vector | s |", "|---|---|---|---|---|"]
    lines += [f"| {r['case']} | {r['verdict']} | {r['max_loss']:.2e} | {r['max_whole']:.2e} | {r['seconds']} |"
              for r in rows]
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    print(f"run_all: {sum(r['as_expected'] for r in rows)} of {len(rows)} cases as expected, "
          f"{total:.0f} s; results in {out}")
    print("run_all: " + ("PASS" if failures == 0 else f"FAIL ({failures} unexpected)"))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
