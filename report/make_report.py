#!/usr/bin/env python3
"""Build the report of one ptsuite run directory.

Usage: python3 report/make_report.py RUN_DIR

Writes RUN_DIR/report/index.html, summary.md (the same summary in Markdown, for CI
comments) and the PNG figures the page shows. The code is in report/ptsreport/
(see its __init__.py for where each part lives). Exits with status 2 and a message
naming the file and column when a required input is missing.
"""

import argparse
import sys
from pathlib import Path

from ptsreport import ReportError, make_report


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
