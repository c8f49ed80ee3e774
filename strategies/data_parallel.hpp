// The data-parallel axis. `ddp`: each of the dp ranks trains a full replica on
// global_batch/dp samples; gradients are averaged over the dp group with bucketed
// all-reduce on the flat gradient buffer, then every rank takes the same optimizer step.
//
// Buckets are fixed slices of the flat buffer cut from its end, bucket_bytes each (the
// last one shorter), because backward finishes the parameters in reverse canonical
// order. With overlap, a bucket's non-blocking all-reduce starts as soon as backward has
// finished every gradient in it; the step waits only before the optimizer.
//
// Bytes per step per rank: one all-reduce of all N gradients, in ceil(N*s / bucket_bytes)
// calls (s = sizeof(T)): payload N*s, bus bytes 2(dp-1)/dp * N*s. Memory: params, grads
// and optimizer state all full size (N*s each; AdamW's state 2*N*s).
#pragma once
#include <vector>

#include "core/optimizer.hpp"
#include "strategies/replica.hpp"

namespace pts {

struct Bucket {
  int64_t begin = 0, end = 0;  // element range [begin, end) of the flat gradient buffer
};
// Buckets of at most bucket_elems elements covering [0, n), ordered from the end of the
// buffer (the order backward completes them).
std::vector<Bucket> make_buckets(int64_t n, int64_t bucket_elems);

template <class T>
class DataParallel : public Strategy<T> {
 public:
  explicit DataParallel(const StrategyContext<T>& ctx);
  void load_batch(int step) override { replica_.load(step); }
  double train_step(int step) override;
  std::vector<double> full_params(Comm& side) override;
  std::vector<ExpectedOp> expected_comm() const override;
  MemoryExpectation expected_memory() const override;

 protected:
  // Hooks a test-only broken strategy overrides to plant a bug.
  virtual T gradient_scale() const { return T(1) / static_cast<T>(dp_.size()); }
  virtual bool bucket_enabled(size_t /*index*/) const { return true; }
  const std::vector<Bucket>& buckets() const { return buckets_; }

 private:
  void launch_ready(int64_t finished_from);
  StrategyContext<T> ctx_;
  Comm& dp_;
  Replica<T> replica_;
  Optimizer<T> opt_;
  std::vector<Bucket> buckets_;
  std::vector<RequestPtr> pending_;
  size_t next_bucket_ = 0;
};

void validate_ddp(const CaseConfig& c);

}  // namespace pts
