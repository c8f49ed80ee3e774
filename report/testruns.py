"""Helpers for the report tests: copies of the real runs in testdata/ with planted
changes (a failure, the newer oversubscription fields), and a parser for the pages."""

import json
import shutil
from html.parser import HTMLParser
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from ptsreport.htmlpage import write_html
from ptsreport.load import load_run
from ptsreport.markdown import write_markdown
from ptsreport.metrics import add_metrics
from ptsreport.summary import summarize

TESTDATA = Path(__file__).resolve().parent / "testdata"


def copy_run(name: str, dest: Path, env=None, drop_env=(), failures=None, oversubscribed=None,
             staleness=None) -> Path:
    """A copy of testdata/name in dest. env: keys to set in env.json; drop_env: keys
    to remove; failures: {case: (check column, reason)} turned into FAIL verdicts;
    oversubscribed: 0 or 1 written as the cases.csv column (None: no column);
    staleness: {case: {staleness: count}} written as staleness.csv (None: no file), the
    file the asynchronous strategies write (planted: the runs in testdata/ have none)."""
    run_dir = dest / name
    shutil.copytree(TESTDATA / name, run_dir)
    env_path = run_dir / "env.json"
    data = json.loads(env_path.read_text())
    data.update(env or {})
    for key in drop_env:
        data.pop(key, None)
    env_path.write_text(json.dumps(data))
    cases = pd.read_csv(run_dir / "cases.csv", dtype=str, keep_default_na=False)
    for case, (check, reason) in (failures or {}).items():
        assert (cases["case"] == case).any(), f"no case {case} in testdata/{name}"
        cases.loc[cases["case"] == case, ["verdict", check, "reason"]] = ["FAIL", "FAIL", reason]
    if oversubscribed is not None:
        cases.insert(cases.columns.get_loc("ranks") + 1, "oversubscribed", str(oversubscribed))
    cases.to_csv(run_dir / "cases.csv", index=False)
    if staleness is not None:
        rows = [(case, s, n) for case, hist in staleness.items() for s, n in hist.items()]
        pd.DataFrame(rows, columns=["case", "staleness", "count"]).to_csv(run_dir / "staleness.csv", index=False)
    return run_dir


def load(run_dir: Path):
    """(run with metrics, summary)."""
    run = add_metrics(load_run(run_dir))
    return run, summarize(run)


def pages(run_dir: Path):
    """Write index.html and summary.md only (no figures); return (html, markdown) text."""
    run, summary = load(run_dir)
    out = run_dir / "report"
    out.mkdir(exist_ok=True)
    write_html(run, summary, out / "index.html")
    write_markdown(run, summary, out / "summary.md")
    return (out / "index.html").read_text(encoding="utf-8"), (out / "summary.md").read_text(encoding="utf-8")


class Page(HTMLParser):
    """What the tests read from index.html: images, element ids in page order, and
    each headline table as {workload: {"header": [...], "rows": [(dtype, cells)]}}
    with cells as (text, classes, note)."""

    def __init__(self, text: str):
        super().__init__()
        self.images, self.ids, self.headlines = [], [], {}
        self._table = None
        self._dtype = ""
        self._row = None
        self._cell = None
        self._in_note = False
        self.feed(text)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if "id" in attrs:
            self.ids.append(attrs["id"])
        if tag == "img":
            self.images.append(attrs["src"])
        elif tag == "table" and "headline" in (attrs.get("class") or ""):
            self._table = self.headlines.setdefault(attrs["data-workload"], {"header": [], "rows": []})
        elif self._table is not None and tag == "tr":
            self._row = {"group": "group" in (attrs.get("class") or ""), "cells": []}
        elif self._table is not None and tag in ("td", "th"):
            self._cell = ["", (attrs.get("class") or "").split(), ""]
        elif self._cell is not None and tag == "span":
            self._in_note = True

    def handle_endtag(self, tag):
        if tag == "span":
            self._in_note = False
        elif tag in ("td", "th") and self._cell is not None:
            self._row["cells"].append((self._cell[0].strip(), self._cell[1], self._cell[2].strip()))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            cells = self._row["cells"]
            if self._row["group"]:
                self._dtype = cells[0][0]
            elif not self._table["header"]:
                self._table["header"] = [c[0] for c in cells]
            else:
                self._table["rows"].append((self._dtype, cells))
            self._row = None
        elif tag == "table":
            self._table, self._dtype = None, ""

    def handle_data(self, data):
        if self._cell is not None:
            self._cell[2 if self._in_note else 0] += data


def figure_texts(fig) -> list:
    """Every text drawn on a figure (suptitle, axes titles and labels, texts, legends);
    closes the figure."""
    texts = [t.get_text() for t in fig.texts]
    if fig._suptitle is not None:
        texts.append(fig._suptitle.get_text())
    for ax in fig.axes:
        texts += [ax.get_title(loc) for loc in ("left", "center", "right")]
        texts += [ax.get_xlabel(), ax.get_ylabel()] + [t.get_text() for t in ax.texts]
        legend = ax.get_legend()
        if legend is not None:
            texts += [t.get_text() for t in legend.get_texts()]
    for legend in fig.legends:
        texts += [t.get_text() for t in legend.get_texts()]
    plt.close(fig)
    return [t for t in texts if t]
