// ddp-2phase: data parallelism whose gradient average is a reduce-scatter followed by an
// all-gather (the two phases of a ring all-reduce, issued as two collectives). It is the
// worked example of README "Adding a strategy": one file, one registry line, and it runs
// under tp and pp unchanged because the trainer composes it with them.
//
// The flat gradient is padded per unit to a multiple of dp (ModelStorage::pad_to), so it
// splits evenly: rank r receives the sum of slice r (S = N'/dp elements) in a workspace
// buffer, scales it by 1/dp, and the all-gather puts every averaged slice back into the
// gradient. Per step per rank: reduce_scatter N' s and all_gather N' s, one call each (none
// at dp 1). Memory: params N' s, grads N' s, optimizer k N' s, workspace S s.
#include "strategies/dp/dp_sync.hpp"
#include "strategies/trainer.hpp"

namespace pts {
namespace {

template <class T>
class TwoPhaseAllReduce final : public DpSync<T> {
 public:
  explicit TwoPhaseAllReduce(const StrategyContext<T>& ctx) : DpSync<T>(ctx) {}
  ModelStorage storage() const override { return {this->dp().size(), true, true}; }

  void attach(Model<T>& model) override {
    DpSync<T>::attach(model);
    const int64_t n = this->layout().padded_total();
    opt_ = std::make_unique<Optimizer<T>>(this->config().optimizer, this->backend(), this->memory(), n);
  }

  UnitHooks hooks(int) override { return {}; }  // everything happens after backward

  void finish_step(int) override {
    Model<T>& m = this->model();
    const int64_t n = m.grads().numel(), dp = this->dp().size();
    if (dp > 1) {
      Tensor<T> slice(this->memory(), MemCategory::workspace, {n / dp});
      this->dp().reduce_scatter(m.grads().data(), slice.data(), n / dp, dtype_of<T>());
      this->average(slice.data(), slice.numel());
      this->dp().all_gather(slice.data(), m.grads().data(), n / dp, dtype_of<T>());
    }
    opt_->step(m.params().data(), m.grads().data());
  }

  std::vector<ExpectedOp> expected_comm(int) const override {
    const int n = this->dp().size();
    if (n == 1) return {};
    const uint64_t bytes = static_cast<uint64_t>(this->bytes(this->layout().padded_total()));
    return {{"dp", CommOp::reduce_scatter, n, 1, bytes}, {"dp", CommOp::all_gather, n, 1, bytes}};
  }

  MemoryExpectation expected_memory() const override {
    const int64_t n = this->layout().padded_total();
    return {this->bytes(n), this->bytes(n), this->state_bytes(n)};
  }

  int64_t workspace_bound() const override {
    return this->dp().size() > 1 ? this->bytes(this->layout().shard_total()) : 0;
  }

 private:
  std::unique_ptr<Optimizer<T>> opt_;
};

}  // namespace

StrategyInfo two_phase_ddp_entry() {
  return trainer_entry("ddp-2phase",
                       "data parallel, gradients averaged by reduce-scatter + all-gather; composes with tp and pp",
                       "dp tp pp", {dp_algorithm<TwoPhaseAllReduce>("ddp-2phase", 0), {}});
}

}  // namespace pts
