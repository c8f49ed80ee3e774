// ptsuite: the command line. Subcommands list, matrix, run (under mpirun), schema, compare and
// golden (export, results under mpirun, verify), diagnose and bench (under mpirun).
// Exit status: 0 all cases pass (compare: nothing regressed), 1 a case failed a check
// (compare: a regression), 2 bad input (nothing ran); run also 3 interrupted by SIGINT/SIGTERM
// (continue with --resume), 4 the watchdog ended the job, 5 --resume recorded a case that
// crashed (harness/run_state.hpp).
#include <mpi.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>

#include "core/comm/case_comm.hpp"
#include "core/comm/mpi/watchdog.hpp"
#include "harness/collective_bench.hpp"
#include "harness/compare.hpp"
#include "harness/diagnose.hpp"
#include "harness/golden.hpp"
#include "harness/plan.hpp"
#include "harness/run_state.hpp"
#include "harness/runner.hpp"
#include "harness/schema.hpp"
#include "strategies/schedule_table.hpp"
#ifdef PTSUITE_PLANTED_BUGS
#include "strategies/testing/broken_strategies.hpp"
#endif
#include "workloads/workload.hpp"
#ifdef PTSUITE_CUDA
#include "core/backend/cuda/cuda_backend.hpp"
#endif

namespace {

void list(const pts::StrategyRegistry& registry) {
  std::printf("strategies:\n");
  for (const auto& s : registry.all()) {
    std::printf("  %-16s %s\n", s.name.c_str(), s.description.c_str());
    if (s.reference.kind == "replay")
      std::printf("  %-16s   checked against the replay of its own trace on one rank\n", "");
    else if (s.reference.kind != "oracle")
      std::printf("  %-16s   checked against its %s, %s\n", "", s.reference.kind.c_str(), s.reference.strategy.c_str());
    if (!s.matrix.empty())
      std::printf("  %-16s   conformance matrix: %zu cases (ptsuite matrix %s)\n", "",
                  pts::matrix_suite(registry, s.name).cases.size(), s.name.c_str());
  }
  std::printf("strategy options (suite keys a strategy declares; default in brackets):\n");
  for (const auto& o : registry.options())
    std::printf("  %-22s [%s] %s; %s\n", o.key.c_str(), pts::option_text(o.default_of()).c_str(), o.meaning.c_str(),
                registry.declaring(o.key).c_str());
  std::printf("workloads:\n");
  for (const auto& w : pts::builtin_workloads()) {
    std::printf("  %-16s %12lld params  %s", w.name.c_str(), static_cast<long long>(w.num_params()),
                w.description.c_str());
    const std::string note = w.model_kind().note(w);
    if (!note.empty()) std::printf(" (%s)", note.c_str());
    std::printf("\n");
  }
  // What this build computes and communicates on: the suite's `backend` key, and the
  // communicator a case then uses (cases.csv: comm_backend).
  std::printf("backends: %s\n", pts::backend_names().c_str());
  std::printf("communicators: %s\n", pts::comm_backend_names().c_str());
  std::printf("suites:\n");
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("suite", ec))
    if (e.path().extension() == ".toml") std::printf("  %s\n", e.path().c_str());
  std::printf("suite keys:");
  for (const auto& k : pts::suite_keys(registry)) std::printf(" %s", k.c_str());
  std::printf("\n");
}

