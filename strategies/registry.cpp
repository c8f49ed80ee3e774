#include "strategies/registry.hpp"

#include "strategies/data_parallel.hpp"
#include "strategies/single.hpp"

namespace pts {

void StrategyRegistry::add(StrategyInfo info) {
  if (find(info.name)) throw Error("strategy '" + info.name + "' registered twice");
  entries_.push_back(std::move(info));
}

const StrategyInfo* StrategyRegistry::find(const std::string& name) const {
  for (const auto& e : entries_)
    if (e.name == name) return &e;
  return nullptr;
}

std::string StrategyRegistry::names() const {
  std::string s;
  for (const auto& e : entries_) s += (s.empty() ? "" : ", ") + e.name;
  return s;
}

void require_layout(const CaseConfig& c, int dp, int tp, int pp, const std::string& who) {
  const Layout& l = c.layout;
  if (l.dp != dp || l.tp != tp || l.pp != pp) {
    std::string axis = l.dp != dp ? "dp" : l.tp != tp ? "tp" : "pp";
    throw CaseError(axis, who + " needs dp(" + std::to_string(dp) + ") * tp(" + std::to_string(tp) +
                              ") * pp(" + std::to_string(pp) + "), got " + l.product_string());
  }
}

void require_batch_divisible(const CaseConfig& c, int64_t divisor, const std::string& what) {
  if (c.global_batch % divisor != 0)
    throw CaseError("global_batch", "global_batch " + std::to_string(c.global_batch) +
                                        " is not divisible by " + what + "(" + std::to_string(divisor) +
                                        "); choose a multiple of " + std::to_string(divisor));
}

void validate_single(const CaseConfig& c) { require_layout(c, 1, 1, 1, "single"); }

StrategyRegistry builtin_strategies() {
  StrategyRegistry r;
  r.add(strategy_entry<Single>("single", "the oracle: one rank, the whole global batch", validate_single));
  r.add(data_parallel_entry<DataParallel>("ddp", "data parallel: bucketed all-reduce of gradients over dp (overlap optional)", 0));
  r.add(data_parallel_entry<DataParallel>("zero1", "ZeRO-1: optimizer state sharded over dp", 1));
  r.add(data_parallel_entry<DataParallel>("zero2", "ZeRO-2: optimizer state and gradients sharded over dp", 2));
  r.add(data_parallel_entry<DataParallel>("fsdp", "ZeRO-3 / FSDP: parameters too; gathered per unit (prefetch, reshard_after_forward)", 3));
  return r;
}

}  // namespace pts
