"""summary.md: the first screen of index.html as Markdown, short enough for a CI
comment: verdict counts, failures with their reasons, the core-sharing caveat and
the per-workload headline tables."""

from .convergence import convergence_tables, has_target
from .load import Run
from .summary import Summary, headline_table, tally


def md(text) -> str:
    """Text safe inside a Markdown table cell."""
    return str(text).replace("|", "\\|").replace("\n", " ")


def cell_md(cell) -> str:
    text = f"**{md(cell.text)}** ★" if cell.best else md(cell.text)
    if cell.css == "FAIL":
        text = f"❌ {text}"
    return f"{text} <sub>{md(cell.note)}</sub>" if cell.note else text


def write_markdown(run: Run, summary: Summary, path) -> None:
    env = run.env
    meta = " · ".join(str(p) for p in (env.get("suite"), f"{env['ranks']} ranks" if "ranks" in env else None,
                                       env.get("git_sha"), env.get("time")) if p)
    mark = "❌" if summary.verdicts["FAIL"] or summary.incomplete else "✅"
    out = [f"## ptsuite report: {md(run.name)}", "", meta, "",
           f"{mark} **{summary.num_cases} cases: {tally(summary.verdicts)}**"]
    if summary.incomplete:
        out.append(f"**{summary.incomplete}**: the run was interrupted or died; `--resume` continues it.")
    if summary.checks:
        out.append("Checks: " + "; ".join(f"{c.replace('check_', '')} {tally(n, always=[])}"
                                          for c, n in summary.checks.items()))
    if summary.failures:
        out += ["", "**Failures**", ""]
        out += [f"- `{case}` ({strategy}, {workload}): {md(reason)}"
                for case, strategy, workload, reason in summary.failures]
    if summary.notes:
        out += ["", "Notes: " + "; ".join(f"{n} case{'s' * (n > 1)}: {md(r)}" for r, n in summary.notes)]
    over = run.oversubscription
    if over.state == "yes":
        out += ["", f"> ⚠️ **Oversubscribed run** ({over.detail}): ranks shared cores, so timings "
                "(step time, throughput, bandwidth, bubbles) measure the sharing, not the strategy. "
                "The checks are unaffected."]
    elif over.state == "unknown":
        out += ["", f"Core sharing unknown: {over.detail}."]
    for ws in summary.workloads:
        head, groups = headline_table(ws)
        out += ["", f"### {md(ws.workload)} (throughput in {ws.unit})", "",
                "| dtype | " + " | ".join(md(h) for h in head) + " |",
                "|---|" + "---|" * len(head)]
        for dtype, table in groups:
            out += [f"| {md(dtype)} | " + " | ".join(cell_md(c) for c in row) + " |" for row in table]
    if has_target(run):  # time to target is what a suite with a target_loss is asking
        for t in convergence_tables(run):
            out += ["", f"### {md(t.workload)}: communication and time to target", "",
                    "| strategy | " + " | ".join(md(h) for h in t.header) + " |", "|---|" + "---|" * len(t.header)]
            for strategy, table in t.groups:
                out += [f"| {md(strategy)} | " + " | ".join(cell_md(c) for c in row) + " |" for row in table]
        out += ["", "Time to target: steps and wall seconds until the first training loss at or below "
                "target_loss; ★ the passing case that got there soonest."]
    out += ["", "★ best of its workload and dtype among strategies with no failed case. Speed and "
            "comm from each strategy's fastest passing case, memory from its leanest. Plots and all "
            "columns: index.html beside this file."]
    path.write_text("\n".join(out) + "\n", encoding="utf-8")
