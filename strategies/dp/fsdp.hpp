// fsdp (ZeRO stage 3): parameters sharded too. Per unit: all-gather before forward, free after
// it (reshard_after_forward), all-gather again before backward, reduce-scatter the unit's
// staged gradient after it, free; prefetch issues the next unit's all-gather early. With
// m > 1 microbatches a unit stays gathered from its first forward to its last backward
// (reshard_after_forward applies only to m = 1): one all-gather per unit per step.
//
// Per step per rank: all_gather 2 N' s (N' s without resharding) in 2U (U) calls,
// reduce_scatter N' s in U calls (bus 1.5x ddp). Memory: params S s, grads S s, optimizer
// k S s; gathered units (comm) at most the largest n_u' s, twice that with prefetch (every
// unit when forward keeps them for backward); workspace as zero2.
#pragma once
#include "strategies/dp/zero.hpp"

namespace pts {

template <class T>
class Fsdp : public Zero<T> {
 public:
  explicit Fsdp(const StrategyContext<T>& ctx) : Zero<T>(ctx, 3) {}
  ModelStorage storage() const override { return storage_for(this->dp().size()); }
  // The statements as pure functions (dp_sync.hpp's DpShape), for the planner too.
  static ModelStorage storage_for(int dp) { return {dp, false, false}; }
  static DpStatement statement(const DpShape& s, int step);
  // A unit is freed after forward only when one forward precedes its backward.
  static bool reshards(const CaseConfig& c) { return c.reshard_after_forward && microbatches_of(c) == 1; }
  void attach(Model<T>& model) override;
  UnitHooks hooks(int step) override;
  std::vector<double> local_params(Comm& dp_side) override;
  MemoryExpectation expected_memory() const override;

 protected:
  void update_params() override;
  uint64_t gathers_per_unit() const override { return reshards(this->config()) ? 2 : 1; }
  // Makes unit u's full parameters available to its backward.
  virtual void gather_for_backward(size_t u) { ensure_gathered(u); }
  // Frees a unit's gathered parameters (`gathered` is empty afterwards).
  virtual void release(Tensor<T>& gathered) { gathered = Tensor<T>(); }
  void ensure_gathered(size_t u);
  Tensor<T>& gathered(size_t u) { return gathered_[u]; }

 private:
  void start_gather(size_t u);

  Tensor<T> param_shard_;
  std::vector<Tensor<T>> gathered_;
  std::vector<RequestPtr> gather_req_;
};

}  // namespace pts
