"""Shared fixtures of the report tests: the full report (figures included) of each
real run in testdata/, built once per session through the command line."""

import subprocess
import sys
from pathlib import Path

import pytest

REPORT = Path(__file__).resolve().parent
sys.path.insert(0, str(REPORT))  # ptsreport, whatever pytest's import mode

from testruns import copy_run  # noqa: E402

MAKE_REPORT = REPORT / "make_report.py"


def run_make_report(run_dir):
    return subprocess.run([sys.executable, str(MAKE_REPORT), str(run_dir)],
                          capture_output=True, text=True, timeout=300)


def built(run_dir):
    proc = run_make_report(run_dir)
    assert proc.returncode == 0, f"make_report failed\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    index = run_dir / "report" / "index.html"
    assert proc.stdout.strip().splitlines()[-1] == str(index)
    return run_dir


@pytest.fixture(scope="session")
def quick_built(tmp_path_factory):
    """testdata/quick with its report written by make_report.py."""
    return built(copy_run("quick", tmp_path_factory.mktemp("quick")))


@pytest.fixture(scope="session")
def bench_built(tmp_path_factory):
    """testdata/bench-mp with its report written by make_report.py."""
    return built(copy_run("bench-mp", tmp_path_factory.mktemp("bench")))


@pytest.fixture(scope="session")
def convergence_built(tmp_path_factory):
    """testdata/convergence with its report written by make_report.py."""
    return built(copy_run("convergence", tmp_path_factory.mktemp("convergence")))
