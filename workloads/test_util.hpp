// What the workloads' tests check alike: gradients read back, and that microbatches and
// pipeline stages reproduce the whole batch through the whole model.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "workloads/data.hpp"

namespace pts {

inline std::vector<double> grads_of(Model<double>& m) {
  return std::vector<double>(m.grads().data(), m.grads().data() + m.num_params());
}

// Two microbatches accumulated (each normalised by the whole batch) give the whole batch's
// loss and gradient; the model cut into two stages (embedding + block 0, block 1 + head) and
// run one after the other gives the whole model's, each stage's gradients at their canonical
// offsets.
inline void expect_microbatches_and_stages_equal_whole_batch(const WorkloadSpec& w) {
  MemoryTracker mem;
  auto be = make_cpu_backend<double>();
  const int64_t rows = 4;
  DataSource data(w, 9);
  Batch<double> b = make_batch<double>(w, mem, rows);
  data.fill(2, rows, 0, rows, b, *be);
  auto whole = make_model<double>(w, *be, mem, 9);
  const double loss = whole->forward_backward(b, rows);
  const std::vector<double> g = grads_of(*whole);

  auto acc = make_model<double>(w, *be, mem, 9);
  double loss2 = 0;
  for (int k = 0; k < 2; ++k) {
    Micro<double> mb{&b, 2 * k, 2, double(rows)};
    loss2 += acc->forward(k, mb, nullptr, nullptr);
    acc->backward(k, mb, nullptr, nullptr, {}, k > 0);
  }
  EXPECT_NEAR(loss2, loss, 1e-14);
  const std::vector<double> g2 = grads_of(*acc);
  for (size_t i = 0; i < g.size(); ++i) ASSERT_NEAR(g2[i], g[i], 1e-14 * (1 + std::abs(g[i]))) << i;

  ModelShard s0, s1;
  s0.end_block = 2;
  s1.first_block = 2;
  auto m0 = make_model<double>(w, *be, mem, 9, {}, s0);
  auto m1 = make_model<double>(w, *be, mem, 9, {}, s1);
  ASSERT_EQ(m0->num_params() + m1->num_params(), w.num_params());
  EXPECT_EQ(m1->in_per_row(), w.seq * w.embd);
  Micro<double> mb{&b, 0, rows, double(rows)};
  std::vector<double> act(rows * m0->out_per_row()), dact(act.size());
  m0->forward(0, mb, nullptr, act.data());
  EXPECT_EQ(m1->forward(0, mb, act.data(), nullptr), loss);
  m1->backward(0, mb, nullptr, dact.data());
  m0->backward(0, mb, dact.data(), nullptr);
  std::vector<double> joined(w.num_params());
  for (auto* m : {m0.get(), m1.get()})
    for (const Segment& sg : m->segments())
      for (int64_t i = 0; i < sg.count; ++i) joined[sg.canonical + i] = m->grads()[sg.local + i];
  for (size_t i = 0; i < g.size(); ++i) ASSERT_EQ(joined[i], g[i]) << i;
}

}  // namespace pts
