"""`ptsuite bench`'s sweep in the report: bench.csv read against schema.BENCH, bus
bandwidth against message size per op (log2 x axis; out of place solid, in place dashed,
one colour per ranks x type), and the page of a directory that holds only a sweep."""

import html
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.ticker import FuncFormatter

from . import schema
from .load import read_csv, read_env
from .plots.style import OVERSUBSCRIBED_NOTE, panel_grid, save

FIGURE = "bench_busbw.png"
TITLE = "Collective bus bandwidth (ptsuite bench)"
CAPTION = ("bench.csv: busbw = size / time x the op's bus factor (all_reduce 2(n-1)/n; reduce_scatter, "
           "all_gather, all_to_all (n-1)/n; broadcast, send_recv 1) against the nccl-tests size, log2 axis. "
           "Solid out of place, dashed in place (all_reduce, all_gather, broadcast); a red x marks a size "
           "with #wrong > 0.")


def load_bench(run_dir: Path):
    """bench.csv of run_dir as a frame (text columns as strings, the rest numbers), or
    None when there is none. A missing required column is a ReportError naming it."""
    df, _ = read_csv(run_dir, schema.BENCH_FILE, schema.BENCH, optional=True)
    return df


def size_label(value, _=None) -> str:
    """Bytes in powers of 1024, as the sweep's sizes are given: 8, 64K, 16M."""
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if value >= scale:
            return f"{value / scale:g}{unit}"
    return f"{value:g}"


def wrong_rows(df: pd.DataFrame) -> pd.DataFrame:
    return df[(df["wrong"] > 0) | (df["ip_wrong"] > 0)]


def plot_bench_busbw(bench: pd.DataFrame, env: dict):
    """One panel per op, in the order the sweep ran them."""
    ops = list(dict.fromkeys(bench["op"]))
    fig, axes = panel_grid(len(ops), 4.6, 3.4)
    groups = list(dict.fromkeys(zip(bench["ranks"], bench["type"])))
    colors = {g: plt.get_cmap("tab10").colors[i % 10] for i, g in enumerate(groups)}
    for op, ax in zip(ops, axes):
        part = bench[bench["op"] == op]
        for (ranks, dtype), rows in part.groupby(["ranks", "type"], sort=False):
            rows = rows.sort_values("size")
            name = f"{ranks:g} ranks {dtype}"
            ax.plot(rows["size"], rows["busbw"], "-o", ms=3, color=colors[(ranks, dtype)],
                    label=f"{name} out of place")
            in_place = rows.dropna(subset=["ip_busbw"])
            if not in_place.empty:
                ax.plot(in_place["size"], in_place["ip_busbw"], "--", color=colors[(ranks, dtype)],
                        label=f"{name} in place")
        bad = wrong_rows(part)
        if not bad.empty:
            ax.plot(bad["size"], bad["busbw"], "x", color="#b00020", ms=9, mew=2, label="#wrong > 0")
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(FuncFormatter(size_label))
        ax.set_title(op, color="#b00020" if not bad.empty else "black")
        ax.set_xlabel("size (bytes, log2)")
        ax.set_ylabel("busbw (GB/s)")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    if env.get("oversubscribed") is True:
        fig.suptitle(f"{OVERSUBSCRIBED_NOTE} ({env.get('ranks_per_node')} ranks on {env.get('cores')} cores)",
                     color="#b00020", fontsize=10, fontweight="bold")
    return fig


def peak_rows(bench: pd.DataFrame) -> list:
    """Per op and ranks x type: the highest out-of-place busbw and the size it was reached at."""
    rows = []
    for (op, ranks, dtype), part in bench.groupby(["op", "ranks", "type"], sort=False):
        best = part.loc[part["busbw"].idxmax()]
        rows.append([op, f"{ranks:g}", dtype, f"{best['busbw']:.3f}", size_label(best["size"]),
                     f"{int(part['wrong'].fillna(0).sum() + part['ip_wrong'].fillna(0).sum())}"])
    return rows


def bench_section(bench: pd.DataFrame) -> str:
    """The page section: the figure and the peaks table."""
    esc = html.escape
    head = ["op", "ranks", "type", "peak busbw GB/s", "at size", "#wrong"]
    table = ["<table id=\"bench-peaks\"><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"]
    table += ["<tr>" + "".join(f"<td>{esc(v)}</td>" for v in row) + "</tr>" for row in peak_rows(bench)]
    bad = wrong_rows(bench)
    status = (f'<p class="status bad">{len(bad)} row(s) with #wrong &gt; 0: '
              + esc(", ".join(f"{r.op} at {r.size:g} B" for r in bad.itertuples())) + "</p>"
              if not bad.empty else "")
    return "\n".join(['<h2 id="bench">Collective bandwidth</h2>', status,
                      f'<figure><img src="{FIGURE}" alt="{esc(TITLE)}"><figcaption><b>{esc(TITLE)}.</b> '
                      f"{esc(CAPTION)}</figcaption></figure>", "\n".join(table + ["</table>"])])


def write_bench_report(run_dir: Path, bench: pd.DataFrame) -> Path:
    """RUN_DIR/report/index.html and the figure for a directory with bench.csv and no cases.csv."""
    from .htmlpage import STYLE, flatten  # the run page's look

    env = read_env(run_dir)
    out = run_dir / "report"
    out.mkdir(exist_ok=True)
    save(plot_bench_busbw(bench, env), out / FIGURE)
    esc = html.escape
    meta = " · ".join(esc(str(env[k])) for k in ("host", "time", "git_sha") if k in env)
    env_rows = "".join(f"<tr><td>{esc(k)}</td><td>{esc(str(v))}</td></tr>" for k, v in flatten(env))
    page = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
            f"<title>ptsuite bench: {esc(run_dir.resolve().name)}</title><style>{STYLE}</style></head><body>",
            f"<h1>ptsuite bench: {esc(run_dir.resolve().name)}</h1>", f'<p class="meta">{meta}</p>',
            bench_section(bench),
            f'<details open><summary>Environment (env.json)</summary><table id="env">{env_rows}</table></details>',
            "</body></html>"]
    index = out / "index.html"
    index.write_text("\n".join(page) + "\n", encoding="utf-8")
    return index
