#!/usr/bin/env python3
"""Build the HTML report of one ptsuite run directory.

Usage: python3 report/make_report.py RUN_DIR

Reads the CSV files written by the ptsuite harness (cases.csv, steps.csv,
comm.csv, memory.csv, stages.csv) and env.json, and writes
RUN_DIR/report/index.html with the PNG plots it references (loss, throughput,
exposed, comm, memory, layouts, bubble). stages.csv may be absent (older runs).
Exits with status 2 and a message on stderr if a CSV file or a column it
needs is missing. Optional columns (those newer runs add) may be absent: what
needs them is shown as n/a.
"""

import argparse
import html
import json
import math
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402

# Every part of the report in page order: (output, heading, input file, columns it
# needs, columns it uses when present). This is the one place that says which inputs
# and columns are required; optional columns may be missing (older runs) and other
# extra columns in the inputs are ignored.
PARTS = [
    ("summary", "Cases", "cases.csv", ["case", "verdict"], []),
    ("loss.png", "Loss per step vs oracle", "steps.csv", ["case", "step", "loss", "oracle_loss"], []),
    ("throughput.png", "Step time and throughput", "cases.csv",
     ["case", "step_time_s", "step_time_p90_s", "samples_per_s"], []),
    ("exposed.png", "Step time: exposed communication vs the rest", "cases.csv",
     ["case", "step_time_s"], ["comm_wait_s", "comm_exposed_frac"]),
    ("comm.png", "Communication bytes per step: measured vs expected", "cases.csv",
     ["case", "comm_bytes_per_step", "comm_bytes_expected"], []),
    ("memory.png", "Peak memory by category (max over ranks)", "memory.csv",
     ["case", "category", "peak_bytes"], []),
    ("layouts.png", "Throughput and peak memory per rank, by layout (dp x tp x pp)", "cases.csv",
     ["case", "peak_mem_bytes"], ["tokens_per_s", "dp", "tp", "pp"]),
    ("bubble.png", "Pipeline bubble per stage: measured vs (p-1)/(m+p-1)", "stages.csv",
     ["case", "stage", "bubble_frac", "bubble_theory"], []),
    ("comm", "Communication by op", "comm.csv",
     ["case", "axis", "op", "calls", "payload_bytes", "bus_bytes", "wait_s"], ["model_s"]),
]
# Optional column of cases.csv whose value the plots show after each case name,
# as "case (strategy)"; every plot keyed by case uses it when present.
LABEL_COLUMN = "strategy"
# Optional columns of the summary table, shown in this order when present in cases.csv.
SUMMARY_COLUMNS = ["case", "strategy", "workload", "dtype", "dp", "tp", "pp", "microbatches",
                   "schedule", "verdict", "reason", "step_time_s", "samples_per_s", "tokens_per_s",
                   "bubble_frac", "bubble_theory", "comm_bytes_per_step",
                   "comm_bytes_expected", "max_rel_err", "err_ratio"]
# Inputs that older runs do not have: a missing one is reported, not an error.
OPTIONAL_FILES = {"stages.csv"}
# Memory categories in display order; unknown categories follow these.
MEMORY_CATEGORIES = ["param", "grad", "optimizer", "activation", "comm", "workspace"]


class ReportError(Exception):
    """An input problem that stops the report (exit status 2)."""


def read_csv(run_dir: Path, name: str) -> pd.DataFrame:
    """Read one CSV as text, check its required columns, and return it."""
    path = run_dir / name
    if not path.is_file() and name in OPTIONAL_FILES:
        return pd.DataFrame(columns=[c for _, _, source, cols, _ in PARTS if source == name for c in cols])
    if not path.is_file():
        raise ReportError(f"{path}: file not found")
    try:
        df = pd.read_csv(path, dtype=str, keep_default_na=False)
    except pd.errors.EmptyDataError:
        raise ReportError(f"{path}: file is empty (no header row)") from None
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise ReportError(f"{path}: cannot parse CSV: {exc}") from None
    for output, _, source, columns, _ in PARTS:
        missing = [c for c in columns if source == name and c not in df.columns]
        if missing:
            raise ReportError(f"{path}: missing column(s) {', '.join(missing)} (needed for {output})")
    return df


