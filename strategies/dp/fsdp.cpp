#include "strategies/dp/fsdp.hpp"

#include <algorithm>

namespace pts {

template <class T>
void Fsdp<T>::attach(Model<T>& model) {
  Zero<T>::attach(model);
  const FlatLayout& l = this->layout();
  param_shard_ = Tensor<T>(this->memory(), MemCategory::param, {l.shard_total()});
  gathered_.resize(l.units.size());
  gather_req_.resize(l.units.size());
  const int64_t r = this->dp().rank();
  for (size_t u = 0; u < l.units.size(); ++u) {
    // This rank's slice of unit u, in canonical indices; past the unit's end is padding.
    const ParamUnit& pu = l.units[u];
    const int64_t s = l.shard_numel(u), lo = pu.offset + r * s;
    const int64_t hi = std::min(lo + s, pu.offset + pu.numel);
    if (hi > lo) model.init_params(lo, hi, param_shard_.data() + l.shard_offset(u));
  }
}

template <class T>
void Fsdp<T>::start_gather(size_t u) {
  if (!gathered_[u].empty() || gather_req_[u]) return;
  const FlatLayout& l = this->layout();
  gathered_[u] = Tensor<T>(this->memory(), MemCategory::comm, {l.padded_numel(u)});
  gather_req_[u] = this->dp().iall_gather(param_shard_.data() + l.shard_offset(u), gathered_[u].data(),
                                          l.shard_numel(u), dtype_of<T>());
}

template <class T>
void Fsdp<T>::ensure_gathered(size_t u) {
  start_gather(u);
  if (gather_req_[u]) {
    gather_req_[u]->wait();
    gather_req_[u].reset();
  }
  this->model().bind_unit(u, gathered_[u].data(), nullptr);
}

template <class T>
UnitHooks Fsdp<T>::hooks(int step) {
  UnitHooks h = Zero<T>::hooks(step);  // gradient staging and reduce-scatter
  const bool prefetch = this->config().prefetch;
  const size_t units = this->layout().units.size();
  h.before_forward = [this, prefetch, units](size_t u) {
    ensure_gathered(u);
    if (prefetch && u + 1 < units) start_gather(u + 1);
    this->progress(gather_req_);
  };
  if (reshards(this->config())) h.after_forward = [this](size_t u) { release(gathered_[u]); };
  h.before_backward = [this, prefetch, stage = h.before_backward](size_t u) {
    gather_for_backward(u);
    if (prefetch && u > 0) start_gather(u - 1);
    stage(u);
  };
  h.after_backward = [this, scatter = h.after_backward](size_t u) {
    scatter(u);
    release(gathered_[u]);
    this->progress(gather_req_);
  };
  return h;
}

template <class T>
void Fsdp<T>::update_params() {
  // The optimizer runs on the shard itself; nothing to gather until the next forward.
  Tensor<T>& g = this->grad_shard();
  this->update_shard(param_shard_.data(), g.data(), 0, g.numel());
}

template <class T>
std::vector<double> Fsdp<T>::local_params(Comm& dp_side) {
  // Gather every dp rank's shard, then undo the per-unit interleaving.
  const FlatLayout& l = this->layout();
  const int64_t S = l.shard_total(), n = dp_side.size();
  std::vector<T> mine(S), all(S * n);
  this->backend().download(mine.data(), param_shard_.data(), S);
  dp_side.all_gather(mine.data(), all.data(), S, dtype_of<T>());
  std::vector<double> local(this->model().num_params());
  for (size_t u = 0; u < l.units.size(); ++u) {
    const ParamUnit& pu = l.units[u];
    const int64_t s = l.shard_numel(u);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t i = 0; i < s && r * s + i < pu.numel; ++i) local[pu.offset + r * s + i] = all[r * S + l.shard_offset(u) + i];
  }
  return local;
}

template <class T>
DpStatement Fsdp<T>::statement(const DpShape& s, int) {
  const FlatLayout& l = s.layout;
  const int64_t shard = s.bytes(l.shard_total());
  DpStatement st{Zero<T>::comm_of(s, reshards(s.config) ? 2 : 1), {shard, shard, s.state_bytes(l.shard_total())},
                 Zero<T>::workspace_of(s, 3)};
  // Gathered units alive at once: one, or two with prefetch; every unit when forward keeps
  // them for backward.
  st.memory.comm_max = reshards(s.config) ? s.bytes(l.largest_padded_unit()) * (s.config.prefetch ? 2 : 1)
                                          : s.bytes(l.padded_total());
  return st;
}

template <class T>
MemoryExpectation Fsdp<T>::expected_memory() const {
  return statement(this->shape(), 0).memory;
}

template class Fsdp<float>;
template class Fsdp<double>;

}  // namespace pts
