// Runs a suite under MPI: for each case, trains it on the first dp*tp*pp ranks, runs the
// single-device oracle on rank 0 (cached per workload/dtype/steps/...), applies the checks
// and appends the case's rows to the run directory's CSV files (cases.csv last). run.json
// records the case in progress and the completed ones, so `--resume` can continue a run that
// was interrupted or died.
#pragma once
#include <string>
#include <vector>

#include "core/comm/mpi/mpi_comm.hpp"
#include "harness/csv.hpp"
#include "harness/progress.hpp"
#include "harness/suite.hpp"

namespace pts {

struct RunOptions {
  std::string out_dir;  // created by rank 0; must not already hold results (unless resume)
  std::string filter;   // ECMAScript regex on case names; empty = all
  bool quiet = false;   // no progress lines, summary or warnings (tests)
  ProgressMode progress = ProgressMode::automatic;
  bool resume = false;  // continue the run in out_dir (same suite, filter and overrides)
  std::vector<std::string> overrides;  // --set KEY=VALUE (applied by load_suite; fingerprinted)
};

struct RunSummary {
  std::vector<Row> cases;  // the cases.csv rows (rank 0 only)
  int failed = 0;          // cases with verdict FAIL, this invocation and earlier ones (all ranks)
  bool interrupted = false;  // stopped by SIGINT/SIGTERM; run.json says "interrupted"
  bool crash_recorded = false;  // --resume found a case in progress and recorded it as FAIL
  int expected = 0, completed = 0;
  int exit_code() const;  // kExitInterrupted, kExitCrashRecorded, kExitFailed or kExitPass
};

// Collective over `world`. Throws ConfigError (on every rank) when the output directory is
// unusable (holds results without --resume; with it, holds no run.json or one of another
// suite or filter) or the filter matches nothing, before anything runs.
RunSummary run_suite(const Suite& suite, const StrategyRegistry& registry, const RunOptions& opts,
                     MpiComm& world);

// The nodes a run's ranks share. Oversubscribed: some node has more ranks than CPUs its
// ranks may run on (the union of their affinity masks).
struct NodeInfo {
  int cores = 0;           // usable CPUs of the smallest node
  int ranks_per_node = 0;  // ranks on the fullest node
  bool oversubscribed = false;
  std::string yield_when_idle;  // Open MPI's mpi_yield_when_idle as set in the environment ("" unset)
};
NodeInfo node_info(MpiComm& world);  // collective over `world`
// The one-paragraph warning rank 0 prints once for an oversubscribed run ("" when not).
std::string oversubscription_warning(const NodeInfo& nodes);

// env.json content for a run on `world` (git sha, time, host, ranks, cores, versions).
std::string environment_json(MpiComm& world, const Suite& suite, const NodeInfo& nodes);

}  // namespace pts
