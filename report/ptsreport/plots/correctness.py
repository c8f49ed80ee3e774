"""Correctness: each case's conformance error against its check's bound, on a log
scale, one row per workload: the exact check (float64: max_rel_err against 1e-12)
on the left, the precision check (float32: err_ratio against 4) on the right."""

import math

from .. import schema
from ..load import Run
from .style import case_axis, no_data, strategy_colors, strategy_legend, workload_panels

FAIL_RED = "#b00020"
CHECKS = [  # (check column, value column, bound, panel title, x label)
    ("check_exact", "max_rel_err", schema.EXACT_BOUND, "exact check (float64)",
     "max relative error vs the float64 oracle (dimensionless, log scale)"),
    ("check_precision", "err_ratio", schema.PRECISION_BOUND, "precision check (float32)",
     "err_ratio: distance to oracle / single float32's (dimensionless, log scale)"),
]


def checked_cases(cases, check: str, value: str):
    """The cases the check ran on (PASS or FAIL, or a recorded value)."""
    return cases[cases[check].isin(["PASS", "FAIL"]) | cases[value].notna()]


def draw_check(ax, cases, check, value, bound, title, xlabel, colors) -> None:
    if cases.empty:
        ax.text(0.5, 0.5, f"{title}: no case ran it", ha="center", va="center", transform=ax.transAxes)
        ax.set_title(title, fontsize=9, loc="left")
        ax.set_xticks([])
        ax.set_yticks([])
        return
    errors = cases[value]
    positive = errors[errors > 0]
    # From a little below the smallest error (or a decade below the bound) to a decade
    # past the bound or the largest error; exact zeros sit on the left edge.
    low = min(positive.min() / 3 if not positive.empty else bound / 10, bound / 10)
    high = max(positive.max() * 10 if not positive.empty else bound * 10, bound * 10)
    ax.set_xscale("log")
    ax.set_xlim(low, high)
    ax.minorticks_off()  # decades are enough; minor log ticks cost most of the drawing time
    ax.axvspan(bound, high, color=FAIL_RED, alpha=0.07, lw=0)
    ax.axvline(bound, color=FAIL_RED, ls="--", lw=1.2)
    ax.text(bound, -0.6, f" bound {bound:g}", color=FAIL_RED, fontsize=8, va="bottom")
    for y, (err, verdict, strategy) in enumerate(zip(errors, cases[check], cases["strategy"])):
        failed = verdict == "FAIL" or err > bound
        if math.isnan(err):
            ax.plot(high, y, "x", color=FAIL_RED if failed else "gray", ms=9, mew=2, clip_on=False)
            ax.text(high, y, " n/a", va="center", fontsize=7, color=FAIL_RED if failed else "gray")
        elif err <= 0:
            ax.plot(low, y, "<", color=colors[strategy], ms=6, clip_on=False)
            ax.text(low, y, "  0 (bitwise equal)", va="center", fontsize=7)
        else:
            ax.hlines(y, low, err, color="#ccc", lw=1)
            ax.plot(err, y, "X" if failed else "o", color=FAIL_RED if failed else colors[strategy],
                    ms=10 if failed else 6, mec="black" if failed else "none")
    case_axis(ax, list(cases["case"]))
    for label, verdict, err in zip(ax.get_yticklabels(), cases[check], errors):
        if verdict == "FAIL" or err > bound:
            label.set_color(FAIL_RED)
            label.set_fontweight("bold")
    ax.set_title(title, fontsize=9, loc="left")
    ax.set_xlabel(xlabel, fontsize=8)
    ax.grid(axis="x", which="major", alpha=0.3)


def plot_correctness(run: Run):
    cases = run.cases
    panels = {w: [checked_cases(cases[cases["workload"] == w], c, v) for c, v, *_ in CHECKS]
              for w in run.workloads}
    shown = [w for w in run.workloads if any(not p.empty for p in panels[w])]
    if not shown:
        return no_data("no exact or precision check ran (equivalence checks off)")
    colors = strategy_colors(run)
    fig, rows = workload_panels(shown, [max(len(p) for p in panels[w]) for w in shown], ncols=2)
    for workload, row in zip(shown, rows):
        for ax, part, (check, value, bound, title, xlabel) in zip(row, panels[workload], CHECKS):
            draw_check(ax, part, check, value, bound, f"{workload}: {title}", xlabel, colors)
    strategy_legend(fig, colors, cases.loc[cases["workload"].isin(shown), "strategy"],
                    loc="outside right upper")
    return fig
