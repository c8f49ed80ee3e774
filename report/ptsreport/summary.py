"""What the top of the page and summary.md say: verdict counts, the failures with
their reasons, and per workload one headline row per strategy and dtype.

A headline row speaks for a strategy through two of its cases: its fastest passing
case (step time, throughput, speedup, communication) and its leanest passing case
(peak memory). A strategy none of whose cases passed is shown with its fastest case
and is never marked best.
"""

import math
from collections import Counter
from dataclasses import dataclass, field

import pandas as pd

from .formatting import byte_unit, num
from .load import Run

VERDICTS = ["PASS", "FAIL", "SKIP"]
CHECKS = ["check_exact", "check_precision", "check_comm", "check_memory"]


@dataclass
class Headline:
    strategy: str
    dtype: str
    counts: Counter  # verdict -> number of the strategy's cases
    checked: bool  # an exact or precision check ran on some case
    fastest: pd.Series  # the case speed columns come from
    leanest: pd.Series  # the case the memory column comes from
    best: set = field(default_factory=set)  # of "speed", "memory", "comm"

    @property
    def passed(self) -> bool:
        """None of its cases failed: only then can it be marked best."""
        return self.counts["FAIL"] == 0 and self.fastest["verdict"] == "PASS"

    @property
    def num_cases(self) -> int:
        return sum(self.counts.values())


@dataclass
class WorkloadSummary:
    workload: str
    unit: str  # tokens/s or samples/s
    groups: list  # of (dtype, [Headline]) with the fastest strategy first


@dataclass
class Summary:
    num_cases: int
    verdicts: Counter
    checks: dict  # check column -> Counter of its values (only columns the run has)
    failures: list  # of (case, strategy, workload, reason)
    notes: list  # of (reason, number of cases): reasons given on cases that did not fail
    workloads: list  # of WorkloadSummary
    expected: int = 0  # cases the run set out to run (run.json); 0 when unknown

    @property
    def incomplete(self) -> str:
        """ "incomplete: 1 of 3 cases ran (interrupted)" when the run did not run every case
        it expected, else "". """
        if not self.expected or self.num_cases >= self.expected:
            return ""
        return f"incomplete: {self.num_cases} of {self.expected} cases ran"


def extreme(cases: pd.DataFrame, column: str, largest: bool) -> pd.Series:
    """The case with the largest (or smallest) value, preferring passing cases."""
    for pool in (cases[cases["verdict"] == "PASS"], cases):
        known = pool[column].dropna()
        if not known.empty:
            return pool.loc[known.idxmax() if largest else known.idxmin()]
    return cases.iloc[0]


def headline(strategy: str, dtype: str, cases: pd.DataFrame) -> Headline:
    ran = cases[["check_exact", "check_precision"]].isin(["PASS", "FAIL"]).to_numpy().any()
    return Headline(strategy=strategy, dtype=dtype, counts=Counter(cases["verdict"].replace("", "none")),
                    checked=bool(ran), fastest=extreme(cases, "throughput", largest=True),
                    leanest=extreme(cases, "peak_mib", largest=False))


def mark_best(rows: list) -> None:
    """Mark the best row of a group among strategies none of whose cases failed, for
    speed, memory and communication (the least bytes among those that communicate)."""
    passing = [r for r in rows if r.passed]
    for metric, value, largest in (("speed", lambda r: r.fastest["throughput"], True),
                                   ("memory", lambda r: r.leanest["peak_mib"], False),
                                   ("comm", lambda r: r.fastest["comm_bytes_per_step"], False)):
        known = [r for r in passing if value(r) > 0]
        if known:
            pick = (max if largest else min)(known, key=value)
            pick.best.add(metric)


