"""index.html: the first screen answers which strategy is correct, fastest and
leanest per workload (status line, failures, caveats, one compact table per
workload); the figures follow by family; the wide per-case tables come last,
collapsed and scrolling inside their own box."""

import html
import json

from .convergence import CAPTION as CONVERGENCE_CAPTION
from .convergence import convergence_tables, has_target
from .formatting import raw
from .load import Run
from .plots import FIGURES
from .summary import Summary, headline_table, tally

STYLE = """
body { font: 14px/1.4 system-ui, sans-serif; margin: 0 1em 2em; color: #222; max-width: 1500px; }
h1 { font-size: 1.4em; margin: 0.6em 0 0; } h2 { font-size: 1.2em; margin-top: 1.6em;
  border-bottom: 1px solid #ccc; } h3 { font-size: 1.05em; margin: 0 0 0.3em; }
.meta { color: #666; margin: 0.1em 0 0.6em; }
.status { font-size: 1.1em; font-weight: 600; padding: 0.35em 0.7em; border-radius: 4px;
  display: inline-block; } .status.ok { background: #d8f3d8; } .status.bad { background: #f8d0d0; }
.checks { color: #444; margin: 0.3em 0; }
.banner { background: #b00020; color: white; padding: 0.5em 0.8em; border-radius: 4px;
  margin: 0.5em 0; font-weight: 600; }
.unknown { color: #8a5a00; margin: 0.3em 0; }
ul.failures { margin: 0.3em 0; padding-left: 1.2em; } ul.failures li { color: #900; }
.cards { display: flex; flex-wrap: wrap; gap: 0.8em; margin-top: 0.6em; }
.card { border: 1px solid #ccc; border-radius: 6px; padding: 0.4em 0.5em; flex: 0 1 auto; }
.card .unit { color: #666; font-weight: normal; font-size: 0.9em; }
table { border-collapse: collapse; font-size: 13px; }
table.headline, table.convergence { font-size: 12px; }
th, td { border-bottom: 1px solid #e2e2e2; padding: 2px 5px; text-align: left; vertical-align: top; }
th { background: #f2f2f2; font-weight: 600; }
table.headline td, table.headline th, table.convergence td, table.convergence th { text-align: right; }
table.headline td:first-child, table.headline th:first-child,
table.convergence td:first-child, table.convergence th:first-child { text-align: left; }
tr.group th { background: #fff; text-align: left; color: #555; font-style: italic; padding-top: 6px; }
td .note { display: block; color: #777; font-size: 10px; font-family: ui-monospace, monospace; }
table.headline td, table.convergence td { line-height: 1.15; white-space: nowrap; }
td.best { background: #c9efc9; font-weight: 700; } td.best::after { content: " \\2605"; color: #1a7f1a; }
td.PASS { color: #1a7f1a; } td.FAIL { color: #b00020; font-weight: 700; background: #f8d0d0; }
td.SKIP, td.UNCHECKED { color: #777; }
td.shared { color: #999; font-style: italic; }
.caption { color: #555; font-size: 13px; margin: 0.2em 0; max-width: 1100px; }
nav { margin: 1em 0; } nav a { margin-right: 1em; }
figure { margin: 0.8em 0 1.6em; } figure img { max-width: 100%; border: 1px solid #eee; }
figcaption { color: #555; font-size: 13px; max-width: 1100px; }
.scroll { overflow-x: auto; max-width: 100%; border: 1px solid #ddd; }
.scroll table td, .scroll table th { white-space: nowrap; text-align: left; }
details { margin: 0.6em 0; } summary { cursor: pointer; font-weight: 600; }
"""


def esc(text) -> str:
    return html.escape(str(text))


def header(run: Run) -> str:
    env = run.env
    parts = [env.get("suite"), f"{env['ranks']} ranks" if "ranks" in env else None, env.get("time"),
             f"git {env['git_sha']}" if "git_sha" in env else None,
             f"host {env['host']}" if "host" in env else None, env.get("backend")]
    meta = " · ".join(esc(p) for p in parts if p) or "env.json not found"
    return f"<h1>ptsuite report: {esc(run.name)}</h1>\n<p class=\"meta\">{meta}</p>"


def oversubscription_note(run: Run) -> str:
    over = run.oversubscription
    if over.state == "yes":
        return (f'<div class="banner" id="oversubscribed">Oversubscribed run ({esc(over.detail)}): '
                "ranks shared cores, so step times, throughput, scaling, bandwidth and pipeline bubbles "
                "measure the sharing, not the strategy. The checks (correctness, bytes, memory) are "
                "unaffected. For timings run at most one rank per core.</div>")
    if over.state == "unknown":
        return (f'<p class="unknown" id="cores-unknown">Core sharing unknown: {esc(over.detail)}. '
                "If the run had more ranks than cores, its timings measure the sharing.</p>")
    return ""


