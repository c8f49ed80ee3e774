#include "strategies/dp/ddp.hpp"

#include <algorithm>

namespace pts {

std::vector<Bucket> make_buckets(int64_t n, int64_t bucket_elems) {
  std::vector<Bucket> out;
  bucket_elems = std::max<int64_t>(bucket_elems, 1);
  for (int64_t end = n; end > 0; end -= bucket_elems) out.push_back({std::max<int64_t>(0, end - bucket_elems), end});
  return out;
}

template <class T>
void Ddp<T>::attach(Model<T>& model) {
  DpSync<T>::attach(model);
  const int64_t n = this->layout().padded_total();
  opt_ = std::make_unique<Optimizer<T>>(this->config().optimizer, this->backend(), this->memory(), n);
  buckets_ = make_buckets(n, this->config().bucket_bytes / static_cast<int64_t>(sizeof(T)));
}

template <class T>
RequestPtr Ddp<T>::reduce_bucket(size_t, T* data, int64_t n) {
  return this->dp().iall_reduce(data, data, n, dtype_of<T>());
}

template <class T>
void Ddp<T>::launch_ready(int64_t finished_from) {
  T* g = this->model().grads().data();
  for (; next_bucket_ < buckets_.size() && buckets_[next_bucket_].begin >= finished_from; ++next_bucket_) {
    const Bucket& b = buckets_[next_bucket_];
    RequestPtr r = reduce_bucket(next_bucket_, g + b.begin, b.end - b.begin);
    if (!r) continue;
    if (!this->config().overlap) r->wait();  // blocking form, for comparison
    pending_.push_back(std::move(r));
  }
}

template <class T>
UnitHooks Ddp<T>::hooks(int) {
  next_bucket_ = 0;
  UnitHooks h;
  if (this->dp().size() > 1 && this->config().overlap) h.after_backward = [this](size_t u) {
    launch_ready(this->layout().units[u].offset);
    this->progress(pending_);
  };
  return h;
}

template <class T>
void Ddp<T>::finish_step(int) {
  Model<T>& m = this->model();
  if (this->dp().size() > 1) {
    launch_ready(0);  // whatever backward has not launched yet (all of it without overlap)
    this->wait_all(pending_);
    this->average(m.grads().data(), m.grads().numel());
  }
  opt_->step(m.params().data(), m.grads().data());
}

template <class T>
DpStatement Ddp<T>::statement(const DpShape& s, int) {
  DpStatement st;
  const int64_t n = s.layout.padded_total(), full = s.bytes(n);
  // Nothing to synchronise at dp 1; else the buckets attach() cuts.
  if (s.dp > 1)
    st.comm = {{"dp", CommOp::all_reduce, s.dp, make_buckets(n, s.config.bucket_bytes / s.elem_bytes).size(),
                static_cast<uint64_t>(full)}};
  st.memory = {full, full, s.state_bytes(n)};
  return st;
}

template <class T>
std::vector<ExpectedOp> Ddp<T>::expected_comm(int step) const {
  return statement(this->shape(), step).comm;
}

template <class T>
MemoryExpectation Ddp<T>::expected_memory() const {
  return statement(this->shape(), 0).memory;
}

template class Ddp<float>;
template class Ddp<double>;

}  // namespace pts
