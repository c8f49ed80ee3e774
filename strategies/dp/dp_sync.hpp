// The data-parallel axis as a pluggable algorithm. The trainer (strategies/trainer.hpp)
// composes one DpSync with a pipeline schedule and tensor-parallel layers; a new dp
// algorithm (ddp, a ZeRO stage, local SGD, ...) is one class implementing this contract and
// works under tp and pp with no edit elsewhere.
//
// The contract, in the order the trainer calls it:
//   storage()        before the model exists: which flat buffers the model allocates itself
//                    and the padding of every unit (pad_to = dp for sharded algorithms).
//   attach(model)    once: allocate shards and optimizer state for this rank's stage/tp shard.
//   hooks(step)      per step: callbacks the pipeline runs around each unit's first forward,
//                    last forward, first backward and last backward (see Pipeline::run).
//   finish_step(step) after every microbatch's backward: synchronise over dp and update the
//                    parameters. Only dp-axis communication goes through `dp()`.
//   local_params()   this rank's stage/shard parameters in the model's local unpadded order,
//                    for the final check (collective over the uncounted dp group `dp_side`).
//   expected_comm(step), expected_memory()  the algorithm's own statements: dp-axis
//                    operations of step `step`, and param/grad/optimizer bytes (plus the
//                    bound on gathered parameters and the dp part of the workspace bound).
//   workspace_bound() bytes of workspace the algorithm itself may hold at once.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "core/optimizer.hpp"
#include "strategies/strategy.hpp"

namespace pts {

template <class T>
class DpSync {
 public:
  explicit DpSync(const StrategyContext<T>& ctx) : ctx_(ctx), dp_(ctx.mesh.dp()) {}
  virtual ~DpSync() = default;
  DpSync(const DpSync&) = delete;
  DpSync& operator=(const DpSync&) = delete;

  virtual ModelStorage storage() const = 0;
  virtual void attach(Model<T>& model) { model_ = &model; }
  virtual UnitHooks hooks(int step) = 0;
  virtual void finish_step(int step) = 0;
  // Default: the model's own (full, padded) parameter buffer with the padding dropped.
  virtual std::vector<double> local_params(Comm& dp_side);
  virtual std::vector<ExpectedOp> expected_comm(int step) const = 0;
  virtual MemoryExpectation expected_memory() const = 0;
  virtual int64_t workspace_bound() const { return 0; }

 protected:
  // Turns a gradient summed over dp into the mean.
  virtual void average(T* grads, int64_t n) { backend().scale(grads, T(1) / static_cast<T>(dp_.size()), n); }
  const CaseConfig& config() const { return ctx_.config; }
  Backend<T>& backend() const { return ctx_.backend; }
  MemoryTracker& memory() const { return ctx_.memory; }
  Comm& dp() const { return dp_; }
  Model<T>& model() const { return *model_; }
  const FlatLayout& layout() const { return model_->layout(); }
  // Bytes of n elements, and of the optimizer state for n elements.
  static int64_t bytes(int64_t n) { return n * static_cast<int64_t>(sizeof(T)); }
  int64_t state_bytes(int64_t n) const { return config().optimizer.state_per_param() * bytes(n); }
  // MPI moves a non-blocking operation's data only inside MPI calls: poke every outstanding
  // one between layers so that transfers really run during compute.
  static void progress(std::vector<RequestPtr>& requests) {
    for (auto& r : requests)
      if (r) r->test();
  }
  static void wait_all(std::vector<RequestPtr>& requests) {
    for (auto& r : requests)
      if (r) r->wait();
    requests.clear();
  }

 private:
  StrategyContext<T> ctx_;
  Comm& dp_;
  Model<T>* model_ = nullptr;
};

template <class T>
using DpSyncFactory = std::function<std::unique_ptr<DpSync<T>>(const StrategyContext<T>&)>;

// A dp algorithm as the registry names it: the factories for both dtypes and the ZeRO stage
// it reports in cases.csv (-1 when the notion does not apply).
struct DpAlgorithm {
  std::string name;
  int zero_stage = -1;
  DpSyncFactory<float> make_f32;
  DpSyncFactory<double> make_f64;
};

template <template <class> class A, class... Args>
DpAlgorithm dp_algorithm(std::string name, int zero_stage, Args... args) {
  return {std::move(name), zero_stage,
          [=](const StrategyContext<float>& c) { return std::make_unique<A<float>>(c, args...); },
          [=](const StrategyContext<double>& c) { return std::make_unique<A<double>>(c, args...); }};
}

// The shipped algorithms by ZeRO stage: 0 ddp, 1 zero1, 2 zero2, 3 fsdp (hybrid's zero_stage).
const DpAlgorithm& dp_algorithm_for_stage(int zero_stage);

}  // namespace pts
