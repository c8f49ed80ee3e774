// The Strategy interface: how one case trains its workload on a process mesh, and what it
// states up front about itself (bytes it moves per step, bytes it holds) so the harness
// can check both exactly. A new strategy is one file implementing this plus one registry line.
#pragma once
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/backend/backend.hpp"
#include "core/comm/comm.hpp"
#include "core/comm/link_comm.hpp"
#include "core/error.hpp"
#include "core/memory.hpp"
#include "core/mesh.hpp"
#include "core/optimizer.hpp"
#include "workloads/workload.hpp"

namespace pts {

// The value of a strategy option (see OptionSpec).
using OptionValue = std::variant<int64_t, double, bool, std::string>;
enum class OptionType { integer, number, boolean, string };  // the variant's alternatives, in order
// As written in cases.csv: integers and numbers in shortest round-trip form, booleans 1/0.
std::string option_text(const OptionValue& v);

// One expanded case of a suite file.
struct CaseConfig {
  std::string name;
  std::string strategy = "single";
  std::string workload = "mlp-tiny";
  std::string data;  // gpt: "" (synthetic Markov tokens) or a uint16 token file
  std::string dtype = "float64";  // float32 | float64
  std::string backend = "cpu";    // compute backend and memory of the case (known_backends())
  Layout layout;
  int steps = 4;
  int warmup_steps = 1;
  int64_t global_batch = 32;
  OptimizerConfig optimizer;
  uint64_t seed = 1234;
  std::string check = "auto";  // auto | exact | precision | none
  // What the checks compare with: auto = the reference the strategy names (ReferenceSpec);
  // oracle = the single-device oracle, to state a degenerate identity (local-sgd with
  // sync_every 1 and plain SGD is ddp).
  std::string reference = "auto";
  // A training loss to time the run to (cases.csv steps_to_target, time_to_target_s); it
  // never changes what is trained. Unset: no target.
  std::optional<double> target_loss;
  int target_window = 1;  // steps whose losses are averaged before the comparison
  // After each step every rank runs a fixed gemm + all_reduce, timed (steps.csv probe_time_s):
  // the machine's speed at that moment, for compare's step / probe ratio. Changes no number.
  bool timing_probe = false;
  int64_t bucket_bytes = 4 << 20;
  bool overlap = false;
  bool prefetch = true;               // fsdp: issue the next unit's all-gather early
  bool reshard_after_forward = true;  // fsdp: free a unit's gathered params after forward
  LinkModel link;                     // emulated interconnect under every collective (off: bus_gbps 0)
  // Emulated compute: every microbatch forward takes at least f_ms and every backward at least
  // b_ms + w_ms (the pipeline sleeps out the rest, as the link does), so a schedule's bubble is
  // measured apart from this machine's compute noise (all zero: off).
  struct ComputeEmulation {
    double f_ms = 0, b_ms = 0, w_ms = 0;
    bool enabled() const { return f_ms > 0 || b_ms > 0 || w_ms > 0; }
  } emulate_compute;
  int zero_stage = -1;                // hybrid: ZeRO stage on dp (-1: the preset's, else 0)
  std::string schedule = "1f1b";      // pipeline schedule (schedules.hpp)
  int virtual_stages = 0;             // chunks per rank; 0: the schedule's (interleaved-1f1b, zbv: 2)
  int microbatches = 0;               // per replica per step; 0: pp
  std::vector<int> stage_layers;      // layers per pipeline stage; empty: balanced
  std::string stage_layers_text;      // as written in the suite ("2,1,1")
  int slow_rank = -1;                 // emulated straggler: this rank computes slow_factor x as long
  double slow_factor = 1;
  // Values of the options a strategy declares without a field here (OptionSpec with no
  // set/get), defaults filled in by the suite parser for the case's strategy.
  std::map<std::string, OptionValue> options;
  template <class V>
  const V& option(const std::string& key) const {
    auto it = options.find(key);
    PTS_REQUIRE(it != options.end() && std::holds_alternative<V>(it->second),
                "option '" + key + "' is not declared by strategy " + strategy + " with this type");
    return std::get<V>(it->second);
  }
};

// A suite key a strategy declares: the suite parser accepts it for cases of that strategy
// (from [defaults] it applies only to them), `ptsuite list` shows it, and it becomes a
// cases.csv column and a line of results/SCHEMA.md. Most options are stored in
// CaseConfig::options; the trainer's long-standing ones are fields of CaseConfig, reached
// through set/get.
struct OptionSpec {
  std::string key;
  OptionType type = OptionType::integer;
  OptionValue default_value = int64_t{0};  // for options kept in CaseConfig::options
  std::string unit = "-";                  // cases.csv unit ("count", "bytes", "bool", ...)
  std::string meaning;
  std::function<void(CaseConfig&, const OptionValue&)> set = nullptr;  // null: CaseConfig::options[key]
  std::function<OptionValue(const CaseConfig&)> get = nullptr;         // null: CaseConfig::options[key]
  bool column = true;  // false: an existing cases.csv column already reports it
  void assign(CaseConfig& c, const OptionValue& v) const {
    if (set) set(c, v);
    else c.options[key] = v;
  }
  OptionValue value(const CaseConfig& c) const {
    if (get) return get(c);
    auto it = c.options.find(key);
    return it != c.options.end() ? it->second : default_value;
  }
  OptionValue default_of() const { return get ? get(CaseConfig{}) : default_value; }
};

// The number of microbatches a case runs per replica per step (microbatches = 0: pp).
inline int microbatches_of(const CaseConfig& c) { return c.microbatches > 0 ? c.microbatches : c.layout.pp; }

// One kind of call a rank makes, with how often and how many bytes (payload in the
// nccl-tests convention, see core/comm/comm.hpp): in one step, as a strategy states it, or
// over a whole run, as the check sums it.
struct ExpectedOp {
  std::string axis;
  CommOp op;
  int group_size = 1;
  uint64_t calls = 0;
  uint64_t payload_bytes = 0;
  double bus_bytes() const { return static_cast<double>(payload_bytes) * bus_factor(op, group_size); }
};

// Bytes this rank holds by category, from the strategy's formula.
struct MemoryExpectation {
  int64_t param = 0, grad = 0, optimizer = 0;
  int64_t comm_max = -1;  // upper bound on the peak of comm buffers (gathered params); -1: none
  int64_t activation = -1;  // exact activation peak (microbatches in flight x their bytes); -1: unchecked
  int64_t workspace_max = -1;  // upper bound on the peak of workspace (scratch) bytes; -1: unchecked
};

// Everything a rank states about one step: its operations and its bytes held.
struct RankStatement {
  std::vector<ExpectedOp> comm;
  MemoryExpectation memory;
  // For the planner's time model: one microbatch's forward + backward work on this rank, and
  // the microbatches per step.
  ComputeWork work;
  int micro = 1;
};

// What one rank saw in its last step, for the pipeline figures.
struct StepStats {
  int stage = 0;              // pipeline stage of this rank
  double busy_s = -1;         // compute (forward and backward) seconds; -1: not measured
  double bubble_theory = 0;   // (pp - 1) / (m + pp - 1)
};

// One gradient an asynchronous strategy's server applied (its trace): worker `worker`'s
// gradient of step `step`, computed on version `computed_on` of server `server`'s shard and
// applied to version `applied_to` (the shard's version counts the updates applied to it).
// `staleness` is the step minus the fewest pushes of any worker the pulled shard included.
struct AppliedUpdate {
  int server = 0, worker = 0, step = 0;
  int64_t computed_on = 0, applied_to = 0;
  int staleness = 0;
  bool operator==(const AppliedUpdate&) const = default;
};

// A pull a server answered: worker `worker` gets version `version` of the shard for step
// `step`; `fewest` is the fewest pushes of any worker the shard then included.
struct ServedPull {
  int server = 0, worker = 0, step = 0;
  int64_t version = 0;
  int fewest = 0;
  bool operator==(const ServedPull&) const = default;
};

// One gradient a worker pushed to a server.
struct PushedUpdate {
  int worker = 0, server = 0, step = 0;
  bool operator==(const PushedUpdate&) const = default;
};

// What an asynchronous strategy did, for the trace check and the replay reference: every
// push must be applied exactly once, and no applied gradient may be staler than `bound`.
struct UpdateTrace {
  int bound = -1;  // the staleness bound; -1: no trace
  std::vector<PushedUpdate> pushed;    // this rank's pushes (workers)
  std::vector<ServedPull> served;      // this rank's answered pulls, in order (servers)
  std::vector<AppliedUpdate> applied;  // this rank's applied updates, in order (servers)
  bool operator==(const UpdateTrace&) const = default;
};

// What an asynchronous strategy's whole run produced on this rank: per step its share of
// the global mean loss (the shares of all ranks sum to it) and its seconds for the step.
struct AsyncRun {
  std::vector<double> loss_shares, step_times;
};

// What a strategy is built from. Everything is passed in; nothing is global.
template <class T>
struct StrategyContext {
  const CaseConfig& config;
  const WorkloadSpec& workload;
  Mesh& mesh;  // over the counted communicator
  Backend<T>& backend;
  MemoryTracker& memory;
};

template <class T>
class Strategy {
 public:
  virtual ~Strategy() = default;
  // Generates this rank's part of step `step`'s global batch (untimed: a real trainer's
  // data loader runs ahead of compute).
  virtual void load_batch(int step) = 0;
  // One optimizer step. Returns this rank's share of the global mean loss: the shares of
  // all ranks sum to it.
  virtual double train_step(int step) = 0;
  // The full flat parameter vector in canonical order, on mesh rank 0 (empty elsewhere).
  // Collective over the mesh; may use only `side`, an uncounted communicator over the
  // same ranks, so checking never changes the counted bytes.
  virtual std::vector<double> full_params(Comm& side) = 0;
  // What this rank moves in step `step` (from 0) of the run. It may vary by step: an
  // operation every H steps, nothing in the first s. The check sums it over the run.
  virtual std::vector<ExpectedOp> expected_comm(int step) const = 0;
  virtual MemoryExpectation expected_memory() const = 0;
  virtual StepStats step_stats() const { return {}; }

  // Asynchronous strategies (lockstep() false) have no global step: the harness calls
  // train_run() once instead of load_batch() and train_step() per step, with no barrier
  // between steps. `side` is the uncounted communicator over the same ranks, for control
  // messages only (a rank that fails tells the others, so no rank waits forever).
  virtual bool lockstep() const { return true; }
  virtual AsyncRun train_run(int /*steps*/, Comm& /*side*/) {
    throw Error("this strategy trains in lockstep; the harness calls train_step");
  }
  // The updates this rank pushed and applied (bound -1: the strategy keeps no trace).
  virtual UpdateTrace trace() const { return {}; }
};

}  // namespace pts
