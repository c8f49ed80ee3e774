// `single`: the oracle. One rank trains on the whole global batch; no communication.
#pragma once
#include "core/optimizer.hpp"
#include "strategies/replica.hpp"

namespace pts {

template <class T>
class Single final : public Strategy<T> {
 public:
  explicit Single(const StrategyContext<T>& ctx)
      : ctx_(ctx), replica_(ctx, 0, ctx.config.global_batch),
        opt_(ctx.config.optimizer, ctx.backend, ctx.memory, replica_.model().num_params()) {}
  void load_batch(int step) override { replica_.load(step); }
  double train_step(int) override {
    double loss = replica_.forward_backward();
    opt_.step(replica_.model().params().data(), replica_.model().grads().data());
    return loss;
  }
  std::vector<double> full_params(Comm&) override { return replica_.params_as_double(); }
  std::vector<ExpectedOp> expected_comm(int) const override { return {}; }
  MemoryExpectation expected_memory() const override {
    MemoryExpectation e = full_replica_memory<T>(ctx_.config, ctx_.workload.num_params());
    e.activation = replica_.model().activation_bytes(ctx_.config.global_batch);
    e.workspace_max = replica_.workspace_bound(ctx_.config.global_batch);
    return e;
  }

 private:
  StrategyContext<T> ctx_;
  Replica<T> replica_;
  Optimizer<T> opt_;
};

void validate_single(const CaseConfig& c, const WorkloadSpec& w);

}  // namespace pts
