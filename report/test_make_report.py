"""Tests of report/make_report.py.

The main test runs the real quick suite with the ptsuite binary (from
$PTSUITE_BIN, else <repo>/build/ptsuite) under mpirun and checks the report
built from its output. It is skipped when the binary is missing, unless
PTSUITE_REQUIRE_BIN is set, in which case a missing binary fails the test.
The other tests need no binary: they check the error exits and reports of
small hand-written runs (with and without the optional columns).
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
EXPECTED_PNGS = ["loss.png", "throughput.png", "exposed.png", "comm.png", "memory.png", "layouts.png",
                 "bubble.png"]
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


def check_pngs(report_dir, page):
    """Every expected PNG is written, valid and referenced; every <img> exists."""
    for png in report_dir.glob("*.png"):
        width, height = png_size(png)
        assert width > 0 and height > 0, f"{png} has size {width}x{height}"
    for name in EXPECTED_PNGS:
        assert (report_dir / name).is_file(), f"{name} was not written"
        assert name in page.images, f"index.html has no <img src=\"{name}\">"
    for src in page.images:
        assert (report_dir / src).is_file(), f"<img src=\"{src}\"> points to a missing file"


def write_run(run_dir, cases, comm, with_optional):
    """A small run directory; cases and comm are lists of row dicts (cases.csv
    rows may carry strategy, comm_wait_s, comm_exposed_frac; comm.csv rows
    model_s), whose optional keys are written only when with_optional is set."""
    def write(name, header, rows):
        with open(run_dir / name, "w", newline="") as f:
            writer = csv.DictWriter(f, header, extrasaction="ignore")
            writer.writeheader()
            writer.writerows(rows)
    case_cols = ["case", "verdict", "step_time_s", "step_time_p90_s", "samples_per_s",
                 "comm_bytes_per_step", "comm_bytes_expected", "peak_mem_bytes"]
    comm_cols = ["case", "axis", "op", "calls", "payload_bytes", "bus_bytes", "wait_s"]
    if with_optional:
        case_cols += ["strategy", "comm_wait_s", "comm_exposed_frac", "tokens_per_s", "dp", "tp", "pp"]
        comm_cols += ["model_s"]
        # Two stages of a pipelined case and one of an unpipelined one (theory 0: not plotted).
        write("stages.csv", ["case", "stage", "bubble_frac", "bubble_theory"],
              [{"case": "a", "stage": 0, "bubble_frac": "0.31", "bubble_theory": "0.2"},
               {"case": "a", "stage": 1, "bubble_frac": "0.24", "bubble_theory": "0.2"},
               {"case": "b", "stage": 0, "bubble_frac": "0.01", "bubble_theory": "0"}])
    write("cases.csv", case_cols, cases)
    write("comm.csv", comm_cols, comm)
    write("steps.csv", ["case", "step", "loss", "oracle_loss"],
          [{"case": c["case"], "step": s, "loss": 1.0 / (s + 1), "oracle_loss": ""}
           for c in cases for s in range(3)])
    write("memory.csv", ["case", "rank", "category", "peak_bytes"],
          [{"case": c["case"], "rank": r, "category": cat, "peak_bytes": 1000 * (r + 1)}
           for c in cases for r in range(2) for cat in ("param", "grad", "comm")])


SMALL_CASES = [
    # comm_wait_s beyond step_time_s (capped in the bar), unknown wait, no comm, empty step time.
    {"case": "a", "strategy": "pp-1f1b", "verdict": "PASS", "step_time_s": "0.002", "step_time_p90_s": "0.003",
     "samples_per_s": "100", "comm_bytes_per_step": "4096", "comm_bytes_expected": "4096",
     "peak_mem_bytes": "3000000", "tokens_per_s": "1600", "dp": "1", "tp": "1", "pp": "2",
     "comm_wait_s": "0.003", "comm_exposed_frac": "1.5"},
    {"case": "b", "strategy": "fsdp", "verdict": "FAIL", "step_time_s": "0.001", "step_time_p90_s": "",
     "samples_per_s": "", "comm_bytes_per_step": "8192", "comm_bytes_expected": "",
     "comm_wait_s": "", "comm_exposed_frac": ""},
    {"case": "c", "strategy": "", "verdict": "SKIP", "step_time_s": "0.004", "step_time_p90_s": "0.004",
     "samples_per_s": "8", "comm_bytes_per_step": "0", "comm_bytes_expected": "0",
     "comm_wait_s": "0", "comm_exposed_frac": "0"},
    {"case": "d", "strategy": "zero1", "verdict": "FAIL", "step_time_s": "", "step_time_p90_s": "",
     "samples_per_s": "", "comm_bytes_per_step": "", "comm_bytes_expected": "",
     "comm_wait_s": "", "comm_exposed_frac": ""},
]
SMALL_COMM = [{"case": "a", "axis": "dp", "op": "all_reduce", "calls": "1", "payload_bytes": "4096",
               "bus_bytes": "4096", "wait_s": "0.003", "model_s": "0.0025"}]


@pytest.mark.parametrize("with_optional", [True, False], ids=["new-run", "older-run"])
def test_small_run_report(tmp_path, with_optional):
    write_run(tmp_path, SMALL_CASES, SMALL_COMM, with_optional)
    proc = run_make_report(tmp_path)
    assert proc.returncode == 0, f"make_report failed\nstdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    text = (tmp_path / "report" / "index.html").read_text(encoding="utf-8")
    page = ReportPage()
    page.feed(text)
    check_pngs(tmp_path / "report", page)
    assert page.summary_cases == ["a", "b", "c", "d"]
    assert ("<th>model_s</th>" in text) == with_optional
    assert ("Not in cases.csv (older run): comm_wait_s, comm_exposed_frac." in text) != with_optional
    assert ("Not in comm.csv (older run): model_s." in text) != with_optional
    assert ("stages.csv is not in this run (older run)." in text) != with_optional


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

    check_pngs(quick_report, page)

    with open(quick_run / "cases.csv", newline="") as f:
        cases = [row["case"] for row in csv.DictReader(f)]
    assert cases, "cases.csv of the quick suite has no rows"
    missing = sorted(set(cases) - set(page.summary_cases))
    assert not missing, f"cases missing from the summary table: {missing}"
    assert re.search(r'<td class="(PASS|FAIL|SKIP)">', index.read_text()), "no coloured verdict cell"
    with open(quick_run / "comm.csv", newline="") as f:
        has_model = "model_s" in next(csv.reader(f))
    assert ("<th>model_s</th>" in index.read_text()) == has_model, "model_s column of comm.csv not shown"


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
