"""Tests of reading a run: the report's column list against results/SCHEMA.md, the
core-sharing decision for newer and older runs, and env.json's control characters."""

import json
import re

import pytest

from conftest import REPORT
from ptsreport import schema
from ptsreport.load import load_run
from testruns import copy_run, pages

SCHEMA_MD = REPORT.parent / "results" / "SCHEMA.md"


def schema_md_units() -> dict:
    """{file: {column: unit}} from the tables of results/SCHEMA.md."""
    units, current = {}, None
    for line in SCHEMA_MD.read_text().splitlines():
        heading = re.match(r"## (\S+\.csv)", line)
        if heading:
            current = units.setdefault(heading.group(1), {})
        row = re.match(r"\| `(\w+)` \| ([^|]+) \|", line)
        if row and current is not None:
            current[row.group(1)] = row.group(2).strip()
    return units


def test_columns_match_schema_md():
    """Every column the report reads is in SCHEMA.md with the unit the report assumes
    (it converts s to ms and bytes to MiB on that basis)."""
    documented = schema_md_units()
    for name, columns in schema.FILES.items():
        assert name in documented, f"{name} not in {SCHEMA_MD}"
        for column in columns:
            assert column.name in documented[name], f"{name}: {column.name} not in SCHEMA.md"
            assert documented[name][column.name] == column.unit, \
                f"{name}: {column.name} is in {documented[name][column.name]}, the report assumes {column.unit}"


@pytest.mark.parametrize("env, column, state, detail", [
    # Newer runs: env.json says it, and cases.csv has the column.
    ({"cores": 2, "ranks_per_node": 4, "oversubscribed": True}, 1, "yes",
     "env.json: 4 ranks on a node with 2 usable cores"),
    ({"cores": 16, "ranks_per_node": 4, "oversubscribed": False}, 0, "no",
     "env.json: 4 ranks on a node with 16 usable cores"),
    # A cases.csv column without the env.json keys.
    ({}, 1, "yes", "cases.csv oversubscribed column"),
    # Older runs with cores only: env.json ranks (4 in testdata/quick) against cores.
    ({"cores": 2}, None, "yes", "env.json: 4 ranks, 2 cores"),
    ({"cores": 8}, None, "no", "env.json: 4 ranks, 8 cores"),
    # Older runs without cores (testdata as recorded).
    ({}, None, "unknown", "env.json does not record the cores (older run)"),
], ids=["new-yes", "new-no", "column-only", "cores-only-yes", "cores-only-no", "unknown"])
def test_oversubscription(tmp_path, env, column, state, detail):
    run = load_run(copy_run("quick", tmp_path, env=env, oversubscribed=column))
    assert (run.oversubscription.state, run.oversubscription.detail) == (state, detail)


def test_env_control_characters_stripped(tmp_path):
    """Older runs' MPI version string ends in a NUL: the page shows it without."""
    run_dir = copy_run("quick", tmp_path)
    raw = json.loads((run_dir / "env.json").read_text())["versions"]["mpi"]
    assert raw.endswith("\x00"), "testdata/quick no longer has the NUL this test is about"
    assert load_run(run_dir).env["versions"]["mpi"] == raw[:-1]
    text, markdown = pages(run_dir)
    assert f"<td>versions.mpi</td><td>{raw[:-1]}</td>" in text
    assert "\x00" not in text and "\x00" not in markdown


def test_optional_columns_absent(tmp_path):
    """An older cases.csv without optional columns still makes a page, which names them."""
    run_dir = copy_run("bench-mp", tmp_path)
    lines = (run_dir / "cases.csv").read_text().splitlines()
    header = lines[0].split(",")
    drop = {header.index(c) for c in ("tokens_per_s", "strategy", "comm_wait_s", "global_batch")}
    (run_dir / "cases.csv").write_text("\n".join(",".join(f for i, f in enumerate(line.split(","))
                                                          if i not in drop) for line in lines) + "\n")
    text, _ = pages(run_dir)
    assert "Not in this run (older run): cases.csv: strategy, oversubscribed, global_batch, target_loss, " \
           "tokens_per_s, comm_wait_s, steps_to_target, time_to_target_s; steps.csv: wall_s." in text
    assert "throughput in samples/s" in text  # without tokens_per_s, gpt-small falls back
