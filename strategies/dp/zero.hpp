// ZeRO stages 1 and 2 (Rajbhandari et al., SC'20): optimizer state (stage 1) and also
// gradients (stage 2) sharded over dp, one unit (layer) at a time. Unit u of n_u elements is
// padded to n_u' = ceil(n_u/dp) dp and rank r owns elements [r n_u'/dp, (r+1) n_u'/dp).
// N' = sum n_u', S = N'/dp, s = sizeof(T), k = optimizer state per element, U units.
//
//   zero1  after backward, reduce-scatter each unit's gradient into this rank's shard (a
//          workspace buffer), update the shard, all-gather the parameters back.
//   zero2  each unit's full gradient lives in a staging buffer only from its (first)
//          backward to its reduce-scatter, launched as soon as the unit's last backward is
//          done; the full gradient is never held.
//
// Per step per rank: reduce_scatter N' s in U calls, all_gather N' s in U calls.
// Memory: zero1 params N' s, grads N' s, optimizer k S s, workspace S s (the reduced shard);
// zero2 params N' s, grads S s, optimizer k S s, workspace: the staging buffer of one unit
// (of every unit with overlap, whose reduce-scatters finish only at the end of the step).
#pragma once
#include "strategies/dp/dp_sync.hpp"

namespace pts {

template <class T>
class Zero : public DpSync<T> {
 public:
  // stage 1 or 2; fsdp (stage 3) extends this class.
  Zero(const StrategyContext<T>& ctx, int stage) : DpSync<T>(ctx), stage_(stage) {}
  ModelStorage storage() const override { return storage_for(this->dp().size(), stage_); }
  // The statements as pure functions (dp_sync.hpp's DpShape), for the planner too.
  static ModelStorage storage_for(int dp, int stage) { return {dp, true, stage < 2}; }
  static DpStatement statement(const DpShape& s, int step, int stage);
  void attach(Model<T>& model) override;
  UnitHooks hooks(int step) override;
  void finish_step(int step) override;
  std::vector<ExpectedOp> expected_comm(int step) const override;
  MemoryExpectation expected_memory() const override;
  int64_t workspace_bound() const override;

 protected:
  // The optimizer update of n elements of this rank's shard: params and grads point at the
  // shard's elements, state_offset is their offset in the shard's optimizer state.
  virtual void update_shard(T* params, const T* grads, int64_t state_offset, int64_t n);
  // All of this rank's shards after the averaged gradient shard is complete: stages 1-2
  // update the shards inside the full parameters and all-gather them.
  virtual void update_params();
  // All-gathers of parameters per unit per step.
  virtual uint64_t gathers_per_unit() const { return 1; }
  void reduce_scatter_unit(size_t u, const T* full_grad);
  // Per step: U reduce-scatters and gathers x U all-gathers of N' s.
  static std::vector<ExpectedOp> comm_of(const DpShape& s, uint64_t gathers_per_unit);
  static int64_t workspace_of(const DpShape& s, int stage);
  Tensor<T>& grad_shard() { return grad_shard_; }
  std::vector<RequestPtr>& pending() { return pending_; }
  int stage() const { return stage_; }

 private:
  const int stage_;
  std::unique_ptr<Optimizer<T>> opt_;
  Tensor<T> grad_shard_;
  std::vector<Tensor<T>> staging_;
  std::vector<RequestPtr> pending_;
};

}  // namespace pts
