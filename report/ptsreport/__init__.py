"""ptsreport: the HTML report of a ptsuite run directory.

Where things live:
  schema.py      which CSV files and columns are read, required or optional, with units
  load.py        read a run directory into a Run (CSV files, env.json, core sharing)
  metrics.py     derived figures: ms, MiB, throughput in the workload's unit, speedup, bandwidth
  summary.py     verdict counts, failures, per-workload headline rows (the first screen)
  convergence.py per-workload tables: comm bytes, exposed comm and time to target_loss per case
  plots/         one module per family of figures; plots/__init__.py lists them in page order
  htmlpage.py    index.html;  markdown.py  summary.md (for CI comments)
  build.py       make_report(run_dir): all of the above, in order
  multirun.py    make_multirun_report(runs, out): a baseline against other runs or a history
"""

from .build import make_report  # noqa: F401
from .load import ReportError  # noqa: F401
from .multirun import make_multirun_report  # noqa: F401