def status(run: Run, summary: Summary) -> str:
    bad = summary.verdicts["FAIL"] > 0 or bool(summary.incomplete)
    out = [f'<div class="status {"bad" if bad else "ok"}" id="verdicts">{summary.num_cases} cases: '
           f"{esc(tally(summary.verdicts))}</div>"]
    if summary.incomplete:
        out.append(f'<p class="incomplete" id="incomplete">{esc(summary.incomplete)}: the run was interrupted or '
                   "died; <code>ptsuite run SUITE --out DIR --resume</code> continues it.</p>")
    if summary.checks:
        names = {c: c.replace("check_", "") for c in summary.checks}
        checks = " · ".join(f"{names[c]} check: {esc(tally(n, always=[]))}" for c, n in summary.checks.items())
        out.append(f'<p class="checks">{checks}</p>')
    if summary.failures:
        items = "".join(f"<li><code>{esc(case)}</code> ({esc(strategy)}, {esc(workload)}): {esc(reason)}</li>"
                        for case, strategy, workload, reason in summary.failures)
        out.append(f'<ul class="failures" id="failures">{items}</ul>')
    if summary.notes:
        items = "; ".join(f"{n} case{'s' * (n > 1)}: {esc(reason)}" for reason, n in summary.notes)
        out.append(f'<p class="checks" id="notes">Notes: {items}</p>')
    out.append(oversubscription_note(run))
    return "\n".join(out)


def cell_html(cell, shared: bool) -> str:
    classes = [c for c in (cell.css, "best" if cell.best else "", "shared" if shared else "") if c]
    attr = f' class="{" ".join(classes)}"' if classes else ""
    attr += f' title="{esc(cell.hover)}"' if cell.hover else ""
    note = f'<span class="note">{esc(cell.note)}</span>' if cell.note else ""
    return f"<td{attr}>{esc(cell.text)}{note}</td>"


def choose(run: Run, summary: Summary) -> str:
    """The per-workload headline tables."""
    cards = []
    timing_columns = {2, 3, 4}  # step ms, throughput, speedup
    shared = run.oversubscription.state == "yes"
    for ws in summary.workloads:
        head, groups = headline_table(ws)
        rows = ["<tr>" + "".join(f"<th>{esc(h)}</th>" for h in head) + "</tr>"]
        for dtype, table in groups:
            if dtype:
                rows.append(f'<tr class="group"><th colspan="{len(head)}">{esc(dtype)}</th></tr>')
            rows += ["<tr>" + "".join(cell_html(c, shared and i in timing_columns) for i, c in enumerate(r))
                     + "</tr>" for r in table]
        cards.append(f'<div class="card"><h3>{esc(ws.workload)} <span class="unit">· throughput in '
                     f'{esc(ws.unit)}</span></h3>\n<table class="headline" data-workload="{esc(ws.workload)}">'
                     + "\n".join(rows) + "</table></div>")
    caption = ("One row per strategy and dtype, fastest first. Step time, throughput, speedup over the "
               "single case of the same workload and dtype, and communication come from the strategy's "
               "fastest passing case (named under it); peak memory from its leanest passing case (hover "
               "to see which). "
               "&#9733; the best of a dtype group among strategies with no failed case (comm: least among "
               "those that communicate).")
    return (f'<h2 id="choose">Which strategy: correct, fastest, leanest</h2>\n<p class="caption">{caption}</p>\n'
            f'<div class="cards">{"".join(cards)}</div>')


def convergence(run: Run) -> str:
    """The per-workload convergence tables, open when the suite set a target_loss."""
    cards = []
    shared = run.oversubscription.state == "yes"  # then the timed columns are greyed
    for t in convergence_tables(run):
        timed = [shared and h in ("exposed comm", "s to target") for h in t.header]
        rows = ["<tr>" + "".join(f"<th>{esc(h)}</th>" for h in t.header) + "</tr>"]
        for strategy, table in t.groups:
            rows.append(f'<tr class="group"><th colspan="{len(t.header)}">{esc(strategy)}</th></tr>')
            rows += ["<tr>" + "".join(cell_html(c, grey) for c, grey in zip(r, timed)) + "</tr>" for r in table]
        cards.append(f'<div class="card"><h3>{esc(t.workload)}</h3>\n<table class="convergence" '
                     f'data-workload="{esc(t.workload)}">' + "\n".join(rows) + "</table></div>")
    what = "with target_loss" if has_target(run) else "no target_loss set in this suite"
    return (f'<details{" open" * has_target(run)} id="convergence-tables"><summary>Communication and time to '
            f'target per strategy ({what})</summary><p class="caption">{CONVERGENCE_CAPTION}</p>'
            f'<div class="cards">{"".join(cards)}</div></details>')


