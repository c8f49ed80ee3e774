#include "strategies/testing/broken_strategies.hpp"

#include "strategies/data_parallel.hpp"

namespace pts {
namespace {

template <class T>
class DdpSum final : public DataParallel<T> {
 public:
  using DataParallel<T>::DataParallel;
  T gradient_scale() const override { return T(1); }
};

template <class T>
class DdpSkipBucket final : public DataParallel<T> {
 public:
  using DataParallel<T>::DataParallel;
  bool bucket_enabled(size_t index) const override { return index != 0; }
};

template <class T>
class DdpLeak final : public DataParallel<T> {
 public:
  explicit DdpLeak(const StrategyContext<T>& ctx)
      : DataParallel<T>(ctx), copy_(ctx.memory, MemCategory::grad, {ctx.workload.num_params()}) {}

 private:
  Tensor<T> copy_;
};

}  // namespace

void add_broken_strategies(StrategyRegistry& r) {
  r.add(strategy_entry<DdpSum>("ddp-sum", "BROKEN: sums gradients instead of averaging", validate_ddp));
  r.add(strategy_entry<DdpSkipBucket>("ddp-skip-bucket", "BROKEN: skips the first bucket", validate_ddp));
  r.add(strategy_entry<DdpLeak>("ddp-leak", "BROKEN: holds an extra gradient copy", validate_ddp));
}

}  // namespace pts
