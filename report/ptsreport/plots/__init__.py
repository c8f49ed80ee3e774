"""The report's figures, one module per family; FIGURES lists them in page order.
Each draw function takes the Run and returns a matplotlib Figure (tests inspect it)."""

from dataclasses import dataclass
from typing import Callable

import matplotlib

matplotlib.use("Agg")  # files only, no display: before any module imports pyplot

from .comm import plot_bandwidth, plot_comm_per_sample  # noqa: E402
from .convergence import plot_loss_per_step, plot_loss_per_time, plot_staleness  # noqa: E402
from .correctness import plot_correctness  # noqa: E402
from .memory import plot_memory  # noqa: E402
from .pipeline import plot_bubble, plot_bubble_vs_m  # noqa: E402
from .speed import plot_scaling, plot_speed, plot_tradeoff  # noqa: E402


@dataclass(frozen=True)
class FigureSpec:
    file: str
    section: str  # the page section it appears in
    title: str
    caption: str  # how to read it, shown under the image
    draw: Callable
    timing: bool  # shows timings (then the core-sharing caveat applies)


FIGURES = [
    FigureSpec("correctness.png", "Correctness", "Conformance error against the check's bound",
               "One dot per case, log scale. Exact check (float64): max relative error of losses and "
               "final parameters against the float64 oracle, bound 1e-12. Precision check (float32): "
               "distance to the oracle divided by the single float32 run's, bound 4. Red X and a red "
               "label: the case failed; right of the dashed red line fails.",
               plot_correctness, timing=False),
    FigureSpec("speed.png", "Speed and scaling", "Step time and throughput per case",
               "Step time in ms: median over timed steps of the slowest rank, tick at p90; the hatched "
               "part is exposed communication (comm_wait_s: time blocked in communication), labelled "
               "with its share of the step. Throughput in the "
               "workload's unit: tokens/s for gpt workloads, samples/s for mlp.",
               plot_speed, timing=True),
    FigureSpec("scaling.png", "Speed and scaling", "Throughput against dp, tp and pp",
               "One line per configuration run at several sizes of one mesh axis, everything else "
               "equal, as throughput relative to the line's first point: its size-1 case, else the "
               "single case of the same workload and dtype (when its other axes are 1), else its "
               "smallest size. Dotted: linear scaling. Absolute throughput: the plot above and the "
               "tables.",
               plot_scaling, timing=True),
    FigureSpec("tradeoff.png", "Speed and scaling", "Throughput against peak memory",
               "Each case's throughput against its peak tracked memory per rank (circles float32, "
               "squares float64). Per dtype a grey line joins and names the passing cases that no "
               "other passing case of that dtype beats on both.",
               plot_tradeoff, timing=True),
    FigureSpec("loss_step.png", "Convergence", "Training loss per step",
               "steps.csv: each case's global mean training loss (before the step's update) against the "
               "optimizer step; one line per case, coloured by strategy, dashed float64. Dotted: the "
               "suite's target_loss; a star marks the first step at or below it (steps_to_target - 1).",
               plot_loss_per_step, timing=False),
    FigureSpec("loss_time.png", "Convergence", "Training loss against wall time",
               "The same losses against wall_s: seconds from the start of the case's first step to the "
               "end of each step (the sum of the slowest rank's step times; loading batches is untimed). "
               "A method that communicates less loses a little per step and may win it back here: the "
               "star is time_to_target_s.",
               plot_loss_per_time, timing=True),
    FigureSpec("staleness.png", "Convergence", "Staleness histogram",
               "staleness.csv, per asynchronous case: how many gradients were applied at each staleness "
               "(parameter versions between the one a gradient was computed on and the one it updated). "
               "Empty when the run has no asynchronous case.",
               plot_staleness, timing=False),
    FigureSpec("memory.png", "Memory", "Peak memory by category",
               "Peak bytes of each tracked category, max over ranks, in MiB; the black tick is the "
               "tracked total peak (categories peak at different times, so the stack can exceed it).",
               plot_memory, timing=False),
    FigureSpec("comm_per_sample.png", "Communication", "Communication per training sample",
               "Bus bytes per step (nccl-tests bus factors, max over ranks) divided by the global "
               "batch. A red case label: the comm check failed.",
               plot_comm_per_sample, timing=False),
    FigureSpec("bandwidth.png", "Communication", "Bus bandwidth per op",
               "Bus bandwidth = bus_bytes / wait_s per step (the nccl-tests busbw, with the time "
               "ranks were blocked in the op), against the message size per call. Where an op "
               "overlaps compute, wait_s is shorter than the transfer: read it as an upper bound; "
               "a pipeline recv also waits for the sending stage's compute, so it reads low.",
               plot_bandwidth, timing=True),
    FigureSpec("bubble.png", "Pipeline", "Pipeline bubble per stage",
               "Grey bar: the uniform-stage bubble (p-1)/(m+p-1) for p stages and m microbatches. "
               "Red dots: each stage's measured idle share, 1 - compute / step time.",
               plot_bubble, timing=True),
    FigureSpec("bubble_vs_m.png", "Pipeline", "Pipeline bubble against microbatches, per schedule",
               "One panel per workload and pipeline depth p. Lines: each schedule's closed form at "
               "equal F, B and W per chunk ((p-1)/(m+p-1) for gpipe and 1f1b, v m for interleaved, "
               "3m for zb-h1, 6m for zbv in place of m); hollow diamonds: the schedule's table "
               "simulated at the case's emulated costs (what check_schedule compares with); dots: "
               "each stage's measured idle share. Without emulated compute the costs are this "
               "machine's and need not be equal, so dots may sit above the line.",
               plot_bubble_vs_m, timing=True),
]
