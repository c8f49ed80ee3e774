// The GPT workload and the block model: parameter counts, every gradient against central
// finite differences in float64, microbatch accumulation and stage splitting equal to the
// whole model, and a loss that falls on the synthetic token stream.
#include <gtest/gtest.h>

#include <cmath>

#include "core/optimizer.hpp"
#include "workloads/data.hpp"
#include "workloads/gpt.hpp"
#include "workloads/test_util.hpp"

namespace pts {
namespace {

// Small enough to sweep every parameter by finite differences.
WorkloadSpec fd_gpt() { return {"fd", "gpt", "", 0, 0, 0, 0, 2, 2, 8, 5, 11}; }

TEST(Gpt, ParameterCounts) {
  const WorkloadSpec& g2 = *find_workload("gpt2-124m");
  // GPT-2 small is 124,439,808 parameters with the head tied to wte; the untied head adds V*C.
  EXPECT_EQ(g2.num_params(), 124439808 + 50257 * 768);
  const WorkloadSpec w = fd_gpt();
  const int64_t C = 8, block = 12 * C * C + 13 * C;
  EXPECT_EQ(w.num_params(), 11 * C + 5 * C + 2 * block + 2 * C + 11 * C);
  MemoryTracker mem;
  auto be = make_cpu_backend<double>();
  auto m = make_model<double>(w, *be, mem, 1);
  EXPECT_EQ(m->num_params(), w.num_params());
  EXPECT_EQ(m->layout().units.size(), 4u);  // embedding, 2 blocks, head
  EXPECT_EQ(num_blocks(w), 4);
}

// d loss / d p by central differences with h = 1e-6: truncation O(h^2) and rounding
// ~1e-16/h leave ~1e-9 relative; 1e-6 relative with a 1e-8 floor separates right from wrong.
TEST(Gpt, GradientsMatchFiniteDifferences) {
  const WorkloadSpec w = fd_gpt();
  MemoryTracker mem;
  auto be = make_cpu_backend<double>();
  auto model = make_model<double>(w, *be, mem, 5);
  Model<double>& m = *model;
  // Perturb LayerNorm gains and biases away from 1 and 0 so their gradients are generic.
  for (int64_t i = 0; i < m.num_params(); ++i) m.params()[i] += 0.02 * std::sin(double(3 * i + 1));
  DataSource data(w, 5);
  const int64_t rows = 3;
  Batch<double> b = make_batch<double>(w, mem, rows);
  data.fill(0, rows, 0, rows, b, *be);
  m.forward_backward(b, rows);
  std::vector<double> analytic = grads_of(m);
  const double h = 1e-6;
  for (int64_t i = 0; i < m.num_params(); ++i) {
    const double p = m.params()[i];
    auto loss_at = [&](double v) {
      m.params()[i] = v;
      return m.forward_backward(b, rows);
    };
    const double fd = (loss_at(p + h) - loss_at(p - h)) / (2 * h);
    m.params()[i] = p;
    ASSERT_NEAR(analytic[i], fd, 1e-6 * std::abs(fd) + 1e-8) << "parameter " << i;
  }
}

TEST(Gpt, MicrobatchesAndStagesEqualTheWholeBatch) { expect_microbatches_and_stages_equal_whole_batch(fd_gpt()); }

TEST(Gpt, LossFallsOnTheMarkovStream) {
  const WorkloadSpec& w = *find_workload("gpt-tiny");
  MemoryTracker mem;
  auto be = make_cpu_backend<float>();
  auto m = make_model<float>(w, *be, mem, 3);
  Optimizer<float> opt({"adamw", 3e-3}, *be, mem, m->num_params());
  DataSource data(w, 3);
  const int64_t rows = 16;
  Batch<float> b = make_batch<float>(w, mem, rows);
  auto mean_loss = [&](int first, int steps, bool train) {
    double sum = 0;
    for (int s = first; s < first + steps; ++s) {
      data.fill(s, rows, 0, rows, b, *be);
      sum += m->forward_backward(b, rows);
      if (train) opt.step(m->params().data(), m->grads().data());
    }
    return sum / steps;
  };
  const double before = mean_loss(0, 5, false);
  EXPECT_NEAR(before, std::log(double(w.vocab)), 0.3);  // untrained: about uniform
  mean_loss(0, 150, true);
  const double after = mean_loss(1000, 5, false);
  EXPECT_LT(after, before - 1.0) << "before " << before << " after " << after;
}

}  // namespace
}  // namespace pts
