"""Kits for the tests: the committed ones under <repo>/results/golden (or the directory in
PTSUITE_GOLDEN_DIR), and, when PTSUITE_BIN names a ptsuite binary, kits exported by it in
the test session (mlp with adamw, so the optimizer conventions are exercised twice)."""
import os
import pathlib
import subprocess

import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
try:
    import ptsuite_golden  # noqa: F401  (the installed package, as a user has it)
except ImportError:  # a checkout without `pip install ./python`: the source next to the tests
    sys.path.insert(0, str(REPO / "python"))


def ptsuite_bin():
    b = os.environ.get("PTSUITE_BIN", "")
    return b if b and os.access(b, os.X_OK) else None


def committed_kits():
    root = pathlib.Path(os.environ.get("PTSUITE_GOLDEN_DIR", REPO / "results" / "golden"))
    return sorted(p for p in root.glob("*") if (p / "manifest.json").is_file()) if root.is_dir() else []


# (name, export flags) of the kits the binary exports for the tests.
EXPORTS = [
    ("mlp-tiny-sgd", ["--workload", "mlp-tiny", "--steps", "3"]),
    ("mlp-tiny-adamw", ["--workload", "mlp-tiny", "--steps", "3", "--optimizer", "adamw", "--lr", "0.01",
                        "--weight-decay", "0.1", "--seed", "77"]),
    ("gpt-tiny", ["--workload", "gpt-tiny", "--steps", "3", "--global-batch", "4", "--every", "2", "--seed", "5"]),
]


@pytest.fixture(scope="session")
def exported_kits(tmp_path_factory):
    b = ptsuite_bin()
    if not b:
        return []
    root = tmp_path_factory.mktemp("kits")
    out = []
    for name, flags in EXPORTS:
        d = root / name
        subprocess.run([b, "golden", "export", *flags, str(d)], check=True, capture_output=True,
                       env={**os.environ, "OPENBLAS_NUM_THREADS": "1"})
        out.append(d)
    return out


@pytest.fixture(scope="session")
def kits(exported_kits):
    ks = committed_kits() + list(exported_kits)
    if not ks:
        pytest.skip("no kit: run from a checkout with results/golden, or set PTSUITE_GOLDEN_DIR or PTSUITE_BIN")
    return ks
