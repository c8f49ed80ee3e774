"""Speed: step time (ms, with its exposed-communication share) and throughput per
case, throughput against each mesh axis (scaling), and throughput against peak
memory (the trade-off). One panel per workload, in the workload's own unit."""

import math

import matplotlib.pyplot as plt
from matplotlib.ticker import FuncFormatter
import numpy as np
import pandas as pd

from ..formatting import num
from ..load import Run
from .style import (case_axis, no_data, panel_grid, strategy_colors, strategy_legend, timing_caveat,
                    workload_panels)

EXPOSED = dict(facecolor="#444", hatch="////", edgecolor="white", linewidth=0)
AXES = {"dp": "dp: data-parallel ranks", "tp": "tp: tensor-parallel ranks", "pp": "pp: pipeline stages"}
# Columns that define a configuration: a scaling series varies one mesh axis and keeps
# all of these equal.
CONFIG = ["strategy", "dtype", "optimizer", "dp", "tp", "pp", "microbatches", "schedule", "zero_stage",
          "overlap", "prefetch", "reshard_after_forward", "bucket_bytes", "global_batch", "stage_layers",
          "link_bus_gbps", "link_latency_us", "data", "steps"]
DTYPE_STYLE = {"float32": ("-", "o"), "float64": ("--", "s")}
THOUSANDS = FuncFormatter(lambda value, _: f"{value / 1e6:g}M" if abs(value) >= 1e6
                          else f"{value / 1e3:g}k" if abs(value) >= 1e3 else f"{value:g}")


def plot_speed(run: Run):
    """Per workload: step time in ms (median bar, p90 tick; the red part is exposed
    communication, comm_wait_s) and throughput in the workload's unit."""
    cases = run.cases
    if cases.empty:
        return no_data("no cases")
    colors = strategy_colors(run)
    groups = [cases[cases["workload"] == w] for w in run.workloads]
    fig, rows = workload_panels(run.workloads, [len(g) for g in groups], ncols=2, sharey_row=True)
    for workload, part, (ax_t, ax_r) in zip(run.workloads, groups, rows):
        y = np.arange(len(part))
        step = part["step_ms"].to_numpy()
        exposed = np.minimum(part["comm_wait_s"].to_numpy() * 1e3, step)
        bar_colors = [colors[s] for s in part["strategy"]]
        ax_t.barh(y, np.nan_to_num(exposed), **EXPOSED)
        ax_t.barh(y, step - np.nan_to_num(exposed), left=np.nan_to_num(exposed), color=bar_colors)
        ax_t.plot(part["p90_ms"], y, "k|", ms=10)
        ends = np.fmax(step, part["p90_ms"].to_numpy())
        for yi, end, share in zip(y, ends, part["comm_exposed_frac"]):
            if end > 0 and share > 0:
                ax_t.text(end, yi, f"  {100 * share:.0f}% comm", va="center", fontsize=7)
        ax_t.set_xlabel("step time (ms): median over timed steps, tick = p90", fontsize=8)
        ax_t.set_title(f"{workload}: step time", fontsize=9, loc="left")
        ax_t.margins(x=0.12)
        unit = part["unit"].iloc[0]
        ax_r.barh(y, part["throughput"], color=bar_colors)
        ax_r.set_xlabel(f"throughput ({unit})", fontsize=8)
        ax_r.xaxis.set_major_formatter(THOUSANDS)
        ax_r.set_title(f"{workload}: throughput ({unit})", fontsize=9, loc="left")
        case_axis(ax_t, list(part["case"]))
        ax_r.tick_params(labelleft=False)
        for ax in (ax_t, ax_r):
            ax.set_xlim(left=0)
            ax.grid(axis="x", alpha=0.3)
    extra = [plt.Rectangle((0, 0), 1, 1, **EXPOSED, label="exposed communication"),
             plt.Line2D([], [], ls="none", marker="|", color="black", ms=10, label="p90 step time")]
    strategy_legend(fig, colors, cases["strategy"], extra=extra, loc="outside right upper")
    timing_caveat(fig, run)
    return fig


def scaling_series(cases, axis: str) -> list:
    """(configuration, points) of each configuration run at two or more sizes of the
    axis. A series whose other mesh axes are 1 and that lacks size 1 starts at its
    single baseline. points: rows with the axis size, throughput and speedup."""
    # With pp = 1 the schedule is empty, so a pp series is not split by it.
    keys = [c for c in CONFIG if c != axis and not (axis == "pp" and c == "schedule")]
    columns = [axis, "throughput", "speedup", "baseline", "case"]
    series = []
    for key, group in cases.groupby(keys, sort=False, dropna=False):
        config = dict(zip(keys, key))
        points = group[columns].dropna(subset=["throughput"]).sort_values(axis).drop_duplicates(axis)
        alone = all(config[a] == 1 for a in AXES if a != axis)
        if alone and not points.empty and points[axis].min() > 1:
            baseline = cases.loc[cases["case"] == points["baseline"].iloc[0], columns]
            points = pd.concat([baseline.dropna(subset=["throughput"]), points])
        if len(points) >= 2:
            series.append((config, points))
    return series


