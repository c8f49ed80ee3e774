// An optimizer over one contiguous range of a flat parameter buffer: its state has the
// range's length, so a ZeRO shard is just a shorter range. Memory: SGD with momentum holds
// one buffer (n elements), AdamW two (m and v).
#pragma once
#include <string>

#include "core/backend/backend.hpp"
#include "core/tensor.hpp"

namespace pts {

struct OptimizerConfig {
  std::string kind = "sgd";  // sgd | adamw
  double lr = 0.1, momentum = 0.9, weight_decay = 0.0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;
  // Optimizer-state elements per parameter element.
  int state_per_param() const { return kind == "adamw" ? 2 : 1; }
};

template <class T>
class Optimizer {
 public:
  Optimizer(const OptimizerConfig& cfg, Backend<T>& backend, MemoryTracker& mem, int64_t n)
      : cfg_(cfg), backend_(backend), n_(n) {
    state_ = Tensor<T>(mem, MemCategory::optimizer, {cfg.state_per_param() * n});
  }
  // One update of p[0..n) with gradient g[0..n).
  void step(T* p, const T* g) {
    begin_step();
    update(p, g, 0, n_);
  }
  // The same in pieces, for state that is updated in several slices per step: begin_step()
  // once, then update() for each slice [state_offset, state_offset + n) of the state.
  void begin_step() { ++t_; }
  void update(T* p, const T* g, int64_t state_offset, int64_t n) {
    PTS_REQUIRE(state_offset >= 0 && state_offset + n <= n_, "optimizer slice out of range");
    T* m = state_.data() + state_offset;
    if (cfg_.kind == "adamw") {
      backend_.adamw(p, g, m, state_.data() + n_ + state_offset, n,
                     {cfg_.lr, cfg_.beta1, cfg_.beta2, cfg_.eps, cfg_.weight_decay}, t_);
    } else {
      backend_.sgd_momentum(p, g, m, n, {cfg_.lr, cfg_.momentum, cfg_.weight_decay});
    }
  }

 private:
  OptimizerConfig cfg_;
  Backend<T>& backend_;
  int64_t n_;
  int64_t t_ = 0;
  Tensor<T> state_;
};

}  // namespace pts
