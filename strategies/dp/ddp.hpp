// ddp (ZeRO stage 0): every rank holds params, grads and optimizer state in full; the
// gradients are averaged by bucketed all-reduce. Buckets are cut from the end of the flat
// buffer, the order backward finishes it; with overlap each bucket launches as soon as its
// last unit's backward is done, and outstanding all-reduces are progressed between layers.
//
// Per step per rank (N elements of this rank's stage/shard, s = sizeof(T), k = optimizer
// state per element): all_reduce of N s payload in ceil(N s / bucket_bytes) calls (none at
// dp 1); memory params N s, grads N s, optimizer k N s, no workspace of its own.
#pragma once
#include "strategies/dp/dp_sync.hpp"

namespace pts {

struct Bucket {
  int64_t begin = 0, end = 0;  // element range [begin, end) of the flat gradient buffer
};
// Buckets of at most bucket_elems elements covering [0, n), ordered from the end of the
// buffer (the order backward completes them).
std::vector<Bucket> make_buckets(int64_t n, int64_t bucket_elems);

template <class T>
class Ddp : public DpSync<T> {
 public:
  explicit Ddp(const StrategyContext<T>& ctx) : DpSync<T>(ctx) {}
  ModelStorage storage() const override { return storage_for(this->dp().size()); }
  // The statements as pure functions (dp_sync.hpp's DpShape), for the planner too.
  static ModelStorage storage_for(int) { return {1, true, true}; }
  static DpStatement statement(const DpShape& s, int step);
  void attach(Model<T>& model) override;
  UnitHooks hooks(int step) override;
  void finish_step(int step) override;
  std::vector<ExpectedOp> expected_comm(int step) const override;
  MemoryExpectation expected_memory() const override;

 protected:
  // Starts the reduction of bucket `index` (elements [data, data + n) of the gradient); a
  // variant that compresses or reorders gradients overrides this. nullptr: nothing to wait on.
  virtual RequestPtr reduce_bucket(size_t index, T* data, int64_t n);

 private:
  void launch_ready(int64_t finished_from);

  std::unique_ptr<Optimizer<T>> opt_;
  std::vector<Bucket> buckets_;
  size_t next_bucket_ = 0;
  std::vector<RequestPtr> pending_;
};

}  // namespace pts
