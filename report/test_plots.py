"""Tests of the figures, read from the matplotlib Figure each draw function returns:
one panel per workload and never two throughput units on one axis, units on the
axes, the check bounds and failing cases, the core-sharing caveat, and values."""

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest

from ptsreport.plots import FIGURES
from ptsreport.plots.comm import plot_bandwidth
from ptsreport.plots.correctness import plot_correctness
from ptsreport.plots.pipeline import closed_form_bubble, plot_bubble, plot_bubble_vs_m
from ptsreport.plots.speed import plot_scaling, plot_speed
from testruns import TESTDATA, copy_run, figure_texts, load

WORKLOADS = {"quick": {"mlp-tiny": "samples/s", "gpt-tiny": "tokens/s"}, "bench-mp": {"gpt-small": "tokens/s"},
             "convergence": {"mlp-tiny": "samples/s", "gpt-tiny": "tokens/s"}}
# Figures with a panel for every workload of a run (bubble: only pipelined ones;
# correctness: only where a check ran; scaling: only where a series exists).
EVERY_WORKLOAD = {"speed.png", "memory.png", "comm_per_sample.png", "tradeoff.png", "bandwidth.png",
                  "loss_step.png", "loss_time.png"}
CASE_LABELLED = {"correctness.png", "speed.png", "memory.png", "comm_per_sample.png", "bubble.png"}


@pytest.fixture(scope="module", params=["quick", "bench-mp", "convergence"])
def drawn(request, tmp_path_factory):
    """(run name, run, {file: figure}) with every figure drawn, not saved."""
    run, _ = load(TESTDATA / request.param)
    figures = {spec.file: spec.draw(run) for spec in FIGURES}
    yield request.param, run, figures
    for fig in figures.values():
        plt.close(fig)


def axes_text(ax) -> str:
    return " ".join([ax.get_title(loc="left"), ax.get_title(), ax.get_xlabel(), ax.get_ylabel()])


def panels(fig):
    """The axes that show data (not turned off, not a message placeholder)."""
    return [ax for ax in fig.axes if ax.axison and (ax.get_xlabel() or ax.get_ylabel())]


def test_grouped_by_workload(drawn):
    name, run, figures = drawn
    units = WORKLOADS[name]
    for file, fig in figures.items():
        titled = {}
        for ax in panels(fig):
            text = axes_text(ax)
            assert not ("samples/s" in text and "tokens/s" in text), f"{file}: {text!r} mixes units"
            owners = [w for w in units if ax.get_title(loc="left").startswith(f"{w}:")]
            assert len(owners) == 1, f"{file}: panel {ax.get_title(loc='left')!r} names no single workload"
            titled.setdefault(owners[0], []).append(ax)
            other = {"samples/s": "tokens/s", "tokens/s": "samples/s"}[units[owners[0]]]
            assert other not in text, f"{file}: {owners[0]} panel in {other}"
            if file in CASE_LABELLED:  # its case labels belong to its workload
                labels = {t.get_text().split(" (")[0] for t in ax.get_yticklabels() if t.get_text()}
                cases = set(run.cases.loc[run.cases["workload"] == owners[0], "case"])
                assert labels <= cases, f"{file}: {owners[0]} panel shows {labels - cases}"
        if file in EVERY_WORKLOAD:
            assert set(titled) == set(units), f"{file}: panels for {set(titled)}, run has {set(units)}"


