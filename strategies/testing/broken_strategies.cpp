#include "strategies/testing/broken_strategies.hpp"

#include "strategies/data_parallel.hpp"

namespace pts {
namespace {

template <class T>
class SumsGradients final : public DataParallel<T> {
 public:
  using DataParallel<T>::DataParallel;
  T gradient_scale() const override { return T(1); }
};

template <class T>
class SkipsFirstBucket final : public DataParallel<T> {
 public:
  using DataParallel<T>::DataParallel;
  bool bucket_enabled(size_t index) const override { return index != 0; }
};

template <class T>
class KeepsGradientCopy final : public DataParallel<T> {
 public:
  KeepsGradientCopy(const StrategyContext<T>& ctx, int stage)
      : DataParallel<T>(ctx, stage), copy_(ctx.memory, MemCategory::grad, {ctx.workload.num_params()}) {}

 private:
  Tensor<T> copy_;
};

template <class T>
class ShiftsShard final : public DataParallel<T> {
 public:
  using DataParallel<T>::DataParallel;
  int64_t shard_update_shift() const override { return 1; }
};

template <class T>
class NeverFreesUnits final : public DataParallel<T> {
 public:
  using DataParallel<T>::DataParallel;
  void free_unit(Tensor<T>& gathered) override {
    leaked_.push_back(std::move(gathered));
    gathered = Tensor<T>();
  }

 private:
  std::vector<Tensor<T>> leaked_;
};

template <class T>
class GathersTwice final : public DataParallel<T> {
 public:
  using DataParallel<T>::DataParallel;
  int gathers_before_backward() const override { return 2; }
};

}  // namespace

void add_broken_strategies(StrategyRegistry& r) {
  r.add(data_parallel_entry<SumsGradients>("ddp-sum", "BROKEN: sums gradients instead of averaging", 0));
  r.add(data_parallel_entry<SkipsFirstBucket>("ddp-skip-bucket", "BROKEN: skips the first bucket", 0));
  r.add(data_parallel_entry<KeepsGradientCopy>("ddp-leak", "BROKEN: holds an extra gradient copy", 0));
  r.add(data_parallel_entry<ShiftsShard>("zero1-shard-shift", "BROKEN: shard update one element off", 1));
  r.add(data_parallel_entry<ShiftsShard>("zero2-shard-shift", "BROKEN: shard update one element off", 2));
  r.add(data_parallel_entry<NeverFreesUnits>("fsdp-no-free", "BROKEN: never frees gathered units", 3));
  r.add(data_parallel_entry<GathersTwice>("fsdp-double-gather", "BROKEN: gathers twice before backward", 3));
}

}  // namespace pts