def figures(run: Run) -> str:
    out, section = [], None
    for spec in FIGURES:
        if spec.section != section:
            section = spec.section
            out.append(f'<h2 id="{section.split()[0].lower()}">{esc(section)}</h2>')
            if section == "Convergence":
                out.append(convergence(run))
        out.append(f'<figure><img src="{spec.file}" alt="{esc(spec.title)}">'
                   f"<figcaption><b>{esc(spec.title)}.</b> {esc(spec.caption)}</figcaption></figure>")
    return "\n".join(out)


def table(header, rows, table_id, verdict_column=None) -> str:
    out = [f'<table id="{table_id}"><tr>' + "".join(f"<th>{esc(h)}</th>" for h in header) + "</tr>"]
    for row in rows:
        cells = [f'<td class="{esc(v)}">{esc(v)}</td>' if i == verdict_column and v in ("PASS", "FAIL", "SKIP")
                 else f"<td>{esc(v)}</td>" for i, v in enumerate(row)]
        out.append("<tr>" + "".join(cells) + "</tr>")
    return "\n".join(out + ["</table>"])


def details(run: Run) -> str:
    columns = run.header["cases.csv"]
    cases = [[raw(v) for v in row] for row in run.cases[columns].itertuples(index=False)]
    comm = run.comm
    comm_head = ["case", "axis", "op", "calls/step", "bytes/call", "bus bytes/step", "wait ms/step",
                 "busbw GB/s", "algbw GB/s"]
    has_model = "model_s" in run.header.get("comm.csv", [])
    comm_rows = [[c.case, c.axis, c.op, raw(c.calls), raw(c.bytes_per_call), raw(c.bus_bytes),
                  raw(c.wait_s * 1e3), raw(c.busbw_gbps), raw(c.algbw_gbps)]
                 + ([raw(c.model_s * 1e3)] if has_model else []) for c in comm.itertuples()]
    env_rows = [[k, v] for k, v in flatten(run.env)]
    env_rows.append(["(report) oversubscribed", f"{run.oversubscription.state}: {run.oversubscription.detail}"])
    older = [f"{name}: {', '.join(cols)}" for name, cols in run.absent.items()]
    older += [f"{name} (whole file)" for name in run.absent_files]
    note = f"<p>Not in this run (older run): {esc('; '.join(older))}.</p>" if older else ""
    return "\n".join([
        '<h2 id="details">Details</h2>', note,
        f"<details><summary>All {len(cases)} cases, {len(columns)} columns of cases.csv</summary>"
        f'<div class="scroll">{table(columns, cases, "cases", columns.index("verdict"))}</div></details>',
        f"<details><summary>Communication by op ({len(comm_rows)} rows; per step, max over ranks)</summary>"
        f'<div class="scroll">{table(comm_head + ["model ms/step"] * has_model, comm_rows, "comm")}</div>'
        "</details>",
        f'<details open><summary>Environment (env.json)</summary>{table(["key", "value"], env_rows, "env")}'
        "</details>"])


def flatten(env: dict, prefix=""):
    for key, value in env.items():
        if isinstance(value, dict):
            yield from flatten(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value if isinstance(value, str) else json.dumps(value)


def write_html(run: Run, summary: Summary, path, extra: str = "") -> None:
    """extra: a section placed after the figures (the bench sweep's, ptsreport/bench.py)."""
    sections = " ".join(f'<a href="#{s.split()[0].lower()}">{esc(s)}</a>'
                        for s in dict.fromkeys(f.section for f in FIGURES))
    if extra:
        sections += ' <a href="#bench">Collective bandwidth</a>'
    page = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
            f"<title>ptsuite report: {esc(run.name)}</title><style>{STYLE}</style></head><body>",
            header(run), status(run, summary), choose(run, summary),
            f'<nav>{sections} <a href="#details">Details</a> · summary.md beside this page</nav>',
            figures(run), extra, details(run), "</body></html>"]
    path.write_text("\n".join(page) + "\n", encoding="utf-8")
