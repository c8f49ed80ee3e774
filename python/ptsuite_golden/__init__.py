"""ptsuite_golden: read ptsuite golden kits (golden/MANIFEST.md), regenerate their weights
and batches bit for bit, and judge an implementation's losses, parameters and gradients with
the rules of `ptsuite golden verify`.

    import ptsuite_golden as pg
    kit = pg.load_kit("results/golden/gpt-tiny")
    report = pg.verify(kit, losses=my_losses, params={"step.3.wte": ..., ...})
    print(report); assert report.passed
"""
from .kit import Kit, KitError, ResultsError, load_kit
from .philox import CounterRng, philox4x32_10
from .regen import batch, init_params, successor_table
from .verify import Report, read_losses_csv, verify, write_losses_csv

__all__ = ["Kit", "KitError", "ResultsError", "load_kit", "CounterRng", "philox4x32_10", "batch", "init_params",
           "successor_table", "Report", "verify", "read_losses_csv", "write_losses_csv"]
__version__ = "0.1.0"
