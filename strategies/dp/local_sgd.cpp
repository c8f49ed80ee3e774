#include "strategies/dp/local_sgd.hpp"

#include "strategies/dp/serial_replicas.hpp"
#include "strategies/trainer.hpp"

namespace pts {

template <class T>
LocalSgd<T>::LocalSgd(const StrategyContext<T>& ctx) : DpSync<T>(ctx), every_(ctx.config.template option<int64_t>("sync_every")) {}

template <class T>
void LocalSgd<T>::attach(Model<T>& model) {
  DpSync<T>::attach(model);
  opt_ = std::make_unique<Optimizer<T>>(this->config().optimizer, this->backend(), this->memory(), n());
}

template <class T>
void LocalSgd<T>::finish_step(int step) {
  opt_->step(params(), this->model().grads().data());
  if (syncs(step)) synchronise(step);
}

template <class T>
void LocalSgd<T>::synchronise(int) {
  if (this->dp().size() == 1) return;  // one replica is its own mean
  this->dp().all_reduce(params(), params(), n(), dtype_of<T>());
  this->average(params(), n());
}

template <class T>
std::vector<ExpectedOp> LocalSgd<T>::expected_comm(int step) const {
  const int dp = this->dp().size();
  if (dp == 1 || !syncs(step)) return {};
  return {{"dp", CommOp::all_reduce, dp, 1, static_cast<uint64_t>(this->bytes(n()))}};
}

template <class T>
MemoryExpectation LocalSgd<T>::expected_memory() const {
  return {this->bytes(n()), this->bytes(n()), this->state_bytes(n())};
}

template class LocalSgd<float>;
template class LocalSgd<double>;

namespace {

// The twin: replicas step serially; at the end of a round each takes their mean.
template <class T>
class LocalSgdTwin final : public SerialRounds<T> {
 public:
  explicit LocalSgdTwin(const StrategyContext<T>& ctx)
      : SerialRounds<T>(ctx), mean_(ctx.memory, MemCategory::workspace, {this->n()}) {}

 private:
  void end_round() override {
    this->mean_params(mean_.data());
    this->set_all_params(mean_.data());
  }
  Tensor<T> mean_;
};

}  // namespace

StrategyInfo local_steps_entry(std::string name, std::string description, DpAlgorithm algorithm) {
  TrainerPreset preset{std::move(algorithm)};
  preset.bucket_options = false;
  StrategyInfo info = trainer_entry(std::move(name), std::move(description), "dp tp pp", preset);
  info.options.push_back({"sync_every", OptionType::integer, int64_t{4}, "steps",
                          "local steps per round (H): parameters meet over dp every H steps and at the last"});
  info.validate = [validate = info.validate](const CaseConfig& c, const WorkloadSpec& w) {
    validate(c, w);
    if (c.option<int64_t>("sync_every") < 1)
      throw CaseError("sync_every", "sync_every must be at least 1, got " + std::to_string(c.option<int64_t>("sync_every")));
  };
  // Beyond the trainer's matrix (at the default H = 4: rounds end at steps 3 and 4 of 5):
  // every step a round (H = 1) and one round and a short one (H = 3), and H = 1 against the
  // oracle (with SGD it is ddp).
  return with_matrix(std::move(info),
                     {{"rounds",
                       {{"sync_every", {1, 3}}, {"dp", {2, 3, 4}}, {"dtype", {"float64", "float32"}},
                        {"optimizer", {"sgd", "adamw"}}, {"global_batch", {24}}},
                       true},
                      {"identity",
                       {{"reference", {"oracle"}}, {"sync_every", {1}}, {"dp", {2, 4}},
                        {"dtype", {"float64", "float32"}}, {"global_batch", {24}}},
                       true}});
}

StrategyInfo local_sgd_entry(std::string name, std::optional<DpAlgorithm> algorithm) {
  StrategyInfo info =
      local_steps_entry(name, "local SGD: H = sync_every local optimizer steps per replica, then parameters averaged over dp",
                        algorithm ? *algorithm : dp_algorithm<LocalSgd>("local-sgd", 0));
  info.reference = twin_reference<LocalSgdTwin>(name + "-twin");
  return info;
}

}  // namespace pts
