#!/usr/bin/env python3
"""Build the report over several ptsuite runs: a baseline and the runs compared with it.

Usage: python3 report/compare_runs.py BASELINE RUN [RUN ...] [--out DIR]

BASELINE and each RUN are run directories (holding cases.csv); a directory of run
directories (a nightly history) stands for its runs, oldest first. Writes DIR/index.html
(default: compare-report/ beside the last run), summary.md for a CI comment, and the
figures: trend.png (per strategy, step time against the baseline run by run, with the
regressions `ptsuite compare` flagged in each run's compare.json ringed), speedup.png and
memory.png (grouped bars per strategy). Exits 2 with a message on bad input.
"""

import argparse
import sys
from pathlib import Path

from ptsreport import ReportError, make_multirun_report


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Compare ptsuite runs against a baseline.")
    parser.add_argument("runs", nargs="+", type=Path, help="the baseline run, then the runs (or histories)")
    parser.add_argument("--out", type=Path, help="output directory (default: compare-report beside the last run)")
    args = parser.parse_args(argv)
    out = args.out or args.runs[-1].resolve().parent / "compare-report"
    try:
        index = make_multirun_report([str(p) for p in args.runs], out)
    except ReportError as exc:
        print(f"compare_runs: error: {exc}", file=sys.stderr)
        return 2
    print(index)
    return 0


if __name__ == "__main__":
    sys.exit(main())
