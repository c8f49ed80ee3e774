"""The convergence tables: per workload, the cases grouped by strategy, with what a
communication-reducing method trades: bus bytes per step and the exposed share of the
step against the steps and the wall time it needs to reach the suite's target_loss.
Shared by index.html and summary.md."""

import math
from dataclasses import dataclass

import pandas as pd

from .formatting import byte_unit, num
from .load import Run
from .summary import Cell

# cases.csv columns of the asynchronous strategies, shown as written when the run has them:
# their options (how often replicas synchronise, the staleness bound) and the largest
# staleness a case saw.
ASYNC_COLUMNS = ["sync_every", "staleness", "max_staleness_seen"]


@dataclass
class ConvergenceTable:
    workload: str
    header: list
    groups: list  # of (strategy, rows of Cells), strategies in run order


def final_losses(run: Run) -> pd.Series:
    """case -> the training loss of its last step."""
    steps = run.steps.dropna(subset=["loss"]).sort_values("step")
    return steps.groupby("case")["loss"].last()


def has_target(run: Run) -> bool:
    return bool(run.cases["target_loss"].notna().any())


def convergence_tables(run: Run) -> list:
    final = final_losses(run)
    options = [c for c in ASYNC_COLUMNS if c in run.cases.columns and (run.cases[c] != "").any()]
    tables = []
    for workload in run.workloads:
        cases = run.cases[run.cases["workload"] == workload]
        divisor, unit = byte_unit(cases["comm_bytes_per_step"].max(skipna=True) or 0)
        passing = cases[(cases["verdict"] == "PASS") & (cases["time_to_target_s"] > 0)]
        fastest = passing["time_to_target_s"].idxmin() if not passing.empty else None
        header = ["case", "dtype"] + options + [f"comm {unit}/step", "exposed comm", "final loss", "target loss",
                                                "steps to target", "s to target"]
        groups = []
        for strategy, group in cases.groupby("strategy", sort=False):
            rows = []
            for index, c in group.iterrows():
                reached = c["steps_to_target"] > 0
                target = c["target_loss"]
                missed = "not reached" if target > 0 and not reached else ""
                rows.append([Cell(c["case"]), Cell(c["dtype"])] + [Cell(str(c[o])) for o in options] + [
                    Cell(num(c["comm_bytes_per_step"] / divisor)),
                    Cell(f"{100 * c['comm_exposed_frac']:.0f}%" if not math.isnan(c["comm_exposed_frac"]) else "n/a"),
                    Cell(num(final.get(c["case"], math.nan))),
                    Cell(num(target) if target > 0 else ""),
                    Cell(f"{c['steps_to_target']:.0f}" if reached else missed),
                    Cell(num(c["time_to_target_s"]) if reached else missed, best=index == fastest)])
            groups.append((strategy, rows))
        tables.append(ConvergenceTable(workload, header, groups))
    return tables


CAPTION = ("Per case, grouped by strategy: bus bytes per step (comm_bytes_per_step, max over ranks), the "
           "share of the step spent blocked in communication (comm_exposed_frac), the last step's training "
           "loss, and where the suite sets target_loss the steps (steps_to_target, counting the step that "
           "reached it) and wall seconds (time_to_target_s, from the first step's start) to the first "
           "training loss at or below it. &#9733; the passing case of the workload that reached its target "
           "soonest in wall time.")