def series_label(config: dict, others: list) -> str:
    """strategy and dtype, then the settings that tell it apart from the other series
    of the same strategy and dtype in the panel (text settings by value alone)."""
    same = [o for o in others if o["strategy"] == config["strategy"] and o["dtype"] == config["dtype"]]
    varying = [k for k in config if k not in ("strategy", "dtype") and len({str(o[k]) for o in same}) > 1]
    extra = [str(config[k]) if isinstance(config[k], str) else f"{k}={num(config[k])}" for k in varying]
    return " ".join(p for p in [config["strategy"], config["dtype"]] + extra if p)


def relative(points):
    """Throughput relative to the series' first point: its size-1 point or single
    baseline where it has one, else its smallest size."""
    return points["throughput"] / points["throughput"].iloc[0]


def plot_scaling(run: Run):
    """Per workload and mesh axis with a series: throughput relative to the line's
    first point (size 1, or the single case), one line per configuration, against
    the axis size; the dotted line is linear scaling from the smallest size."""
    cases = run.cases
    panels = [(w, a, series) for w in run.workloads for a in AXES
              for series in [scaling_series(cases[cases["workload"] == w], a)] if series]
    if not panels:
        return no_data("no configuration was run at two sizes of dp, tp or pp")
    colors = strategy_colors(run)
    fig, axes = panel_grid(len(panels), 5.2, 4.6)
    for (workload, axis, series), ax in zip(panels, axes):
        configs = [c for c, _ in series]
        sizes = set()
        for config, points in series:
            line, marker = DTYPE_STYLE.get(config["dtype"], ("-", "o"))
            speedup = relative(points)
            ax.plot(points[axis], speedup, line, marker=marker, ms=5, color=colors[config["strategy"]],
                    label=series_label(config, configs))
            sizes.update(points[axis])
        sizes = sorted(sizes)
        ax.plot(sizes, [s / sizes[0] for s in sizes], ":", color="black", lw=1, label="linear scaling")
        ax.axhline(1, color="gray", lw=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xticks(sizes, [f"{s:g}" for s in sizes])
        ax.minorticks_off()
        ax.set_ylim(bottom=0)
        ax.set_xlabel(AXES[axis], fontsize=8)
        ax.set_ylabel("speedup over the line's first point (×)", fontsize=8)
        ax.set_title(f"{workload}: scaling with {axis}", fontsize=9, loc="left")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=2, frameon=False)
    timing_caveat(fig, run)
    return fig


def pareto(points) -> list:
    """Indices of the points no other point beats on both memory (lower) and
    throughput (higher), by increasing memory."""
    front, best = [], -math.inf
    for i, row in points.sort_values(["peak_mib", "throughput"], ascending=[True, False]).iterrows():
        if row["throughput"] > best:
            front.append(i)
            best = row["throughput"]
    return front


def plot_tradeoff(run: Run):
    """Per workload: each case's throughput against its peak memory per rank; per
    dtype, a grey line joins (and names) the passing cases no other passing case of
    that dtype beats on both."""
    cases = run.cases.dropna(subset=["throughput", "peak_mib"])
    workloads = [w for w in run.workloads if (cases["workload"] == w).any()]
    if not workloads:
        return no_data("no case has both throughput and peak memory")
    colors = strategy_colors(run)
    fig, axes = panel_grid(len(workloads), 4.8, 4.0, 1.8)
    for workload, ax in zip(workloads, axes):
        part = cases[cases["workload"] == workload]
        handles = []
        for dtype, by_dtype in part.groupby("dtype", sort=False):
            line, marker = DTYPE_STYLE.get(dtype, ("-", "o"))
            ax.scatter(by_dtype["peak_mib"], by_dtype["throughput"], marker=marker, s=36,
                       c=[colors[s] for s in by_dtype["strategy"]], edgecolors="black", linewidths=0.4)
            front = by_dtype.loc[pareto(by_dtype[by_dtype["verdict"] == "PASS"])]
            ax.plot(front["peak_mib"], front["throughput"], line, color="gray", lw=1, zorder=0)
            for _, row in front.iterrows():
                ax.annotate(row["case"], (row["peak_mib"], row["throughput"]), textcoords="offset points",
                            xytext=(5, -2), fontsize=6)
            handles.append(plt.Line2D([], [], ls=line, marker=marker, color="gray", mfc="white", mec="black",
                                      label=f"{dtype or 'cases'}: best trade-offs"))
        unit = part["unit"].iloc[0]
        ax.set_xlabel("peak tracked memory per rank (MiB, max over ranks)", fontsize=8)
        ax.set_ylabel(f"throughput ({unit})", fontsize=8)
        ax.yaxis.set_major_formatter(THOUSANDS)
        ax.set_title(f"{workload}: faster is up, leaner is left", fontsize=9, loc="left")
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.margins(x=0.25)
        ax.grid(alpha=0.3)
        ax.legend(handles=handles, fontsize=7, loc="lower right")
    strategy_legend(fig, colors, cases["strategy"], loc="outside right upper")
    timing_caveat(fig, run)
    return fig
