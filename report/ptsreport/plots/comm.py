"""Communication: the bus bandwidth each op achieved against its message size, and
the bytes each case moves per training sample; one panel per workload.

Bus bandwidth = bus_bytes / wait_s (comm.csv, both per step), the nccl-tests busbw
with the time ranks were blocked in the op: comparable across ops and rank counts
and with a link's rated bus speed; an upper bound where the op overlaps compute."""


import matplotlib.pyplot as plt
import numpy as np
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from ..formatting import byte_unit
from ..load import Run
from .style import (case_axis, no_data, panel_grid, strategy_colors, strategy_legend, timing_caveat,
                    workload_panels)

AXIS_MARKERS = {"dp": "o", "tp": "s", "pp": "^", "world": "D"}


def human_bytes(value, _=None) -> str:
    divisor, unit = byte_unit(value)
    return f"{value / divisor:g} {unit}"


BYTES = FuncFormatter(human_bytes)


def plot_bandwidth(run: Run):
    comm = run.comm.dropna(subset=["busbw_gbps", "bytes_per_call"])
    workloads = [w for w in run.workloads if (comm["workload"] == w).any()]
    if not workloads:
        return no_data("no timed communication (comm.csv has no op with bytes and wait time)")
    ops = list(dict.fromkeys(comm["op"]))
    op_colors = {op: plt.get_cmap("tab10").colors[i % 10] for i, op in enumerate(ops)}
    fig, axes = panel_grid(len(workloads), 4.8, 3.8, 1.8)
    for workload, ax in zip(workloads, axes):
        part = comm[comm["workload"] == workload]
        for (op, axis), group in part.groupby(["op", "axis"], sort=False):
            ax.scatter(group["bytes_per_call"], group["busbw_gbps"], color=op_colors[op],
                       marker=AXIS_MARKERS.get(axis, "x"), s=30, edgecolors="black", linewidths=0.3,
                       label=f"{op} ({axis})")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.xaxis.set_major_locator(LogLocator(base=2, numticks=8))
        ax.xaxis.set_major_formatter(BYTES)
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("message size per call (bytes, log scale)", fontsize=8)
        ax.set_ylabel("bus bandwidth (GB/s, log scale)", fontsize=8)
        ax.set_title(f"{workload}: bus bandwidth per op", fontsize=9, loc="left")
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=6, loc="best")
    timing_caveat(fig, run)
    return fig


def plot_comm_per_sample(run: Run):
    """Per workload: communicated bus bytes per step divided by the global batch, for
    the cases that communicate."""
    cases = run.cases[run.cases["comm_bytes_per_step"] != 0]
    if cases["comm_per_sample"].isna().all():
        return no_data("no comm bytes per sample (no case communicates, or cases.csv lacks global_batch)")
    colors = strategy_colors(run)
    workloads = [w for w in run.workloads if (cases["workload"] == w).any()]
    groups = [cases[cases["workload"] == w] for w in workloads]
    fig, rows = workload_panels(workloads, [len(g) for g in groups])
    for workload, part, (ax,) in zip(workloads, groups, rows):
        values = part["comm_per_sample"]
        divisor, unit = byte_unit(values.max() if values.notna().any() else 0)
        y = np.arange(len(part))
        ax.barh(y, values / divisor, color=[colors[s] for s in part["strategy"]])
        for yi, value in zip(y, values):
            if not value > 0:
                ax.text(0, yi, " 0" if value == 0 else " n/a", va="center", fontsize=7)
        case_axis(ax, list(part["case"]))
        for label, check in zip(ax.get_yticklabels(), part["check_comm"]):
            if check == "FAIL":
                label.set_color("#b00020")
                label.set_fontweight("bold")
        ax.set_xlim(left=0)
        ax.set_title(f"{workload}: communication per training sample (cases that communicate)",
                     fontsize=9, loc="left")
        ax.set_xlabel(f"bus bytes per sample ({unit}/sample) = comm_bytes_per_step / global_batch",
                      fontsize=8)
        ax.grid(axis="x", alpha=0.3)
    strategy_legend(fig, colors, cases["strategy"], loc="outside right upper")
    return fig
