"""The report over several runs: a baseline and the runs compared with it (before and after
a change, two machines, two library versions) or a nightly history in time order.

What a user looks at first is the trend figure: per strategy, the median over its cases of
step time relative to the baseline, run by run, with the runs where `ptsuite compare`
flagged a regression of that strategy marked (each run directory may hold the compare
output of nightly.sh, compare.json). Then grouped bars of speedup and memory ratio per
strategy and run, and a side-by-side table of every case the runs share.

Ratios are of medians of timed steps (cases.csv step_time_s) and of peak bytes; they do
not decide what is a regression (noise bands are `ptsuite compare`'s job): without
compare.json a run's regressions are simply not marked, and the page says so."""

import html
import json
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd

from .load import ReportError, Run, load_run
from .plots.style import save

COMPARE_FILE = "compare.json"


@dataclass
class MultiRun:
    runs: list  # Run, the baseline first, then in the order given (a history: by time)
    labels: list  # one short label per run
    flagged: list = field(default_factory=list)  # per run: {strategy: [columns flagged]}, None: no compare.json

    @property
    def baseline(self) -> Run:
        return self.runs[0]


def expand(paths: list) -> list:
    """Run directories from the arguments: a directory with cases.csv is a run; one without
    it is a history whose subdirectories holding cases.csv are its runs, oldest first (by
    env.json time, then name)."""
    out = []
    for p in map(Path, paths):
        if (p / "cases.csv").is_file():
            out.append(p)
            continue
        if not p.is_dir():
            raise ReportError(f"{p}: not a run directory (no cases.csv) nor a directory of runs")
        members = [d for d in p.iterdir() if (d / "cases.csv").is_file()]
        if not members:
            raise ReportError(f"{p}: holds no run directory (no */cases.csv)")
        out.extend(sorted(members, key=lambda d: (run_time(d), d.name)))
    return out


def run_time(run_dir: Path) -> str:
    try:
        return str(json.loads((run_dir / "env.json").read_text()).get("time", ""))
    except (OSError, ValueError):
        return ""


def label_of(run: Run) -> str:
    """The run's directory name, with its git sha when env.json has one."""
    sha = str(run.env.get("git_sha", ""))[:8]
    return f"{run.name} ({sha})" if sha else run.name


def read_flagged(run_dir: Path, cases: pd.DataFrame):
    """{strategy: sorted flagged columns} from run_dir/compare.json (ptsuite compare
    --format json: its regressions, each naming a case and a column); None without it."""
    path = run_dir / COMPARE_FILE
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except ValueError as exc:
        raise ReportError(f"{path}: not JSON ({exc})") from exc
    strategy_of = dict(zip(cases["case"], cases["strategy"]))
    out = {}
    for item in data.get("regressions", []):
        strategy = strategy_of.get(item.get("case"), "?")
        out.setdefault(strategy, set()).add(str(item.get("column", "?")))
    return {s: sorted(c) for s, c in out.items()}


def load_runs(paths: list) -> MultiRun:
    dirs = expand(paths)
    if len(dirs) < 2:
        raise ReportError("give a baseline and at least one run to compare with it")
    runs = [load_run(d) for d in dirs]
    return MultiRun(runs, [label_of(r) for r in runs], [read_flagged(r.run_dir, r.cases) for r in runs])


def side_by_side(m: MultiRun) -> pd.DataFrame:
    """One row per case every run has: strategy, workload, and per run its verdict, step
    time, peak memory and their ratios to the baseline."""
    keys = ["case", "strategy", "workload"]
    common = set(m.baseline.cases["case"])
    for r in m.runs[1:]:
        common &= set(r.cases["case"])
    base = m.baseline.cases.set_index("case")
    out = m.baseline.cases[m.baseline.cases["case"].isin(common)][keys].copy().set_index("case")
    for i, (run, label) in enumerate(zip(m.runs, m.labels)):
        c = run.cases.set_index("case")
        out[f"verdict {i}"] = c["verdict"]
        out[f"step_time_s {i}"] = c["step_time_s"]
        out[f"peak_mem_bytes {i}"] = c["peak_mem_bytes"]
        if i:
            out[f"time ratio {i}"] = c["step_time_s"] / base["step_time_s"]
            out[f"memory ratio {i}"] = c["peak_mem_bytes"] / base["peak_mem_bytes"]
    return out.reset_index()


