"""Tests of the first screen (index.html's status and per-workload tables) and of
summary.md, against values computed here straight from the runs' cases.csv."""

import json
import re

import pandas as pd
import pytest

from testruns import TESTDATA, Page, copy_run, pages

FAILURES = {  # case: (check column, reason) planted into a copy of testdata/quick
    "zero2-dp2-float32": ("check_precision", "precision: err_ratio 7.5 > 4 (float32 drifted from the oracle)"),
    "gpt-tp2-float64": ("check_exact", "exact: max_rel_err 3.2e-09 > 1e-12 | at step 3"),
}


def expected_best(name: str) -> dict:
    """{(workload, dtype): (fastest case, leanest case)} over the passing cases of
    testdata/name, from cases.csv alone."""
    cases = pd.read_csv(TESTDATA / name / "cases.csv")
    cases = cases[cases["verdict"] == "PASS"]
    rate = cases["tokens_per_s"].fillna(cases["samples_per_s"])
    best = {}
    for key, group in cases.groupby(["workload", "dtype"]):
        best[key] = (group.loc[rate[group.index].idxmax(), "case"],
                     group.loc[group["peak_mem_bytes"].idxmin(), "case"])
    return best


def marked(table: dict, column: str) -> list:
    """(dtype, strategy, fastest case, cell) of the rows whose cell in column is marked best."""
    index = table["header"].index(column)
    return [(dtype, cells[0][0], cells[0][2], cells[index]) for dtype, cells in table["rows"]
            if "best" in cells[index][1]]


@pytest.mark.parametrize("fixture, name, units", [
    ("quick_built", "quick", {"mlp-tiny": "samples/s", "gpt-tiny": "tokens/s"}),
    ("bench_built", "bench-mp", {"gpt-small": "tokens/s"}),
])
def test_first_screen_tables(fixture, name, units, request):
    """One table per workload, in its own throughput unit, with ms and MiB; in each
    dtype group the fastest and the leanest passing case are the ones marked."""
    run_dir = request.getfixturevalue(fixture)
    page = Page((run_dir / "report" / "index.html").read_text(encoding="utf-8"))
    assert list(page.headlines) == list(units)
    best = expected_best(name)
    cases = pd.read_csv(TESTDATA / name / "cases.csv").set_index("case")
    for workload, unit in units.items():
        table = page.headlines[workload]
        header = table["header"]
        assert header[:4] == ["strategy", "checks", "step ms", unit]
        assert "peak MiB" in header and re.fullmatch(r"comm (B|KiB|MiB|GiB)/step", header[-1])
        other = {"samples/s": "tokens/s", "tokens/s": "samples/s"}[unit]
        assert other not in header
        dtypes = {d for d in cases.loc[cases["workload"] == workload, "dtype"]}
        assert {d for d, _ in table["rows"]} == dtypes
        fastest = marked(table, unit)
        assert sorted((d, case) for d, _, case, _ in fastest) == \
            sorted((d, best[(workload, d)][0]) for d in dtypes)
        for dtype, strategy, case, cell in fastest:
            assert cases.loc[case, "strategy"] == strategy
            assert cell[0] == f"{round(cases.loc[case, 'tokens_per_s' if unit == 'tokens/s' else 'samples_per_s']):,}"
        leanest = marked(table, "peak MiB")
        for dtype, strategy, _, cell in leanest:
            lean = best[(workload, dtype)][1]
            assert cases.loc[lean, "strategy"] == strategy
            assert float(cell[0]) == pytest.approx(cases.loc[lean, "peak_mem_bytes"] / 2**20, rel=5e-3)
        assert len(leanest) == len(dtypes)
        # Rows are ordered fastest first within each dtype group.
        for dtype in dtypes:
            rates = [float(cells[3][0].replace(",", "")) for d, cells in table["rows"] if d == dtype]
            assert rates == sorted(rates, reverse=True)


def test_status_of_a_run_with_failures(tmp_path):
    run_dir = copy_run("quick", tmp_path, failures=FAILURES)
    text, markdown = pages(run_dir)
    assert '<div class="status bad" id="verdicts">40 cases: 38 PASS, 2 FAIL, 0 SKIP</div>' in text
    items = re.findall(r"<li>(.*?)</li>", text[text.index('id="failures"'):])
    assert items == ["<code>zero2-dp2-float32</code> (zero2, mlp-tiny): precision: err_ratio 7.5 &gt; 4 "
                     "(float32 drifted from the oracle)",
                     "<code>gpt-tp2-float64</code> (tp, gpt-tiny): exact: max_rel_err 3.2e-09 &gt; 1e-12 | at step 3"]
    assert "exact check: 19 PASS, 1 FAIL, 20 SKIP" in text and "precision check: 19 PASS, 1 FAIL, 20 SKIP" in text
    assert "**40 cases: 38 PASS, 2 FAIL, 0 SKIP**" in markdown
    assert "- `gpt-tp2-float64` (tp, gpt-tiny): exact: max_rel_err 3.2e-09 > 1e-12 \\| at step 3" in markdown
    # A strategy with a failed case says so and is never marked best.
    page = Page(text)
    for workload, strategy, dtype, checks in (("mlp-tiny", "zero2", "float32", "1 FAIL of 2"),
                                              ("gpt-tiny", "tp", "float64", "1 FAIL of 1")):
        rows = [cells for d, cells in page.headlines[workload]["rows"] if cells[0][0] == strategy and d == dtype]
        assert len(rows) == 1
        assert rows[0][1][0] == checks and "FAIL" in rows[0][1][1]
        assert not any("best" in c[1] for c in rows[0])


