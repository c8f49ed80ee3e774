"""Tests of the bench sweep in the report (ptsreport/bench.py) on testdata/collective-bench,
a real `ptsuite bench` directory (bench.csv and env.json): the page make_report.py writes for
it, the busbw figure's panels, axes and values, #wrong marked, the figure in a run
directory's report, the error for a bench.csv without a required column, and the columns
against results/SCHEMA.md."""

import shutil

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from conftest import built, run_make_report
from ptsreport import schema
from ptsreport.bench import FIGURE, load_bench, plot_bench_busbw
from test_load import schema_md_units
from testruns import TESTDATA, Page, copy_run, figure_texts

BENCH = TESTDATA / "collective-bench"
OPS = ["all_reduce", "reduce_scatter", "all_gather", "all_to_all", "broadcast", "send_recv"]
IN_PLACE = {"all_reduce", "all_gather", "broadcast"}


def bench_copy(tmp_path, change=None):
    """A copy of testdata/collective-bench; change(frame) edits its bench.csv."""
    run_dir = tmp_path / "collective-bench"
    shutil.copytree(BENCH, run_dir)
    if change is not None:
        df = pd.read_csv(run_dir / "bench.csv", dtype=str, keep_default_na=False)
        df = change(df)
        df.to_csv(run_dir / "bench.csv", index=False)
    return run_dir


def test_bench_only_directory_gets_its_page(tmp_path):
    run_dir = built(bench_copy(tmp_path))
    page = Page((run_dir / "report" / "index.html").read_text(encoding="utf-8"))
    assert page.images == [FIGURE]
    assert "bench-peaks" in page.ids and "env" in page.ids
    assert (run_dir / "report" / FIGURE).read_bytes()[:4] == b"\x89PNG"
    text = (run_dir / "report" / "index.html").read_text(encoding="utf-8")
    for op in OPS:
        assert f"<td>{op}</td>" in text
    assert "row(s) with #wrong" not in text  # every result of the committed run was right


def test_one_panel_per_op_log2_sizes_solid_and_dashed():
    bench = load_bench(BENCH)
    fig = plot_bench_busbw(bench, {})
    axes = [ax for ax in fig.axes if ax.axison]
    assert [ax.get_title() for ax in axes] == OPS
    for ax in axes:
        op = ax.get_title()
        rows = bench[bench["op"] == op].sort_values("size")
        assert ax.get_xscale() == "log" and ax.xaxis.get_transform().base == 2
        assert ax.get_xlabel() == "size (bytes, log2)" and ax.get_ylabel() == "busbw (GB/s)"
        lines = ax.get_lines()
        solid = [line for line in lines if line.get_linestyle() == "-"]
        dashed = [line for line in lines if line.get_linestyle() == "--"]
        assert len(solid) == 1
        np.testing.assert_array_equal(solid[0].get_xdata(), rows["size"])
        np.testing.assert_array_equal(solid[0].get_ydata(), rows["busbw"])
        if op in IN_PLACE:
            assert len(dashed) == 1
            np.testing.assert_array_equal(dashed[0].get_ydata(), rows["ip_busbw"])
        else:
            assert dashed == [] and rows["ip_busbw"].isna().all()
    plt.close(fig)


def test_wrong_results_and_oversubscription_are_shown(tmp_path):
    def plant(df):
        df.loc[(df["op"] == "all_gather") & (df["size"] == "1024"), "wrong"] = "3"
        return df
    run_dir = bench_copy(tmp_path, plant)
    bench = load_bench(run_dir)
    fig = plot_bench_busbw(bench, {"oversubscribed": True, "ranks_per_node": 4, "cores": 2})
    gather = next(ax for ax in fig.axes if ax.get_title() == "all_gather")
    marks = [line for line in gather.get_lines() if line.get_marker() == "x"]
    assert len(marks) == 1 and list(marks[0].get_xdata()) == [1024]
    assert gather.title.get_color() == "#b00020"
    assert any("OVERSUBSCRIBED" in t for t in figure_texts(fig))
    built(run_dir)
    assert "all_gather at 1024 B" in (run_dir / "report" / "index.html").read_text(encoding="utf-8")


def test_run_directory_with_a_sweep_shows_it(tmp_path):
    run_dir = copy_run("quick", tmp_path)
    shutil.copy(BENCH / "bench.csv", run_dir / "bench.csv")
    built(run_dir)
    page = Page((run_dir / "report" / "index.html").read_text(encoding="utf-8"))
    assert FIGURE in page.images and "bench" in page.ids
    assert page.ids.index("bench") < page.ids.index("details")
    assert (run_dir / "report" / FIGURE).is_file()


def test_missing_required_column_exits_2(tmp_path):
    run_dir = bench_copy(tmp_path, lambda df: df.drop(columns=["busbw"]))
    proc = run_make_report(run_dir)
    assert proc.returncode == 2
    assert "bench.csv: missing column(s) busbw" in proc.stderr
    assert not (run_dir / "report" / "index.html").exists()


def test_columns_match_schema_md():
    documented = schema_md_units()[schema.BENCH_FILE]
    header = pd.read_csv(BENCH / "bench.csv", nrows=0).columns.tolist()
    assert header == list(documented), "testdata/collective-bench is not in the current schema"
    for column in schema.BENCH:
        assert documented.get(column.name) == column.unit, column.name
