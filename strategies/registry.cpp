#include "strategies/registry.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>

#include "strategies/dp/delayed_sgd.hpp"
#include "strategies/dp/diloco.hpp"
#include "strategies/dp/local_sgd.hpp"
#include "strategies/param_server.hpp"
#include "strategies/trainer.hpp"
#include "strategies/single.hpp"

namespace pts {

StrategyInfo two_phase_ddp_entry();  // strategies/dp/two_phase.cpp: the worked example, no header

void StrategyRegistry::add(StrategyInfo info) {
  if (find(info.name)) throw Error("strategy '" + info.name + "' registered twice");
  for (const OptionSpec& o : info.options)
    for (const OptionSpec& known : options())
      if (known.key == o.key && known.type != o.type)
        throw Error("strategy '" + info.name + "' declares option '" + o.key + "' with another type than " +
                    declaring(o.key));
  entries_.push_back(std::move(info));
}

std::vector<OptionSpec> StrategyRegistry::options() const {
  std::vector<OptionSpec> out;
  for (const auto& e : entries_)
    for (const auto& o : e.options)
      if (std::none_of(out.begin(), out.end(), [&](const OptionSpec& k) { return k.key == o.key; })) out.push_back(o);
  return out;
}

std::string StrategyRegistry::declaring(const std::string& key) const {
  std::string s;
  for (const auto& e : entries_)
    if (e.option(key)) s += (s.empty() ? "" : ", ") + e.name;
  return s;
}

std::string option_text(const OptionValue& v) {
  if (const auto* i = std::get_if<int64_t>(&v)) return std::to_string(*i);
  if (const auto* b = std::get_if<bool>(&v)) return *b ? "1" : "0";
  if (const auto* s = std::get_if<std::string>(&v)) return *s;
  char buf[40];
  auto r = std::to_chars(buf, buf + sizeof buf, std::get<double>(v));  // shortest round trip
  return std::string(buf, r.ptr);
}

StrategyInfo with_matrix(StrategyInfo info, std::vector<MatrixEntry> entries) {
  for (MatrixEntry& e : entries) {
    auto same = std::find_if(info.matrix.begin(), info.matrix.end(), [&](const MatrixEntry& m) { return m.name == e.name; });
    if (same != info.matrix.end()) *same = std::move(e);
    else info.matrix.push_back(std::move(e));
  }
  return info;
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

CaseConfig oracle_config(const CaseConfig& c) {
  CaseConfig o;  // defaults for everything parallel
  o.strategy = "single";
  o.workload = c.workload;
  o.data = c.data;
  o.dtype = c.dtype;
  o.steps = c.steps;
  o.global_batch = c.global_batch;
  o.optimizer = c.optimizer;
  o.seed = c.seed;
  return o;
}

CaseConfig twin_config(const CaseConfig& c, bool replicas) {
  CaseConfig t = oracle_config(c);
  if (replicas) t.layout.dp = c.layout.dp;
  t.options = c.options;
  return t;
}

const ReferenceSpec& reference_of(const StrategyInfo& info, const CaseConfig& c) {
  static const ReferenceSpec oracle;
  return c.reference == "oracle" ? oracle : info.reference;
}

CaseConfig reference_config(const StrategyInfo& info, const CaseConfig& c) {
  const ReferenceSpec& ref = reference_of(info, c);
  CaseConfig r = ref.config ? ref.config(c) : oracle_config(c);
  r.strategy = ref.strategy;
  r.name.clear();
  return r;
}

std::string config_key(const CaseConfig& c) {
  const OptimizerConfig& o = c.optimizer;
  std::string k;
  auto add = [&k](const std::string& field, const std::string& v) { k += field + "=" + v + ";"; };
  auto num = [](double v) {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    return std::string(buf);
  };
  add("strategy", c.strategy);
  add("workload", c.workload);
  add("data", c.data);
  add("dtype", c.dtype);
  add("backend", c.backend);
  add("layout", c.layout.product_string());
  add("steps", std::to_string(c.steps));
  add("warmup_steps", std::to_string(c.warmup_steps));
  add("global_batch", std::to_string(c.global_batch));
  add("optimizer", o.kind + "," + num(o.lr) + "," + num(o.momentum) + "," + num(o.weight_decay) + "," + num(o.beta1) +
                       "," + num(o.beta2) + "," + num(o.eps));
  add("seed", std::to_string(c.seed));
  add("check", c.check);
  add("bucket_bytes", std::to_string(c.bucket_bytes));
  add("overlap", std::to_string(c.overlap));
  add("prefetch", std::to_string(c.prefetch));
  add("reshard_after_forward", std::to_string(c.reshard_after_forward));
  add("link", num(c.link.bus_gbps) + "," + num(c.link.latency_us));
  add("zero_stage", std::to_string(c.zero_stage));
  add("schedule", c.schedule);
  add("microbatches", std::to_string(c.microbatches));
  std::string layers;
  for (int n : c.stage_layers) layers += std::to_string(n) + ",";
  add("stage_layers", layers);
  add("reference", c.reference);
  for (const auto& [key, value] : c.options) add(key, option_text(value));
  return k;
}

void require_layout(const CaseConfig& c, int dp, int tp, int pp, const std::string& who, int cp, int ep) {
  const Layout& l = c.layout;
  if (l.dp != dp || l.tp != tp || l.pp != pp || l.cp != cp || l.ep != ep) {
    std::string axis = l.dp != dp ? "dp" : l.tp != tp ? "tp" : l.pp != pp ? "pp" : l.cp != cp ? "cp" : "ep";
    throw CaseError(axis, who + " needs " + Layout{dp, tp, pp, cp, ep}.axes_string() + ", got " + l.product_string());
  }
}

void require_batch_divisible(const CaseConfig& c, int64_t divisor, const std::string& what) {
  if (c.global_batch % divisor != 0)
    throw CaseError("global_batch", "global_batch " + std::to_string(c.global_batch) +
                                        " is not divisible by " + what + "(" + std::to_string(divisor) +
                                        "); choose a multiple of " + std::to_string(divisor));
}

void validate_single(const CaseConfig& c, const WorkloadSpec&) {
  require_layout(c, 1, 1, 1, "single");
  if (c.microbatches > 1) throw CaseError("microbatches", "single trains the whole batch at once; use ddp for accumulation");
}

StrategyRegistry builtin_strategies() {
  StrategyRegistry r;
  r.add(strategy_entry<Single>("single", "the oracle: one rank, the whole global batch", validate_single));
  // The four ZeRO stages are the same algorithms hybrid picks by zero_stage.
  const DpAlgorithm& ddp = dp_algorithm_for_stage(0);
  const auto one_f_one_b = find_schedule("1f1b");
  r.add(trainer_entry("ddp", "data parallel: bucketed all-reduce of gradients over dp (overlap optional)", "dp",
                      {ddp, one_f_one_b}));
  r.add(trainer_entry("zero1", "ZeRO-1: optimizer state sharded over dp", "dp",
                      {dp_algorithm_for_stage(1), one_f_one_b}));
  r.add(trainer_entry("zero2", "ZeRO-2: optimizer state and gradients sharded over dp", "dp",
                      {dp_algorithm_for_stage(2), one_f_one_b}));
  r.add(trainer_entry("fsdp", "ZeRO-3 / FSDP: parameters too; gathered per unit (prefetch, reshard_after_forward)",
                      "dp", {dp_algorithm_for_stage(3), one_f_one_b}));
  r.add(trainer_entry("tp", "tensor parallel (Megatron): heads and MLP split over tp, vocabulary-parallel embedding and loss",
                      "tp", {ddp, one_f_one_b}));
  r.add(trainer_entry("pp-gpipe", "pipeline parallel, GPipe schedule: all forwards, then all backwards", "pp",
                      {ddp, find_schedule("gpipe")}));
  r.add(trainer_entry("pp-1f1b", "pipeline parallel, 1F1B schedule: at most pp microbatches in flight", "pp",
                      {ddp, one_f_one_b}));
  r.add(two_phase_ddp_entry());
  // Communication-reducing dp algorithms, each checked against its serial twin.
  r.add(local_sgd_entry());
  r.add(diloco_entry());
  r.add(delayed_sgd_entry());
  r.add(trainer_entry("cp", "context parallel: each sequence split over cp ranks (causal load balance), ring attention",
                      "cp", {ddp, one_f_one_b}));
  r.add(trainer_entry("ep", "expert parallel: each MoE block's experts split over ep ranks, tokens dispatched and "
                      "combined by all-to-all", "ep", {ddp, one_f_one_b}));
  r.add(trainer_entry("hybrid", "any dp x ep x cp x tp x pp; zero_stage 0-3 on dp, schedule and microbatches from the case",
                      "dp tp pp cp ep", {}));
  r.add(param_server_entry());
  return r;
}

}  // namespace pts
