"""The report over several runs (ptsreport/multirun.py, compare_runs.py): ratios against
the baseline per case and per strategy, the regressions compare.json flags marked with the
run since which they stand, a history directory read in time order, and bad input."""

import json
import shutil

import pandas as pd
import pytest

from compare_runs import main
from ptsreport.load import ReportError
from ptsreport.multirun import expand, load_runs, per_strategy, side_by_side, since_when
from testruns import TESTDATA


def run_copy(dest, name, scale=None, time=None, flagged=None, drop=()):
    """testdata/quick copied to dest/name; scale: {strategy: factor} on step_time_s;
    time: env.json time; flagged: cases written to compare.json as step_time_s
    regressions; drop: cases removed."""
    run = dest / name
    shutil.copytree(TESTDATA / "quick", run)
    cases = pd.read_csv(run / "cases.csv", dtype=str, keep_default_na=False)
    for strategy, factor in (scale or {}).items():
        rows = cases["strategy"] == strategy
        cases.loc[rows, "step_time_s"] = (cases.loc[rows, "step_time_s"].astype(float) * factor).map(repr)
    cases = cases[~cases["case"].isin(drop)]
    cases.to_csv(run / "cases.csv", index=False)
    if time:
        env = json.loads((run / "env.json").read_text())
        env["time"] = time
        (run / "env.json").write_text(json.dumps(env))
    if flagged is not None:
        (run / "compare.json").write_text(json.dumps(
            {"regressions": [{"case": c, "column": "step_time_s"} for c in flagged]}))
    return run


def test_ratios_per_case_and_per_strategy(tmp_path):
    base = run_copy(tmp_path, "base")
    slow = run_copy(tmp_path, "slow", scale={"zero2": 1.5, "ddp": 0.5})
    m = load_runs([base, slow])
    table = side_by_side(m)
    z = table[table["strategy"] == "zero2"]
    assert len(z) == 4 and (z["time ratio 1"].round(12) == 1.5).all()
    speed = per_strategy(table, m, "time ratio")
    assert speed.loc["zero2"].iloc[0] == pytest.approx(1.5)
    assert speed.loc["ddp"].iloc[0] == pytest.approx(0.5)
    assert speed.loc["fsdp"].iloc[0] == pytest.approx(1.0)
    assert (per_strategy(table, m, "memory ratio") == 1.0).all().all()


def test_flagged_regressions_name_the_run_since_which_they_stand(tmp_path):
    history = tmp_path / "history"
    history.mkdir()
    # Given out of order: the history is read by env.json time.
    run_copy(history, "c", scale={"zero2": 1.6}, time="2026-12-03T03:00:00Z", flagged=["zero2-dp2-float64"])
    run_copy(history, "a", time="2026-12-01T03:00:00Z", flagged=[])
    run_copy(history, "b", scale={"zero2": 1.5}, time="2026-12-02T03:00:00Z", flagged=["zero2-dp4-float64"])
    assert [p.name for p in expand([history])] == ["a", "b", "c"]
    m = load_runs([history])
    table = side_by_side(m)
    flagged = since_when(m, per_strategy(table, m, "time ratio"))
    assert flagged.to_dict("records") == [{"strategy": "zero2", "flagged since": m.labels[1],
                                           "columns": "step_time_s", "time ratio now": pytest.approx(1.6)}]


def test_page_summary_and_missing_cases(tmp_path):
    base = run_copy(tmp_path, "base")
    fewer = run_copy(tmp_path, "fewer", drop=["zero1-dp2-float64"])
    out = tmp_path / "out"
    assert main([str(base), str(fewer), "--out", str(out)]) == 0
    summary = (out / "summary.md").read_text()
    assert "39 shared cases" in summary
    assert "lacks 1 of the baseline's cases (e.g. zero1-dp2-float64)" in summary
    assert "no compare.json" in summary  # its regressions are not marked, and it says so
    for png in ("trend.png", "speedup.png", "memory.png"):
        assert (out / png).stat().st_size > 0
    assert "Every shared case, side by side" in (out / "index.html").read_text()


def test_bad_input_exits_2(tmp_path, capsys):
    base = run_copy(tmp_path, "base")
    assert main([str(base)]) == 2
    assert "at least one run" in capsys.readouterr().err
    (tmp_path / "empty").mkdir()
    assert main([str(base), str(tmp_path / "empty")]) == 2
    assert "holds no run directory" in capsys.readouterr().err
    with pytest.raises(ReportError, match="not a run directory"):
        expand([tmp_path / "nowhere"])
