"""Pipeline: per pipelined case, the measured idle share of each stage against the
uniform-stage bubble (p-1)/(m+p-1); one panel per workload. On an oversubscribed
run the measurement is dominated by core sharing, and the plot says so in red.
And the bubble against the microbatches, per schedule, with each schedule's closed form."""

import numpy as np
import pandas as pd

from ..load import Run
from .style import case_axis, no_data, panel_grid, timing_caveat, workload_panels

# Chunks per rank a schedule runs when virtual_stages is 0 (strategies/schedules.cpp).
DEFAULT_CHUNKS = {"interleaved-1f1b": 2, "zbv": 2}
# Busy time per microbatch in units of one chunk's F (= B = W), so that the idle share of a
# step is (p-1) / (units m + p-1): gpipe and 1f1b idle p-1 of m + p-1 microbatch slots
# (any F:B ratio), interleaved v chunks shrink each slot v-fold, zb-h1 fills two thirds of
# 1f1b's idle time with deferred W passes, zbv (two chunks, B and W split) five sixths.
SCHEDULE_UNITS = {"gpipe": lambda v: 1, "1f1b": lambda v: 1, "interleaved-1f1b": lambda v: v,
                  "zb-h1": lambda v: 3, "zbv": lambda v: 6}
FORMULAS = {"gpipe": "(p-1)/(m+p-1)", "1f1b": "(p-1)/(m+p-1)", "interleaved-1f1b": "(p-1)/(vm+p-1)",
            "zb-h1": "(p-1)/(3m+p-1)", "zbv": "(p-1)/(6m+p-1)"}


def closed_form_bubble(schedule: str, p: int, m, v: int = 0):
    """The idle share of a step under `schedule` at F = B = W per chunk (README, "Pipeline
    schedules as tables"); None for a schedule without a closed form here."""
    if schedule not in SCHEDULE_UNITS:
        return None
    units = SCHEDULE_UNITS[schedule](v or DEFAULT_CHUNKS.get(schedule, 1))
    return (p - 1) / (units * np.asarray(m, dtype=float) + p - 1)


def plot_bubble(run: Run):
    stages = run.stages.dropna(subset=["bubble_theory"])
    stages = stages[stages["bubble_theory"] > 0]
    if stages.empty:
        why = "stages.csv is not in this run" if "stages.csv" in run.absent_files else "no pipelined case"
        return no_data(f"pipeline bubble: {why}")
    cases = run.cases[run.cases["case"].isin(stages["case"])]
    workloads = [w for w in run.workloads if (cases["workload"] == w).any()]
    groups = [cases[cases["workload"] == w] for w in workloads]
    fig, rows = workload_panels(workloads, [len(g) for g in groups], row_inch=0.3)
    measured_label = "measured, one dot per stage"
    if run.oversubscription.state == "yes":
        measured_label += " (NOT meaningful: ranks shared cores)"
    for workload, part, (ax,) in zip(workloads, groups, rows):
        theory = stages.groupby("case")["bubble_theory"].first()
        y = np.arange(len(part))
        ax.barh(y, theory.loc[part["case"]], color="#bbb", label="theory (p-1)/(m+p-1)")
        for yi, case in zip(y, part["case"]):
            measured = stages.loc[stages["case"] == case, "bubble_frac"]
            ax.plot(measured, [yi] * len(measured), "o", color="tab:red", ms=5, alpha=0.8,
                    label=measured_label if yi == 0 else None)
        labels = [f"{c} (pp {p:g}, m {m:g})" for c, p, m in zip(part["case"], part["pp"], part["microbatches"])]
        case_axis(ax, labels)
        ax.set_xlim(0, 1)
        ax.set_title(f"{workload}: pipeline bubble", fontsize=9, loc="left")
        ax.set_xlabel("idle share of the step (fraction of step time, 0-1)", fontsize=8)
        ax.grid(axis="x", alpha=0.3)
        ax.legend(fontsize=7, loc="lower right")
    if run.oversubscription.state == "unknown":
        fig.suptitle("Core sharing unknown (older run): if ranks shared cores, measured bubbles "
                     "measure the sharing", fontsize=9, color="#8a5a00")
    timing_caveat(fig, run, prominent=True)
    return fig


def plot_bubble_vs_m(run: Run):
    """One panel per (workload, pp): per schedule, each stage's measured idle share against
    m (dots), the table simulated at the case's costs (hollow diamonds: what check_schedule
    judges) and the schedule's closed form at F = B = W (line)."""
    stages = run.stages.dropna(subset=["bubble_theory"])
    stages = stages[stages["bubble_theory"] > 0]
    if stages.empty:
        why = "stages.csv is not in this run" if "stages.csv" in run.absent_files else "no pipelined case"
        return no_data(f"pipeline bubble against microbatches: {why}")
    cases = run.cases[run.cases["case"].isin(stages["case"])].copy()
    # virtual_stages: 0 (or absent, older runs) is the schedule's default.
    chunks = cases["virtual_stages"] if "virtual_stages" in cases else pd.Series(0, index=cases.index)
    cases["virtual_stages"] = pd.to_numeric(chunks, errors="coerce").fillna(0).astype(int)
    groups = list(cases.groupby(["workload", "pp"], sort=False))
    fig, axes = panel_grid(len(groups), 4.4, 3.3)
    measured_label = "measured, one dot per stage"
    if run.oversubscription.state == "yes":
        measured_label += " (NOT meaningful: ranks shared cores)"
    colors = dict(zip(FORMULAS, ["tab:gray", "tab:blue", "tab:orange", "tab:green", "tab:red"]))
    for ((workload, pp), part), ax in zip(groups, axes):
        p = int(pp)
        for (schedule, v), series in part.groupby(["schedule", "virtual_stages"], sort=False):
            color = colors.get(schedule, "tab:purple")
            series = series.sort_values("microbatches")
            ms = series["microbatches"].to_numpy(dtype=float)
            grid = np.linspace(ms.min(), ms.max(), 50) if len(ms) > 1 else ms
            form = closed_form_bubble(schedule, p, grid, v)
            name = schedule + (f" v{v}" if v else "")
            if form is not None:
                ax.plot(grid, form, "-", color=color, lw=1, label=f"{name}: {FORMULAS[schedule]}")
            for m, case in zip(ms, series["case"]):
                rows = stages[stages["case"] == case]
                ax.plot([m] * len(rows), rows["bubble_frac"], "o", color=color, ms=4, alpha=0.8,
                        label=measured_label if case == part["case"].iloc[0] else None)
                ax.plot([m], [rows["bubble_theory"].iloc[0]], "D", mfc="none", color=color, ms=6,
                        label="simulated table at the case's costs" if case == part["case"].iloc[0] else None)
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(part["microbatches"].unique()), [f"{m:g}" for m in sorted(part["microbatches"].unique())])
        ax.set_ylim(0, None)
        ax.set_title(f"{workload}: pp {p}", fontsize=9, loc="left")
        ax.set_xlabel("microbatches m (count)", fontsize=8)
        ax.set_ylabel("idle share of the step (fraction, 0-1)", fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6, loc="upper right")
    timing_caveat(fig, run, prominent=True)
    return fig