def test_axes_carry_units(drawn):
    name, _, figures = drawn
    # Per figure, what every panel's labels must say (either of a pair).
    expected = {"speed.png": [("step time (ms)", "throughput (")], "memory.png": [("(MiB)",)],
                "comm_per_sample.png": [("/sample)",)], "bandwidth.png": [("(GB/s",), ("(bytes",)],
                "tradeoff.png": [("(MiB",), ("throughput (",)], "scaling.png": [("(×)",)],
                "bubble.png": [("(fraction",)], "bubble_vs_m.png": [("(fraction",), ("(count)",)],
                "correctness.png": [("(dimensionless, log scale)",)],
                "loss_step.png": [("(nats)",), ("optimizer step",)], "loss_time.png": [("(nats)",), ("(s)",)],
                "staleness.png": [("(steps",), ("(count)",)]}
    assert set(expected) == {spec.file for spec in FIGURES}
    for file, fig in figures.items():
        for ax in panels(fig):
            text = axes_text(ax)
            for units in expected[file]:
                assert any(u in text for u in units), f"{file}: {ax.get_title(loc='left')!r}: {text!r}"
            assert ax.get_xlabel(), f"{file}: {ax.get_title(loc='left')!r} has no x label"
    speed = figures["speed.png"]
    for workload, unit in WORKLOADS[name].items():
        [ax] = [a for a in speed.axes if a.get_title(loc="left") == f"{workload}: throughput ({unit})"]
        assert ax.get_xlabel() == f"throughput ({unit})"


def test_speed_values_in_ms_and_workload_unit():
    run, _ = load(TESTDATA / "quick")
    fig = plot_speed(run)
    cases = pd.read_csv(TESTDATA / "quick" / "cases.csv")
    for workload, column in (("mlp-tiny", "samples_per_s"), ("gpt-tiny", "tokens_per_s")):
        part = cases[cases["workload"] == workload]
        [ax_t] = [a for a in fig.axes if a.get_title(loc="left") == f"{workload}: step time"]
        [ax_r] = [a for a in fig.axes if a.get_title(loc="left").startswith(f"{workload}: throughput")]
        widths = [p.get_width() for p in ax_r.patches]
        np.testing.assert_allclose(widths, part[column], rtol=1e-12)
        # Step bars: exposed part plus the rest, together the median step time in ms.
        n = len(part)
        totals = np.add([p.get_width() for p in ax_t.patches[:n]], [p.get_width() for p in ax_t.patches[n:2 * n]])
        np.testing.assert_allclose(totals, part["step_time_s"] * 1e3, rtol=1e-12)
    plt.close(fig)


def test_correctness_bounds_and_failures(tmp_path):
    run_dir = copy_run("quick", tmp_path, failures={"zero2-dp2-float32": ("check_precision", "drift")})
    run, _ = load(run_dir)
    fig = plot_correctness(run)
    bounds = {"exact check (float64)": 1e-12, "precision check (float32)": 4.0}
    seen = set()
    for ax in panels(fig):
        workload, check = ax.get_title(loc="left").split(": ")
        verticals = [line.get_xdata()[0] for line in ax.lines
                     if len(line.get_xdata()) == 2 and line.get_xdata()[0] == line.get_xdata()[1]]
        assert verticals == [bounds[check]], f"{workload} {check}: bound lines at {verticals}"
        assert ax.get_xscale() == "log"
        red = [t.get_text() for t in ax.get_yticklabels() if t.get_color() == "#b00020"]
        assert red == (["zero2-dp2-float32"] if (workload, check) == ("mlp-tiny", "precision check (float32)")
                       else [])
        dtype = "float64" if check.startswith("exact") else "float32"
        expected = run.cases.loc[(run.cases["workload"] == workload) & (run.cases["dtype"] == dtype), "case"]
        assert [t.get_text() for t in ax.get_yticklabels()] == list(expected)
        seen.add((workload, check))
    assert len(seen) == 4
    plt.close(fig)


@pytest.mark.parametrize("state", ["yes", "no", "unknown"])
def test_bubble_caveat(tmp_path, state):
    env = {"yes": {"cores": 2, "ranks_per_node": 4, "oversubscribed": True},
           "no": {"cores": 8, "ranks_per_node": 4, "oversubscribed": False}, "unknown": {}}[state]
    run, _ = load(copy_run("quick", tmp_path, env=env))
    texts = " ".join(figure_texts(plot_bubble(run)))
    assert ("OVERSUBSCRIBED RUN" in texts) == (state == "yes")
    assert ("NOT meaningful: ranks shared cores" in texts) == (state == "yes")
    assert ("Core sharing unknown" in texts) == (state == "unknown")
    assert "theory (p-1)/(m+p-1)" in texts
    speed_texts = " ".join(figure_texts(plot_speed(run)))
    assert ("OVERSUBSCRIBED RUN" in speed_texts) == (state == "yes")


