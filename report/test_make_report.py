"""Tests of report/make_report.py.

The main test runs the real quick suite with the ptsuite binary (from
$PTSUITE_BIN, else <repo>/build/ptsuite) under mpirun and checks the report
built from its output. It is skipped when the binary is missing, unless
PTSUITE_REQUIRE_BIN is set, in which case a missing binary fails the test.
The other tests need no binary and check the error exits.
"""

import csv
import os
import re
import shutil
import struct
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
MAKE_REPORT = REPO / "report" / "make_report.py"
EXPECTED_PNGS = ["loss.png", "throughput.png", "comm.png", "memory.png"]
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SUITE_TIMEOUT_S = 600


def run_make_report(run_dir):
    return subprocess.run([sys.executable, str(MAKE_REPORT), str(run_dir)],
                          capture_output=True, text=True, timeout=300)


def png_size(path):
    """(width, height) from the IHDR chunk; fails the test if not a PNG."""
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, f"{path} does not start with the PNG signature"
    assert data[12:16] == b"IHDR", f"{path} has no IHDR chunk first"
    return struct.unpack(">II", data[16:24])


class ReportPage(HTMLParser):
    """Collects <img src> values and the first-column cells of the summary table."""

    def __init__(self):
        super().__init__()
        self.images, self.summary_cases = [], []
        self._in_summary = False
        self._column = -1
        self._cell = None

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "img":
            self.images.append(attrs.get("src"))
        elif tag == "table" and attrs.get("id") == "summary":
            self._in_summary = True
        elif self._in_summary and tag == "tr":
            self._column = -1
        elif self._in_summary and tag == "td":
            self._column += 1
            self._cell = "" if self._column == 0 else None

    def handle_endtag(self, tag):
        if tag == "table":
            self._in_summary = False
        elif tag == "td" and self._cell is not None:
            self.summary_cases.append(self._cell)
            self._cell = None

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data


def find_binary():
    env = os.environ.get("PTSUITE_BIN")
    path = Path(env) if env else REPO / "build" / "ptsuite"
    if path.is_file() and os.access(path, os.X_OK):
        return path
    message = f"ptsuite binary not found at {path} (set PTSUITE_BIN or build it)"
    if os.environ.get("PTSUITE_REQUIRE_BIN"):
        pytest.fail(message + "; PTSUITE_REQUIRE_BIN is set")
    pytest.skip(message)


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    """Run the quick suite once under mpirun; return its run directory."""
    binary = find_binary()
    mpirun = shutil.which("mpirun")
    assert mpirun, "mpirun not found on PATH"
    run_dir = tmp_path_factory.mktemp("quick") / "run"
    cmd = [mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "4",
           "-x", "OPENBLAS_NUM_THREADS=1", str(binary), "run",
           str(REPO / "suite" / "quick.toml"), "--out", str(run_dir)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=SUITE_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"quick suite timed out after {SUITE_TIMEOUT_S} s\n"
                    f"stdout:\n{exc.stdout}\nstderr:\n{exc.stderr}")
    assert proc.returncode == 0, (f"{' '.join(cmd)} exited {proc.returncode}\n"
                                  f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}")
    return run_dir


@pytest.fixture(scope="module")
def quick_report(quick_run):
    """Build the report of the quick run once; return its folder."""
    proc = run_make_report(quick_run)
    assert proc.returncode == 0, f"make_report failed\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    index = quick_run / "report" / "index.html"
    assert proc.stdout.strip().splitlines()[-1] == str(index)
    return quick_run / "report"


def test_quick_suite_report(quick_run, quick_report):
    index = quick_report / "index.html"
    assert index.is_file()
    page = ReportPage()
    page.feed(index.read_text(encoding="utf-8"))

    for png in quick_report.glob("*.png"):
        width, height = png_size(png)
        assert width > 0 and height > 0, f"{png} has size {width}x{height}"
    for name in EXPECTED_PNGS:
        assert (quick_report / name).is_file(), f"{name} was not written"
        assert name in page.images, f"index.html has no <img src=\"{name}\">"
    for src in page.images:
        assert (quick_report / src).is_file(), f"<img src=\"{src}\"> points to a missing file"

    with open(quick_run / "cases.csv", newline="") as f:
        cases = [row["case"] for row in csv.DictReader(f)]
    assert cases, "cases.csv of the quick suite has no rows"
    missing = sorted(set(cases) - set(page.summary_cases))
    assert not missing, f"cases missing from the summary table: {missing}"
    assert re.search(r'<td class="(PASS|FAIL|SKIP)">', index.read_text()), "no coloured verdict cell"


def test_missing_cases_csv(tmp_path):
    proc = run_make_report(tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "cases.csv" in proc.stderr


def test_cases_csv_without_verdict(tmp_path):
    (tmp_path / "cases.csv").write_text(
        "case,step_time_s,step_time_p90_s,samples_per_s,comm_bytes_per_step,comm_bytes_expected\n"
        "a,0.1,0.2,10,0,0\n")
    proc = run_make_report(tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "cases.csv" in proc.stderr and "verdict" in proc.stderr
