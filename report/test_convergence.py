"""Tests of the convergence part of the report: the loss curves against step and wall
time (the values of steps.csv, the target_loss line and the star at the step that reached
it), the per-strategy table of bytes, exposed communication and time to target, and the
staleness histogram of a planted staleness.csv. testdata/convergence is a real run of
its suite.toml with target_loss set; testdata/quick predates wall_s and target_loss."""

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from conftest import run_make_report
from ptsreport.plots.convergence import plot_loss_per_step, plot_loss_per_time, plot_staleness
from testruns import TESTDATA, Page, copy_run, figure_texts, load, pages

CONVERGENCE = TESTDATA / "convergence"
STALENESS = {"ddp-dp2": {0: 10, 1: 30, 2: 8}, "gpt-tp2": {0: 4, 3: 1}}


def csv(name, file):
    return pd.read_csv(TESTDATA / name / file)


def curves(ax) -> dict:
    """{(x tuple, y tuple)} of the solid or dashed lines of a panel (the loss curves; the
    target is dotted)."""
    return {(tuple(line.get_xdata()), tuple(line.get_ydata())) for line in ax.lines
            if len(line.get_xdata()) > 1 and line.get_linestyle() in ("-", "--")}


def stars(ax) -> set:
    return {(float(line.get_xdata()[0]), float(line.get_ydata()[0])) for line in ax.lines
            if line.get_marker() == "*" and len(line.get_xdata()) == 1}


def horizontal_lines(ax) -> list:
    return sorted(float(line.get_ydata()[0]) for line in ax.lines
                  if len(line.get_ydata()) == 2 and line.get_ydata()[0] == line.get_ydata()[1]
                  and line.get_linestyle() == ":")


@pytest.mark.parametrize("draw, x", [(plot_loss_per_step, "step"), (plot_loss_per_time, "wall_s")])
def test_loss_curves_are_steps_csv(draw, x):
    """One curve per case, equal to its steps.csv losses against step or wall_s; the
    target_loss dotted; a star at the step steps_to_target counts to, none where the
    target was not reached."""
    run, _ = load(CONVERGENCE)
    fig = draw(run)
    steps, cases = csv("convergence", "steps.csv"), csv("convergence", "cases.csv")
    for workload in ("mlp-tiny", "gpt-tiny"):
        [ax] = [a for a in fig.axes if a.get_title(loc="left").startswith(f"{workload}: training loss")]
        mine = cases[cases["workload"] == workload]
        expected = {(tuple(s[x]), tuple(s["loss"])) for _, s in steps[steps["case"].isin(mine["case"])].groupby("case")}
        assert curves(ax) == expected
        assert horizontal_lines(ax) == sorted(set(mine["target_loss"]))
        reached = mine.dropna(subset=["steps_to_target"])
        want = set()
        for _, c in reached.iterrows():
            hit = steps[(steps["case"] == c["case"]) & (steps["step"] == c["steps_to_target"] - 1)].iloc[0]
            assert hit["loss"] <= c["target_loss"] < steps.loc[(steps["case"] == c["case"]) &
                                                               (steps["step"] < hit["step"]), "loss"].min()
            if x == "wall_s":
                assert hit["wall_s"] == c["time_to_target_s"]
            want.add((float(hit[x]), float(hit["loss"])))
        assert stars(ax) == want
    assert "ddp-low-lr" in set(cases.loc[cases["steps_to_target"].isna(), "case"])  # a case that never got there
    plt.close(fig)


def test_older_run_wall_time_is_the_running_sum_of_step_times():
    """testdata/quick has no wall_s: the curve against time uses the sum of step times,
    and no target is drawn (none was set)."""
    run, _ = load(TESTDATA / "quick")
    fig = plot_loss_per_time(run)
    steps = csv("quick", "steps.csv")
    assert "wall_s" not in steps.columns
    [ax] = [a for a in fig.axes if a.get_title(loc="left") == "mlp-tiny: training loss against wall time"]
    single = steps[steps["case"] == "single-float64-sgd"]
    line = [c for c in curves(ax) if c[1] == tuple(single["loss"])]
    assert line, "no curve of single-float64-sgd"
    np.testing.assert_allclose(line[0][0], single["step_time_s"].cumsum(), rtol=1e-12)
    assert horizontal_lines(ax) == [] and stars(ax) == set()
    assert "target_loss" not in figure_texts(fig)


