// local-sgd: every replica takes H = sync_every optimizer steps on its own 1/dp of each
// global batch, then the parameters are averaged over dp by one all-reduce. The last step
// of a run always averages, so a run ends on one model. Optimizer state (momentum, Adam's
// moments) stays local to each replica and is never averaged.
//
// Per run per rank (N elements of this rank's stage/shard, s = sizeof(T), k = optimizer
// state per element): one all_reduce of N s payload at every step t with (t + 1) % H == 0
// and at the last step (none at dp 1); memory params N s, grads N s, optimizer k N s, no
// workspace. With H = 1 and SGD (any momentum: it is linear) it is ddp; with AdamW it is not.
#pragma once
#include <optional>

#include "strategies/dp/dp_sync.hpp"
#include "strategies/registry.hpp"

namespace pts {

template <class T>
class LocalSgd : public DpSync<T> {
 public:
  explicit LocalSgd(const StrategyContext<T>& ctx);
  ModelStorage storage() const override { return {1, true, true}; }
  void attach(Model<T>& model) override;
  UnitHooks hooks(int) override { return {}; }
  void finish_step(int step) override;
  std::vector<ExpectedOp> expected_comm(int step) const override;
  MemoryExpectation expected_memory() const override;

 protected:
  // True at the steps that end a round of local steps.
  bool syncs(int step) const { return (step + 1) % every_ == 0 || step + 1 == this->config().steps; }
  // The end of a round: the parameters averaged over dp.
  virtual void synchronise(int step);
  int64_t n() const { return this->layout().padded_total(); }
  T* params() const { return this->model().params().data(); }

 private:
  int64_t every_;
  std::unique_ptr<Optimizer<T>> opt_;
};

// A trainer entry (dp tp pp) for an algorithm that works in rounds of sync_every local
// steps: the option, and its check.
StrategyInfo local_steps_entry(std::string name, std::string description, DpAlgorithm algorithm);
// The registry entry with its twin reference; `algorithm` replaces LocalSgd (a test's broken
// variant keeps the entry's options and reference).
StrategyInfo local_sgd_entry(std::string name = "local-sgd", std::optional<DpAlgorithm> algorithm = {});

}  // namespace pts
