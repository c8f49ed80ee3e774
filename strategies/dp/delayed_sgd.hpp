// delayed-sgd: synchronous data parallelism with a fixed gradient delay s = staleness. The
// gradient applied at step t was computed at step t - s (nothing is applied in the first
// s steps); its all-reduce is launched at step t - s and completes in the background while
// the s steps in between compute, so with s >= 1 communication hides behind compute. The
// reductions of the last s steps would never be applied and are not launched.
//
// Per run per rank (N elements, s = sizeof(T), k = optimizer state per element): one
// all_reduce of N s at every step t < steps - staleness (none at dp 1). Memory: params N s,
// grads N s + staleness N s (the gradients in flight), optimizer k N s, no workspace.
// With staleness 0 it is ddp with one bucket.
#pragma once
#include <optional>

#include "strategies/dp/dp_sync.hpp"
#include "strategies/registry.hpp"

namespace pts {

template <class T>
class DelayedSgd : public DpSync<T> {
 public:
  explicit DelayedSgd(const StrategyContext<T>& ctx);
  ModelStorage storage() const override { return {1, true, true}; }
  void attach(Model<T>& model) override;
  UnitHooks hooks(int step) override;
  void finish_step(int step) override;
  std::vector<ExpectedOp> expected_comm(int step) const override;
  MemoryExpectation expected_memory() const override;

 protected:
  // Steps between computing a gradient and applying it.
  virtual int delay() const { return staleness_; }

 private:
  int64_t n() const { return this->layout().padded_total(); }
  const int staleness_;
  std::unique_ptr<Optimizer<T>> opt_;
  std::vector<Tensor<T>> in_flight_;  // slot t % delay(): the gradient of step t until applied
  std::vector<RequestPtr> pending_;   // its all-reduce, same slot
};

StrategyInfo delayed_sgd_entry(std::string name = "delayed-sgd", std::optional<DpAlgorithm> algorithm = {});

}  // namespace pts
