"""Pipeline: per pipelined case, the measured idle share of each stage against the
uniform-stage bubble (p-1)/(m+p-1); one panel per workload. On an oversubscribed
run the measurement is dominated by core sharing, and the plot says so in red."""

import numpy as np

from ..load import Run
from .style import case_axis, no_data, timing_caveat, workload_panels


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
