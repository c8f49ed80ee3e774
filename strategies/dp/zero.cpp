#include "strategies/dp/zero.hpp"

namespace pts {

template <class T>
void Zero<T>::attach(Model<T>& model) {
  DpSync<T>::attach(model);
  const int64_t S = this->layout().shard_total();
  opt_ = std::make_unique<Optimizer<T>>(this->config().optimizer, this->backend(), this->memory(), S);
  // zero1 receives the reduced shard in a workspace buffer; zero2 and fsdp keep it as the
  // rank's only gradient storage.
  grad_shard_ = Tensor<T>(this->memory(), stage_ == 1 ? MemCategory::workspace : MemCategory::grad, {S});
  staging_.resize(this->layout().units.size());
}

template <class T>
void Zero<T>::reduce_scatter_unit(size_t u, const T* full_grad) {
  const FlatLayout& l = this->layout();
  RequestPtr r = this->dp().ireduce_scatter(full_grad, grad_shard_.data() + l.shard_offset(u), l.shard_numel(u),
                                            dtype_of<T>());
  if (this->config().overlap) pending_.push_back(std::move(r));
  else r->wait();
}

template <class T>
UnitHooks Zero<T>::hooks(int) {
  UnitHooks h;
  if (stage_ < 2) return h;
  h.before_backward = [this](size_t u) {
    staging_[u] = Tensor<T>(this->memory(), MemCategory::workspace, {this->layout().padded_numel(u)});
    this->model().bind_unit(u, nullptr, staging_[u].data());
  };
  h.after_backward = [this](size_t u) {
    reduce_scatter_unit(u, staging_[u].data());
    if (!this->config().overlap) staging_[u] = Tensor<T>();
    this->progress(pending_);
  };
  return h;
}

template <class T>
void Zero<T>::update_shard(T* params, const T* grads, int64_t state_offset, int64_t n) {
  opt_->update(params, grads, state_offset, n);
}

template <class T>
void Zero<T>::update_params() {
  const FlatLayout& l = this->layout();
  T* p = this->model().params().data();
  const int64_t r = this->dp().rank();
  for (size_t u = 0; u < l.units.size(); ++u) {
    const int64_t s = l.shard_numel(u);
    update_shard(p + l.padded_offset(u) + r * s, grad_shard_.data() + l.shard_offset(u), l.shard_offset(u), s);
  }
  for (size_t u = 0; u < l.units.size(); ++u) {
    const int64_t s = l.shard_numel(u), off = l.padded_offset(u);
    this->dp().all_gather(p + off + r * s, p + off, s, dtype_of<T>());  // in place
  }
}

template <class T>
void Zero<T>::finish_step(int) {
  const FlatLayout& l = this->layout();
  if (stage_ == 1)
    for (size_t u = 0; u < l.units.size(); ++u)
      reduce_scatter_unit(u, this->model().grads().data() + l.padded_offset(u));
  this->wait_all(pending_);
  for (auto& s : staging_) s = Tensor<T>();
  this->average(grad_shard_.data(), grad_shard_.numel());
  opt_->begin_step();
  update_params();
}

template <class T>
std::vector<ExpectedOp> Zero<T>::comm_of(const DpShape& s, uint64_t gathers) {
  const uint64_t units = s.layout.units.size();
  const uint64_t bytes = static_cast<uint64_t>(s.bytes(s.layout.padded_total()));
  return {{"dp", CommOp::reduce_scatter, s.dp, units, bytes},
          {"dp", CommOp::all_gather, s.dp, gathers * units, gathers * bytes}};
}

template <class T>
int64_t Zero<T>::workspace_of(const DpShape& s, int stage) {
  if (stage == 1) return s.bytes(s.layout.shard_total());
  // A unit's staging buffer lives from its first backward to its reduce-scatter: after its
  // last backward without overlap and with one microbatch, else to the end of the step.
  const bool one_at_a_time = !s.config.overlap && microbatches_of(s.config) == 1;
  return s.bytes(one_at_a_time ? s.layout.largest_padded_unit() : s.layout.padded_total());
}

template <class T>
DpStatement Zero<T>::statement(const DpShape& s, int, int stage) {
  const int64_t full = s.bytes(s.layout.padded_total()), shard = s.bytes(s.layout.shard_total());
  return {comm_of(s, 1), {full, stage == 1 ? full : shard, s.state_bytes(s.layout.shard_total())},
          workspace_of(s, stage)};
}

template <class T>
std::vector<ExpectedOp> Zero<T>::expected_comm(int) const {
  return comm_of(this->shape(), gathers_per_unit());
}

template <class T>
MemoryExpectation Zero<T>::expected_memory() const {
  return statement(this->shape(), 0, stage_).memory;
}

template <class T>
int64_t Zero<T>::workspace_bound() const {
  return workspace_of(this->shape(), stage_);
}

template class Zero<float>;
template class Zero<double>;

}  // namespace pts