def numeric(df: pd.DataFrame, column: str) -> pd.Series:
    """The column as floats; empty or non-numeric fields become NaN, as does a
    missing (optional) column."""
    if column not in df.columns:
        return pd.Series(math.nan, index=df.index, dtype=float)
    return pd.to_numeric(df[column], errors="coerce")


def case_labels(cases: pd.DataFrame) -> dict:
    """Plot label of each case: "case (strategy)", or the bare case name where
    cases.csv has no strategy column or the field is empty."""
    if LABEL_COLUMN not in cases.columns:
        return {}
    return {case: f"{case} ({strategy})" if strategy else case
            for case, strategy in zip(cases["case"], cases[LABEL_COLUMN])}


def byte_unit(largest: float):
    """A (divisor, label) pair that keeps byte values readable."""
    return next(((d, u) for d, u in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")) if largest >= d),
                (1, "B"))


def no_data(path: Path, title: str) -> None:
    """Write a placeholder plot saying there is nothing to show."""
    fig, ax = plt.subplots(figsize=(6, 2))
    ax.text(0.5, 0.5, f"{title}: no data", ha="center", va="center")
    ax.axis("off")
    save(fig, path)


def save(fig, path: Path) -> None:
    """Write the figure as PNG and free it."""
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def bar_height(n: int) -> float:
    """Figure height (inches) for a horizontal bar chart of n cases."""
    return max(2.5, 0.3 * n + 1.2)


def time_unit(largest: float):
    """A (divisor, label) pair that keeps durations in seconds readable."""
    return next(((d, u) for d, u in ((1, "s"), (1e-3, "ms"), (1e-6, "us")) if largest >= d),
                (1e-6, "us"))


def case_axis(ax, names, labels) -> None:
    """Label the y axis with the cases' labels (or names), first case on top; linear x from 0."""
    ax.set_yticks(range(len(names)), [labels.get(n, n) for n in names], fontsize=8)
    ax.set_ylim(len(names) - 0.5, -0.5)
    if ax.get_xscale() == "linear":
        ax.set_xlim(left=0)


def label_empty_bars(ax, ys, values) -> None:
    """Write "0" or "n/a" at the left edge where a bar would be invisible."""
    for y, v in zip(ys, values):
        if not v > 0:
            ax.text(0.005, y, "0" if v == 0 else "n/a", transform=ax.get_yaxis_transform(),
                    va="center", fontsize=7)


def plot_loss(steps: pd.DataFrame, labels: dict, path: Path) -> None:
    """One subplot per case: loss (solid) and oracle loss (dashed) per step."""
    cases = list(dict.fromkeys(steps["case"]))
    if not cases:
        return no_data(path, "loss")
    steps = steps.assign(**{c: numeric(steps, c) for c in ("step", "loss", "oracle_loss")})
    ncols = min(4, len(cases))
    nrows = math.ceil(len(cases) / ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.6 * ncols, 2.6 * nrows), squeeze=False)
    for ax, case in zip(axes.flat, cases):
        rows = steps[steps["case"] == case].sort_values("step")
        ax.plot(rows["step"], rows["loss"], "-", marker=".", label="loss")
        if rows["oracle_loss"].notna().any():
            ax.plot(rows["step"], rows["oracle_loss"], "--", label="oracle")
        ax.set_title(labels.get(case, case), fontsize=9)
        ax.set_xlabel("step", fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=7)
    for ax in list(axes.flat)[len(cases):]:
        ax.axis("off")
    save(fig, path)


def plot_throughput(cases: pd.DataFrame, labels: dict, path: Path) -> None:
    """Median step time (p90 as a marker) and samples/s, one bar per case."""
    if cases.empty:
        return no_data(path, "throughput")
    names = list(cases["case"])
    y = range(len(names))
    median, p90 = numeric(cases, "step_time_s"), numeric(cases, "step_time_p90_s")
    fig, (ax_t, ax_s) = plt.subplots(1, 2, figsize=(12, bar_height(len(names))), sharey=True)
    ax_t.barh(y, median, color="tab:blue", label="median")
    ax_t.plot(p90, y, "k|", markersize=12, label="p90")
    ax_t.set_xlabel("step time (s)")
    ax_t.legend(fontsize=8)
    label_empty_bars(ax_t, y, median)
    samples = numeric(cases, "samples_per_s")
    ax_s.barh(y, samples, color="tab:green")
    label_empty_bars(ax_s, y, samples)
    ax_s.set_xlabel("samples / s")
    case_axis(ax_t, names, labels)
    case_axis(ax_s, names, labels)
    save(fig, path)


