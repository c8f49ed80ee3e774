#include "strategies/dp/delayed_sgd.hpp"

#include <deque>

#include "strategies/replica.hpp"
#include "strategies/trainer.hpp"

namespace pts {

template <class T>
DelayedSgd<T>::DelayedSgd(const StrategyContext<T>& ctx)
    : DpSync<T>(ctx), staleness_(static_cast<int>(ctx.config.template option<int64_t>("staleness"))) {}

template <class T>
void DelayedSgd<T>::attach(Model<T>& model) {
  DpSync<T>::attach(model);
  opt_ = std::make_unique<Optimizer<T>>(this->config().optimizer, this->backend(), this->memory(), n());
  for (int i = 0; i < delay(); ++i) in_flight_.emplace_back(this->memory(), MemCategory::grad, Shape{n()});
  pending_.resize(delay());
}

template <class T>
UnitHooks DelayedSgd<T>::hooks(int) {
  UnitHooks h;
  if (delay() > 0 && this->dp().size() > 1) h.after_backward = [this](size_t) { this->progress(pending_); };
  return h;
}

template <class T>
void DelayedSgd<T>::finish_step(int step) {
  Model<T>& m = this->model();
  const bool multi = this->dp().size() > 1;
  if (delay() == 0) {
    if (multi) {
      this->dp().all_reduce(m.grads().data(), m.grads().data(), n(), dtype_of<T>());
      this->average(m.grads().data(), n());
    }
    opt_->step(m.params().data(), m.grads().data());
    return;
  }
  // The slot of step - delay() is the slot this step's gradient goes into.
  const int slot = step % delay();
  T* g = in_flight_[slot].data();
  if (step >= delay()) {
    if (pending_[slot]) pending_[slot]->wait();
    pending_[slot].reset();
    if (multi) this->average(g, n());
    opt_->step(m.params().data(), g);
  }
  if (step + delay() < this->config().steps) {
    this->backend().copy(g, m.grads().data(), n());
    if (multi) pending_[slot] = this->dp().iall_reduce(g, g, n(), dtype_of<T>());
  }
}

template <class T>
std::vector<ExpectedOp> DelayedSgd<T>::expected_comm(int step) const {
  const int dp = this->dp().size();
  if (dp == 1 || step + staleness_ >= this->config().steps) return {};
  return {{"dp", CommOp::all_reduce, dp, 1, static_cast<uint64_t>(this->bytes(n()))}};
}

template <class T>
MemoryExpectation DelayedSgd<T>::expected_memory() const {
  return {this->bytes(n()), this->bytes(n()) * (1 + staleness_), this->state_bytes(n())};
}

template class DelayedSgd<float>;
template class DelayedSgd<double>;

namespace {

// The twin: one model on the whole global batch (a dp-mean gradient is the full-batch
// gradient) and a queue of the last s gradients.
template <class T>
class DelayedSgdTwin final : public Strategy<T> {
 public:
  explicit DelayedSgdTwin(const StrategyContext<T>& ctx)
      : ctx_(ctx), replica_(ctx, 0, ctx.config.global_batch),
        opt_(ctx.config.optimizer, ctx.backend, ctx.memory, replica_.model().num_params()),
        staleness_(static_cast<size_t>(ctx.config.template option<int64_t>("staleness"))) {}
  void load_batch(int step) override { replica_.load(step); }
  double train_step(int) override {
    Model<T>& m = replica_.model();
    const double loss = replica_.forward_backward();
    queue_.emplace_back(ctx_.memory, MemCategory::grad, Shape{m.num_params()});
    ctx_.backend.copy(queue_.back().data(), m.grads().data(), m.num_params());
    if (queue_.size() > staleness_) {
      opt_.step(m.params().data(), queue_.front().data());
      queue_.pop_front();
    }
    return loss;
  }
  std::vector<double> full_params(Comm&) override { return replica_.params_as_double(); }
  std::vector<ExpectedOp> expected_comm(int) const override { return {}; }
  MemoryExpectation expected_memory() const override {
    MemoryExpectation e = full_replica_memory<T>(ctx_.config, ctx_.workload.num_params());
    e.grad *= static_cast<int64_t>(2 + staleness_);
    return e;
  }

 private:
  StrategyContext<T> ctx_;
  Replica<T> replica_;
  Optimizer<T> opt_;
  size_t staleness_;
  std::deque<Tensor<T>> queue_;
};

}  // namespace

StrategyInfo delayed_sgd_entry(std::string name, std::optional<DpAlgorithm> algorithm) {
  TrainerPreset preset{algorithm ? *algorithm : dp_algorithm<DelayedSgd>("delayed-sgd", 0)};
  preset.bucket_options = false;
  StrategyInfo info = trainer_entry(
      name, "delayed SGD: the gradient of step t - staleness is applied at step t; its all-reduce runs behind s steps",
      "dp tp pp", preset);
  info.options.push_back({"staleness", OptionType::integer, int64_t{1}, "steps",
                          "steps between computing a gradient and applying it (s)"});
  // A negative staleness is refused by the suite parser (integers are never negative); one of
  // steps or more would apply no gradient at all (and hold that many buffers).
  info.validate = [validate = info.validate](const CaseConfig& c, const WorkloadSpec& w) {
    validate(c, w);
    if (c.option<int64_t>("staleness") >= c.steps)
      throw CaseError("staleness", "staleness " + std::to_string(c.option<int64_t>("staleness")) +
                                       " would apply no gradient in " + std::to_string(c.steps) +
                                       " steps; it must be less than steps");
  };
  info.reference = twin_reference<DelayedSgdTwin>(name + "-twin", false);  // the delay does not depend on dp
  // Beyond the trainer's matrix (at the default s = 1): no delay and two steps of it, and
  // s = 0 against the oracle (it is ddp, AdamW too).
  return with_matrix(std::move(info),
                     {{"delayed",
                       {{"staleness", {0, 2}}, {"dp", {2, 3, 4}}, {"dtype", {"float64", "float32"}},
                        {"optimizer", {"sgd", "adamw"}}, {"global_batch", {24}}}},
                      {"identity",
                       {{"reference", {"oracle"}}, {"staleness", {0}}, {"dp", {2, 4}}, {"optimizer", {"sgd", "adamw"}},
                        {"dtype", {"float64", "float32"}}, {"global_batch", {24}}},
                       true}});
}

}  // namespace pts