// The conformance matrices of `names` (every strategy's when empty): the suite tables, or
// with `cases` the names of the cases they expand to.
// ptsuite schedule: the table simulated, one line per rank, and the closed form beside it.
void schedule_report(const std::string& name, int p, int m, int v, const std::string& costs, const std::string& csv) {
  pts::PipeCosts c;
  double* fields[] = {&c.f, &c.b, &c.w, &c.p2p};
  size_t at = 0;
  int got = 0;
  for (; got < 4 && at <= costs.size(); ++got) {
    const size_t comma = std::min(costs.find(',', at), costs.size());
    const std::string part = costs.substr(at, comma - at);
    char* end = nullptr;
    *fields[got] = std::strtod(part.c_str(), &end);
    if (part.empty() || *end != '\0' || !std::isfinite(*fields[got]) || *fields[got] < 0)
      throw pts::ConfigError("--costs '" + costs + "': give F,B,W[,P2P] as finite numbers >= 0");
    at = comma + 1;
  }
  if (got < 3 || at <= costs.size()) throw pts::ConfigError("--costs '" + costs + "': give F,B,W[,P2P]");
  const pts::ScheduleTable t = pts::make_schedule_table(name, p, m, v);
  const pts::ScheduleSim sim = pts::simulate(t, c);
  std::printf("# %s: pp %d, %d microbatches, %d chunk(s) per rank; F %g, B %g, W %g, p2p %g per chunk; %s\n",
              name.c_str(), p, m, t.v, c.f, c.b, c.w, c.p2p,
              t.split_w ? "B and W split" : "B includes W");
  std::printf("# makespan %g\n", sim.makespan);
  std::printf("%6s %10s %10s %12s %10s %10s %8s\n", "rank", "busy", "bubble", "bubble/busy", "in-flight", "W-pending",
              "sends");
  for (int r = 0; r < p; ++r)
    std::printf("%6d %10g %10g %12.4f %10d %10d %8d\n", r, sim.busy[r], sim.bubble[r], sim.bubble_ratio(r),
                sim.peak_in_flight[r], sim.peak_w_pending[r], sim.sends[r]);
  if (!csv.empty()) {
    std::ofstream f(csv);
    f << pts::schedule_csv(t, sim);
    if (!f) throw pts::ConfigError("--csv: cannot write " + csv);
    std::printf("# wrote %s\n", csv.c_str());
  }
}

void matrix(const pts::StrategyRegistry& registry, const std::vector<std::string>& names, bool cases) {
  std::vector<const pts::StrategyInfo*> chosen;
  for (const auto& name : names) {
    const pts::StrategyInfo* s = registry.find(name);
    if (!s) throw pts::ConfigError("unknown strategy '" + name + "'; known: " + registry.names());
    chosen.push_back(s);
  }
  if (names.empty())
    for (const auto& s : registry.all()) chosen.push_back(&s);
  for (const pts::StrategyInfo* s : chosen) {
    if (s->matrix.empty()) {
      std::printf("# %s: no conformance matrix\n", s->name.c_str());
    } else if (cases) {
      for (const auto& c : pts::matrix_suite(registry, s->name).cases) std::printf("%s\n", c.name.c_str());
    } else {
      std::printf("%s\n", pts::matrix_text(*s).c_str());
    }
  }
}

