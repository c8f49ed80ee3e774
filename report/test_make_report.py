"""End-to-end tests of report/make_report.py: the files it writes for the real runs
in testdata/, the page's order (first screen, figures, details last), the error
exits, and the report of a fresh quick suite run with the ptsuite binary (from
$PTSUITE_BIN, else <repo>/build/ptsuite; skipped without it unless
PTSUITE_REQUIRE_BIN is set, which makes a missing binary fail)."""

import csv
import os
import re
import shutil
import struct
import subprocess
from pathlib import Path

import pytest

from conftest import REPORT, built, run_make_report
from ptsreport.plots import FIGURES
from ptsreport.plots.pipeline import plot_bubble
from testruns import Page, copy_run, figure_texts, load, pages

REPO = REPORT.parent
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SUITE_TIMEOUT_S = 600


def png_size(path):
    """(width, height) from the IHDR chunk; fails the test if not a PNG."""
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE, f"{path} does not start with the PNG signature"
    assert data[12:16] == b"IHDR", f"{path} has no IHDR chunk first"
    return struct.unpack(">II", data[16:24])


def check_report(run_dir):
    """Every figure written, valid and shown; the page in its order; summary.md there."""
    out = run_dir / "report"
    text = (out / "index.html").read_text(encoding="utf-8")
    page = Page(text)
    for spec in FIGURES:
        width, height = png_size(out / spec.file)
        assert width > 100 and height > 50, f"{spec.file} is {width}x{height}"
        assert spec.file in page.images, f'index.html has no <img src="{spec.file}">'
    assert sorted(page.images) == sorted(s.file for s in FIGURES)
    # First the verdicts and the per-workload tables, then the figures, the wide tables last.
    order = [page.ids.index(i) for i in ("verdicts", "choose", "correctness", "details", "cases")]
    assert order == sorted(order), f"page order: {page.ids}"
    assert re.search(r'<details><summary>All \d+ cases, \d+ columns of cases.csv</summary>'
                     r'<div class="scroll"><table id="cases">', text), "wide table not collapsed and contained"
    assert (out / "summary.md").is_file()
    return text, page


def case_names(run_dir):
    with open(run_dir / "cases.csv", newline="") as f:
        return [row["case"] for row in csv.DictReader(f)]


@pytest.mark.parametrize("fixture", ["quick_built", "bench_built", "convergence_built"])
def test_report_of_real_run(fixture, request):
    run_dir = request.getfixturevalue(fixture)
    text, page = check_report(run_dir)
    names = case_names(run_dir)
    cases_table = text[text.index('<table id="cases">'):]
    missing = [c for c in names if f"<td>{c}</td>" not in cases_table]
    assert not missing, f"cases missing from the details table: {missing}"
    assert f"{len(names)} cases: {len(names)} PASS, 0 FAIL, 0 SKIP" in text


def test_missing_cases_csv(tmp_path):
    proc = run_make_report(tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "cases.csv" in proc.stderr and "file not found" in proc.stderr


def test_cases_csv_without_verdict(tmp_path):
    (tmp_path / "cases.csv").write_text(
        "case,workload,step_time_s,samples_per_s,peak_mem_bytes,comm_bytes_per_step\n"
        "a,mlp-tiny,0.1,10,100,0\n")
    proc = run_make_report(tmp_path)
    assert proc.returncode == 2, proc.stderr
    assert "cases.csv" in proc.stderr and "verdict" in proc.stderr


def test_comm_csv_without_wait_s(tmp_path):
    run_dir = copy_run("bench-mp", tmp_path)
    lines = (run_dir / "comm.csv").read_text().splitlines()
    column = lines[0].split(",").index("wait_s")
    (run_dir / "comm.csv").write_text(
        "\n".join(",".join(f for i, f in enumerate(line.split(",")) if i != column) for line in lines) + "\n")
    proc = run_make_report(run_dir)
    assert proc.returncode == 2, proc.stderr
    assert "comm.csv: missing column(s) wait_s (needed for bus bandwidth)" in proc.stderr


def test_older_run_without_stages_csv(tmp_path):
    """stages.csv is optional: the page says it is missing, the bubble plot is empty."""
    run_dir = copy_run("bench-mp", tmp_path)
    (run_dir / "stages.csv").unlink()
    text, _ = pages(run_dir)
    assert re.search(r"Not in this run \(older run\): [^<]*stages.csv \(whole file\)", text)
    run, _ = load(run_dir)
    assert figure_texts(plot_bubble(run)) == ["pipeline bubble: stages.csv is not in this run"]


def find_binary():
    env = os.environ.get("PTSUITE_BIN")
    path = Path(env) if env else REPO / "build" / "ptsuite"
    if path.is_file() and os.access(path, os.X_OK):
        return path
    message = f"ptsuite binary not found at {path} (set PTSUITE_BIN or build it)"
    if os.environ.get("PTSUITE_REQUIRE_BIN"):
        pytest.fail(message + "; PTSUITE_REQUIRE_BIN is set")
    pytest.skip(message)


def test_quick_suite_report(tmp_path):
    """The quick suite run now, on 4 ranks, and its report."""
    binary = find_binary()
    mpirun = shutil.which("mpirun")
    assert mpirun, "mpirun not found on PATH"
    run_dir = tmp_path / "run"
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
    text, page = check_report(built(run_dir))
    names = case_names(run_dir)
    assert names, "cases.csv of the quick suite has no rows"
    assert f"{len(names)} cases:" in text
    with open(run_dir / "cases.csv", newline="") as f:
        workloads = list(dict.fromkeys(row["workload"] for row in csv.DictReader(f)))
    assert list(page.headlines) == workloads