def plot_exposed(cases: pd.DataFrame, labels: dict, path: Path) -> None:
    """Per case, step time split into exposed communication (comm_wait_s, capped at
    the step time) and the rest, labelled with comm_exposed_frac as a percentage."""
    if cases.empty:
        return no_data(path, "exposed")
    names = list(cases["case"])
    y = range(len(names))
    step, wait = numeric(cases, "step_time_s"), numeric(cases, "comm_wait_s")
    frac = numeric(cases, "comm_exposed_frac").fillna(wait / step)
    exposed = wait.clip(upper=step)  # NaN where either is unknown: an empty bar
    div, unit = time_unit(step.max() if step.notna().any() else 0)
    fig, ax = plt.subplots(figsize=(9, bar_height(len(names))))
    ax.barh(y, exposed / div, color="tab:red", label="exposed communication (comm_wait_s)")
    ax.barh(y, (step - exposed) / div, left=exposed / div, color="tab:gray",
            label="rest: compute + hidden communication")
    label_empty_bars(ax, y, step.where(exposed.notna()))
    for i, (total, share) in enumerate(zip(step.where(exposed.notna()), frac)):
        if total > 0 and math.isfinite(share):
            ax.text(total / div, i, f" {100 * share:.0f}%", va="center", fontsize=7)
    case_axis(ax, names, labels)
    ax.margins(x=0.08)
    ax.set_xlabel(f"step time ({unit}); label: comm_exposed_frac")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    save(fig, path)


def plot_comm(cases: pd.DataFrame, labels: dict, path: Path) -> None:
    """Grouped bars of measured vs expected comm bytes per step, per case."""
    if cases.empty:
        return no_data(path, "comm")
    names = list(cases["case"])
    measured, expected = numeric(cases, "comm_bytes_per_step"), numeric(cases, "comm_bytes_expected")
    values = pd.concat([measured, expected])
    positive = values[values > 0]
    log = not positive.empty and positive.max() / positive.min() >= 100
    div, unit = (1, "B") if log else byte_unit(values.max() if values.notna().any() else 0)
    fig, ax = plt.subplots(figsize=(9, bar_height(1.4 * len(names))))
    for offset, series, label, color in ((-0.2, measured, "measured", "tab:blue"),
                                         (0.2, expected, "expected", "tab:orange")):
        ys = [i + offset for i in range(len(names))]
        ax.barh(ys, series / div, height=0.4, label=label, color=color)
        label_empty_bars(ax, ys, series)
    if log:
        ax.set_xscale("log")
    case_axis(ax, names, labels)
    ax.set_xlabel(f"bytes per step ({unit})" + (", log scale" if log else ""))
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    save(fig, path)


def plot_memory(memory: pd.DataFrame, labels: dict, path: Path) -> None:
    """Stacked bars of peak bytes per category (max over ranks), per case."""
    mem = memory.assign(peak_bytes=numeric(memory, "peak_bytes")).dropna(subset=["peak_bytes"])
    if mem.empty:
        return no_data(path, "memory")
    table = mem.groupby(["case", "category"], sort=False)["peak_bytes"].max().unstack(fill_value=0)
    found = list(table.columns)
    order = [c for c in MEMORY_CATEGORIES if c in found] + [c for c in found if c not in MEMORY_CATEGORIES]
    table = table[order]
    div, unit = byte_unit(table.sum(axis=1).max())
    fig, ax = plt.subplots(figsize=(9, bar_height(len(table))))
    left = pd.Series(0.0, index=table.index)
    y = range(len(table))
    for category in order:
        ax.barh(y, table[category] / div, left=left, label=category)
        left += table[category] / div
    case_axis(ax, list(table.index), labels)
    ax.set_xlabel(f"peak memory ({unit})")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    save(fig, path)


def layout_of(cases: pd.DataFrame) -> list:
    """ "dp x tp x pp" of each case ("" where cases.csv lacks the axes)."""
    if not all(c in cases.columns for c in ("dp", "tp", "pp")):
        return [""] * len(cases)
    return [f"{d}x{t}x{p}" for d, t, p in zip(cases["dp"], cases["tp"], cases["pp"])]


