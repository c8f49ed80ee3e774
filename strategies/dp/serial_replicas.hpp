// The serial twin of a data-parallel algorithm (ReferenceSpec kind "twin"): the case's dp
// replicas simulated one after another on one rank. Replica r trains on samples
// [r B/dp, (r+1) B/dp) of every global batch with an optimizer of its own (the data split of
// the parallel run), and a subclass writes the algorithm's synchronisation out serially in
// synchronise(step), with no communicator. No parallel implementation calls this code, so a
// bug in one is not mirrored in the other. Tensor and pipeline parallelism do not change
// the arithmetic of a dp algorithm (the oracle proves it for ddp), so a twin simulates
// whole-model replicas whatever the case's tp and pp.
#pragma once
#include <memory>
#include <vector>

#include "core/optimizer.hpp"
#include "strategies/registry.hpp"
#include "strategies/replica.hpp"

namespace pts {

template <class T>
class SerialReplicas : public Strategy<T> {
 public:
  explicit SerialReplicas(const StrategyContext<T>& ctx) : ctx_(ctx) {
    const int count = ctx.config.layout.dp;
    const int64_t rows = ctx.config.global_batch / count;
    for (int r = 0; r < count; ++r) {
      replicas_.push_back(std::make_unique<Replica<T>>(ctx, r * rows, rows));
      optimizers_.push_back(std::make_unique<Optimizer<T>>(ctx.config.optimizer, ctx.backend, ctx.memory, n()));
    }
  }
  void load_batch(int step) override {
    for (auto& r : replicas_) r->load(step);
  }
  // Every replica computes its gradient and takes its own optimizer step, then the
  // algorithm synchronises. The loss is the mean of the replicas' slice means.
  double train_step(int step) override {
    double loss = 0;
    for (int r = 0; r < count(); ++r) {
      loss += replicas_[r]->forward_backward();
      optimizers_[r]->step(params(r), replicas_[r]->model().grads().data());
    }
    synchronise(step);
    return loss / count();
  }
  std::vector<double> full_params(Comm&) override { return replicas_[0]->params_as_double(); }
  std::vector<ExpectedOp> expected_comm(int) const override { return {}; }
  MemoryExpectation expected_memory() const override {
    MemoryExpectation e = full_replica_memory<T>(ctx_.config, n());
    e.param *= count(), e.grad *= count(), e.optimizer = e.optimizer * count() + extra_state_bytes();
    return e;
  }

 protected:
  virtual void synchronise(int step) = 0;
  virtual int64_t extra_state_bytes() const { return 0; }
  int count() const { return static_cast<int>(replicas_.size()); }
  int64_t n() const { return ctx_.workload.num_params(); }
  T* params(int r) { return replicas_[r]->model().params().data(); }
  Backend<T>& backend() const { return ctx_.backend; }
  MemoryTracker& memory() const { return ctx_.memory; }
  const CaseConfig& config() const { return ctx_.config; }
  // out = the mean of the replicas' parameters, summed in replica order.
  void mean_params(T* out) {
    backend().copy(out, params(0), n());
    for (int r = 1; r < count(); ++r) backend().add(out, params(r), n());
    backend().scale(out, T(1) / static_cast<T>(count()), n());
  }
  void set_all_params(const T* p) {
    for (int r = 0; r < count(); ++r) backend().copy(params(r), p, n());
  }

 private:
  StrategyContext<T> ctx_;
  std::vector<std::unique_ptr<Replica<T>>> replicas_;
  std::vector<std::unique_ptr<Optimizer<T>>> optimizers_;
};

// The twin of an algorithm that works in rounds of H = sync_every local steps: end_round()
// runs at every step t with (t + 1) % H == 0 and at the last step of the run.
template <class T>
class SerialRounds : public SerialReplicas<T> {
 public:
  explicit SerialRounds(const StrategyContext<T>& ctx)
      : SerialReplicas<T>(ctx), every_(ctx.config.template option<int64_t>("sync_every")) {}

 protected:
  virtual void end_round() = 0;

 private:
  void synchronise(int step) final {
    if ((step + 1) % every_ == 0 || step + 1 == this->config().steps) end_round();
  }
  int64_t every_;
};

}  // namespace pts
