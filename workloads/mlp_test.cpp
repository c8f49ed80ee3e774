// The MLP workload: gradients of every layer against central finite differences in
// float64, data that is a pure function of (seed, step, sample), and a loss that falls
// under single-device training.
#include <gtest/gtest.h>

#include <cmath>
#include <set>

#include "core/optimizer.hpp"
#include "workloads/data.hpp"
#include "workloads/mlp.hpp"

namespace pts {
namespace {

const WorkloadSpec& tiny() { return *find_workload("mlp-tiny"); }

// A smaller shape than mlp-tiny keeps the finite-difference sweep over every parameter fast.
WorkloadSpec fd_shape() { return {"fd", "mlp", "", 5, 7, 2, 4}; }

TEST(Mlp, ParameterCountAndFlops) {
  const WorkloadSpec& w = tiny();  // 32 -> 64 -> 64 -> 10
  EXPECT_EQ(w.num_params(), 32 * 64 + 64 + 64 * 64 + 64 + 64 * 10 + 10);
  EXPECT_EQ(w.flops_per_sample(), 4.0 * 32 * 64 + 6.0 * 64 * 64 + 6.0 * 64 * 10);
  EXPECT_EQ(find_workload("mlp-medium")->width, 1024);
  EXPECT_EQ(find_workload("mlp-medium")->hidden_layers, 4);
  EXPECT_EQ(find_workload("nope"), nullptr);
}

// Every layer's backward (linear weight and bias, GELU, softmax cross-entropy) through the
// whole model: d loss / d p_i by central differences with h = 1e-6 has truncation error
// O(h^2) ~ 1e-12 and rounding error ~ 1e-16 / h = 1e-10, so 1e-7 relative (with a 1e-9
// absolute floor for near-zero gradients) separates a correct backward from a wrong one.
TEST(Mlp, GradientsMatchFiniteDifferences) {
  WorkloadSpec w = fd_shape();
  MemoryTracker mem;
  auto be = make_cpu_backend<double>();
  const int64_t rows = 6;
  auto model = make_model<double>(w, *be, mem, 7);
  Model<double>& m = *model;
  // Non-zero biases so their gradients flow through GELU at generic points.
  for (int64_t i = 0; i < m.num_params(); ++i) m.params()[i] += 0.01 * std::sin(double(i));
  DataSource data(w, 7);
  Batch<double> b = make_batch<double>(w, mem, rows);
  data.fill(0, rows, 0, rows, b, *be);
  m.grads().zero();
  m.forward_backward(b, rows, {});
  std::vector<double> analytic(m.grads().data(), m.grads().data() + m.num_params());
  const double h = 1e-6;
  int checked = 0;
  for (int64_t i = 0; i < m.num_params(); ++i) {
    double p = m.params()[i];
    auto loss_at = [&](double v) {
      m.params()[i] = v;
      m.grads().zero();
      return m.forward_backward(b, rows, {});
    };
    double fd = (loss_at(p + h) - loss_at(p - h)) / (2 * h);
    m.params()[i] = p;
    EXPECT_NEAR(analytic[i], fd, 1e-7 * std::abs(fd) + 1e-9) << "parameter " << i;
    ++checked;
  }
  EXPECT_EQ(checked, w.num_params());
}

TEST(Mlp, HooksRunAroundEveryUnitInOrder) {
  const WorkloadSpec& w = tiny();
  MemoryTracker mem;
  auto be = make_cpu_backend<double>();
  auto model = make_model<double>(w, *be, mem, 1);
  Model<double>& m = *model;
  Batch<double> b = make_batch<double>(w, mem, 4);
  DataSource(w, 1).fill(0, 4, 0, 4, b, *be);
  std::vector<std::string> seen;
  auto log = [&](const char* what) { return [&seen, what](size_t u) { seen.push_back(what + std::to_string(u)); }; };
  m.forward_backward(b, 4, {log("f"), log("F"), log("b"), log("B")});
  EXPECT_EQ(seen, (std::vector<std::string>{"f0", "F0", "f1", "F1", "f2", "F2", "b2", "B2", "b1", "B1", "b0", "B0"}));
  const int64_t l0 = 32 * 64 + 64, l1 = 64 * 64 + 64;
  ASSERT_EQ(m.layout().units.size(), 3u);
  EXPECT_EQ(m.layout().units[1].offset, l0);
  EXPECT_EQ(m.layout().units[2].offset, l0 + l1);
}

TEST(TeacherData, AnySliceEqualsTheWholeBatch) {
  const WorkloadSpec& w = tiny();
  MemoryTracker mem;
  TeacherData data(w, 99);
  const int64_t global = 12;
  Batch<double> whole = make_batch<double>(w, mem, global);
  data.fill(3, global, 0, global, whole);
  for (int64_t parts : {2, 3, 4}) {
    for (int64_t p = 0; p < parts; ++p) {
      const int64_t n = global / parts;
      Batch<double> part = make_batch<double>(w, mem, n);
      data.fill(3, global, p * n, n, part);
      for (int64_t s = 0; s < n; ++s) {
        EXPECT_EQ(part.labels[s], whole.labels[p * n + s]);
        for (int64_t j = 0; j < w.in_dim; ++j) EXPECT_EQ(part.x_host[s * w.in_dim + j], whole.x_host[(p * n + s) * w.in_dim + j]);
      }
    }
  }
  // float inputs are the rounded double inputs; labels do not depend on the dtype.
  Batch<float> wf = make_batch<float>(w, mem, global);
  data.fill(3, global, 0, global, wf);
  for (int64_t s = 0; s < global; ++s) EXPECT_EQ(wf.labels[s], whole.labels[s]);
  EXPECT_EQ(wf.x_host[5], static_cast<float>(whole.x_host[5]));
  // Another step is another batch; the labels use more than one class.
  Batch<double> next = make_batch<double>(w, mem, global);
  data.fill(4, global, 0, global, next);
  EXPECT_NE(next.x_host[0], whole.x_host[0]);
  std::set<int32_t> classes(whole.labels.begin(), whole.labels.end());
  EXPECT_GT(classes.size(), 2u);
}

TEST(Mlp, LossFallsUnderSingleDeviceTraining) {
  const WorkloadSpec& w = tiny();
  MemoryTracker mem;
  auto be = make_cpu_backend<double>();
  const int64_t batch = 64;
  auto model = make_model<double>(w, *be, mem, 3);
  Model<double>& m = *model;
  Optimizer<double> opt({"sgd", 0.1, 0.9}, *be, mem, m.num_params());
  DataSource data(w, 3);
  Batch<double> b = make_batch<double>(w, mem, batch);
  auto mean_loss = [&](int first_step, int steps, bool train) {
    double sum = 0;
    for (int s = first_step; s < first_step + steps; ++s) {
      data.fill(s, batch, 0, batch, b, *be);
      m.grads().zero();
      sum += m.forward_backward(b, batch, {});
      if (train) opt.step(m.params().data(), m.grads().data());
    }
    return sum / steps;
  };
  double before = mean_loss(0, 10, true);
  for (int epoch = 0; epoch < 20; ++epoch) mean_loss(10 + 10 * epoch, 10, true);
  double after = mean_loss(1000, 10, false);  // fresh batches: generalisation, not memory
  EXPECT_LT(after, 0.6 * before) << "before " << before << " after " << after;
}

}  // namespace
}  // namespace pts