def test_scaling_starts_at_single():
    """bench-mp: tp has no tp=1 case, so its line starts at the single case."""
    run, _ = load(TESTDATA / "bench-mp")
    fig = plot_scaling(run)
    [ax] = [a for a in fig.axes if a.get_title(loc="left") == "gpt-small: scaling with tp"]
    [line] = [line for line in ax.lines if line.get_label() == "tp float32"]
    cases = pd.read_csv(TESTDATA / "bench-mp" / "cases.csv").set_index("case")["tokens_per_s"]
    np.testing.assert_array_equal(line.get_xdata(), [1, 2, 4])
    np.testing.assert_allclose(line.get_ydata(), [1, cases["tp-tp2"] / cases["single"],
                                                  cases["tp-tp4"] / cases["single"]])
    plt.close(fig)


def test_bandwidth_is_bus_bytes_over_wait():
    run, _ = load(TESTDATA / "bench-mp")
    fig = plot_bandwidth(run)
    comm = pd.read_csv(TESTDATA / "bench-mp" / "comm.csv")
    row = comm[(comm["case"] == "tp-tp2") & (comm["op"] == "all_reduce")].iloc[0]
    point = [row["payload_bytes"] / row["calls"], row["bus_bytes"] / row["wait_s"] / 1e9]
    offsets = np.concatenate([c.get_offsets() for ax in fig.axes for c in ax.collections])
    assert np.isclose(offsets, point, rtol=1e-9).all(axis=1).any()
    plt.close(fig)


def test_bubble_against_m_draws_the_closed_forms():
    """schedules (suite/bench-schedules.toml): at equal emulated F, B and W (gpt-deep) the
    closed forms drawn are the C++ tables' simulated bubbles exactly; dots and diamonds are
    the run's values."""
    run, _ = load(TESTDATA / "schedules")
    cases = pd.read_csv(TESTDATA / "schedules" / "cases.csv")
    stages = pd.read_csv(TESTDATA / "schedules" / "stages.csv")
    equal = cases[(cases["workload"] == "gpt-deep")]
    assert set(equal["schedule"]) == {"1f1b", "interleaved-1f1b", "zb-h1", "zbv"}
    for row in equal.itertuples():
        form = closed_form_bubble(row.schedule, row.pp, row.microbatches, int(row.virtual_stages))
        assert form == pytest.approx(row.bubble_theory, rel=1e-5), row.case
    # gpipe and 1f1b: (p-1)/(m+p-1) whatever F:B (gpt-tiny runs F 20 ms, B 40 ms).
    for row in cases[cases["workload"] == "gpt-tiny"].itertuples():
        assert closed_form_bubble(row.schedule, row.pp, row.microbatches) == pytest.approx(row.bubble_theory, rel=1e-5)
    assert closed_form_bubble("no-such", 2, 4) is None
    fig = plot_bubble_vs_m(run)
    titles = {ax.get_title(loc="left"): ax for ax in fig.axes if ax.axison}
    assert set(titles) == {"gpt-tiny: pp 2", "gpt-tiny: pp 4", "gpt-deep: pp 2", "gpt-deep: pp 4", "gpt-small: pp 2"}
    ax = titles["gpt-deep: pp 4"]
    [zbv] = [line for line in ax.lines if line.get_label() == "zbv: (p-1)/(6m+p-1)"]
    np.testing.assert_allclose(zbv.get_ydata()[[0, -1]], [3 / 27, 3 / 51])
    dots = np.concatenate([line.get_ydata() for line in ax.lines if line.get_marker() == "o"])
    part = stages[stages["case"].isin(cases.loc[(cases["workload"] == "gpt-deep") & (cases["pp"] == 4), "case"])]
    np.testing.assert_allclose(np.sort(dots), np.sort(part["bubble_frac"]))
    diamonds = [line.get_ydata()[0] for line in ax.lines if line.get_marker() == "D"]
    np.testing.assert_allclose(sorted(diamonds), sorted(part.groupby("case")["bubble_theory"].first()))
    plt.close(fig)