def plot_layouts(cases: pd.DataFrame, labels: dict, path: Path) -> None:
    """Per case, labelled with its layout: tokens/s (samples/s where a case has no
    tokens) and peak tracked memory per rank."""
    if cases.empty:
        return no_data(path, "layouts")
    names = list(cases["case"])
    layout = layout_of(cases)
    tagged = {n: f"{labels.get(n, n)} {lay}".strip() for n, lay in zip(names, layout)}
    y = range(len(names))
    tokens, samples = numeric(cases, "tokens_per_s"), numeric(cases, "samples_per_s")
    rate = tokens.fillna(samples)
    peak = numeric(cases, "peak_mem_bytes")
    div, unit = byte_unit(peak.max() if peak.notna().any() else 0)
    fig, (ax_r, ax_m) = plt.subplots(1, 2, figsize=(12, bar_height(len(names))), sharey=True)
    ax_r.barh(y, rate, color=["tab:purple" if t == t else "tab:green" for t in tokens])
    label_empty_bars(ax_r, y, rate)
    ax_r.set_xlabel("tokens / s (purple); samples / s where no tokens (green)")
    ax_m.barh(y, peak / div, color="tab:brown")
    label_empty_bars(ax_m, y, peak)
    ax_m.set_xlabel(f"peak tracked memory per rank ({unit}, max over ranks)")
    case_axis(ax_r, names, tagged)
    case_axis(ax_m, names, tagged)
    save(fig, path)


def plot_bubble(stages: pd.DataFrame, labels: dict, path: Path) -> None:
    """Pipelined cases (theory > 0): the theoretical bubble as a bar, each stage's
    measured idle share as a dot."""
    df = stages.assign(**{c: numeric(stages, c) for c in ("stage", "bubble_frac", "bubble_theory")})
    df = df[df["bubble_theory"] > 0]
    if df.empty:
        return no_data(path, "bubble (no pipelined case)")
    names = list(dict.fromkeys(df["case"]))
    fig, ax = plt.subplots(figsize=(9, bar_height(len(names))))
    theory = df.groupby("case", sort=False)["bubble_theory"].first()
    ax.barh(range(len(names)), [theory[n] for n in names], color="tab:gray", label="(p-1)/(m+p-1)")
    for i, name in enumerate(names):
        rows = df[df["case"] == name]
        ax.plot(rows["bubble_frac"], [i] * len(rows), "o", color="tab:red", markersize=5,
                label="measured, per stage" if i == 0 else None)
    case_axis(ax, names, labels)
    ax.set_xlabel("idle share of the step")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1))
    save(fig, path)


def fmt(value: str) -> str:
    """Integral numbers as integers, other floats to 4 digits, text as written."""
    try:
        number = float(value)
    except ValueError:
        return value
    if not math.isfinite(number):
        return value
    return str(int(number)) if number.is_integer() and abs(number) < 1e15 else f"{number:.4g}"


