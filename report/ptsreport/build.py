"""make_report: read a run directory and write RUN_DIR/report/ (index.html,
summary.md and the PNG figures)."""

from pathlib import Path

from .htmlpage import write_html
from .load import load_run
from .markdown import write_markdown
from .metrics import add_metrics
from .plots import FIGURES
from .plots.style import save
from .summary import summarize


def make_report(run_dir: Path) -> Path:
    """Write the report of run_dir; return the path of its index.html."""
    run = add_metrics(load_run(run_dir))
    summary = summarize(run)
    out_dir = run_dir / "report"
    out_dir.mkdir(exist_ok=True)
    for spec in FIGURES:
        save(spec.draw(run), out_dir / spec.file)
    write_markdown(run, summary, out_dir / "summary.md")
    index = out_dir / "index.html"
    write_html(run, summary, index)
    return index
