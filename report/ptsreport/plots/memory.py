"""Memory: per case, the peak bytes of each tracked category (max over ranks) as a
stacked bar in MiB, with the tracked total peak as a tick; one panel per workload."""

import matplotlib.pyplot as plt
import numpy as np

from ..load import Run
from ..metrics import MIB
from .style import case_axis, no_data, workload_panels

# Display order; categories the run adds follow these.
CATEGORIES = ["param", "grad", "optimizer", "activation", "comm", "workspace"]
PALETTE = plt.get_cmap("Set2").colors  # not the strategies' colours


def plot_memory(run: Run):
    memory = run.memory.dropna(subset=["peak_bytes"])
    if memory.empty:
        return no_data("memory.csv has no rows")
    table = memory.groupby(["case", "category"], sort=False)["peak_bytes"].max().unstack(fill_value=0) / MIB
    found = list(table.columns)
    order = [c for c in CATEGORIES if c in found] + [c for c in found if c not in CATEGORIES]
    cases = run.cases[run.cases["case"].isin(table.index)]
    workloads = [w for w in run.workloads if (cases["workload"] == w).any()]
    groups = [cases[cases["workload"] == w] for w in workloads]
    fig, rows = workload_panels(workloads, [len(g) for g in groups])
    for workload, part, (ax,) in zip(workloads, groups, rows):
        stack = table.loc[part["case"], order]
        y = np.arange(len(part))
        left = np.zeros(len(part))
        for i, category in enumerate(order):
            ax.barh(y, stack[category], left=left, label=category, color=PALETTE[i % len(PALETTE)])
            left += stack[category].to_numpy()
        ax.plot(part["peak_mib"], y, "k|", ms=12, mew=2, label="tracked total peak")
        case_axis(ax, list(part["case"]))
        ax.set_xlim(left=0)
        ax.set_title(f"{workload}: peak memory per rank by category", fontsize=9, loc="left")
        ax.set_xlabel("peak memory per rank (MiB): each category's peak, max over ranks", fontsize=8)
        ax.grid(axis="x", alpha=0.3)
    rows[0][0].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1))
    return fig