def test_table_per_strategy(tmp_path):
    """Per workload, the cases grouped under their strategy, with comm bytes per step,
    exposed communication, steps and seconds to target as cases.csv has them; the
    soonest passing case starred; open because the suite set a target."""
    text, markdown = pages(copy_run("convergence", tmp_path))
    start = text.index('id="convergence-tables"')
    assert text[text.rindex("<details", 0, start):start].startswith("<details open")
    tables = Page(text[start:text.index("</details>", start)].replace('class="convergence"', 'class="headline"'))
    cases = csv("convergence", "cases.csv").set_index("case")
    assert list(tables.headlines) == ["mlp-tiny", "gpt-tiny"]
    for workload, table in tables.headlines.items():
        header = table["header"]
        assert header[0] == "case" and header[-2:] == ["steps to target", "s to target"]
        assert "exposed comm" in header and header[header.index("exposed comm") - 1].startswith("comm ")
        mine = cases[cases["workload"] == workload]
        grouped = [c for s in dict.fromkeys(mine["strategy"]) for c in mine.index[mine["strategy"] == s]]
        assert [cells[0][0] for _, cells in table["rows"]] == grouped
        for strategy, cells in table["rows"]:
            case = cells[0][0]
            row = dict(zip(header, (c[0] for c in cells)))
            assert strategy == cases.at[case, "strategy"]
            assert row["exposed comm"] == f"{100 * cases.at[case, 'comm_exposed_frac']:.0f}%"
            if pd.isna(cases.at[case, "steps_to_target"]):
                assert row["steps to target"] == row["s to target"] == "not reached"
            else:
                assert row["steps to target"] == f"{cases.at[case, 'steps_to_target']:.0f}"
                assert float(row["s to target"]) == pytest.approx(cases.at[case, "time_to_target_s"], rel=5e-3)
        best = [cells[0][0] for _, cells in table["rows"] if "best" in cells[-1][1]]
        assert best == [mine["time_to_target_s"].idxmin()]
    assert "### mlp-tiny: communication and time to target" in markdown
    assert "| ddp | ddp-low-lr | float32 |" in markdown and "not reached" in markdown


def test_no_target_keeps_the_table_collapsed_and_summary_short(tmp_path):
    text, markdown = pages(copy_run("quick", tmp_path))
    assert '<details id="convergence-tables"><summary>Communication and time to target per strategy ' \
           '(no target_loss set in this suite)' in text
    assert "time to target" not in markdown


def test_staleness_histogram(tmp_path):
    """staleness.csv: one panel per case, a bar per staleness with its count, in the
    case's workload; absent, the figure says so and the page does not list it as missing."""
    run, _ = load(copy_run("convergence", tmp_path, staleness=STALENESS))
    fig = plot_staleness(run)
    cases = csv("convergence", "cases.csv").set_index("case")
    titles = {}
    for ax in fig.axes:
        if not ax.axison:
            continue
        titles[ax.get_title(loc="left")] = {(round(p.get_x() + p.get_width() / 2), p.get_height()) for p in ax.patches}
    assert titles == {f"{cases.at[c, 'workload']}: {c}": set(h.items())
                      for c, h in STALENESS.items()}
    assert "48 gradients\nmean 0.96, max 2" in figure_texts(fig)
    bare, _ = load(copy_run("convergence", tmp_path / "bare"))
    assert figure_texts(plot_staleness(bare)) == [
        "staleness histogram: no asynchronous case in this run (no staleness.csv rows)"]
    text, _ = pages(tmp_path / "bare" / "convergence")
    assert "staleness.csv" not in text.split('id="details"')[1].split("<details")[0]


def test_staleness_csv_without_count(tmp_path):
    run_dir = copy_run("convergence", tmp_path, staleness=STALENESS)
    (run_dir / "staleness.csv").write_text("case,staleness\nddp-dp2,0\n")
    proc = run_make_report(run_dir)
    assert proc.returncode == 2, proc.stderr
    assert "staleness.csv: missing column(s) count (needed for the staleness histogram)" in proc.stderr


def test_async_columns_shown_when_the_run_has_them(tmp_path):
    """sync_every, staleness and max_staleness_seen (the asynchronous strategies' columns)
    appear after dtype, as written; empty for the cases that do not have them."""
    run_dir = copy_run("convergence", tmp_path)
    cases = pd.read_csv(run_dir / "cases.csv", dtype=str, keep_default_na=False)
    cases["sync_every"] = ["", "4", "", "", "", "", ""]
    cases["max_staleness_seen"] = ["", "", "2", "", "", "", ""]
    cases.to_csv(run_dir / "cases.csv", index=False)
    text, _ = pages(run_dir)
    start = text.index('id="convergence-tables"')
    tables = Page(text[start:text.index("</details>", start)].replace('class="convergence"', 'class="headline"'))
    table = tables.headlines["mlp-tiny"]
    assert table["header"][:4] == ["case", "dtype", "sync_every", "max_staleness_seen"]
    cells = {c[0][0]: (c[2][0], c[3][0]) for _, c in table["rows"]}
    assert cells["ddp-dp2"] == ("4", "") and cells["ddp-dp4"] == ("", "2") and cells["single"] == ("", "")
