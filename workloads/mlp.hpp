// The MLP workload: L hidden layers of width W with GELU, then a C-class softmax head.
// Parameters in canonical order W0 b0 W1 b1 ... WL bL (W row-major [in, out]); each layer
// is one unit. Dimension legend: B = batch rows, D = input dim, W = width, C = classes.
#pragma once
#include <vector>

#include "core/rng.hpp"
#include "workloads/layers.hpp"
#include "workloads/workload.hpp"

namespace pts {

int64_t mlp_num_params(const WorkloadSpec& s);

// RNG streams of the parameter tensors: weight of layer l is stream kParamStream + 2l.
inline constexpr uint64_t kParamStream = 1000;

template <class T>
class Mlp final : public Model<T> {
 public:
  Mlp(const WorkloadSpec& spec, Backend<T>& backend, MemoryTracker& mem, uint64_t seed, int64_t max_rows,
      const ModelStorage& storage = {});
  const FlatLayout& layout() const override { return layout_; }
  Tensor<T>& params() override { return params_; }
  Tensor<T>& grads() override { return grads_; }
  void bind_unit(size_t u, T* params, T* grads) override { layers_.at(u).bind(params, grads); }
  void init_params(int64_t begin, int64_t end, T* out) const override;
  double forward_backward(const Batch<T>& batch, double norm, const UnitHooks& hooks = {},
                          bool accumulate = false) override;

 private:
  Backend<T>& be_;
  uint64_t seed_;
  FlatLayout layout_;
  Tensor<T> params_, grads_;
  std::vector<Linear<T>> layers_;
  std::vector<Tensor<T>> pre_, post_;  // per layer: pre-activation h_l [B,O], post-GELU a_l
  Tensor<T> grad_a_, grad_b_;          // ping-pong activation-gradient buffers [B, max width]
  int64_t max_rows_;
};

}  // namespace pts