def per_strategy(table: pd.DataFrame, m: MultiRun, column: str) -> pd.DataFrame:
    """Median over each strategy's shared cases of `column i` (a ratio), strategies x runs."""
    frame = {m.labels[i]: table.groupby("strategy")[f"{column} {i}"].median() for i in range(1, len(m.runs))}
    return pd.DataFrame(frame)


def missing_cases(m: MultiRun) -> list:
    """(run label, cases the baseline has and it lacks, cases it has and the baseline lacks)."""
    base = set(m.baseline.cases["case"])
    out = []
    for run, label in zip(m.runs[1:], m.labels[1:]):
        mine = set(run.cases["case"])
        if base - mine or mine - base:
            out.append((label, sorted(base - mine), sorted(mine - base)))
    return out


def plot_trend(m: MultiRun, speed: pd.DataFrame):
    """Per strategy, the median step-time ratio to the baseline over the runs (the baseline
    is 1); a red ring where compare.json flagged one of the strategy's cases."""
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(m.runs) + 3), 4.2), layout="constrained")
    x = np.arange(len(m.runs))
    for strategy in speed.index:
        y = [1.0] + [float(v) for v in speed.loc[strategy]]
        line, = ax.plot(x, y, marker="o", label=strategy)
        for i, flagged in enumerate(m.flagged):
            if i and flagged and strategy in flagged:
                ax.plot(x[i], y[i], marker="o", markersize=13, markerfacecolor="none", markeredgecolor="red",
                        markeredgewidth=2)
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xticks(x, m.labels, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel("step time / baseline's (median over cases)")
    ax.set_title("Which strategy got slower, by how much, since when\n(red ring: ptsuite compare flagged "
                 "one of its cases in that run)", fontsize=10, loc="left")
    ax.legend(fontsize=8, ncol=2)
    ax.grid(alpha=0.3)
    return fig


def plot_bars(frame: pd.DataFrame, title: str, ylabel: str):
    """Grouped bars: one group per strategy, one bar per run."""
    fig, ax = plt.subplots(figsize=(max(6.0, 0.9 * len(frame.index) * max(1, len(frame.columns)) + 2), 4.0),
                           layout="constrained")
    width = 0.8 / max(1, len(frame.columns))
    x = np.arange(len(frame.index))
    for j, label in enumerate(frame.columns):
        ax.bar(x + j * width - 0.4 + width / 2, frame[label], width, label=label)
    ax.axhline(1.0, color="grey", linewidth=0.8)
    ax.set_xticks(x, frame.index, rotation=20, ha="right")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10, loc="left")
    ax.legend(fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    return fig


def since_when(m: MultiRun, speed: pd.DataFrame) -> pd.DataFrame:
    """Per strategy flagged by compare in some run: the first run that flagged it, the
    columns flagged there, and its step-time ratio in the last run."""
    rows = []
    for strategy in speed.index:
        first = next((i for i, f in enumerate(m.flagged) if i and f and strategy in f), None)
        if first is not None:
            rows.append({"strategy": strategy, "flagged since": m.labels[first],
                         "columns": ", ".join(m.flagged[first][strategy]),
                         "time ratio now": float(speed.loc[strategy].iloc[-1])})
    return pd.DataFrame(rows, columns=["strategy", "flagged since", "columns", "time ratio now"])


def slowest(table: pd.DataFrame, m: MultiRun, n: int = 10) -> pd.DataFrame:
    """The n (case, run) pairs with the largest step-time ratio to the baseline."""
    rows = []
    for i in range(1, len(m.runs)):
        part = table[["case", "strategy", f"step_time_s 0", f"step_time_s {i}", f"time ratio {i}"]].copy()
        part.columns = ["case", "strategy", "baseline s", "run s", "ratio"]
        part.insert(2, "run", m.labels[i])
        rows.append(part)
    return pd.concat(rows).sort_values("ratio", ascending=False).head(n)


def markdown_table(frame: pd.DataFrame, digits: int = 3) -> str:
    def cell(v):
        return f"{v:.{digits}g}" if isinstance(v, (float, np.floating)) else str(v)
    head = "| " + " | ".join(map(str, frame.columns)) + " |\n|" + "---|" * len(frame.columns) + "\n"
    return head + "".join("| " + " | ".join(cell(v) for v in row) + " |\n" for row in frame.itertuples(index=False))


def make_multirun_report(paths: list, out_dir: Path) -> Path:
    """Write out_dir/index.html, summary.md, trend.png, speedup.png and memory.png."""
    m = load_runs(paths)
    table = side_by_side(m)
    if table.empty:
        raise ReportError("the runs share no case (cases are matched by name)")
    speed = per_strategy(table, m, "time ratio")
    memory = per_strategy(table, m, "memory ratio")
    out_dir.mkdir(parents=True, exist_ok=True)
    save(plot_trend(m, speed), out_dir / "trend.png")
    save(plot_bars(1.0 / speed, "Speedup against the baseline, per strategy (median over its cases)",
                   "baseline step time / run's"), out_dir / "speedup.png")
    save(plot_bars(memory, "Peak memory against the baseline, per strategy (median over its cases)",
                   "run's peak bytes / baseline's"), out_dir / "memory.png")
    notes = []
    for label, lost, new in missing_cases(m):
        if lost:
            notes.append(f"{label} lacks {len(lost)} of the baseline's cases (e.g. {lost[0]})")
        if new:
            notes.append(f"{label} has {len(new)} cases the baseline lacks (e.g. {new[0]})")
    unmarked = [lab for lab, f in zip(m.labels[1:], m.flagged[1:]) if f is None]
    if unmarked:
        notes.append("no compare.json (ptsuite compare --format json) in " + ", ".join(unmarked) +
                     ": their regressions are not marked")
    top = slowest(table, m)
    flagged = since_when(m, speed)
    md = [f"# Runs against the baseline {m.labels[0]}", "",
          f"{len(table)} shared cases; {len(m.runs) - 1} run(s) compared.", ""]
    md += [f"- {n}" for n in notes] + ([""] if notes else [])
    md += ["## Regressions flagged by ptsuite compare, per strategy", "",
           markdown_table(flagged) if not flagged.empty else "none flagged", ""]
    md += ["## Step time / baseline's, per strategy (median over its cases)", "",
           markdown_table(speed.reset_index()), "## Slowest cases against the baseline", "",
           markdown_table(top), "## Peak memory / baseline's, per strategy", "",
           markdown_table(memory.reset_index())]
    (out_dir / "summary.md").write_text("\n".join(md))
    page = ["<!doctype html><html><head><meta charset='utf-8'><title>ptsuite: runs compared</title>",
            "<style>body{font:14px/1.4 system-ui,sans-serif;margin:0 1em 2em;max-width:1500px}"
            "table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;padding:2px 6px}"
            ".notes li{color:#8a5a00}</style></head><body>",
            f"<h1>Runs against the baseline {html.escape(m.labels[0])}</h1>",
            f"<p>{len(table)} shared cases; runs: {html.escape(', '.join(m.labels[1:]))}</p>"]
    if notes:
        page.append("<ul class='notes'>" + "".join(f"<li>{html.escape(n)}</li>" for n in notes) + "</ul>")
    page.append("<h2>Regressions flagged by ptsuite compare</h2>" +
                (flagged.to_html(index=False, float_format="%.4g") if not flagged.empty else "<p>none flagged</p>"))
    for png, caption in [("trend.png", "Step time against the baseline over the runs"),
                         ("speedup.png", "Speedup per strategy"), ("memory.png", "Peak memory per strategy")]:
        page.append(f"<h2>{caption}</h2><img src='{png}' alt='{caption}'>")
    page.append("<h2>Slowest cases against the baseline</h2>" + top.to_html(index=False, float_format="%.4g"))
    page.append("<h2>Every shared case, side by side</h2><details><summary>"
                f"{len(table)} cases</summary>" + table.to_html(index=False, float_format="%.4g") + "</details>")
    page.append("</body></html>")
    index = out_dir / "index.html"
    index.write_text("\n".join(page))
    return index
