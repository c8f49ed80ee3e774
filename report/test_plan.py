"""Tests of `ptsuite plan --validate` in the report (ptsreport/plan.py) on
testdata/plan-validate, a real plan directory (validate.csv and plan.csv of gpt-small on 2
ranks under a 0.25 GB/s, 100 us emulated link): the page make_report.py writes, the figure's
two panels (step time and memory, predicted on x, measured on y, the line y = x), the figures
ptsuite printed for that run (MAPE 7.2 %, tau 0.714, regret 1.117, 15 of 15 memory exact),
a missing column named, and the columns against results/SCHEMA.md."""

import shutil

import pandas as pd
import pytest

from conftest import built, run_make_report
from ptsreport import schema
from ptsreport.plan import FIGURE, accuracy, kendall_tau, load_validate, plot_validate
from test_load import schema_md_units
from testruns import TESTDATA, Page

PLAN = TESTDATA / "plan-validate"


def test_plan_directory_gets_its_page(tmp_path):
    run_dir = tmp_path / "plan"
    shutil.copytree(PLAN, run_dir)
    built(run_dir)
    page = Page((run_dir / "report" / "index.html").read_text(encoding="utf-8"))
    assert page.images == [FIGURE]
    assert "validate" in page.ids
    assert (run_dir / "report" / FIGURE).read_bytes()[:4] == b"\x89PNG"


def test_figures_match_what_ptsuite_printed():
    # ptsuite plan --validate printed for this run: "MAPE 7.2 %, Kendall tau 0.714, regret
    # (top-1 measured / best measured) 1.117" and "on every rank for 15 of 15".
    a = accuracy(load_validate(PLAN))
    assert a["layouts"] == 15
    assert a["mape"] == pytest.approx(7.2, abs=0.05)
    assert a["tau"] == pytest.approx(0.714, abs=0.0005)
    assert a["regret"] == pytest.approx(1.117, abs=0.0005)
    assert a["memory_exact"] == 15


def test_kendall_tau_of_known_orders():
    assert kendall_tau([1, 2, 3, 4], [10, 20, 30, 40]) == 1.0
    assert kendall_tau([1, 2, 3, 4], [40, 30, 20, 10]) == -1.0
    assert kendall_tau([1, 2, 3], [1, 3, 2]) == pytest.approx(1 / 3)


def test_panels_plot_predicted_against_measured():
    df = load_validate(PLAN)
    fig = plot_validate(df)
    ax_t, ax_m = fig.axes[:2]
    xs = sorted(x for coll in ax_t.collections for x, _ in coll.get_offsets())
    assert xs == pytest.approx(sorted(df["predicted_step_s"]))
    ys = sorted(y for coll in ax_m.collections for _, y in coll.get_offsets())
    assert ys == pytest.approx(sorted(df["measured_mem_exact_bytes"] / 2**20))
    assert "15 of 15" in ax_m.get_title()


def test_missing_column_is_named(tmp_path):
    run_dir = tmp_path / "plan"
    shutil.copytree(PLAN, run_dir)
    df = pd.read_csv(run_dir / "validate.csv", dtype=str, keep_default_na=False)
    df.drop(columns=["measured_step_s"]).to_csv(run_dir / "validate.csv", index=False)
    proc = run_make_report(run_dir)
    assert proc.returncode != 0
    assert "measured_step_s" in proc.stderr


def test_columns_match_schema_md():
    units = schema_md_units()["validate.csv"]
    for c in schema.VALIDATE:
        assert units.get(c.name) == c.unit, c.name