std::string default_out_dir(const std::string& suite_path) {
  std::time_t now = std::time(nullptr);
  char stamp[32];
  std::strftime(stamp, sizeof stamp, "%Y%m%d-%H%M%S", std::gmtime(&now));
  return "results/runs/" + std::string(stamp) + "-" + std::filesystem::path(suite_path).stem().string();
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  int code = 0;
#ifdef PTSUITE_CUDA
  pts::register_cuda_backends();  // cuda, cuda-tf32: their factories throw where no GPU is visible
#endif
  CLI::App app{"ptsuite: conformance and benchmark suite for parallel training strategies"};
  app.require_subcommand(1);
  auto* list_cmd = app.add_subcommand("list", "strategies, workloads (with parameter counts) and suite files");
  auto* matrix_cmd = app.add_subcommand("matrix", "the conformance matrix a strategy's registry entry declares");
  std::vector<std::string> matrix_names;
  bool matrix_cases = false;
  matrix_cmd->add_option("strategy", matrix_names, "strategies (default: all)");
  matrix_cmd->add_flag("--cases", matrix_cases, "print the names of the cases instead of the matrix entries");
  auto* schema_cmd = app.add_subcommand("schema", "print results/SCHEMA.md, generated from the code");
  auto* run_cmd = app.add_subcommand("run", "run a suite file (under mpirun)");
  std::string suite_path, out_dir, filter;
  bool quiet = false, resume = false;
  double timeout_s = 300;
  run_cmd->add_option("suite", suite_path, "suite file (TOML)")->required();
  run_cmd->add_option("--out", out_dir, "run directory (default results/runs/<time>-<suite>); must not hold results");
  run_cmd->add_flag("--resume", resume,
                    "continue the interrupted or crashed run in --out: completed cases are kept, the case in "
                    "progress when it died is recorded as FAIL (crash), the rest run");
  run_cmd->add_option("--timeout", timeout_s,
                      "seconds any one wait for other ranks may block before the watchdog names it and ends the "
                      "job with exit 4 (0: no watchdog)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  run_cmd->add_option("--filter", filter, "only cases whose name matches this regular expression");
  run_cmd->add_flag("--quiet", quiet, "no progress, summary or warnings");
  std::vector<std::string> overrides;
  run_cmd->add_option("--set", overrides,
                      "KEY=VALUE: the suite key set in every case, over the file's settings (repeatable; "
                      "e.g. --set backend=cuda)");
  bool run_diagnose = false;
  run_cmd->add_flag("--diagnose", run_diagnose,
                    "after the run, diagnose every failed case into OUT/diagnose/<case>.txt (ptsuite diagnose)");
  std::string progress = "auto";
  run_cmd->add_option("--progress", progress,
                      "auto (a live line on a terminal outside mpirun/CI, else lines), live, lines or none")
      ->check(CLI::IsMember({"auto", "live", "lines", "none"}));
  auto* compare_cmd = app.add_subcommand("compare", "compare a run directory with a baseline run: exit 1 on a regression");
  std::string compare_base, compare_current, timing_band = "auto", compare_format = "text";
  compare_cmd->add_option("baseline", compare_base, "baseline run directory")->required();
  compare_cmd->add_option("current", compare_current, "current run directory")->required();
  compare_cmd->add_option("--timing-band", timing_band,
                          "auto (the measured spread per case), a percentage (the least timing change reported) or off "
                          "(timings not compared: ci/nightly.sh when ci/compare_ab.sh measures them)");
  std::vector<std::string> confirm_dirs;
  compare_cmd->add_option("--confirm", confirm_dirs,
                          "a rerun of the flagged cases (repeatable): a timing change stands only if each rerun shows it");
  compare_cmd->add_option("--format", compare_format, "text, markdown or json")
      ->check(CLI::IsMember({"text", "markdown", "json"}));
  auto* golden_cmd = app.add_subcommand("golden", "conformance kits for implementations outside ptsuite");
  golden_cmd->require_subcommand(1);
  auto* gexport_cmd = golden_cmd->add_subcommand("export", "write the oracle's run of a workload as a golden kit");
  pts::GoldenExportOptions gx;
  std::string gx_dir, gx_dtype = "float64";
  gexport_cmd->add_option("dir", gx_dir, "new directory for the kit")->required();
  gexport_cmd->add_option("--workload", gx.workload, "workload preset (ptsuite list)")->required();
  gexport_cmd->add_option("--steps", gx.steps, "optimizer steps")->capture_default_str();
  gexport_cmd->add_option("--global-batch", gx.global_batch, "samples per step")->capture_default_str();
  gexport_cmd->add_option("--every", gx.every, "store the parameters after every k-th step (and the last)")
      ->capture_default_str();
  gexport_cmd->add_option("--optimizer", gx.optimizer.kind, "sgd (momentum) or adamw")
      ->check(CLI::IsMember({"sgd", "adamw"}))
      ->capture_default_str();
  gexport_cmd->add_option("--lr", gx.optimizer.lr, "learning rate")->capture_default_str();
  gexport_cmd->add_option("--momentum", gx.optimizer.momentum, "sgd momentum")->capture_default_str();
  gexport_cmd->add_option("--weight-decay", gx.optimizer.weight_decay, "weight decay")->capture_default_str();
  gexport_cmd->add_option("--seed", gx.seed, "seed of parameters and data")->capture_default_str();
  gexport_cmd->add_option("--dtype", gx_dtype, "the kit's precision: float64 (the oracle)")
      ->check(CLI::IsMember({"float64"}));
  bool gx_no32 = false;
  gexport_cmd->add_flag("--no-float32", gx_no32, "leave out the single-device float32 run");
  auto* gresults_cmd = golden_cmd->add_subcommand(
      "results", "train a kit's configuration with a ptsuite strategy and write results verify reads (under mpirun)");
  pts::GoldenResultsOptions gr;
  gresults_cmd->add_option("kit", gr.kit, "golden kit directory")->required();
  gresults_cmd->add_option("out", gr.out, "new directory for losses.csv and params.safetensors")->required();
  gresults_cmd->add_option("--strategy", gr.strategy, "registered strategy")->required();
  gresults_cmd->add_option("--dtype", gr.dtype, "float64 or float32")
      ->check(CLI::IsMember({"float64", "float32"}))
      ->capture_default_str();
  gresults_cmd->add_option("--dp", gr.layout.dp, "data-parallel ranks")->capture_default_str();
  gresults_cmd->add_option("--tp", gr.layout.tp, "tensor-parallel ranks")->capture_default_str();
  gresults_cmd->add_option("--pp", gr.layout.pp, "pipeline stages")->capture_default_str();
  gresults_cmd->add_option("--set", gr.sets, "another suite key, KEY=VALUE with a TOML value (repeatable)");
  auto* gverify_cmd = golden_cmd->add_subcommand("verify", "judge results against a kit: exit 0 pass, 1 fail, 2 bad input");
  pts::GoldenVerifyOptions gv;
  gverify_cmd->add_option("kit", gv.kit, "golden kit directory")->required();
  gverify_cmd->add_option("--losses", gv.losses, "CSV step,loss")->required();
  gverify_cmd->add_option("--params", gv.params, "safetensors: step.<k>.<name> or <name> (after the last step)");
  gverify_cmd->add_option("--grads", gv.grads, "safetensors: <name>, gradients of step 0");
  gverify_cmd->add_option("--dtype", gv.dtype, "auto (from the files), float64 (exact rule) or float32 (error ratio)")
      ->check(CLI::IsMember({"auto", "float64", "float32"}))
      ->capture_default_str();
  gverify_cmd->add_option("--format", gv.format, "text or json")->check(CLI::IsMember({"text", "json"}));
  gverify_cmd->add_option("--show", gv.show, "tensors listed in the text table, worst first")->capture_default_str();
  auto* diagnose_cmd = app.add_subcommand(
      "diagnose", "re-run a case and its reference step by step: the first step, tensor, elements and shard that "
                  "diverge (under mpirun; exit 0 no divergence, 1 found, 2 bad input)");
  pts::DiagnoseOptions dg;
  diagnose_cmd->add_option("suite", dg.suite, "suite file (TOML)")->required();
  diagnose_cmd->add_option("--case", dg.case_name, "name of the case, as ptsuite run names it")->required();
  diagnose_cmd->add_option("--set", dg.overrides, "KEY=VALUE, as the run had it (repeatable)");
  diagnose_cmd->add_option("--format", dg.format, "text or json")->check(CLI::IsMember({"text", "json"}));
  auto* bench_cmd = app.add_subcommand(
      "bench", "collective bandwidth sweep in the nccl-tests convention, every result checked (under mpirun; exit 0 "
               "pass, 1 a wrong result or a missed --min-busbw, 2 bad input)");
  pts::BenchOptions bo;
  std::string bench_ops, bench_min = "8", bench_max = "64M", bench_gates, bench_out;
  int bench_check = 1;
  bench_cmd->add_option("--ops", bench_ops, "comma-separated ops (default all: " + pts::bench_op_names() + ")");
  bench_cmd->add_option("--min-bytes", bench_min, "smallest size, bytes (K, M, G: x1024)")->capture_default_str();
  bench_cmd->add_option("--max-bytes", bench_max, "largest size, bytes (K, M, G: x1024)")->capture_default_str();
  bench_cmd->add_option("--factor", bo.factor, "each size is the previous times this")->capture_default_str();
  bench_cmd->add_option("--iters", bo.iters, "timed calls per size")->capture_default_str();
  bench_cmd->add_option("--warmup", bo.warmup, "untimed calls before them")->capture_default_str();
  bench_cmd->add_option("--dtype", bo.dtype, "float32 or float64")->capture_default_str();
  bench_cmd->add_option("--backend", bo.backend, "compute backend whose memory holds the buffers")->capture_default_str();
  bench_cmd->add_option("--comm", bo.comm, "communicator measured")->capture_default_str();
  bench_cmd->add_option("--out", bench_out, "directory for bench.csv and env.json (default results/runs/<time>-bench)");
  bench_cmd->add_option("--min-busbw", bench_gates,
                        "SIZE=GBPS,...: every row of size >= SIZE must reach GBPS out-of-place busbw, else exit 1");
  bench_cmd->add_option("--check", bench_check, "1: count wrong elements (#wrong), 0: do not")
      ->check(CLI::IsMember({0, 1}))
      ->capture_default_str();
  auto* sched_cmd = app.add_subcommand(
      "schedule", "a pipeline schedule's action table, simulated at fixed costs: bubble, activations held and "
                  "sends per rank against the closed form; the table as CSV");
  std::string sched_name = "1f1b", sched_costs = "1,1,1,0", sched_out;
  int sched_pp = 4, sched_m = 8, sched_v = 1;
  sched_cmd->add_option("--schedule", sched_name, "one of: " + pts::schedule_table_names())->capture_default_str();
  sched_cmd->add_option("--pp", sched_pp, "pipeline ranks")->capture_default_str();
  sched_cmd->add_option("--microbatches", sched_m, "microbatches per step")->capture_default_str();
  sched_cmd->add_option("--virtual-stages", sched_v, "chunks per rank (interleaved-1f1b; zbv has 2)")->capture_default_str();
  sched_cmd->add_option("--costs", sched_costs, "F,B,W[,P2P] cost of one action on one chunk (any unit)")
      ->capture_default_str();
  sched_cmd->add_option("--csv", sched_out, "write the simulated table here (rank,step,kind,micro,chunk,vstage,start,end)");
  auto* plan_cmd = app.add_subcommand(
      "plan", "suggest a layout for a workload on N ranks from the strategies' exact statements and a time model "
              "(README: Planning a layout; --validate under mpirun -np N)");
  pts::PlanOptions po;
  bool plan_calibrate = false;
  plan_cmd->add_option("--workload", po.workload, "workload to plan for");
  plan_cmd->add_option("--ranks", po.ranks, "ranks to plan for");
  plan_cmd->add_option("--global-batch", po.global_batch, "global batch (default 8 x ranks, at least 16)");
  plan_cmd->add_option("--mem-per-rank", po.mem_per_rank, "bytes a rank may hold (default: no limit)");
  plan_cmd->add_option("--link", po.link, "bus_gbps,latency_us of the link (the emulated link's)");
  plan_cmd->add_option("--bench-csv", po.bench_csv, "a ptsuite bench bench.csv to fit the link to");
  plan_cmd->add_option("--calibration", po.calibration, "a ptsuite plan --calibrate CSV (default: calibrate now)");
  plan_cmd->add_option("--top", po.top, "suggestions to write to plan-top.toml and validate")->capture_default_str();
  plan_cmd->add_option("--out", po.out_dir, "directory for plan.csv and plan-top.toml (--calibrate: the CSV file)");
  plan_cmd->add_option("--dtype", po.dtype, "float32 or float64")->capture_default_str();
  plan_cmd->add_option("--backend", po.backend, "compute backend")->capture_default_str();
  plan_cmd->add_option("--cores", po.cores, "cores the ranks share: the schedule runs at processor-sharing speed (0: a core per rank)")
      ->capture_default_str();
  plan_cmd->add_option("--action-overhead", po.action_overhead_s,
                       "seconds per microbatch and chunk beyond the calibrated work (fitted to a validation)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  plan_cmd->add_option("--steps", po.steps, "steps of each validated case")->capture_default_str();
  plan_cmd->add_option("--warmup-steps", po.warmup_steps, "untimed steps of each")->capture_default_str();
  plan_cmd->add_flag("--calibrate", plan_calibrate, "measure gemm and elementwise throughput into --out FILE");
  plan_cmd->add_flag("--validate", po.validate, "run the suggestions and a sample through the harness");
  plan_cmd->add_option("--sample", po.sample, "layouts besides the top K to validate")->capture_default_str();
  plan_cmd->add_option("--repeat", po.repeat, "rounds of the validation (measured: the least round median)")
      ->check(CLI::Range(1, 100))
      ->capture_default_str();
  try {
    app.parse(argc, argv);
    pts::StrategyRegistry registry = pts::builtin_strategies();
#ifdef PTSUITE_PLANTED_BUGS
    pts::add_broken_strategies(registry);  // ptsuite_planted: the test build with the planted bugs
#endif
    if (*list_cmd) {
      if (rank == 0) list(registry);
    } else if (*matrix_cmd) {
      if (rank == 0) matrix(registry, matrix_names, matrix_cases);
    } else if (*schema_cmd) {
      if (rank == 0) std::fputs(pts::schema_markdown().c_str(), stdout);
    } else if (*compare_cmd) {
      pts::CompareOptions o;
      if (timing_band == "off") {
        o.timings = false;
      } else if (timing_band != "auto") {
        char* end = nullptr;
        const double pct = std::strtod(timing_band.c_str(), &end);
        if (timing_band.empty() || *end != '\0')
          throw pts::ConfigError("--timing-band '" + timing_band + "': give auto, off or a percentage such as 10");
        o.timing_band = pct / 100;
      }
      if (rank == 0) {
        pts::Comparison c = pts::compare_runs(compare_base, compare_current, o);
        pts::confirm_timings(c, confirm_dirs, o);
        std::fputs(pts::format_comparison(c, compare_format).c_str(), stdout);
        code = c.exit_code();
      }
    } else if (*gexport_cmd) {
      gx.float32 = !gx_no32;
      if (rank == 0) pts::golden_export(gx, registry, gx_dir);
    } else if (*gresults_cmd) {
      pts::MpiComm world(MPI_COMM_WORLD, "world", false);
      code = pts::golden_results(gr, registry, world);
    } else if (*gverify_cmd) {
      if (rank == 0) {
        pts::GoldenVerdict v = pts::golden_verify(gv);
        std::fputs(v.report.c_str(), stdout);
        code = v.exit_code;
      }
    } else if (*diagnose_cmd) {
      pts::MpiComm world(MPI_COMM_WORLD, "world", false);
      code = pts::diagnose(dg, registry, world);
      MPI_Bcast(&code, 1, MPI_INT, 0, MPI_COMM_WORLD);  // every rank exits with rank 0's verdict
    } else if (*plan_cmd) {
      pts::MpiComm world(MPI_COMM_WORLD, "world", false);
      code = pts::plan_command(po, plan_calibrate, registry, world);
    } else if (*bench_cmd) {
      if (!bench_ops.empty()) bo.ops = pts::parse_bench_ops(bench_ops);
      bo.min_bytes = pts::parse_size(bench_min);
      bo.max_bytes = pts::parse_size(bench_max);
      if (!bench_gates.empty()) bo.gates = pts::parse_busbw_gates(bench_gates);
      bo.check = bench_check != 0;
      pts::validate(bo);
      pts::MpiComm world(MPI_COMM_WORLD, "world", false);
      if (bench_out.empty()) {
        bench_out = default_out_dir("bench");
        int len = static_cast<int>(bench_out.size());
        MPI_Bcast(&len, 1, MPI_INT, 0, MPI_COMM_WORLD);  // every rank uses rank 0's clock
        bench_out.resize(len);
        MPI_Bcast(bench_out.data(), len, MPI_CHAR, 0, MPI_COMM_WORLD);
      }
      code = pts::collective_bench(bo, bench_out, world);
    } else if (*sched_cmd) {
      if (rank == 0) schedule_report(sched_name, sched_pp, sched_m, sched_v, sched_costs, sched_out);
    } else if (*run_cmd) {
      pts::MpiComm world(MPI_COMM_WORLD, "world", false);
      pts::Suite suite = pts::load_suite(suite_path, registry, world.size(), overrides);
      if (out_dir.empty()) {
        out_dir = default_out_dir(suite_path);
        int len = static_cast<int>(out_dir.size());
        MPI_Bcast(&len, 1, MPI_INT, 0, MPI_COMM_WORLD);  // every rank uses rank 0's clock
        out_dir.resize(len);
        MPI_Bcast(out_dir.data(), len, MPI_CHAR, 0, MPI_COMM_WORLD);
      }
      if (resume && out_dir.empty()) throw pts::ConfigError("--resume needs the --out of the run to continue");
      pts::set_watchdog_timeout(timeout_s);
      pts::RunOptions opts{out_dir, filter, quiet, pts::parse_progress_mode(progress), resume, overrides};
      const pts::RunSummary summary = pts::run_suite(suite, registry, opts, world);
      code = summary.exit_code();
      if (run_diagnose && !summary.interrupted) {
        std::vector<pts::FailedCase> failed;
        for (const pts::Row& r : summary.cases)
          if (r.at("verdict") == "FAIL") failed.push_back({r.at("case"), r.count("reason") ? r.at("reason") : ""});
        const int n = pts::diagnose_failures(suite_path, overrides, failed, out_dir, registry, world);
        if (rank == 0 && !quiet && !failed.empty())
          std::printf("diagnosed %d of %zu failed cases: %s/diagnose/<case>.txt\n", n, failed.size(), out_dir.c_str());
      }
    }
  } catch (const CLI::ParseError& e) {
    code = rank == 0 ? app.exit(e) : (e.get_exit_code() ? 2 : 0);
    if (code != 0) code = 2;
  } catch (const pts::ConfigError& e) {
    if (rank == 0) std::fprintf(stderr, "ptsuite: error: %s\n", e.what());
    code = pts::kExitBadInput;
  } catch (const std::exception& e) {
    // Not a case's failure (those are rows): the harness itself, e.g. a write to a full disk.
    std::fprintf(stderr, "ptsuite: rank %d: fatal: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, pts::kExitFailed);
  }
  MPI_Finalize();
  return code;
}
