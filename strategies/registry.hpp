// The strategy registry: name -> factories for float and double, plus a layout check that
// runs while the suite file is validated, before anything trains.
#pragma once
#include <functional>
#include <memory>
#include <string>
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

struct StrategyInfo {
  std::string name;
  std::string description;
  std::function<void(const CaseConfig&, const WorkloadSpec&)> validate;  // throws CaseError
  StrategyFactory<float> make_f32;
  StrategyFactory<double> make_f64;
  int zero_stage = 0;    // reported in cases.csv (-1: the case's zero_stage)
  std::string schedule;  // pipeline schedule the preset fixes ("": the case's)
};

// Registry entry for a strategy class template S<T> constructed from a StrategyContext<T>
// and `args` (a preset's fixed settings, e.g. the ZeRO stage).
template <template <class> class S, class... Args>
StrategyInfo strategy_entry(std::string name, std::string description,
                            std::function<void(const CaseConfig&, const WorkloadSpec&)> validate, Args... args) {
  return {std::move(name), std::move(description), std::move(validate),
          [=](const StrategyContext<float>& c) { return std::make_unique<S<float>>(c, args...); },
          [=](const StrategyContext<double>& c) { return std::make_unique<S<double>>(c, args...); }, 0, ""};
}

class StrategyRegistry {
 public:
  void add(StrategyInfo info);
  const StrategyInfo* find(const std::string& name) const;
  const std::vector<StrategyInfo>& all() const { return entries_; }
  std::string names() const;  // "single, ddp, ..."

 private:
  std::vector<StrategyInfo> entries_;
};

// The strategies that ship. Test-only (deliberately broken) strategies live in
// strategies/testing and are added only by tests.
StrategyRegistry builtin_strategies();

// Shared layout checks.
void require_layout(const CaseConfig& c, int dp, int tp, int pp, const std::string& who);
void require_batch_divisible(const CaseConfig& c, int64_t divisor, const std::string& what);

}  // namespace pts
