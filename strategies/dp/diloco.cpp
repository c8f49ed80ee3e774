#include "strategies/dp/diloco.hpp"

#include <cmath>

#include "core/bf16.hpp"
#include "strategies/dp/serial_replicas.hpp"

namespace pts {

template <class T>
DiLoCo<T>::DiLoCo(const StrategyContext<T>& ctx)
    : LocalSgd<T>(ctx), lr_(ctx.config.template option<double>("outer_lr")), mu_(ctx.config.template option<double>("outer_momentum")),
      bf16_(ctx.config.template option<std::string>("outer_dtype") == "bfloat16") {}

template <class T>
void DiLoCo<T>::attach(Model<T>& model) {
  LocalSgd<T>::attach(model);
  anchor_ = Tensor<T>(this->memory(), MemCategory::optimizer, {this->n()});
  this->backend().copy(anchor_.data(), this->params(), this->n());
  if (mu_ > 0) momentum_ = Tensor<T>(this->memory(), MemCategory::optimizer, {this->n()});
}

template <class T>
int64_t DiLoCo<T>::padded() const {
  const int64_t dp = this->dp().size();
  return (this->n() + dp - 1) / dp * dp;
}

template <class T>
void DiLoCo<T>::synchronise(int) {
  Backend<T>& be = this->backend();
  const int64_t n = this->n();
  Tensor<T> delta(this->memory(), MemCategory::workspace, {n});  // anchor - params: the outer gradient
  be.copy(delta.data(), anchor_.data(), n);
  be.axpy(delta.data(), T(-1), this->params(), n);
  if (bf16_) {
    mean_in_bf16(delta.data());
  } else if (this->dp().size() > 1) {
    this->dp().all_reduce(delta.data(), delta.data(), n, dtype_of<T>());
    this->average(delta.data(), n);
  }
  outer_step(anchor_.data(), delta.data(), n);
  be.copy(this->params(), anchor_.data(), n);
}

template <class T>
void DiLoCo<T>::mean_in_bf16(T* delta) {
  Backend<T>& be = this->backend();
  const int64_t n = this->n(), dp = this->dp().size(), chunk = padded() / dp;
  Tensor<uint16_t> q(this->memory(), MemCategory::workspace, {padded()});  // zero padding past n
  be.to_bf16(delta, q.data(), n);
  // Block r of every rank's delta to rank r (at dp 1 the one block is the delta itself).
  Tensor<uint16_t> blocks;
  if (dp > 1) {
    blocks = Tensor<uint16_t>(this->memory(), MemCategory::workspace, {padded()});
    this->dp().all_to_all(q.data(), blocks.data(), chunk, DType::bf16);
  }
  const uint16_t* received = dp > 1 ? blocks.data() : q.data();
  Tensor<T> sum(this->memory(), MemCategory::workspace, {chunk});
  for (int64_t r = 0; r < dp; ++r) be.add_bf16(sum.data(), received + r * chunk, chunk);  // rank order
  this->average(sum.data(), chunk);
  Tensor<uint16_t> mine(this->memory(), MemCategory::workspace, {chunk});
  be.to_bf16(sum.data(), mine.data(), chunk);
  if (dp > 1) this->dp().all_gather(mine.data(), q.data(), chunk, DType::bf16);
  be.fill(delta, T(0), n);
  be.add_bf16(delta, dp > 1 ? q.data() : mine.data(), n);
}

template <class T>
void DiLoCo<T>::outer_step(T* anchor, const T* g, int64_t n) {
  Backend<T>& be = this->backend();
  be.axpy(anchor, static_cast<T>(-lr_), g, n);
  if (mu_ > 0) {
    be.scale(momentum_.data(), static_cast<T>(mu_), n);
    be.add(momentum_.data(), g, n);
    be.axpy(anchor, static_cast<T>(-lr_ * mu_), momentum_.data(), n);
  }
}

template <class T>
std::vector<ExpectedOp> DiLoCo<T>::expected_comm(int step) const {
  const int dp = this->dp().size();
  if (dp == 1 || !this->syncs(step)) return {};
  if (!bf16_) return LocalSgd<T>::expected_comm(step);
  const uint64_t bytes = static_cast<uint64_t>(padded()) * 2;
  return {{"dp", CommOp::all_to_all, dp, 1, bytes}, {"dp", CommOp::all_gather, dp, 1, bytes}};
}

template <class T>
MemoryExpectation DiLoCo<T>::expected_memory() const {
  MemoryExpectation e = LocalSgd<T>::expected_memory();
  e.optimizer += this->bytes(this->n()) * (mu_ > 0 ? 2 : 1);
  return e;
}

template <class T>
int64_t DiLoCo<T>::workspace_bound() const {
  const int64_t chunk = padded() / this->dp().size();
  return this->bytes(this->n()) + (bf16_ ? 2 * padded() * 2 + this->bytes(chunk) + 2 * chunk : 0);
}

template class DiLoCo<float>;
template class DiLoCo<double>;

namespace {

// The twin: replicas step serially; at the end of a round the outer gradient is the mean
// of (anchor - params_r) over replicas in replica order (rounded to bf16 per replica and
// again after the mean with outer_dtype "bfloat16"), then the Nesterov outer step.
template <class T>
class DiLoCoTwin final : public SerialRounds<T> {
 public:
  explicit DiLoCoTwin(const StrategyContext<T>& ctx)
      : SerialRounds<T>(ctx), lr_(ctx.config.template option<double>("outer_lr")), mu_(ctx.config.template option<double>("outer_momentum")),
        bf16_(ctx.config.template option<std::string>("outer_dtype") == "bfloat16"),
        anchor_(this->n()), momentum_(this->n(), T(0)) {
    // The replicas' parameters are the backend's memory (a GPU's, on a reduced-precision
    // backend, where a float32 twin runs): read only through download.
    this->backend().download(anchor_.data(), this->params(0), this->n());
  }

