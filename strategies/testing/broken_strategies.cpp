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
  KeepsGradientCopy(const StrategyContext<T>& ctx, ParallelPreset preset)
      : DataParallel<T>(ctx, preset), copy_(ctx.memory, MemCategory::grad, {ctx.workload.num_params()}) {}

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

// 1F1B that loses the last microbatch's gradient contribution.
template <class T>
class DropsLastMicrobatch final : public Pipeline<T> {
 public:
  using Pipeline<T>::Pipeline;
  bool keep_gradient(int micro) const override { return micro + 1 < this->micro(); }
};

// Says 1F1B but runs every forward before any backward (GPipe's order): the same numbers,
// m microbatches of activations held instead of pp.
template <class T>
class RunsAllForwardsFirst final : public Pipeline<T> {
 public:
  using Pipeline<T>::Pipeline;
  std::vector<PipeStep> steps() const override { return pipeline_schedule("gpipe", 0, 1, this->micro()); }
};

// A trainer whose pipeline is P (a pipeline with a planted bug).
template <template <class> class P>
struct WithPipeline {
  template <class T>
  class Trainer final : public DataParallel<T> {
   public:
    Trainer(const StrategyContext<T>& ctx, ParallelPreset preset)
        : DataParallel<T>(ctx, preset), ctx_(ctx), preset_(preset) {}
    std::unique_ptr<Pipeline<T>> make_pipeline() override {
      return std::make_unique<P<T>>(ctx_, this->replica(), preset_.schedule, microbatches_of(ctx_.config));
    }

   private:
    StrategyContext<T> ctx_;
    ParallelPreset preset_;
  };
};

}  // namespace

void add_broken_strategies(StrategyRegistry& r) {
  r.add(parallel_entry<SumsGradients>("ddp-sum", "BROKEN: sums gradients instead of averaging", "dp", ParallelPreset{0, "1f1b", {}}));
  r.add(parallel_entry<SkipsFirstBucket>("ddp-skip-bucket", "BROKEN: skips the first bucket", "dp", ParallelPreset{0, "1f1b", {}}));
  r.add(parallel_entry<KeepsGradientCopy>("ddp-leak", "BROKEN: holds an extra gradient copy", "dp", ParallelPreset{0, "1f1b", {}}));
  r.add(parallel_entry<ShiftsShard>("zero1-shard-shift", "BROKEN: shard update one element off", "dp", ParallelPreset{1, "1f1b", {}}));
  r.add(parallel_entry<ShiftsShard>("zero2-shard-shift", "BROKEN: shard update one element off", "dp", ParallelPreset{2, "1f1b", {}}));
  r.add(parallel_entry<NeverFreesUnits>("fsdp-no-free", "BROKEN: never frees gathered units", "dp", ParallelPreset{3, "1f1b", {}}));
  r.add(parallel_entry<GathersTwice>("fsdp-double-gather", "BROKEN: gathers twice before backward", "dp", ParallelPreset{3, "1f1b", {}}));
  r.add(parallel_entry<DataParallel>("tp-no-row-reduce", "BROKEN: attention's row-parallel projection skips its all-reduce",
                                     "tp", ParallelPreset{0, "1f1b", {true, 0}}));
  r.add(parallel_entry<DataParallel>("tp-vocab-shift", "BROKEN: vocabulary shards looked up one row off", "tp",
                                     ParallelPreset{0, "1f1b", {false, 1}}));
  r.add(parallel_entry<WithPipeline<DropsLastMicrobatch>::Trainer>(
      "pp-1f1b-drop-last", "BROKEN: 1F1B drops the last microbatch's gradient", "pp", ParallelPreset{0, "1f1b", {}}));
  r.add(parallel_entry<WithPipeline<RunsAllForwardsFirst>::Trainer>(
      "pp-1f1b-all-forwards", "BROKEN: 1F1B that runs all forwards first (holds m microbatches)", "pp",
      ParallelPreset{0, "1f1b", {}}));
}

}  // namespace pts
