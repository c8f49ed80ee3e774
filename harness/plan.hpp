// `ptsuite plan`: suggests the layout (dp x tp x pp, ZeRO stage, pipeline schedule,
// microbatches, stage split) for a workload on N ranks from a cost model whose memory and
// bytes are the strategies' own exact statements (StrategyInfo::statement: the same pure
// functions the strategies state and the suite checks), and whose time is a calibration of
// the compute backend plus an alpha-beta model of the link. `--validate` runs the suggestions
// and a sample of the rest through the harness and writes predicted vs measured.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <array>

#include "core/comm/mpi/mpi_comm.hpp"
#include "harness/schema.hpp"
#include "strategies/registry.hpp"

namespace pts {

struct PlanOptions {
  std::string workload;
  int ranks = 0;
  int64_t global_batch = 0;  // 0: 8 x ranks (at least 16)
  int64_t mem_per_rank = 0;  // bytes; 0: no limit
  std::string link;          // "bus_gbps,latency_us" (the emulated link's), or empty
  std::string bench_csv;     // a `ptsuite bench` bench.csv to fit the link from, or empty
  std::string calibration;   // a `plan --calibrate` CSV; empty: calibrate now (seconds)
  std::string dtype = "float32";
  std::string backend = "cpu";
  int top = 5;
  std::string out_dir;  // plan.csv, plan-top.toml (and validate.csv); empty: print only
  // The ranks share this many cores (a validation on a small machine): while k of them compute,
  // each runs at min(1, cores / k) of a core (README "The time model"); 0: a core each.
  int cores = 0;
  // Seconds a rank spends per microbatch and model chunk beyond its gemms and elementwise
  // work (the activations' allocation, the schedule's bookkeeping): fitted to a validation.
  double action_overhead_s = 0;
  bool max_splits = true;  // enumerate the time-balanced stage_layers besides the even split
  // --validate
  bool validate = false;
  int sample = 8;
  int steps = 5, warmup_steps = 2;
  int repeat = 1;  // rounds of the whole validation suite (measured: the least round median)
  uint64_t seed = 1;
};

// One gemm's or one elementwise op's measured throughput (plan --calibrate's rows).
struct CalibrationRow {
  std::string op;  // gemm | elementwise
  int64_t m = 0, n = 0, k = 0;
  double seconds = 0;  // per call
  double rate = 0;     // gemm: FLOP/s; elementwise: elements/s
};
struct Calibration {
  std::string backend, dtype;
  std::vector<CalibrationRow> rows;
  // Seconds of a gemm of this shape: its FLOPs at the rate of the nearest calibrated shape
  // (log distance over m, n, k); of `elements` streamed by elementwise ops.
  double gemm_seconds(int64_t m, int64_t n, int64_t k) const;
  double elementwise_seconds(double elements) const;
};
// Reads a calibration CSV; throws ConfigError naming the file and line when malformed.
Calibration read_calibration(const std::string& path);
// Measures gemm throughput of `shapes` (plus a fixed grid) and elementwise throughput on the
// backend, in dtype.
Calibration calibrate(const std::string& backend, const std::string& dtype,
                      std::vector<std::array<int64_t, 3>> shapes);
void write_calibration(const Calibration& c, const std::string& path);

// The alpha-beta link: an op of `calls` calls moving `bus_bytes` costs calls x alpha +
// bus_bytes / beta (alpha per op kind when fitted from bench.csv).
struct LinkCost {
  double alpha_s = 0, beta_Bps = 0;  // beta 0: free
  std::vector<std::pair<std::string, std::pair<double, double>>> per_op;  // op -> (alpha, beta)
  double seconds(CommOp op, uint64_t calls, double bus_bytes) const;
  std::string text;
};
LinkCost parse_link(const std::string& text);
LinkCost fit_link(const std::string& bench_csv);

// A candidate layout and its prediction.
struct PlanEntry {
  CaseConfig config;
  std::string layout;  // "dp2 tp1 pp2 z3 1f1b m4 [1,3]"
  // The exact statements, per pipeline stage (tp rank 0, which holds the most).
  int64_t mem_per_rank = 0;      // max over ranks of param+grad+optimizer+activation+comm+workspace bounds
  int64_t mem_exact = 0;         // max over ranks of param+grad+optimizer+activation (checked exactly)
  double bus_bytes_per_step = 0;  // max over ranks of the bus bytes a step moves
  // Time model (seconds per step).
  double compute_s = 0, tp_s = 0, cp_s = 0, ep_s = 0, pp_s = 0, bubble_s = 0, dp_s = 0, dp_exposed_s = 0, optimizer_s = 0;
  double step_s = 0, tokens_per_s = 0;
  bool fits = true;
  std::string why;
  int rank = 0;  // 1-based among those that fit
};

struct Plan {
  std::vector<PlanEntry> entries;  // fitting ones first, by predicted step time
  int fitting = 0;
  double seconds = 0;  // wall time of planning
};

// Every valid layout of the options' workload on exactly `ranks` ranks, predicted and ranked.
// Throws ConfigError on bad input (unknown workload, ranks < 1, malformed calibration or link,
// a memory limit no layout fits).
Plan make_plan(const PlanOptions& o, const StrategyRegistry& registry, const Calibration& cal, const LinkCost& link);
// The gemm shapes the layouts of o need (for a calibration targeted at them).
std::vector<std::array<int64_t, 3>> plan_gemm_shapes(const PlanOptions& o, const StrategyRegistry& registry);
std::string plan_table(const Plan& p, const PlanOptions& o, int rows);
void write_plan(const Plan& p, const PlanOptions& o, const std::string& dir);
// A suite file of `entries` that `ptsuite run` accepts as is.
std::string plan_suite(const std::vector<const PlanEntry*>& entries, const PlanOptions& o, const std::string& title);

// Kendall's tau-b of two orders of the same items: (concordant - discordant pairs) over
// sqrt((pairs - tied in a) (pairs - tied in b)); 0 when either order ties every pair.
double kendall_tau_b(const std::vector<double>& a, const std::vector<double>& b);

// plan.csv and validate.csv (in results/SCHEMA.md through schema_markdown()).
const CsvSchema& plan_schema();
const CsvSchema& validate_schema();

// `ptsuite plan` on the world (every rank plans; rank 0 prints and writes; --validate runs
// the layouts on the world). Returns the exit code.
int plan_command(PlanOptions o, bool calibrate_only, const StrategyRegistry& registry, MpiComm& world);

}  // namespace pts
