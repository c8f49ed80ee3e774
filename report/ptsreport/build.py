"""make_report: read a run directory and write RUN_DIR/report/ (index.html,
summary.md and the PNG figures). A directory with `ptsuite bench`'s bench.csv gets its
bus bandwidth figure; one with bench.csv and no cases.csv gets a page of that alone; a
`ptsuite plan --validate` directory (validate.csv) gets predicted against measured."""

from pathlib import Path

from .bench import FIGURE as BENCH_FIGURE
from .bench import bench_section, load_bench, plot_bench_busbw, write_bench_report
from .htmlpage import write_html
from .load import load_run
from .markdown import write_markdown
from .metrics import add_metrics
from .plan import load_validate, write_plan_report
from .plots import FIGURES
from .plots.style import save
from .summary import summarize


def make_report(run_dir: Path) -> Path:
    """Write the report of run_dir; return the path of its index.html."""
    validate = load_validate(run_dir) if run_dir.is_dir() else None
    if validate is not None and not (run_dir / "cases.csv").is_file():
        return write_plan_report(run_dir, validate)
    bench = load_bench(run_dir) if run_dir.is_dir() else None
    if bench is not None and not (run_dir / "cases.csv").is_file():
        return write_bench_report(run_dir, bench)
    run = add_metrics(load_run(run_dir))
    summary = summarize(run)
    out_dir = run_dir / "report"
    out_dir.mkdir(exist_ok=True)
    for spec in FIGURES:
        save(spec.draw(run), out_dir / spec.file)
    extra = ""
    if bench is not None:
        save(plot_bench_busbw(bench, run.env), out_dir / BENCH_FIGURE)
        extra = bench_section(bench)
    write_markdown(run, summary, out_dir / "summary.md")
    index = out_dir / "index.html"
    write_html(run, summary, index, extra)
    return index
