// Golden kits: the single-device oracle's run of one configuration written as a
// self-describing directory (manifest.json + safetensors) that an implementation outside
// ptsuite (PyTorch FSDP, a Megatron fork, JAX) is judged against with the suite's own rules.
// golden/MANIFEST.md is the contract of the kit's layout; harness/checks.hpp owns the rules.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/comm/mpi/mpi_comm.hpp"
#include "core/mesh.hpp"
#include "core/optimizer.hpp"
#include "harness/report.hpp"
#include "strategies/registry.hpp"

namespace pts {

inline constexpr int kGoldenVersion = 1;
inline constexpr int kGoldenMaxSteps = 100000;  // the suite's own limit (harness/suite.hpp Limits)

// One canonical parameter tensor as the kit names it.
struct GoldenParam {
  std::string name;            // "layers.0.weight", "blocks.1.attn.qkv.weight", ...
  std::vector<int64_t> shape;  // [rows, cols] row-major, or [n] for a vector
  int64_t offset = 0;          // in the canonical flat parameter vector
  std::string layout;          // how the model uses it ("[in, out]: y = x W + b", ...)
  double init_std = 0, init_value = 0;  // N(0, std^2) from `stream` when std > 0, else the constant
  uint64_t stream = 0;
  int64_t numel() const;
};

// The canonical tensors of workload `w`, in the flat order of workloads/ (their numel sums
// to w.num_params()).
std::vector<GoldenParam> golden_params(const WorkloadSpec& w);

struct GoldenExportOptions {
  std::string workload;
  int steps = 4;
  int64_t global_batch = 32;
  int every = 1;  // parameters after steps every-1, 2 every-1, ..., and always the last
  OptimizerConfig optimizer;
  uint64_t seed = 1234;
  bool float32 = true;  // also the single-device float32 run
};

// Trains the oracle on this rank alone (MPI_COMM_SELF) and writes the kit into `dir`, which
// must not exist or be empty. Throws ConfigError for a bad configuration before writing.
void golden_export(const GoldenExportOptions& o, const StrategyRegistry& registry, const std::string& dir);

struct GoldenResultsOptions {
  std::string kit, out, strategy, dtype = "float64";
  Layout layout;
  std::vector<std::string> sets;  // more suite keys, "key=value" (TOML value)
};

// Trains the kit's configuration with `strategy` on the ranks of `world` and writes, on rank
// 0, OUT/losses.csv and OUT/params.safetensors (every step the kit stores) in the format
// `golden verify` reads. Collective. Returns 0, or 1 when the strategy failed (its error is
// printed); throws ConfigError for bad input before anything is written.
int golden_results(const GoldenResultsOptions& o, const StrategyRegistry& registry, MpiComm& world);

struct GoldenVerifyOptions {
  std::string kit, losses, params, grads;
  std::string dtype = "auto";   // auto (from the files' dtype) | float64 | float32
  std::string format = "text";  // text | json
  int show = 10;                // tensors listed in the text table (worst first)
};

struct GoldenVerdict {
  int exit_code = 0;  // 0 pass, 1 fail
  std::string report;
};

// The suite's rule (harness/checks.hpp) on one pair of vectors, as golden verify and
// ptsuite diagnose apply it per step and per tensor: float64 relative L2 error <= kExactRelTol;
// float32 error ratio ||yours - golden|| / max(||single32 - golden||, floor) <= kPrecisionRatio.
struct GoldenRule {
  bool precision = false;
  double judge(const std::vector<double>& yours, const std::vector<double>& golden,
               const std::vector<double>* single32) const;
  bool pass(double v) const;
  double limit() const;
  std::string name() const;  // rel_err | err_ratio
};

// One step of the oracle on its own path (the model, data and batch `single` trains), in
// precision T (float or double): the parameters before step `step` (`before`, or the initial
// ones when it is empty), the gradient of that step's batch before the optimizer touches it,
// and the loss. The kit's grads.safetensors is step 0's. With `count` >= 0 only samples
// [first, first + count) of the step's global batch: their share of the gradient and of the
// mean loss (the normalisation stays the global batch), e.g. one microbatch's.
struct OracleStep {
  std::vector<double> params, grads;
  double loss = 0;
};
template <class T>
OracleStep oracle_step(const CaseConfig& c, const WorkloadSpec& w, int step, const std::vector<double>& before,
                       int64_t first = 0, int64_t count = -1);

// Losses of every step and parameters after each step of `saved` (ascending), every step of
// `saved` a run of k+1 steps from the start (the checks' own code path, full_params).
struct SnapshotRun {
  std::vector<double> losses;
  std::vector<std::vector<double>> snapshots;  // [index in saved]; full vectors on rank 0
  std::string error;                           // this rank's error (or "failed on another rank")
  RankReport report;                           // this rank's figures and checks of the last run
};
// Case c's reference (as `info` names it; the oracle for `single`) in precision T, on this
// rank alone through the reference cache. Throws Error when the reference fails.
template <class T>
SnapshotRun reference_snapshots(const CaseConfig& c, const StrategyInfo& info, const WorkloadSpec& w,
                                const std::vector<int>& saved, const StrategyRegistry& registry);
// Case c trained by `info` on the ranks of `side` (exactly the case's ranks), in the case's
// dtype. Collective over `side`. before_run(k), when given, is called before the run of k+1 steps.
SnapshotRun strategy_snapshots(const CaseConfig& c, const StrategyInfo& info, const WorkloadSpec& w,
                               const std::vector<int>& saved, MpiComm& side,
                               const std::function<void(int)>& before_run = {});

// Judges a user's results against the kit. Throws ConfigError naming the file (and tensor)
// for a kit whose files do not match its manifest and for malformed or mismatched results.
GoldenVerdict golden_verify(const GoldenVerifyOptions& o);

}  // namespace pts
