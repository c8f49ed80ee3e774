#include "harness/schema.hpp"

#include "harness/plan.hpp"

#include <algorithm>
#include <sstream>

namespace pts {

const char* to_string(Compare c) {
  switch (c) {
    case Compare::key: return "key";
    case Compare::setting: return "setting";
    case Compare::exact: return "exact";
    case Compare::float_: return "float";
    case Compare::rounding: return "rounding";
    case Compare::timing: return "timing";
    case Compare::info: return "info";
  }
  return "?";
}

std::vector<std::string> CsvSchema::names() const {
  std::vector<std::string> n;
  for (const auto& c : columns) n.push_back(c.name);
  return n;
}

namespace {
// cases.csv without the strategies' option columns.
const CsvSchema& fixed_cases_schema() {
  static const CsvSchema s{
      "cases.csv",
      "One row per case, written when the case finishes.",
      {
          {"case", "-", "unique case name from the suite (generated from the values a matrix varies)", Compare::key},
          {"strategy", "-", "registry name of the strategy", Compare::setting},
          {"workload", "-", "workload preset", Compare::setting},
          {"dtype", "-", "float32 or float64", Compare::setting},
          {"backend", "-", "compute backend the case ran on (cpu; cuda, cuda-tf32, cuda-bf16 in a CUDA build: the last two round float32 gemm inputs to TF32 / bfloat16)", Compare::setting},
          {"comm_backend", "-", "communicator the case ran on: mpi (host tensors), nccl (GPU tensors, one GPU per rank) or mpi-staged (GPU tensors copied through host memory: ranks share a GPU, or the strategy matches messages by tag); empty for a case that crashed", Compare::setting},
          {"optimizer", "-", "sgd (with momentum) or adamw", Compare::setting},
          {"ranks", "count", "ranks the case ran on (dp * ep * cp * tp * pp)", Compare::setting},
          {"oversubscribed", "bool", "1 when some node of the run had more ranks than usable cores (env.json: cores, ranks_per_node): timings then measure the sharing", Compare::info},
          {"dp", "count", "data-parallel axis size", Compare::setting},
          {"tp", "count", "tensor-parallel axis size", Compare::setting},
          {"pp", "count", "pipeline-parallel axis size", Compare::setting},
          {"cp", "count", "context-parallel axis size (each sequence split over cp ranks)", Compare::setting},
          {"ep", "count", "expert-parallel axis size (each MoE block's experts split over ep ranks)", Compare::setting},
          {"steps", "count", "optimizer steps trained (warm-up included)", Compare::setting},
          {"warmup_steps", "count", "first steps left out of the timing statistics", Compare::setting},
          {"global_batch", "samples", "samples per optimizer step over all ranks", Compare::setting},
          {"target_loss", "nats", "the suite's target training loss (empty: none set)", Compare::setting},
          {"target_window", "steps", "steps whose training losses are averaged before the comparison with target_loss (1: each step's own; empty: no target)", Compare::setting},
          {"reference", "-", "what the exact and precision checks compare with: oracle (single-device training), twin:<strategy> (the strategy's algorithm simulated on one rank) or replay:<strategy> (the run's own trace of updates replayed on one rank); the strategy names it, a case's reference = \"oracle\" forces the oracle", Compare::setting},
          {"zero_stage", "0-3", "ZeRO stage on the dp axis (ddp 0, zero1 1, zero2 2, fsdp 3)", Compare::setting},
          {"data", "-", "gpt token source: empty for the synthetic Markov stream, else the token file", Compare::setting},
          {"timing_probe", "bool", "1 when the suite turned the timing probe on (steps.csv cpu_wait_s, probe_time_s, probe_cpu_wait_s; compare then tests the step's time over the probe's, each less its CPU wait)", Compare::setting},
          {"schedule", "-", "pipeline schedule: 1f1b or gpipe (empty when pp = 1)", Compare::setting},
          {"link_bus_gbps", "GB/s", "emulated link bus bandwidth (empty: no link model)", Compare::setting},
          {"link_latency_us", "us", "emulated link latency per operation", Compare::setting},
          {"emulate_f_ms", "ms", "emulate_compute: the least time of a microbatch forward (empty: real compute)", Compare::setting},
          {"emulate_b_ms", "ms", "emulate_compute: the least time of a backward's input gradient", Compare::setting},
          {"emulate_w_ms", "ms", "emulate_compute: the least time of a backward's weight gradient", Compare::setting},
          {"step_time_s", "s", "median over timed steps of the slowest rank's step time", Compare::timing},
          {"step_time_p90_s", "s", "90th percentile of the same", Compare::timing},
          {"samples_per_s", "samples/s", "global_batch / step_time_s", Compare::timing},
          {"tokens_per_s", "tokens/s", "gpt: global_batch * seq / step_time_s (empty for mlp)", Compare::timing},
          {"flops_per_s", "FLOP/s", "matmul FLOPs executed per step / step_time_s", Compare::timing},
          {"bubble_frac", "-", "mean over pipeline stages of the idle share of the step, 1 - compute / step (compute: forward and backward; the optimizer update and dp sync count as idle); per stage in stages.csv", Compare::timing},
          {"bubble_theory", "-", "(pp - 1) / (microbatches + pp - 1), the uniform-stage bubble", Compare::float_},
          {"peak_mem_bytes", "bytes", "max over ranks of the tracker's peak total bytes", Compare::info},
          {"peak_rss_bytes", "bytes", "max over ranks of process peak RSS (process lifetime, cross-check)", Compare::info},
          {"device_used_bytes", "bytes", "GPU backends: max over ranks and steps of the GPU's used memory as its driver counts it (cudaMemGetInfo: total - free, after every step; every process on the GPU and the CUDA context included): the cross-check beside peak_mem_bytes; empty on host backends", Compare::info},
          {"comm_bytes_per_step", "bytes", "max over ranks of counted bus bytes per step (nccl-tests factors)", Compare::float_},
          {"comm_bytes_expected", "bytes", "max over ranks of the strategy's stated bus bytes over the run, divided by steps", Compare::float_},
          {"comm_payload_bytes", "bytes", "max over ranks of counted payload bytes over the run (an integer: the exact communication figure; comm_bytes_per_step is bus bytes in floating point)", Compare::exact},
          {"comm_wait_s", "s", "max over ranks of seconds blocked in communication per timed step (median)", Compare::timing},
          {"comm_exposed_frac", "-", "comm_wait_s / step_time_s: the share of the step spent blocked in communication", Compare::timing},
          {"steps_to_target", "count", "steps run until the first step whose training loss (steps.csv loss, before that step's update) averaged over the target_window steps ending at it (fewer at the start), is <= target_loss, that step included (step index + 1); empty when target_loss is unset, never reached or the case threw", Compare::exact},
          {"time_to_target_s", "s", "steps.csv wall_s of that step (warm-up included); empty likewise", Compare::timing},
          {"max_rel_err", "-", "exact check: max relative error of per-step losses and final parameters vs the float64 reference", Compare::rounding},
          {"err_ratio", "-", "precision check: ||p - p_oracle64|| / max(||p_single32 - p_oracle64||, floor)", Compare::rounding},
          {"check_exact", "-", "PASS, FAIL or SKIP", Compare::exact},
          {"check_precision", "-", "PASS, FAIL or SKIP", Compare::exact},
          {"check_comm", "-", "PASS, FAIL or SKIP", Compare::exact},
          {"check_memory", "-", "PASS, FAIL or SKIP", Compare::exact},
          {"check_trace", "-", "asynchronous strategies: every pushed gradient applied exactly once and none staler than the bound (PASS or FAIL); SKIP for the others", Compare::exact},
          {"check_schedule", "-", "with emulate_compute and pp > 1: every stage's bubble_frac within 0.03 of bubble_theory (PASS or FAIL); SKIP otherwise", Compare::exact},
          {"max_staleness_seen", "steps", "asynchronous strategies: the largest staleness of an applied gradient (histogram in staleness.csv; empty for the others)", Compare::info},
          {"verdict", "-", "FAIL if any check failed or the case threw; else PASS", Compare::exact},
          {"reason", "-", "why a check failed or was skipped, on one line ('; ' between reasons, ' | ' for a line break in a message)", Compare::info},
      }};
  return s;
}

}  // namespace

CsvSchema cases_schema(const StrategyRegistry& registry) {
  CsvSchema s = fixed_cases_schema();
  // The options strategies declare, each a column after the harness's settings.
  auto at = std::find_if(s.columns.begin(), s.columns.end(), [](const Column& c) { return c.name == "step_time_s"; });
  std::vector<Column> options;
  for (const OptionSpec& o : registry.options())
    if (o.column)
      options.push_back({o.key, o.unit, o.meaning + " (option of " + registry.declaring(o.key) + ")", Compare::setting});
  s.columns.insert(at, options.begin(), options.end());
  return s;
}

const CsvSchema& cases_schema() {
  static const CsvSchema s = cases_schema(builtin_strategies());
  return s;
}

const CsvSchema& steps_schema() {
  static const CsvSchema s{"steps.csv",
                           "One row per case per step.",
                           {
                               {"case", "-", "case name", Compare::key},
                               {"step", "index", "optimizer step, from 0", Compare::key},
                               {"loss", "nats", "global mean training loss before this step's update", Compare::float_},
                               {"oracle_loss", "nats", "the same for the case's float64 reference: the oracle, the twin or the replay (empty when not run)", Compare::float_},
                               {"step_time_s", "s", "slowest rank's time for the step", Compare::timing},
                               {"cpu_wait_s", "s", "with timing_probe: the most seconds a rank of the case spent runnable but waiting for a CPU during the step (Linux /proc/thread-self/schedstat run_delay; 0 where the kernel does not say): what other processes took of the step; empty without timing_probe", Compare::timing},
                               {"probe_time_s", "s", "with timing_probe: the slowest rank's time for the fixed work every rank runs after the step (4 rounds of a 256^3 gemm in the case's dtype on its backend and an all_reduce of 8192 values over the case's ranks: harness/timing_probe.hpp), the machine's speed at that moment; not part of step_time_s or wall_s; empty without timing_probe", Compare::timing},
                               {"probe_cpu_wait_s", "s", "with timing_probe: cpu_wait_s of the probe", Compare::timing},
                               {"wall_s", "s", "seconds from the start of the case's first step to the end of this one: the sum of step_time_s over the steps so far (ranks start every step together, so a step lasts as long as its slowest rank); untimed, as in step_time_s: loading each step's batch, the barrier before the step and the reduction of the loss after it", Compare::timing},
                           }};
  return s;
}

const CsvSchema& comm_schema() {
  static const CsvSchema s{"comm.csv",
                           "One row per case per mesh axis per op; per step, max over ranks.",
                           {
                               {"case", "-", "case name", Compare::key},
                               {"axis", "-", "mesh axis of the group (dp, tp, pp, world)", Compare::key},
                               {"op", "-", "all_reduce, reduce_scatter, all_gather, broadcast, all_to_all, all_to_allv, send, recv, barrier", Compare::key},
                               {"calls", "count", "calls per step", Compare::exact},
                               {"payload_bytes", "bytes", "nccl-tests size per step: whole buffer (all_reduce, broadcast, p2p), whole input (reduce_scatter), whole output (all_gather, all_to_all, all_to_allv: what this rank received)", Compare::exact},
                               {"bus_bytes", "bytes", "payload_bytes times the bus factor (all_reduce 2(n-1)/n; reduce_scatter, all_gather, all_to_all, all_to_allv (n-1)/n; else 1)", Compare::float_},
                               {"wait_s", "s", "seconds blocked waiting for the op per step (all steps)", Compare::timing},
                               {"model_s", "s", "modeled link seconds of the op per step (0 without a link model)", Compare::float_},
                               {"expected_calls", "count", "calls per step the strategy states (its run total / steps; empty when it states none)", Compare::exact},
                               {"expected_payload_bytes", "bytes", "payload bytes per step the strategy states (run total / steps)", Compare::exact},
                           }};
  return s;
}

const CsvSchema& memory_schema() {
  static const CsvSchema s{"memory.csv",
                           "One row per case per rank per memory category.",
                           {
                               {"case", "-", "case name", Compare::key},
                               {"rank", "index", "rank within the case", Compare::key},
                               {"category", "-", "param, grad, optimizer, activation, comm, workspace", Compare::key},
                               {"peak_bytes", "bytes", "peak bytes the tracker saw in the category", Compare::exact},
                               {"expected_bytes", "bytes", "the strategy's analytic value (param, grad, optimizer, activation; else empty)", Compare::exact},
                           }};
  return s;
}

const CsvSchema& stages_schema() {
  static const CsvSchema s{"stages.csv",
                           "One row per case per pipeline stage (pp = 1: one stage); per-rank values max over the stage's ranks.",
                           {
                               {"case", "-", "case name", Compare::key},
                               {"stage", "index", "pipeline stage, from 0", Compare::key},
                               {"ranks", "count", "ranks in the stage (dp * tp)", Compare::exact},
                               {"busy_s", "s", "median over timed steps of compute seconds (forward and backward) per step", Compare::timing},
                               {"bubble_frac", "-", "1 - busy_s / step_time_s: the idle share of the step", Compare::timing},
                               {"bubble_theory", "-", "(pp - 1) / (microbatches + pp - 1)", Compare::float_},
                               {"peak_activation_bytes", "bytes", "peak activation bytes (microbatches in flight)", Compare::exact},
                               {"peak_mem_bytes", "bytes", "peak tracked bytes of all categories", Compare::info},
                           }};
  return s;
}

const CsvSchema& staleness_schema() {
  static const CsvSchema s{"staleness.csv",
                           "One row per asynchronous case per staleness value seen: how many applied gradients had it.",
                           {
                               {"case", "-", "case name", Compare::key},
                               {"staleness", "steps", "the gradient's step minus the fewest pushes of any worker the parameters it was computed on included", Compare::key},
                               {"count", "count", "applied gradients (over all servers) with this staleness", Compare::info},
                           }};
  return s;
}

const CsvSchema& bench_schema() {
  static const CsvSchema s{
      "bench.csv",
      "Written by `ptsuite bench` (README: Collective bandwidth) into its own directory, beside env.json: one row "
      "per op per size, the nccl-tests convention. Columns prefixed `ip_` are empty where the op has no in-place "
      "form in the Comm interface (reduce_scatter, all_to_all, send_recv); `wrong` columns are empty with --check 0.",
      {
          {"size", "bytes", "nccl-tests size: the whole buffer (all_reduce, broadcast, send_recv), the whole input (reduce_scatter), the whole output (all_gather, all_to_all); the requested size rounded down so each rank's block is whole elements", Compare::key},
          {"count", "elements", "size / element size", Compare::setting},
          {"type", "-", "float32 or float64", Compare::setting},
          {"redop", "-", "sum (all_reduce, reduce_scatter) or none", Compare::setting},
          {"root", "index", "broadcast's root rank; -1 for the others", Compare::setting},
          {"op", "-", "all_reduce, reduce_scatter, all_gather, all_to_all, broadcast (root 0; out of place the root first copies its input into the one buffer Comm::broadcast takes) or send_recv (each rank sends to rank+1 and receives from rank-1)", Compare::key},
          {"ranks", "count", "ranks of the communicator (n)", Compare::key},
          {"time_us", "us", "out of place: each rank's mean time per call over --iters calls (after --warmup), averaged over ranks", Compare::timing},
          {"algbw", "GB/s", "out of place: size / time_us (GB = 1e9 bytes)", Compare::timing},
          {"busbw", "GB/s", "out of place: algbw times the bus factor (all_reduce 2(n-1)/n; reduce_scatter, all_gather, all_to_all (n-1)/n; broadcast, send_recv 1)", Compare::timing},
          {"wrong", "count", "out of place: output elements that differ from the exact result, summed over ranks (inputs are integers 1..1000, so every result is exact)", Compare::exact},
          {"ip_time_us", "us", "in place (all_reduce: send = recv; all_gather: send = recv + rank * count / n; broadcast: one buffer): as time_us", Compare::timing},
          {"ip_algbw", "GB/s", "in place: as algbw", Compare::timing},
          {"ip_busbw", "GB/s", "in place: as busbw", Compare::timing},
          {"ip_wrong", "count", "in place: as wrong", Compare::exact},
      }};
  return s;
}

const std::vector<const CsvSchema*>& all_schemas() {
  static const std::vector<const CsvSchema*> v = {&cases_schema(), &steps_schema(), &comm_schema(),
                                                  &memory_schema(), &stages_schema(), &staleness_schema()};
  return v;
}

const Column* find_column(const std::string& file, const std::string& name) {
  for (const CsvSchema* s : all_schemas())
    if (s->file == file)
      for (const Column& c : s->columns)
        if (c.name == name) return &c;
  return nullptr;
}

std::string schema_markdown() {
  std::ostringstream o;
  o << "# Result schema\n\n"
    << "Generated by `build/ptsuite schema > results/SCHEMA.md` from harness/schema.cpp; a test\n"
    << "checks this file against the code. A run directory holds the six CSV files below\n"
    << "(RFC 4180, header row first) and `env.json` (git sha, time, host, ranks, library versions).\n"
    << "Rows are appended as each case finishes, cases.csv last. `run.json` records the run's progress:\n"
    << "`state` (running, complete, interrupted), `expected` and `completed` case counts and names,\n"
    << "`failed`, `in_progress` (the case running, or that was when the run died), the suite's\n"
    << "`fingerprint` and `committed_bytes` (each CSV file's size after the last completed case);\n"
    << "`faults.log` holds one line per fault a rank reported (an exception, the watchdog, a crash\n"
    << "signal), which `--resume` copies into a crashed case's reason. With `run --diagnose`,\n"
    << "`diagnose/<case>.txt` holds `ptsuite diagnose`'s text for each failed case.\n"
    << "An empty field means the value does not apply or was not measured.\n\n"
    << "The class of a column says how `ptsuite compare BASELINE CURRENT` treats it:\n\n"
    << "- key: identifies the row; rows of the two runs are matched on the key columns.\n"
    << "- setting: what the case ran; must be identical, else the two cases are not the same case.\n"
    << "- exact: integers and verdicts; identical in any two runs of the same suite.\n"
    << "- float: bitwise identical within one build (same git sha, compiler, MPI, BLAS with its\n"
    << "  kernel architecture, host: env.json); across builds |a - b| <= tol * max(|a|, |b|), tol =\n"
    << "  the exact check's 1e-12 scaled by the dtype's epsilon (1e-12 for float64 figures, 5.4e-4\n"
    << "  for float32 losses): only the order of summation may differ.\n"
    << "- rounding: a measured rounding error; bitwise identical within one build, shown across builds.\n"
    << "- timing: compared with a noise band from the per-step samples (steps.csv step_time_s of the\n"
    << "  timed steps, or with the timing probe in both runs (step_time_s - cpu_wait_s) / (probe_time_s -\n"
    << "  probe_cpu_wait_s)): a one-sided Mann-Whitney test and a minimum effect from the baseline's\n"
    << "  own spread.\n"
    << "- info: varies run to run or is a cross-check; shown, never compared. memory.csv's workspace\n"
    << "  rows count as info too: pipeline send buffers live as long as the schedule's timing lets them.\n";
  auto table = [&o](const CsvSchema& s, const std::string& title) {
    o << "\n## " << title << "\n\n" << s.description << "\n\n| column | unit | class | meaning |\n|---|---|---|---|\n";
    for (const auto& c : s.columns)
      o << "| `" << c.name << "` | " << c.unit << " | " << to_string(c.cls) << " | " << c.description << " |\n";
  };
  for (const CsvSchema* s : all_schemas()) table(*s, s->file);
  table(bench_schema(), bench_schema().file + " (`ptsuite bench`)");
  table(plan_schema(), plan_schema().file + " (`ptsuite plan`)");
  table(validate_schema(), validate_schema().file + " (`ptsuite plan --validate`)");
  return o.str();
}

}  // namespace pts