 private:
  T rounded(T x) const { return bf16_ ? static_cast<T>(bf16_value(bf16_bits(x))) : x; }
  void end_round() override {
    const int64_t n = this->n();
    std::vector<T> params(n), g(n, T(0));
    for (int r = 0; r < this->count(); ++r) {
      this->backend().download(params.data(), this->params(r), n);
      for (int64_t i = 0; i < n; ++i) g[i] += rounded(anchor_[i] - params[i]);
    }
    for (int64_t i = 0; i < n; ++i) {
      g[i] = rounded(g[i] * (T(1) / static_cast<T>(this->count())));
      momentum_[i] = static_cast<T>(mu_) * momentum_[i] + g[i];
      anchor_[i] -= static_cast<T>(lr_) * (g[i] + static_cast<T>(mu_) * momentum_[i]);
    }
    for (int r = 0; r < this->count(); ++r) this->backend().upload(this->params(r), anchor_.data(), n);
  }
  double lr_, mu_;
  bool bf16_;
  std::vector<T> anchor_, momentum_;
};

}  // namespace

StrategyInfo diloco_entry(std::string name, std::optional<DpAlgorithm> algorithm) {
  StrategyInfo info = local_steps_entry(
      name, "DiLoCo: H inner steps per replica, then the mean parameter delta is the gradient of an outer Nesterov SGD",
      algorithm ? *algorithm : dp_algorithm<DiLoCo>("diloco", 0));
  info.options.push_back({"outer_lr", OptionType::number, 0.7, "-", "DiLoCo outer learning rate"});
  info.options.push_back({"outer_momentum", OptionType::number, 0.9, "-", "DiLoCo outer Nesterov momentum (0: none)"});
  info.options.push_back({"outer_dtype", OptionType::string, std::string("same"), "-",
                          "DiLoCo outer gradient on the wire: same (the parameters' dtype) or bfloat16"});
  info.validate = [validate = info.validate](const CaseConfig& c, const WorkloadSpec& w) {
    validate(c, w);
    const double lr = c.option<double>("outer_lr"), mu = c.option<double>("outer_momentum");
    if (!std::isfinite(lr) || lr <= 0) throw CaseError("outer_lr", "outer_lr must be a positive finite number");
    if (!std::isfinite(mu) || mu < 0 || mu >= 1) throw CaseError("outer_momentum", "outer_momentum must be in [0, 1)");
    const std::string& d = c.option<std::string>("outer_dtype");
    if (d != "same" && d != "bfloat16")
      throw CaseError("outer_dtype", "unknown outer_dtype '" + d + "'; known: same, bfloat16");
  };
  info.reference = twin_reference<DiLoCoTwin>(name + "-twin");
  // The identity entry (H = 1 against the oracle) holds with outer SGD at lr 1 and no
  // momentum: the outer step then sets the anchor to the replicas' mean.
  return with_matrix(std::move(info),
                     {{"identity",
                       {{"reference", {"oracle"}}, {"sync_every", {1}}, {"outer_lr", {1.0}}, {"outer_momentum", {0.0}},
                        {"dp", {2, 4}}, {"dtype", {"float64", "float32"}}, {"global_batch", {24}}},
                       true},
                      {"diloco-bf16",
                       {{"outer_dtype", {"bfloat16"}}, {"outer_momentum", {0.9, 0.0}}, {"sync_every", {2}},
                        {"dp", {2, 3, 4}}, {"dtype", {"float64", "float32"}}, {"global_batch", {24}}}}});
}

}  // namespace pts
