#!/usr/bin/env python3
"""Conformance coverage from two run directories.

    python3 ci/coverage.py CONFORMANCE_RUN PLANTED_RUN [--shipped A,B] [--matrix FILE] [--markdown FILE]

CONFORMANCE_RUN is a run of suite/conformance.toml, PLANTED_RUN one of strategies/testing/planted.toml
(by build/ptsuite_planted). Per strategy: the cases, the dtypes and optimizers, and every
communication operation it states, with the number of cases in which the operation was both
stated and counted with calls > 0. Per planted bug: the checks that failed it. Exit status 1
when a strategy states an operation that no case exercises, a shipped strategy is missing
from the conformance run, a case of a strategy's conformance matrix (FILE: `ptsuite matrix
--cases`, one name a line) is missing from it, a case failed there, or a planted bug passed
every check.
"""
import argparse
import sys
from pathlib import Path

import pandas as pd

CHECKS = ["check_exact", "check_precision", "check_comm", "check_memory", "check_trace", "check_schedule"]


def markdown(df):
    cols = list(df.columns)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(str(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines)


def strategies_table(cases, comm):
    rows, problems = [], []
    merged = comm.merge(cases[["case", "strategy"]], on="case")
    for strategy, group in cases.groupby("strategy", sort=True):
        ops = merged[merged.strategy == strategy]
        stated = ops[ops.expected_calls.fillna(0) > 0]
        exercised = stated[stated.calls > 0]
        per_op = []
        for (axis, op), g in stated.groupby(["axis", "op"]):
            n = int((g.calls > 0).sum())
            per_op.append(f"{axis}/{op} {n}")
            if n == 0:
                problems.append(f"{strategy}: states {axis}/{op} but no case exercises it")
        rows.append({
            "strategy": strategy,
            "cases": len(group),
            "dtypes": ", ".join(sorted(group.dtype.unique())),
            "optimizers": ", ".join(sorted(group.optimizer.unique())),
            "stated ops (cases exercising)": "; ".join(per_op) or "none (no communication)",
        })
        failed = group[group.verdict != "PASS"]
        for case in failed.case:
            problems.append(f"{strategy}: conformance case {case} failed")
        if exercised.empty and not stated.empty:
            problems.append(f"{strategy}: nothing it states is exercised")
    return pd.DataFrame(rows), problems


def planted_table(cases):
    rows, problems = [], []
    for strategy, group in cases.groupby("strategy", sort=True):
        caught = [c.replace("check_", "") for c in CHECKS if (group[c] == "FAIL").any()]
        if (group.verdict == "PASS").any():
            problems.append(f"planted bug {strategy}: some case passed every check: "
                            + ", ".join(group[group.verdict == "PASS"].case))
        rows.append({"planted bug": strategy, "cases": len(group),
                     "caught by": ", ".join(caught) or "NOTHING"})
        if not caught:
            problems.append(f"planted bug {strategy}: no check caught it")
    return pd.DataFrame(rows), problems


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("conformance", type=Path)
    ap.add_argument("planted", type=Path)
    ap.add_argument("--markdown", type=Path, help="also write the tables here")
    ap.add_argument("--shipped", default="", help="comma-separated strategies that must appear")
    ap.add_argument("--matrix", type=Path, help="case names that must appear (ptsuite matrix --cases)")
    args = ap.parse_args(argv)
    try:
        cases = pd.read_csv(args.conformance / "cases.csv")
        comm = pd.read_csv(args.conformance / "comm.csv")
        planted = pd.read_csv(args.planted / "cases.csv")
    except (OSError, pd.errors.ParserError) as e:
        print(f"coverage: {e}", file=sys.stderr)
        return 2
    strat, problems = strategies_table(cases, comm)
    bugs, more = planted_table(planted)
    problems += more
    for s in filter(None, args.shipped.split(",")):
        if s not in set(cases.strategy):
            problems.append(f"{s}: shipped but not in the conformance run")
    if args.matrix:
        ran = set(cases.case)
        for name in args.matrix.read_text().splitlines():
            if name and not name.startswith("#") and name not in ran:
                problems.append(f"{name}: in a strategy's conformance matrix but not in the conformance run")
    text = ("## Strategies in the conformance suite\n\n" + markdown(strat) +
            "\n\n## Planted bugs and the checks that caught them\n\n" + markdown(bugs) + "\n")
    print(text)
    if args.markdown:
        args.markdown.write_text(text)
    for p in problems:
        print("coverage: " + p, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
