#include "workloads/mlp.hpp"

#include <algorithm>
#include <cmath>

namespace pts {

namespace {
// (in, out) of every linear layer.
std::vector<std::pair<int64_t, int64_t>> mlp_shapes(const WorkloadSpec& s) {
  std::vector<std::pair<int64_t, int64_t>> shapes;
  int64_t in = s.in_dim;
  for (int64_t l = 0; l <= s.hidden_layers; ++l) {
    int64_t out = l < s.hidden_layers ? s.width : s.classes;
    shapes.emplace_back(in, out);
    in = out;
  }
  return shapes;
}
}  // namespace

int64_t mlp_num_params(const WorkloadSpec& s) {
  int64_t n = 0;
  for (auto [in, out] : mlp_shapes(s)) n += in * out + out;
  return n;
}

template <class T>
Mlp<T>::Mlp(const WorkloadSpec& spec, Backend<T>& backend, MemoryTracker& mem, uint64_t seed, int64_t max_rows,
            const ModelStorage& storage)
    : be_(backend), seed_(seed), max_rows_(max_rows) {
  auto shapes = mlp_shapes(spec);
  int64_t off = 0, widest = 0;
  for (auto [in, out] : shapes) {
    Linear<T> lin;
    lin.in = in;
    lin.out = out;
    layout_.units.push_back({off, lin.numel()});
    off += lin.numel();
    widest = std::max({widest, in, out});
    layers_.push_back(lin);
  }
  layout_.pad_to = storage.pad_to;
  if (storage.own_params) params_ = Tensor<T>(mem, MemCategory::param, {layout_.padded_total()});
  if (storage.own_grads) grads_ = Tensor<T>(mem, MemCategory::grad, {layout_.padded_total()});
  for (size_t u = 0; u < layers_.size(); ++u) {
    int64_t p = layout_.padded_offset(u);
    layers_[u].bind(storage.own_params ? params_.data() + p : nullptr, storage.own_grads ? grads_.data() + p : nullptr);
    if (storage.own_params) init_params(layout_.units[u].offset, layout_.units[u].offset + layout_.units[u].numel,
                                        params_.data() + p);
  }
  for (size_t l = 0; l < shapes.size(); ++l) {
    pre_.emplace_back(mem, MemCategory::activation, Shape{max_rows, shapes[l].second});
    post_.emplace_back(mem, MemCategory::activation,
                       Shape{l + 1 < shapes.size() ? max_rows : 0, shapes[l].second});
  }
  grad_a_ = Tensor<T>(mem, MemCategory::activation, {max_rows, widest});
  grad_b_ = Tensor<T>(mem, MemCategory::activation, {max_rows, widest});
}

template <class T>
void Mlp<T>::init_params(int64_t begin, int64_t end, T* out) const {
  // Weights ~ N(0, 1/in) (LeCun), biases zero; element i of W_l is a pure function of
  // (seed, stream of W_l, i). Indices past the last parameter (padding) are zero.
  for (size_t u = 0; u < layers_.size(); ++u) {
    const Linear<T>& lin = layers_[u];
    const int64_t w0 = layout_.units[u].offset, b0 = w0 + lin.in * lin.out, e = w0 + lin.numel();
    const int64_t lo = std::max(begin, w0), hi = std::min(end, b0);
    if (lo < hi)
      CounterRng(seed_, kParamStream + 2 * u).fill_normal(out + (lo - begin), lo - w0, hi - lo, 1.0 / std::sqrt(double(lin.in)));
    for (int64_t i = std::max(begin, b0); i < std::min(end, e); ++i) out[i - begin] = T(0);
  }
  for (int64_t i = std::max(begin, this->num_params()); i < end; ++i) out[i - begin] = T(0);
}

template <class T>
double Mlp<T>::forward_backward(const Batch<T>& batch, double norm, const UnitHooks& hooks, bool accumulate) {
  const int64_t rows = batch.rows;
  PTS_REQUIRE(rows <= max_rows_, "batch larger than the model was built for");
  const int64_t num = static_cast<int64_t>(layers_.size());
  auto input_of = [&](int64_t l) { return l == 0 ? batch.x.data() : post_[l - 1].data(); };
  auto call = [](const std::function<void(size_t)>& f, int64_t u) {
    if (f) f(static_cast<size_t>(u));
  };

  for (int64_t l = 0; l < num; ++l) {
    call(hooks.before_forward, l);
    layers_[l].forward(be_, input_of(l), pre_[l].data(), rows);
    call(hooks.after_forward, l);
    if (l + 1 < num) be_.gelu_forward(pre_[l].data(), post_[l].data(), rows * layers_[l].out);
  }
  // dlogits into grad_a_; then walk back, alternating the two gradient buffers.
  T* dy = grad_a_.data();
  T* spare = grad_b_.data();
  double loss = be_.softmax_xent(pre_[num - 1].data(), batch.labels.data(), rows, layers_[num - 1].out, norm, dy);
  for (int64_t l = num - 1; l >= 0; --l) {
    T* dx = l > 0 ? spare : nullptr;
    call(hooks.before_backward, l);
    layers_[l].backward(be_, input_of(l), dy, dx, rows, accumulate);
    call(hooks.after_backward, l);
    if (l > 0) {
      // dh_{l-1} = gelu'(h_{l-1}) * da_{l-1}, in place.
      be_.gelu_backward(pre_[l - 1].data(), dx, dx, rows * layers_[l - 1].out);
      std::swap(dy, spare);
    }
  }
  return loss;
}

template class Mlp<float>;
template class Mlp<double>;

}  // namespace pts
