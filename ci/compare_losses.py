#!/usr/bin/env python3
"""Compare the float64 per-step losses of two run directories bit for bit.

    python3 ci/compare_losses.py BEFORE_DIR AFTER_DIR [--all-dtypes]

A refactoring that keeps every summation order must leave each float64 case's losses
identical to the last bit (steps.csv writes the shortest decimal that round-trips, so equal
text is equal doubles). Cases are matched by name; float32 cases are compared only with
--all-dtypes. Exit status: 0 when every compared case is identical and both runs hold the
same float64 cases, 1 otherwise (each difference is listed), 2 on unusable input.
"""
import argparse
import csv
import sys
from pathlib import Path


def read_run(directory: Path):
    """Returns ({case: dtype}, {case: [loss text per step]})."""
    cases_path, steps_path = directory / "cases.csv", directory / "steps.csv"
    for p in (cases_path, steps_path):
        if not p.is_file():
            raise SystemExit(f"compare_losses: {p} is missing; is {directory} a ptsuite run directory?")
    with cases_path.open(newline="") as f:
        dtypes = {row["case"]: row["dtype"] for row in csv.DictReader(f)}
    losses = {}
    with steps_path.open(newline="") as f:
        for row in csv.DictReader(f):
            losses.setdefault(row["case"], []).append((int(row["step"]), row["loss"]))
    return dtypes, {case: [loss for _, loss in sorted(steps)] for case, steps in losses.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--all-dtypes", action="store_true", help="compare float32 cases too")
    args = ap.parse_args(argv)
    try:
        dt_a, loss_a = read_run(args.before)
        dt_b, loss_b = read_run(args.after)
    except SystemExit as e:
        print(e, file=sys.stderr)
        return 2

    def wanted(dtypes):
        return {c for c, d in dtypes.items() if args.all_dtypes or d == "float64"}

    a, b = wanted(dt_a), wanted(dt_b)
    problems = [f"only in {args.before}: {c}" for c in sorted(a - b)]
    problems += [f"only in {args.after}: {c}" for c in sorted(b - a)]
    identical = 0
    for case in sorted(a & b):
        la, lb = loss_a.get(case, []), loss_b.get(case, [])
        if la == lb and la:
            identical += 1
            continue
        if len(la) != len(lb) or not la:
            problems.append(f"{case}: {len(la)} steps before, {len(lb)} after")
            continue
        step = next(i for i, (x, y) in enumerate(zip(la, lb)) if x != y)
        problems.append(f"{case}: step {step} loss {la[step]} before, {lb[step]} after "
                        f"(difference {float(lb[step]) - float(la[step]):.3g})")
    for p in problems:
        print(p)
    kind = "cases" if args.all_dtypes else "float64 cases"
    print(f"{identical} of {len(a | b)} {kind} have bit-identical per-step losses")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
