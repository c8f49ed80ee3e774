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
Mlp<T>::Mlp(const WorkloadSpec& spec, Backend<T>& backend, MemoryTracker& mem, uint64_t seed,
            int64_t max_rows)
    : be_(backend), max_rows_(max_rows) {
  const int64_t n = mlp_num_params(spec);
  params_ = Tensor<T>(mem, MemCategory::param, {n});
  grads_ = Tensor<T>(mem, MemCategory::grad, {n});
  int64_t off = 0, widest = 0;
  auto shapes = mlp_shapes(spec);
  for (size_t l = 0; l < shapes.size(); ++l) {
    auto [in, out] = shapes[l];
    Linear<T> lin;
    lin.in = in;
    lin.out = out;
    lin.w = params_.view(off, {in, out});
    lin.dw = grads_.view(off, {in, out});
    lin.b = params_.view(off + in * out, {out});
    lin.db = grads_.view(off + in * out, {out});
    // Weights ~ N(0, 1/in) (LeCun), biases zero: element i of W_l is a pure function of
    // (seed, stream of W_l, i), so any shard can generate its own slice.
    CounterRng(seed, kParamStream + 2 * l).fill_normal(lin.w.data(), 0, in * out, 1.0 / std::sqrt(double(in)));
    offsets_.push_back(off);
    off += in * out + out;
    widest = std::max({widest, in, out});
    pre_.emplace_back(mem, MemCategory::activation, Shape{max_rows, out});
    post_.emplace_back(mem, MemCategory::activation,
                       Shape{l + 1 < shapes.size() ? max_rows : 0, out});
    layers_.push_back(std::move(lin));
  }
  grad_a_ = Tensor<T>(mem, MemCategory::activation, {max_rows, widest});
  grad_b_ = Tensor<T>(mem, MemCategory::activation, {max_rows, widest});
}

template <class T>
double Mlp<T>::forward_backward(const Batch<T>& batch, double norm, const GradReadyFn& on_ready,
                                bool accumulate) {
  const int64_t rows = batch.rows;
  PTS_REQUIRE(rows <= max_rows_, "batch larger than the model was built for");
  const int64_t num = static_cast<int64_t>(layers_.size());
  auto input_of = [&](int64_t l) { return l == 0 ? batch.x.data() : post_[l - 1].data(); };

  for (int64_t l = 0; l < num; ++l) {
    layers_[l].forward(be_, input_of(l), pre_[l].data(), rows);
    if (l + 1 < num) be_.gelu_forward(pre_[l].data(), post_[l].data(), rows * layers_[l].out);
  }
  // dlogits into grad_a_; then walk back, alternating the two gradient buffers.
  T* dy = grad_a_.data();
  T* spare = grad_b_.data();
  double loss = be_.softmax_xent(pre_[num - 1].data(), batch.labels.data(), rows,
                                 layers_[num - 1].out, norm, dy);
  for (int64_t l = num - 1; l >= 0; --l) {
    T* dx = l > 0 ? spare : nullptr;
    layers_[l].backward(be_, input_of(l), dy, dx, rows, accumulate);
    if (on_ready) on_ready(offsets_[l]);
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
