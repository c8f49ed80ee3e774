"""Derived per-case and per-op figures, in the units the report shows.

Added to Run.cases: step_ms, p90_ms, unit ("tokens/s" for workloads that report
tokens, else "samples/s"), throughput (in that unit), peak_mib, comm_per_sample
(bytes), layout ("dp x tp x pp"), baseline (the single case it is compared with),
speedup (throughput / the baseline's) and shared_cores (timings measure core sharing).
Added to Run.comm: workload, strategy, bytes_per_call, busbw_gbps, algbw_gbps.
Added to Run.steps and Run.staleness: workload, strategy, dtype; Run.steps gets wall_s
where the run predates it.
"""

import math

import numpy as np
import pandas as pd

from .load import Run

MIB = 2**20
TOKENS, SAMPLES = "tokens/s", "samples/s"
SINGLE = "single"  # the registry name of the one-device reference strategy


def workload_units(cases: pd.DataFrame) -> dict:
    """Throughput unit of each workload: tokens/s when any of its cases has
    tokens_per_s (gpt-*), else samples/s (mlp-*). One unit per workload, so a
    workload's cases always share an axis."""
    has_tokens = cases["tokens_per_s"].notna().groupby(cases["workload"]).any()
    return {w: TOKENS if t else SAMPLES for w, t in has_tokens.items()}


def pick_baseline(case: pd.Series, singles: pd.DataFrame):
    """Index of the single case to compare with: same workload and dtype, then the
    same optimizer and global batch where such a one exists; None if none."""
    pool = singles[(singles["workload"] == case["workload"]) & (singles["dtype"] == case["dtype"])]
    for column in ("optimizer", "global_batch"):
        same = pool[pool[column] == case[column]]
        if not same.empty:
            pool = same
    return pool.index[0] if not pool.empty else None


def add_case_metrics(run: Run) -> None:
    cases = run.cases
    cases["strategy"] = cases["strategy"].where(cases["strategy"] != "", cases["case"])
    units = workload_units(cases)
    cases["unit"] = cases["workload"].map(units)
    cases["throughput"] = np.where(cases["unit"] == TOKENS, cases["tokens_per_s"], cases["samples_per_s"])
    cases["step_ms"] = cases["step_time_s"] * 1e3
    cases["p90_ms"] = cases["step_time_p90_s"] * 1e3
    cases["peak_mib"] = cases["peak_mem_bytes"] / MIB
    cases["comm_per_sample"] = cases["comm_bytes_per_step"] / cases["global_batch"]
    cases["layout"] = [f"{d:.0f}x{t:.0f}x{p:.0f}" if not any(map(math.isnan, (d, t, p))) else ""
                       for d, t, p in zip(cases["dp"], cases["tp"], cases["pp"])]
    singles = cases[cases["strategy"] == SINGLE]
    baselines = [pick_baseline(row, singles) for _, row in cases.iterrows()]
    cases["baseline"] = [cases.at[b, "case"] if b is not None else "" for b in baselines]
    base_rate = pd.Series([cases.at[b, "throughput"] if b is not None else math.nan for b in baselines],
                          index=cases.index)
    cases["speedup"] = cases["throughput"] / base_rate
    flagged = cases["oversubscribed"] > 0
    if cases["oversubscribed"].isna().all():
        flagged = pd.Series(run.oversubscription.state == "yes", index=cases.index)
    cases["shared_cores"] = flagged


def add_comm_metrics(run: Run) -> None:
    """Bus bandwidth as nccl-tests defines it, bus_bytes / time, with the time the
    ranks were blocked in the op (wait_s): comparable across ops and rank counts and
    with a link's bus rate. Where communication overlaps compute, wait_s is shorter
    than the transfer, so the figure is an upper bound. algbw is payload_bytes / wait_s."""
    comm, cases = run.comm, run.cases.set_index("case")
    comm["workload"] = comm["case"].map(cases["workload"]).fillna("")
    comm["strategy"] = comm["case"].map(cases["strategy"]).fillna("")
    comm["bytes_per_call"] = comm["payload_bytes"] / comm["calls"].where(comm["calls"] > 0)
    timed = comm["wait_s"].where((comm["wait_s"] > 0) & (comm["bus_bytes"] > 0))
    comm["busbw_gbps"] = comm["bus_bytes"] / timed / 1e9
    comm["algbw_gbps"] = comm["payload_bytes"] / timed / 1e9


def add_step_metrics(run: Run) -> None:
    """The case's workload, strategy and dtype on every steps.csv and staleness.csv row.
    Runs from before steps.csv had wall_s get it as what it is defined to be: the running
    sum of the case's step times."""
    cases = run.cases.set_index("case")
    steps = run.steps
    if "wall_s" not in run.header.get("steps.csv", ["wall_s"]):
        ordered = steps.sort_values(["case", "step"])
        steps["wall_s"] = ordered.groupby("case", sort=False)["step_time_s"].cumsum()
    for frame in (steps, run.staleness):
        for column in ("workload", "strategy", "dtype"):
            frame[column] = frame["case"].map(cases[column]).fillna("")


def add_metrics(run: Run) -> Run:
    add_case_metrics(run)
    add_comm_metrics(run)
    add_step_metrics(run)
    return run