@pytest.mark.parametrize("expected", [55, 40])
def test_incomplete_run_says_so(tmp_path, expected):
    """run.json expecting more cases than cases.csv holds: "incomplete: 40 of 55", not a
    clean pass; a complete one says nothing more."""
    run_dir = copy_run("quick", tmp_path)
    (run_dir / "run.json").write_text(json.dumps({"state": "interrupted", "expected": expected, "completed": 40}))
    text, markdown = pages(run_dir)
    if expected == 55:
        assert '<div class="status bad" id="verdicts">40 cases: 40 PASS, 0 FAIL, 0 SKIP</div>' in text
        assert "incomplete: 40 of 55 cases ran" in text
        assert "❌ **40 cases: 40 PASS, 0 FAIL, 0 SKIP**" in markdown
        assert "**incomplete: 40 of 55 cases ran**" in markdown
    else:
        assert '<div class="status ok" id="verdicts">' in text and "incomplete" not in text + markdown


@pytest.mark.parametrize("oversubscribed", [True, False])
def test_oversubscription_note(tmp_path, oversubscribed):
    run_dir = copy_run("quick", tmp_path, env={"cores": 2 if oversubscribed else 8, "ranks_per_node": 4,
                                               "oversubscribed": oversubscribed},
                       oversubscribed=int(oversubscribed))
    text, markdown = pages(run_dir)
    assert ('id="oversubscribed"' in text) == oversubscribed
    assert ("**Oversubscribed run** (env.json: 4 ranks on a node with 2 usable cores)" in markdown) == oversubscribed
    assert "Core sharing unknown" not in text
    # On the first screen the timing cells are greyed when they measure the sharing.
    cells = [cells[2] for _, cells in Page(text).headlines["mlp-tiny"]["rows"]]
    assert all(("shared" in c[1]) == oversubscribed for c in cells)


def test_unknown_core_sharing_said(quick_built):
    text = (quick_built / "report" / "index.html").read_text(encoding="utf-8")
    assert 'id="cores-unknown"' in text and 'id="oversubscribed"' not in text
    assert "Core sharing unknown: env.json does not record the cores (older run)." in \
        (quick_built / "report" / "summary.md").read_text(encoding="utf-8")


def test_bench_run_says_checks_were_off(bench_built):
    text = (bench_built / "report" / "index.html").read_text(encoding="utf-8")
    assert "Notes: 12 cases: equivalence checks off (check = none)" in text
    rows = Page(text).headlines["gpt-small"]["rows"]
    assert all(cells[1][2] == "no equivalence check" and "UNCHECKED" in cells[1][1] for _, cells in rows)
    # Speedup over the single case: tp-tp2 against single, from tokens/s.
    cases = pd.read_csv(TESTDATA / "bench-mp" / "cases.csv").set_index("case")
    header = Page(text).headlines["gpt-small"]["header"]
    tp = next(cells for _, cells in rows if cells[0][0] == "tp")
    assert tp[0][2] == "tp-tp2"
    speedup = cases.loc["tp-tp2", "tokens_per_s"] / cases.loc["single", "tokens_per_s"]
    assert tp[header.index("× single")][0] == f"×{speedup:.3g}"


def test_summary_md(quick_built):
    markdown = (quick_built / "report" / "summary.md").read_text(encoding="utf-8")
    assert "**40 cases: 40 PASS, 0 FAIL, 0 SKIP**" in markdown
    assert "Checks: exact 20 PASS, 20 SKIP; precision 20 PASS, 20 SKIP; comm 40 PASS; memory 40 PASS" in markdown
    for workload, unit in (("mlp-tiny", "samples/s"), ("gpt-tiny", "tokens/s")):
        section = markdown.split(f"### {workload} (throughput in {unit})")[1].split("###")[0]
        lines = [line for line in section.splitlines() if line.startswith("|")]
        assert lines[0].startswith(f"| dtype | strategy | checks | step ms | {unit} |") and "peak MiB" in lines[0]
        rows = lines[2:]
        assert {r.split(" | ")[0] for r in rows} == {"| float64", "| float32"}
        # One fastest per dtype: the step ms and throughput cells both starred.
        assert sum(r.split(" | ")[4].endswith("★") for r in rows) == 2
