// diloco (DiLoCo, Douillard et al. 2023): local SGD whose rounds feed an outer optimizer.
// Each replica keeps the anchor, the parameters at the start of the round; after H =
// sync_every inner steps (the case's optimizer, state local to each replica) the outer
// gradient is the mean over dp of (anchor - params), the outer optimizer (SGD with
// Nesterov momentum, outer_lr and outer_momentum, 0.7 and 0.9 as in the paper) updates the
// anchor, and every replica restarts from it. The last step of a run always ends a round.
//
// Outer step (PyTorch's Nesterov form): m = mu m + g;  anchor -= lr (g + mu m).
// outer_dtype = "bfloat16" sends the outer gradient in bfloat16, as the streaming variants
// do: every rank rounds its delta to bf16 and sends block r of it to rank r (all_to_all);
// rank r sums its block over ranks in rank order in T, takes the mean, rounds it to bf16
// and all-gathers it. Per round on dp > 1 that is all_to_all and all_gather of 2 N' bytes
// each (N' = N padded to a multiple of dp), bus bytes 4 N' (dp - 1)/dp, against the
// all-reduce's 2 N s (dp - 1)/dp: half of float32, a quarter of float64.
//
// Per run per rank (N elements, s = sizeof(T), k = inner optimizer state per element), at
// every step that ends a round: one all_reduce of N s (outer_dtype "same") or the two bf16
// collectives above (none at dp 1). Memory: params N s, grads N s, optimizer k N s + anchor
// N s + outer momentum N s (when outer_momentum > 0); workspace at most the delta N s, plus
// for bf16 2 N' + 2 N' + C s + 2 C bytes (C = N'/dp).
#pragma once
#include "strategies/dp/local_sgd.hpp"

namespace pts {

template <class T>
class DiLoCo : public LocalSgd<T> {
 public:
  explicit DiLoCo(const StrategyContext<T>& ctx);
  void attach(Model<T>& model) override;
  std::vector<ExpectedOp> expected_comm(int step) const override;
  MemoryExpectation expected_memory() const override;
  int64_t workspace_bound() const override;

 protected:
  void synchronise(int step) override;
  // The outer optimizer: the anchor's update from the outer gradient g.
  virtual void outer_step(T* anchor, const T* g, int64_t n);
  // The outer gradient's mean over dp in bfloat16 (see above), in place.
  void mean_in_bf16(T* delta);
  T* momentum() { return momentum_.data(); }
  const double lr_, mu_;
  const bool bf16_;

 private:
  int64_t padded() const;  // N rounded up to a multiple of dp
  Tensor<T> anchor_, momentum_;
};

StrategyInfo diloco_entry(std::string name = "diloco", std::optional<DpAlgorithm> algorithm = {});

}  // namespace pts
