"""The nightly history and its trend report (ci/nightly.sh calls it).

python3 ci/trend.py HISTORY_DIR RUN_DIR COMPARE_EXIT appends RUN_DIR's cases to
HISTORY_DIR/history.csv (one tidy row per run per case: run id, date, git sha, machine,
compare exit, and the case's gated figures) and rewrites HISTORY_DIR/trend.md: per case,
step time over the last runs, and any run whose exact figures moved.
"""
import csv
import json
import sys
from pathlib import Path

import pandas as pd

FIGURES = ["verdict", "step_time_s", "comm_payload_bytes", "peak_mem_bytes", "max_rel_err", "err_ratio"]
LAST_RUNS = 10


def append(history: Path, run: Path, compare_exit: int) -> Path:
    env = json.loads((run / "env.json").read_text())
    cases = pd.read_csv(run / "cases.csv", dtype=str, keep_default_na=False)
    rows = cases[["case"] + [c for c in FIGURES if c in cases.columns]].copy()
    rows.insert(0, "compare_exit", compare_exit)
    rows.insert(0, "host", env.get("host", ""))
    rows.insert(0, "git_sha", env.get("git_sha", ""))
    rows.insert(0, "date", env.get("time", ""))
    rows.insert(0, "run_id", run.name)
    path = history / "history.csv"
    rows.to_csv(path, mode="a", header=not path.exists(), index=False, quoting=csv.QUOTE_MINIMAL)
    return path


def trend(history: Path) -> str:
    h = pd.read_csv(history / "history.csv", dtype={"git_sha": str})
    runs = h.drop_duplicates("run_id")[["run_id", "date", "git_sha", "compare_exit"]].tail(LAST_RUNS)
    out = ["# Nightly trend", "", f"The last {len(runs)} runs of {h.run_id.nunique()} in {history / 'history.csv'}.", "",
           "| run | date | git sha | compare |", "|---|---|---|---|"]
    for r in runs.itertuples():
        out.append(f"| {r.run_id} | {r.date} | {r.git_sha} | {'REGRESSED' if r.compare_exit == 1 else 'OK' if r.compare_exit == 0 else r.compare_exit} |")
    recent = h[h.run_id.isin(runs.run_id)]
    ms = recent.pivot_table(index="case", columns="run_id", values="step_time_s", aggfunc="first") * 1e3
    out += ["", "## Step time (ms, median of the timed steps)", "",
            "| case | " + " | ".join(ms.columns) + " |", "|---|" + "---|" * len(ms.columns)]
    for case, row in ms.iterrows():
        out.append(f"| {case} | " + " | ".join(f"{v:.3f}" for v in row) + " |")
    moved = recent.groupby("case")["comm_payload_bytes"].nunique()
    out += ["", "## Exact figures", ""]
    out.append("comm_payload_bytes changed in: " + ", ".join(moved[moved > 1].index) if (moved > 1).any()
               else "comm_payload_bytes identical in every run shown.")
    return "\n".join(out) + "\n"


def main() -> None:
    history, run, compare_exit = Path(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3])
    history.mkdir(parents=True, exist_ok=True)
    append(history, run, compare_exit)
    (history / "trend.md").write_text(trend(history))


if __name__ == "__main__":
    main()
