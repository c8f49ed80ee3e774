"""Convergence: each case's training loss against the step and against wall time
(steps.csv), with the suite's target_loss and the step that first reached it; and the
staleness histogram of the asynchronous cases (staleness.csv). One panel per workload for
the curves (a line per case, coloured by strategy), one per case for the histograms.

Against the step, communication-reducing methods (local SGD, stale gradients) lose a
little per step; against wall time they may win it back: the second plot is the one that
decides."""

import matplotlib.pyplot as plt
import textwrap

import numpy as np

from ..load import Run
from .style import no_data, panel_grid, strategy_colors, strategy_legend, timing_caveat

DTYPE_LINE = {"float32": "-", "float64": "--"}
TARGET = dict(color="black", ls=":", lw=1.2)
REACHED = dict(marker="*", ms=11, markeredgecolor="black", markeredgewidth=0.5, ls="none")


def targets(cases) -> list:
    """The distinct target_loss values set on some of these cases, ascending."""
    return sorted(set(cases["target_loss"].dropna()))


def plot_loss(run: Run, x: str):
    """Training loss per case against x: "step" (optimizer steps) or "wall_s" (seconds
    since the case's first step began)."""
    steps = run.steps.dropna(subset=["loss", x])
    if steps.empty:
        why = "steps.csv is not in this run" if "steps.csv" in run.absent_files else "no step has a loss"
        return no_data(f"loss curves: {why}")
    workloads = [w for w in run.workloads if (steps["workload"] == w).any()]
    colors = strategy_colors(run)
    fig, axes = panel_grid(len(workloads), 5.0, 3.8, extra_width=2.2)
    cases = run.cases.set_index("case")
    for workload, ax in zip(workloads, axes):
        part = steps[steps["workload"] == workload]
        for case, curve in part.groupby("case", sort=False):
            curve = curve.sort_values("step")
            row = cases.loc[case] if case in cases.index else None
            color = colors.get(row["strategy"], "grey") if row is not None else "grey"
            dtype = row["dtype"] if row is not None else ""
            ax.plot(curve[x], curve["loss"], color=color, ls=DTYPE_LINE.get(dtype, "-"), lw=1, alpha=0.8)
            reached = row["steps_to_target"] if row is not None else np.nan
            if reached > 0:  # the step that first reached the target: index steps_to_target - 1
                hit = curve[curve["step"] == reached - 1]
                ax.plot(hit[x], hit["loss"], color=color, **REACHED)
        in_workload = run.cases[run.cases["workload"] == workload]
        for target in targets(in_workload):
            ax.axhline(target, **TARGET)
            ax.text(1.0, target, f"target {target:g} ", transform=ax.get_yaxis_transform(), ha="right",
                    va="bottom", fontsize=7)
        if x == "step":
            ax.set_xlabel("optimizer step (index from 0)", fontsize=8)
            ax.set_title(f"{workload}: training loss per step", fontsize=9, loc="left")
        else:
            ax.set_xlabel("wall time (s) since the first step began: sum of step times", fontsize=8)
            ax.set_title(f"{workload}: training loss against wall time", fontsize=9, loc="left")
            ax.set_xlim(left=0)
        ax.set_ylabel("training loss (nats)", fontsize=8)
        ax.grid(alpha=0.3)
    dtypes = [d for d in DTYPE_LINE if (run.cases["dtype"] == d).any()]
    extra = [plt.Line2D([], [], color="grey", ls=DTYPE_LINE[d], label=d) for d in dtypes]
    if targets(run.cases):
        extra += [plt.Line2D([], [], **TARGET, label="target_loss"),
                  plt.Line2D([], [], color="grey", **REACHED, label="first step at or below it")]
    strategy_legend(fig, colors, steps["strategy"].replace("", np.nan).dropna(), extra=extra,
                    loc="outside right upper")
    if x != "step":
        timing_caveat(fig, run)
    return fig


def plot_loss_per_step(run: Run):
    return plot_loss(run, "step")


def plot_loss_per_time(run: Run):
    return plot_loss(run, "wall_s")


def plot_staleness(run: Run):
    """Per asynchronous case: how many gradients were applied at each staleness."""
    rows = run.staleness.dropna(subset=["staleness", "count"])
    if rows.empty:
        return no_data("staleness histogram: no asynchronous case in this run (no staleness.csv rows)")
    colors = strategy_colors(run)
    cases = list(dict.fromkeys(rows["case"]))
    fig, axes = panel_grid(len(cases), 4.2, 3.0)
    for case, ax in zip(cases, axes):
        part = rows[rows["case"] == case].sort_values("staleness")
        strategy, workload = part["strategy"].iloc[0], part["workload"].iloc[0]
        ax.bar(part["staleness"], part["count"], width=0.8, color=colors.get(strategy, "grey"))
        total = part["count"].sum()
        mean = (part["staleness"] * part["count"]).sum() / total if total > 0 else np.nan
        ax.text(0.98, 0.95, f"{total:g} gradients\nmean {mean:.2f}, max {part['staleness'].max():g}",
                transform=ax.transAxes, ha="right", va="top", fontsize=7)
        # The case name already says the strategy; long names wrap instead of running into
        # the next panel.
        ax.set_title(textwrap.fill(f"{workload}: {case}", 44), fontsize=8, loc="left")
        ax.set_xlabel("staleness (steps between the parameters used and those updated)", fontsize=7)
        ax.set_ylabel("gradients applied (count)", fontsize=8)
        # One tick per staleness from 0 to the largest seen: a histogram of one bar keeps
        # whole-step ticks too.
        top = int(part["staleness"].max())
        ax.set_xticks(range(top + 1))
        ax.set_xlim(-0.6, top + 0.6)
        ax.grid(axis="y", alpha=0.3)
    return fig