def html_table(header, rows, table_id: str, verdict_col=None) -> str:
    """An HTML table; the cell in verdict_col gets a PASS/FAIL/SKIP class."""
    out = [f'<table id="{table_id}">', "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in header) + "</tr>"]
    for row in rows:
        cells = []
        for i, cell in enumerate(row):
            cls = f' class="{html.escape(cell)}"' if i == verdict_col and cell in ("PASS", "FAIL", "SKIP") else ""
            cells.append(f"<td{cls}>{html.escape(cell)}</td>")
        out.append("<tr>" + "".join(cells) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def env_section(run_dir: Path) -> str:
    path = run_dir / "env.json"
    if not path.is_file():
        print(f"make_report: warning: {path} not found", file=sys.stderr)
        return "<p>env.json not found.</p>"
    try:
        env = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ReportError(f"{path}: invalid JSON: {exc}") from None
    if not isinstance(env, dict):
        env = {"env": env}
    rows = [[str(k), v if isinstance(v, str) else json.dumps(v, sort_keys=True)] for k, v in env.items()]
    return html_table(["key", "value"], rows, "env")


def comm_section(comm: pd.DataFrame) -> str:
    """Per case/axis/op and step: calls and bytes are means over ranks, wait_s (and
    model_s, when comm.csv has it) the max."""
    if comm.empty:
        return "<p>No communication recorded.</p>"
    times = [c for c in ("wait_s", "model_s") if c in comm.columns]
    df = comm.assign(**{c: numeric(comm, c) for c in ["calls", "payload_bytes", "bus_bytes"] + times})
    agg = df.groupby(["case", "axis", "op"], sort=False).agg(
        calls=("calls", "mean"), payload_bytes=("payload_bytes", "mean"),
        bus_bytes=("bus_bytes", "mean"), **{c: (c, "max") for c in times}).reset_index()
    rows = [[fmt(str(v)) for v in row] for row in agg.itertuples(index=False)]
    note = (f"<p>Per step: calls and bytes are means over ranks, {' and '.join(times)} "
            f"{'is' if len(times) == 1 else 'are'} the max over ranks.</p>")
    return note + html_table(list(agg.columns), rows, "comm")


STYLE = """body { font-family: sans-serif; margin: 1.5em; } img { max-width: 100%; }
table { border-collapse: collapse; font-size: 0.85em; margin-bottom: 1em; }
th, td { border: 1px solid #bbb; padding: 2px 6px; text-align: left; } th { background: #eee; }
td.PASS { background: #c8f0c8; } td.FAIL { background: #f4c0c0; } td.SKIP { background: #ddd; }"""


def summary_section(cases: pd.DataFrame) -> str:
    """Verdict counts and one table row per case."""
    columns = [c for c in SUMMARY_COLUMNS if c in cases.columns]
    rows = [[fmt(str(v)) for v in row] for row in cases[columns].itertuples(index=False)]
    counts = cases["verdict"].replace("", "(no verdict)").value_counts()
    tally = ", ".join(f"{n} {v}" for v, n in counts.items()) or "none"
    return (f"<p>{len(cases)} cases: {html.escape(tally)}</p>\n"
            + html_table(columns, rows, "summary", columns.index("verdict")))


def make_report(run_dir: Path) -> Path:
    """Read the run's files, write the plots and index.html; return its path."""
    if not run_dir.is_dir():
        raise ReportError(f"{run_dir}: not a directory")
    data = {name: read_csv(run_dir, name) for name in dict.fromkeys(part[2] for part in PARTS)}
    out_dir = run_dir / "report"
    out_dir.mkdir(exist_ok=True)
    plotters = {"loss.png": plot_loss, "throughput.png": plot_throughput, "exposed.png": plot_exposed,
                "comm.png": plot_comm, "memory.png": plot_memory, "layouts.png": plot_layouts,
                "bubble.png": plot_bubble}
    tables = {"summary": summary_section, "comm": comm_section}
    labels = case_labels(data["cases.csv"])
    run_id = html.escape(run_dir.name)
    page = ["<!DOCTYPE html>", '<html><head><meta charset="utf-8">',
            f"<title>ptsuite report: {run_id}</title>", f"<style>{STYLE}</style></head><body>",
            f"<h1>ptsuite report: {run_id}</h1>", "<h2>Environment</h2>", env_section(run_dir)]
    for output, heading, source, _, optional in PARTS:
        page.append(f"<h2>{html.escape(heading)}</h2>")
        absent = [c for c in optional if c not in data[source].columns]
        if source in OPTIONAL_FILES and not (run_dir / source).is_file():
            page.append(f"<p>{html.escape(source)} is not in this run (older run).</p>")
        elif absent:
            page.append(f"<p>Not in {html.escape(source)} (older run): {html.escape(', '.join(absent))}.</p>")
        if output in plotters:
            plotters[output](data[source], labels, out_dir / output)
            page.append(f'<img src="{output}" alt="{html.escape(heading)}">')
        else:
            page.append(tables[output](data[source]))
    index = out_dir / "index.html"
    index.write_text("\n".join(page + ["</body></html>"]) + "\n", encoding="utf-8")
    return index


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Build the HTML report of a ptsuite run.")
    parser.add_argument("run_dir", type=Path, help="run directory holding cases.csv etc.")
    args = parser.parse_args(argv)
    try:
        index = make_report(args.run_dir)
    except ReportError as exc:
        print(f"make_report: error: {exc}", file=sys.stderr)
        return 2
    print(index)
    return 0


if __name__ == "__main__":
    sys.exit(main())
