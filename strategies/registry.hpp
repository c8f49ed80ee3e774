// The strategy registry: name -> factories for float and double, plus a layout check that
// runs while the suite file is validated, before anything trains.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <variant>
#include <vector>

#include "strategies/strategy.hpp"

namespace pts {

// Raised by a layout check; `key` names the suite key at fault so the error can point at
// the file and line where it is set.
class CaseError : public ConfigError {
 public:
  CaseError(std::string key, const std::string& msg) : ConfigError(msg), key(std::move(key)) {}
  std::string key;
};

template <class T>
using StrategyFactory = std::function<std::unique_ptr<Strategy<T>>(const StrategyContext<T>&)>;

// What a strategy's result must equal, and so what the exact and precision checks compare
// it with. The harness runs the reference serially on one rank (a 1-rank mesh; the
// reference's config may still carry the case's layout for a twin to simulate) and caches
// it by config_key() of the reference's whole configuration.
//   oracle  single-device SGD/AdamW on the whole global batch (`single`): what every
//           synchronous strategy must reproduce.
//   twin    the strategy's own algorithm simulated on one rank (e.g. dp replicas stepping
//           one after another, parameters averaged every H steps): for algorithms whose
//           correct result is not single-device training.
//   replay  the run's own trace of served pulls and applied updates (UpdateTrace, every
//           rank's, gathered to rank 0), replayed serially on one rank: for truly
//           asynchronous algorithms, whose result depends on the order updates arrived in.
//           Never cached: each run has its own trace.
struct ReplayResult {
  std::vector<double> losses, params;
};
using ReplayFn = std::function<ReplayResult(const CaseConfig&, const WorkloadSpec&, const std::vector<ServedPull>&,
                                            const std::vector<AppliedUpdate>&)>;
struct StrategyInfo;
struct ReferenceSpec {
  std::string kind = "oracle";      // oracle | twin | replay
  std::string strategy = "single";  // the registry entry that runs it, or runner's name
  // The reference's configuration from the case's; null: the oracle's (oracle_config).
  std::function<CaseConfig(const CaseConfig&)> config = nullptr;
  // A twin that is no suite strategy of its own (not registered, not listed): its entry.
  std::shared_ptr<const StrategyInfo> runner = nullptr;
  // replay: the replay in float64 and float32 (the case's config, the whole run's trace).
  ReplayFn replay_f64 = nullptr, replay_f32 = nullptr;
  // "oracle", "twin:<strategy>" or "replay:<strategy>", as cases.csv reports it.
  std::string label() const { return kind == "oracle" ? kind : kind + ":" + strategy; }
};

// A strategy's conformance matrix: the cases a suite's [[generate]] table expands for it
// (harness/suite.hpp). Each entry says what a [[case]] table would, in the suite file's
// vocabulary: suite keys (the harness's, or options the strategy declares) with one value,
// or with a list that expands as a matrix axis. The suite's [defaults] apply under an
// entry and the [[generate]] table's own settings over it.
using SuiteValue = std::variant<int64_t, double, bool, std::string, LinkModel>;
struct MatrixSetting {
  std::string key;
  std::vector<SuiteValue> values;  // one: a plain setting; more: a matrix axis
};
struct MatrixEntry {
  std::string name;  // stem of the case names; "": the strategy's name
  std::vector<MatrixSetting> settings;
  // A stem a family of strategies shares (ddp, zero1, zero2 and fsdp all have "overlap"):
  // their cases carry the strategy's name as a label too, as a [[case]] listing them would.
  bool shared = false;
};

struct StrategyInfo {
  std::string name;
  std::string description;
  std::function<void(const CaseConfig&, const WorkloadSpec&)> validate;  // throws CaseError
  StrategyFactory<float> make_f32;
  StrategyFactory<double> make_f64;
  int zero_stage = 0;    // reported in cases.csv (-1: the case's zero_stage)
  std::string schedule;  // pipeline schedule the preset fixes ("": the case's)
  ReferenceSpec reference;
  std::vector<OptionSpec> options;  // the suite keys this strategy declares
  std::vector<MatrixEntry> matrix;  // what it is checked on (trainer_entry derives it)
  // Matches point-to-point messages by tag, out of posting order: NCCL cannot, so on GPUs the
  // case communicates over staged MPI (core/comm/case_comm.hpp).
  bool tagged_p2p = false;
  // The statements (expected_comm(step), expected_memory()) rank `coord` of case c would
  // make, computed without building the strategy or allocating its model: what the planner
  // (harness/plan.hpp) predicts from. Null: this strategy cannot be predicted that way.
  std::function<RankStatement(const CaseConfig& c, const WorkloadSpec& w, const MeshCoord& coord, int step)>
      statement = nullptr;
  const OptionSpec* option(const std::string& key) const {
    for (const auto& o : options)
      if (o.key == key) return &o;
    return nullptr;
  }
};

// Registry entry for a strategy class template S<T> constructed from a StrategyContext<T>
// and `args` (a preset's fixed settings, e.g. the ZeRO stage).
template <template <class> class S, class... Args>
StrategyInfo strategy_entry(std::string name, std::string description,
                            std::function<void(const CaseConfig&, const WorkloadSpec&)> validate, Args... args) {
  return {std::move(name), std::move(description), std::move(validate),
          [=](const StrategyContext<float>& c) { return std::make_unique<S<float>>(c, args...); },
          [=](const StrategyContext<double>& c) { return std::make_unique<S<double>>(c, args...); }, 0, "", {}, {}, {}, false,
          nullptr};
}

// The configuration of a twin for case c: the oracle's plus the case's strategy options,
// and with `replicas` the case's dp (the replicas a twin of a dp algorithm simulates).
CaseConfig twin_config(const CaseConfig& c, bool replicas);

// A twin reference (kind "twin") run by the unregistered strategy class W<T> on one rank.
template <template <class> class W>
ReferenceSpec twin_reference(std::string name, bool replicas = true) {
  ReferenceSpec r;
  r.kind = "twin";
  r.strategy = name;
  r.config = [replicas](const CaseConfig& c) { return twin_config(c, replicas); };
  r.runner = std::make_shared<StrategyInfo>(strategy_entry<W>(std::move(name), "serial twin", nullptr));
  return r;
}

// `info` with `entries` added to its conformance matrix; an entry named like one it has
// replaces that one. For a registry line: with_matrix(trainer_entry(...), {{"every", {...}}}).
StrategyInfo with_matrix(StrategyInfo info, std::vector<MatrixEntry> entries);

class StrategyRegistry {
 public:
  void add(StrategyInfo info);
  const StrategyInfo* find(const std::string& name) const;
  const std::vector<StrategyInfo>& all() const { return entries_; }
  std::string names() const;  // "single, ddp, ..."
  // Every option some strategy declares, first declaration first (a key declared twice must
  // have one type; add() refuses otherwise).
  std::vector<OptionSpec> options() const;
  // The strategies that declare `key`, "a, b".
  std::string declaring(const std::string& key) const;

 private:
  std::vector<StrategyInfo> entries_;
};

// The strategies that ship. Test-only (deliberately broken) strategies live in
// strategies/testing and are added only by tests.
StrategyRegistry builtin_strategies();

// The oracle's configuration for case c: the same workload, data, batch, steps, seed and
// optimizer, on one rank, with every parallel setting at its default.
CaseConfig oracle_config(const CaseConfig& c);
// The reference case c is checked against: the one `info` names, or the oracle when the
// case says reference = "oracle".
const ReferenceSpec& reference_of(const StrategyInfo& info, const CaseConfig& c);
// The configuration of that reference for case c (strategy set to the reference's, name
// cleared).
CaseConfig reference_config(const StrategyInfo& info, const CaseConfig& c);
// Every setting of c but its name, as one string: equal keys train identically.
std::string config_key(const CaseConfig& c);

// Shared layout checks.
void require_layout(const CaseConfig& c, int dp, int tp, int pp, const std::string& who, int cp = 1, int ep = 1);
void require_batch_divisible(const CaseConfig& c, int64_t divisor, const std::string& what);

}  // namespace pts
