"""`ptsuite plan --validate` in the report: validate.csv read against schema.VALIDATE, and
predicted against measured step time and memory per layout (one point per layout, the
suggested ones filled, the line y = x), with the MAPE, Kendall's tau and the regret."""

import html
import math
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from . import schema
from .load import read_csv
from .plots.style import save

FIGURE = "plan_validate.png"
TITLE = "ptsuite plan: predicted against measured"


def load_validate(run_dir: Path):
    """validate.csv of run_dir as a frame, or None when there is none."""
    df, _ = read_csv(run_dir, schema.VALIDATE_FILE, schema.VALIDATE, optional=True)
    return df


def kendall_tau(a, b) -> float:
    c = d = 0
    for i in range(len(a)):
        for j in range(i + 1, len(a)):
            s = (a[i] - a[j]) * (b[i] - b[j])
            c += s > 0
            d += s < 0
    return (c - d) / (c + d) if c + d else 1.0


def accuracy(df: pd.DataFrame, measured: str = "measured_step_s") -> dict:
    """MAPE (%), Kendall's tau and regret (measured step of the top suggestion / best measured)."""
    ok = df[df[measured] > 0]
    pred, meas = list(ok["predicted_step_s"]), list(ok[measured])
    mape = 100 * sum(abs(p - m) / m for p, m in zip(pred, meas)) / len(meas) if meas else math.nan
    top = ok[ok["predicted_rank"] == ok["predicted_rank"].min()] if "predicted_rank" in ok else ok.iloc[:1]
    regret = float(top[measured].iloc[0]) / min(meas) if meas and not top.empty else math.nan
    return {"layouts": len(meas), "mape": mape, "tau": kendall_tau(pred, meas), "regret": regret,
            "memory_exact": int((df["mem_exact_match"] == 1).sum())}


def plot_validate(df: pd.DataFrame):
    fig, (ax_t, ax_m) = plt.subplots(1, 2, figsize=(10, 4.4), layout="constrained")
    sug = df["suggested"] == 1
    for ax, x, y, unit, scale in ((ax_t, "predicted_step_s", "measured_step_s", "s", 1),
                                  (ax_m, "predicted_mem_exact_bytes", "measured_mem_exact_bytes", "MiB", 2**20)):
        ax.scatter(df.loc[~sug, x] / scale, df.loc[~sug, y] / scale, facecolors="none", edgecolors="C0",
                   label="sampled")
        ax.scatter(df.loc[sug, x] / scale, df.loc[sug, y] / scale, color="C3", label="suggested (top K)")
        lo = min(df[x].min(), df[y].min()) / scale
        hi = max(df[x].max(), df[y].max()) / scale
        ax.plot([lo, hi], [lo, hi], "k--", lw=0.8, label="y = x")
        ax.set_xlabel(f"predicted ({unit})")
        ax.set_ylabel(f"measured ({unit})")
        ax.legend(fontsize=8)
    a = accuracy(df)
    ax_t.set_title(f"step time: MAPE {a['mape']:.1f} %, tau {a['tau']:.2f}, regret {a['regret']:.2f}", fontsize=10)
    ax_m.set_title(f"memory per rank (exact part): {a['memory_exact']} of {len(df)} equal", fontsize=10)
    return fig


def write_plan_report(run_dir: Path, df: pd.DataFrame) -> Path:
    """RUN_DIR/report/index.html and the figure for a plan --validate directory."""
    from .htmlpage import STYLE

    out = run_dir / "report"
    out.mkdir(exist_ok=True)
    save(plot_validate(df), out / FIGURE)
    esc = html.escape
    a = accuracy(df)
    head = ["layout", "suggested", "predicted s", "measured s", "error %", "memory exact"]
    rows = [[r["layout"], "yes" if r["suggested"] == 1 else "", f"{r['predicted_step_s']:.4g}",
             f"{r['measured_step_s']:.4g}", f"{r['step_error_pct']:+.1f}", "yes" if r["mem_exact_match"] == 1 else "NO"]
            for _, r in df.iterrows()]
    table = ["<table id=\"validate\"><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr>"]
    table += ["<tr>" + "".join(f"<td>{esc(str(v))}</td>" for v in row) + "</tr>" for row in rows]
    page = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
            f"<title>{TITLE}</title><style>{STYLE}</style></head><body>", f"<h1>{TITLE}</h1>",
            f"<p>{a['layouts']} layouts: MAPE {a['mape']:.1f} %, Kendall tau {a['tau']:.3f}, regret {a['regret']:.3f}; "
            f"memory exact on every rank for {a['memory_exact']} of {len(df)}.</p>",
            f'<img src="{FIGURE}" alt="{TITLE}">', "\n".join(table) + "</table>", "</body></html>"]
    index = out / "index.html"
    index.write_text("\n".join(page) + "\n", encoding="utf-8")
    return index