def workload_summary(workload: str, cases: pd.DataFrame) -> WorkloadSummary:
    groups = []
    for dtype, by_dtype in cases.groupby("dtype", sort=False):
        rows = [headline(strategy, dtype, by_strategy)
                for strategy, by_strategy in by_dtype.groupby("strategy", sort=False)]
        rows.sort(key=lambda r: -r.fastest["throughput"] if r.fastest["throughput"] > 0 else math.inf)
        mark_best(rows)
        groups.append((dtype, rows))
    return WorkloadSummary(workload=workload, unit=cases["unit"].iloc[0], groups=groups)


def summarize(run: Run) -> Summary:
    cases = run.cases
    failed = cases[cases["verdict"] == "FAIL"]
    failures = [(r.case, r.strategy, r.workload, r.reason or "(no reason given)")
                for r in failed.itertuples()]
    noted = cases.loc[(cases["verdict"] != "FAIL") & (cases["reason"] != ""), "reason"]
    checks = {c: Counter(cases[c].replace("", "none")) for c in CHECKS
              if c not in run.absent.get("cases.csv", [])}
    return Summary(num_cases=len(cases), verdicts=Counter(cases["verdict"].replace("", "none")),
                   checks=checks, failures=failures, notes=list(Counter(noted).items()),
                   workloads=[workload_summary(w, cases[cases["workload"] == w]) for w in run.workloads],
                   expected=int(run.progress.get("expected", 0)))


def tally(counts: Counter, always=VERDICTS) -> str:
    """ "38 PASS, 2 FAIL, 0 SKIP": the values in always (even when 0), then any other."""
    order = VERDICTS + sorted(set(counts) - set(VERDICTS))
    return ", ".join(f"{counts[v]} {v}" for v in order if counts[v] or v in always) or "none"


@dataclass
class Cell:
    text: str
    best: bool = False  # the best value of its dtype group: highlighted
    note: str = ""  # a second, smaller line: the case the value comes from
    css: str = ""  # PASS, FAIL or UNCHECKED for the checks cell
    hover: str = ""  # the case the value comes from, where not the row's fastest


def checks_cell(row: Headline) -> Cell:
    """ "7/7 PASS"; "1 FAIL of 2" (with any SKIP) when not all passed."""
    n, passed = row.num_cases, row.counts["PASS"]
    if passed < n:
        text = ", ".join(f"{row.counts[v]} {v}" for v in row.counts if v != "PASS") + f" of {n}"
        return Cell(text, css="FAIL" if row.counts["FAIL"] else "SKIP")
    if not row.checked:
        return Cell(f"{n}/{n} PASS", note="no equivalence check", css="UNCHECKED")
    return Cell(f"{n}/{n} PASS", css="PASS")


def headline_table(ws: WorkloadSummary) -> tuple:
    """(header, [(dtype, rows of Cells)]) of a workload's first-screen table, shared
    by index.html and summary.md."""
    rows = [r for _, group in ws.groups for r in group]
    divisor, comm_unit = byte_unit(max((r.fastest["comm_bytes_per_step"] for r in rows
                                        if r.fastest["comm_bytes_per_step"] > 0), default=0))
    has_speedup = any(r.fastest["speedup"] > 0 for r in rows)
    header = ["strategy", "checks", "step ms", ws.unit]
    header += ["× single"] * has_speedup + ["peak MiB", f"comm {comm_unit}/step"]
    groups = []
    for dtype, group in ws.groups:
        table = []
        for r in group:
            fast, lean = r.fastest, r.leanest
            speed = "speed" in r.best
            cells = [Cell(r.strategy, note=fast["case"]), checks_cell(r),
                     Cell(num(fast["step_ms"]), best=speed), Cell(num(fast["throughput"]), best=speed)]
            if has_speedup:
                cells.append(Cell(f"×{num(fast['speedup'])}" if fast["speedup"] > 0 else ""))
            cells.append(Cell(num(lean["peak_mib"]), best="memory" in r.best, hover=lean["case"]))
            cells.append(Cell(num(fast["comm_bytes_per_step"] / divisor), best="comm" in r.best))
            table.append(cells)
        groups.append((dtype, table))
    return header, groups
