"""Which input files and columns the report reads, with their units.

The one place that says what is required: a missing required file or column stops
the report (exit status 2); a missing optional one (older runs) only hides what
needs it. Names and units follow results/SCHEMA.md (test_schema.py checks that).
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class Column:
    name: str
    unit: str  # as written in results/SCHEMA.md ("-" for none)
    required: bool = False
    text: bool = False  # kept as a string; other columns are parsed as numbers
    used_for: str = ""  # what needs it, named in the error when a required one is missing


def req(name, unit, used_for, text=False):
    return Column(name, unit, required=True, text=text, used_for=used_for)


def opt(name, unit, text=False):
    return Column(name, unit, text=text)


CASES = [
    req("case", "-", "every table and plot", text=True),
    req("workload", "-", "grouping by workload", text=True),
    req("verdict", "-", "the verdict counts", text=True),
    req("step_time_s", "s", "step time and speed"),
    req("samples_per_s", "samples/s", "throughput of mlp workloads"),
    req("peak_mem_bytes", "bytes", "peak memory"),
    req("comm_bytes_per_step", "bytes", "communication volume"),
    opt("strategy", "-", text=True),
    opt("dtype", "-", text=True),
    opt("optimizer", "-", text=True),
    opt("ranks", "count"),
    opt("oversubscribed", "bool"),
    opt("dp", "count"),
    opt("tp", "count"),
    opt("pp", "count"),
    opt("steps", "count"),
    opt("global_batch", "samples"),
    opt("target_loss", "nats"),
    opt("bucket_bytes", "bytes"),
    opt("zero_stage", "0-3"),
    opt("overlap", "bool"),
    opt("prefetch", "bool"),
    opt("reshard_after_forward", "bool"),
    opt("data", "-", text=True),
    opt("microbatches", "count"),
    opt("schedule", "-", text=True),
    opt("stage_layers", "-", text=True),
    opt("link_bus_gbps", "GB/s"),
    opt("link_latency_us", "us"),
    opt("step_time_p90_s", "s"),
    opt("tokens_per_s", "tokens/s"),
    opt("bubble_frac", "-"),
    opt("bubble_theory", "-"),
    opt("comm_bytes_expected", "bytes"),
    opt("comm_wait_s", "s"),
    opt("comm_exposed_frac", "-"),
    opt("steps_to_target", "count"),
    opt("time_to_target_s", "s"),
    opt("max_rel_err", "-"),
    opt("err_ratio", "-"),
    opt("check_exact", "-", text=True),
    opt("check_precision", "-", text=True),
    opt("check_comm", "-", text=True),
    opt("check_memory", "-", text=True),
    opt("reason", "-", text=True),
]

COMM = [
    req("case", "-", "the communication plots", text=True),
    req("axis", "-", "the communication plots", text=True),
    req("op", "-", "the communication plots", text=True),
    req("calls", "count", "message size per call"),
    req("payload_bytes", "bytes", "message size per call"),
    req("bus_bytes", "bytes", "bus bandwidth"),
    req("wait_s", "s", "bus bandwidth"),
    opt("model_s", "s"),
]

MEMORY = [
    req("case", "-", "the memory plot", text=True),
    req("category", "-", "the memory plot", text=True),
    req("peak_bytes", "bytes", "the memory plot"),
    opt("rank", "index"),
    opt("expected_bytes", "bytes"),
]

STAGES = [
    req("case", "-", "the pipeline bubble plot", text=True),
    req("stage", "index", "the pipeline bubble plot"),
    req("bubble_frac", "-", "the pipeline bubble plot"),
    req("bubble_theory", "-", "the pipeline bubble plot"),
]

STEPS = [
    req("case", "-", "the loss curves", text=True),
    req("step", "index", "the loss curves"),
    req("loss", "nats", "the loss curves"),
    opt("step_time_s", "s"),
    opt("wall_s", "s"),  # older runs: the running sum of step_time_s, which it is by definition
]

# Gradients per staleness (versions between the parameters a gradient was computed on and
# those it was applied to), from the asynchronous strategies.
STALENESS = [
    req("case", "-", "the staleness histogram", text=True),
    req("staleness", "steps", "the staleness histogram"),
    req("count", "count", "the staleness histogram"),
]

# Every input CSV with its columns.
FILES = {"cases.csv": CASES, "comm.csv": COMM, "memory.csv": MEMORY, "stages.csv": STAGES,
         "steps.csv": STEPS, "staleness.csv": STALENESS}
# Files a run may lack (older or hand-made runs): a missing one leaves its plot empty,
# with a note, and the page lists it as not in this run.
OPTIONAL_FILES = {"stages.csv", "steps.csv", "staleness.csv"}
# Optional files a run writes only when some case has rows for them (staleness.csv: an
# asynchronous case); their absence is not news.
WHEN_USED_FILES = {"staleness.csv"}

# Fixed bounds of the conformance checks (harness/checks.hpp), drawn on the plot.
EXACT_BOUND = 1e-12  # max_rel_err of float64 cases against the float64 oracle
PRECISION_BOUND = 4.0  # err_ratio of float32 cases: distance to oracle / single float32's

# bench.csv: `ptsuite bench`'s collective bandwidth sweep (ptsreport/bench.py). Not part of
# FILES: a bench directory holds it alone (with env.json), a run directory may hold it too.
BENCH_FILE = "bench.csv"
BENCH = [
    req("op", "-", "the busbw plot's panels", text=True),
    req("ranks", "count", "the busbw plot's lines"),
    req("size", "bytes", "the busbw plot's x axis"),
    req("type", "-", "the busbw plot's lines", text=True),
    req("busbw", "GB/s", "the busbw plot (out of place)"),
    opt("count", "elements"),
    opt("redop", "-", text=True),
    opt("root", "index"),
    opt("time_us", "us"),
    opt("algbw", "GB/s"),
    opt("wrong", "count"),
    opt("ip_time_us", "us"),
    opt("ip_algbw", "GB/s"),
    opt("ip_busbw", "GB/s"),
    opt("ip_wrong", "count"),
]

# validate.csv: `ptsuite plan --validate`'s predicted against measured (ptsreport/plan.py). A
# plan directory holds it with plan.csv; its run is DIR/run.
VALIDATE_FILE = "validate.csv"
VALIDATE = [
    req("case", "-", "the plan figures' points", text=True),
    req("layout", "-", "the plan figures' labels", text=True),
    req("suggested", "bool", "the plan figures' markers"),
    req("predicted_step_s", "s", "the step-time panel's x axis"),
    req("measured_step_s", "s", "the step-time panel's y axis"),
    req("predicted_mem_exact_bytes", "bytes", "the memory panel's x axis"),
    req("measured_mem_exact_bytes", "bytes", "the memory panel's y axis"),
    req("mem_exact_match", "bool", "the memory panel's markers"),
    opt("predicted_rank", "index"),
    opt("step_error_pct", "%"),
    opt("measured_step_min_s", "s"),
    opt("step_error_min_pct", "%"),
    opt("predicted_mem_bytes", "bytes"),
    opt("measured_peak_mem_bytes", "bytes"),
    opt("mem_within_bound", "bool"),
]
