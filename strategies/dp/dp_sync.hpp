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

// What a dp algorithm's statements depend on, and nothing else: the case, the dp group's
// size, this rank's stage/shard flat layout (units padded as the algorithm's storage says)
// and the bytes of one element. The algorithms' formulas are pure functions of it, called by
// the algorithm itself (expected_comm, expected_memory, workspace_bound) and by the planner
// (strategies/statement.hpp), which predicts layouts it never builds: one formula for both.
struct DpShape {
  const CaseConfig& config;
  const FlatLayout& layout;
  int dp = 1;
  int64_t elem_bytes = 8;
  int64_t bytes(int64_t n) const { return n * elem_bytes; }
  int64_t state_bytes(int64_t n) const { return config.optimizer.state_per_param() * bytes(n); }
};

// A dp algorithm's statements for one step: its dp-axis operations, param/grad/optimizer
// bytes (and the bound on gathered parameters), and the workspace it holds itself.
struct DpStatement {
  std::vector<ExpectedOp> comm;
  MemoryExpectation memory;
  int64_t workspace = 0;
};

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
  // What this algorithm's pure statement functions take (after attach).
  DpShape shape() const { return {ctx_.config, layout(), dp_.size(), static_cast<int64_t>(sizeof(T))}; }
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
// it reports in cases.csv (-1 when the notion does not apply). `storage` and `statement`
// are the algorithm's own pure functions (what its storage() and statements return for a dp
// group of that size), for the planner; null for algorithms the planner does not enumerate.
struct DpAlgorithm {
  std::string name;
  int zero_stage = -1;
  DpSyncFactory<float> make_f32;
  DpSyncFactory<double> make_f64;
  std::function<ModelStorage(int dp)> storage = nullptr;
  std::function<DpStatement(const DpShape&, int step)> statement = nullptr;
};

// `args` are the constructor's fixed settings; the algorithm's static storage_for(dp, args...)
// and statement(shape, step, args...) give its pure functions, where it has them.
template <template <class> class A, class... Args>
DpAlgorithm dp_algorithm(std::string name, int zero_stage, Args... args) {
  DpAlgorithm a{std::move(name), zero_stage,
                [=](const StrategyContext<float>& c) { return std::make_unique<A<float>>(c, args...); },
                [=](const StrategyContext<double>& c) { return std::make_unique<A<double>>(c, args...); }};
  if constexpr (requires(const DpShape& s) {
                  A<double>::storage_for(1, args...);
                  A<double>::statement(s, 0, args...);
                }) {
    a.storage = [=](int dp) { return A<double>::storage_for(dp, args...); };
    a.statement = [=](const DpShape& s, int step) { return A<double>::statement(s, step, args...); };
  }
  return a;
}

// The shipped algorithms by ZeRO stage: 0 ddp, 1 zero1, 2 zero2, 3 fsdp (hybrid's zero_stage).
const DpAlgorithm& dp_algorithm_for_stage(int zero_stage);

}  // namespace pts
