"""What every plot shares: one panel row per workload, one colour per strategy,
case labels, saving, and the core-sharing caveat on timing plots."""

import math

import matplotlib.pyplot as plt

from ..load import Run

ROW_INCH = 0.22  # height of one labelled bar
PANEL_MIN_INCH = 1.6
WIDTH_INCH = 13.0
OVERSUBSCRIBED_NOTE = ("OVERSUBSCRIBED RUN: ranks shared cores, so these timings measure the "
                       "sharing, not the strategy")


def workload_panels(workloads: list, num_items: list, ncols=1, width=WIDTH_INCH, row_inch=ROW_INCH,
                    sharey_row=False):
    """A figure with one row of ncols panels per workload, each row as tall as its
    number of items needs; returns (figure, list of rows of axes). Axes are never
    shared between workloads: each workload gets its own scale."""
    heights = [max(PANEL_MIN_INCH, row_inch * n + 0.9) for n in num_items]
    fig = plt.figure(figsize=(width, sum(heights) + 0.6), layout="constrained")
    grid = fig.add_gridspec(len(workloads), ncols, height_ratios=heights)
    rows = []
    for i, workload in enumerate(workloads):
        first = fig.add_subplot(grid[i, 0])
        row = [first] + [fig.add_subplot(grid[i, j], sharey=first if sharey_row else None)
                         for j in range(1, ncols)]
        rows.append(row)
    return fig, rows


def panel_grid(n: int, panel_width: float, panel_height: float, extra_width: float = 0.0):
    """A figure of n square-ish panels, at most 3 per row, with the unused cells of the
    last row switched off. Returns (fig, the n axes in order)."""
    ncols = min(3, n)
    nrows = math.ceil(n / ncols)
    fig, grid = plt.subplots(nrows, ncols, squeeze=False, layout="constrained",
                             figsize=(panel_width * ncols + extra_width, panel_height * nrows))
    for ax in grid.flat[n:]:
        ax.axis("off")
    return fig, list(grid.flat[:n])


def strategy_colors(run: Run) -> dict:
    """One colour per strategy, the same in every plot."""
    palette = plt.get_cmap("tab10").colors + plt.get_cmap("Dark2").colors
    strategies = list(dict.fromkeys(run.cases["strategy"]))
    return {s: palette[i % len(palette)] for i, s in enumerate(strategies)}


def case_axis(ax, labels: list, fontsize=8) -> None:
    """Case labels on the y axis, first on top."""
    ax.set_yticks(range(len(labels)), labels, fontsize=fontsize)
    ax.set_ylim(len(labels) - 0.5, -0.5)


def strategy_legend(ax_or_fig, colors: dict, strategies, extra=(), **kwargs) -> None:
    """A legend of the strategies' colours, then the extra handles (labelled artists)."""
    names = list(dict.fromkeys(strategies))
    handles = [plt.Rectangle((0, 0), 1, 1, color=colors[s]) for s in names] + list(extra)
    ax_or_fig.legend(handles, names + [h.get_label() for h in extra], title="strategy", fontsize=8,
                     title_fontsize=8, **kwargs)


def timing_caveat(fig, run: Run, prominent=False) -> None:
    """Say on the figure that its timings are not meaningful when the run's ranks
    shared cores; a prominent caveat is a boxed banner, otherwise a red line."""
    if run.oversubscription.state != "yes":
        return
    text = f"{OVERSUBSCRIBED_NOTE} ({run.oversubscription.detail})"
    if prominent:
        fig.suptitle(text, color="white", fontsize=11, fontweight="bold",
                     bbox=dict(facecolor="#b00020", edgecolor="none", pad=6))
    else:
        fig.suptitle(text, color="#b00020", fontsize=10, fontweight="bold")


def no_data(message: str):
    fig, ax = plt.subplots(figsize=(6, 1.2))
    ax.text(0.5, 0.5, message, ha="center", va="center")
    ax.axis("off")
    return fig


def save(fig, path) -> None:
    fig.savefig(path, dpi=100)
    plt.close(fig)
