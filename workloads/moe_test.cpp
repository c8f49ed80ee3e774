// The moe workload: parameter counts, the router's top-k, gates, capacity and dropping exactly
// as defined on crafted logits, drops in the real model, every gradient (router, experts,
// attention, embedding, head; without and with the auxiliary loss) against central finite
// differences in float64, the auxiliary loss at uniform routing, determinism, and microbatches
// and stages equal to the whole batch.
#include <gtest/gtest.h>

#include <cmath>

#include "workloads/data.hpp"
#include "workloads/gpt.hpp"
#include "workloads/test_util.hpp"

namespace pts {
namespace {

// Small enough to sweep every parameter by finite differences; capacity ceil(0.75 * 5 * 2 / 3)
// = 3 slots of 5 tokens, so some assignments drop.
WorkloadSpec fd_moe() { return {"fd-moe", "moe", "", 0, 0, 0, 0, 2, 2, 4, 5, 7, 3, 2, 0.75}; }

TEST(Moe, ParameterCounts) {
  const WorkloadSpec w = fd_moe();
  const int64_t C = 4, F = 16, E = 3;
  const int64_t block = 2 * C + 3 * C * C + 3 * C + C * C + C + 2 * C + C * E + E * (C * F + F + F * C + C);
  EXPECT_EQ(w.num_params(), 7 * C + 5 * C + 2 * block + 2 * C + 7 * C);
  MemoryTracker mem;
  auto be = make_cpu_backend<double>();
  auto m = make_model<double>(w, *be, mem, 1);
  EXPECT_EQ(m->num_params(), w.num_params());
  EXPECT_EQ(m->layout().units.size(), 4u);  // embedding, 2 blocks, head
  EXPECT_EQ(moe_capacity(w), 3);
  const WorkloadSpec& tiny = *find_workload("moe-tiny");
  EXPECT_EQ(moe_capacity(tiny), 4);  // ceil(1.0 * 8 * 2 / 4)
  EXPECT_EQ(moe_capacity(*find_workload("moe-small")), 40);  // ceil(1.25 * 128 * 2 / 8)
  // Expert MLPs replace the GPT's one MLP: E (8 C^2 + 5 C) + C E in place of 8 C^2 + 5 C.
  WorkloadSpec gpt = tiny;
  gpt.kind = "gpt";
  const int64_t Ct = tiny.embd;
  EXPECT_EQ(tiny.num_params() - gpt.num_params(), tiny.layers * (3 * (8 * Ct * Ct + 5 * Ct) + Ct * 4));
}

// Two sequences of 4 tokens, 3 experts, top 2, capacity 2. Hand-worked:
//   seq 0: t0 (e1, e0), t1 (e1, e2), t2 (e1 full: dropped; e0), t3 ties e0 = e2 > e1: (e0 full:
//          dropped; e2)
//   seq 1 starts afresh: t4 (e2, e0)...
TEST(Moe, RoutingDropsExactlyAsDefined) {
  const std::vector<double> logits = {
      2, 3, 0,  // t0
      0, 5, 1,  // t1
      1, 4, 0,  // t2
      7, 1, 7,  // t3: a tie between e0 and e2 goes to e0 first
      1, 0, 3,  // t4
      1, 0, 3,  // t5
      1, 0, 3,  // t6: e2 and e0 full in seq 1: both dropped
      0, 0, 0,  // t7: all tied: e0 (full: dropped), e1
  };
  const MoeRouting r = moe_route(logits, 2, 4, 3, 2, 2);
  const std::vector<int64_t> choice = {1, 0, 1, 2, 1, 0, 0, 2, 2, 0, 2, 0, 2, 0, 0, 1};
  EXPECT_EQ(r.choice, choice);
  // Expert slots: sequence r's at r * 2.
  const std::vector<int64_t> slot = {0, 0, 1, 0, -1, 1, -1, 1, 2, 2, 3, 3, -1, -1, -1, 2};
  EXPECT_EQ(r.slot, slot);
  EXPECT_EQ(r.dropped(), 5);
  const std::vector<int32_t> token = {0, 2, 4, 5,    // e0
                                      0, 1, 7, -1,   // e1
                                      1, 3, 4, 5};   // e2
  EXPECT_EQ(r.token, token);
  // Gates: softmax over the chosen two; a dropped choice keeps its share (no renormalising).
  const double g0 = 1 / (1 + std::exp(-1.0));  // t0: e1 over e0 by 1
  EXPECT_DOUBLE_EQ(r.softmax[0], g0);
  EXPECT_DOUBLE_EQ(r.softmax[1], 1 - g0);
  EXPECT_DOUBLE_EQ(r.gate[3 + 4], 0.0);  // the empty slot
  EXPECT_DOUBLE_EQ(r.softmax[6], 0.5);    // t3's tie
  EXPECT_DOUBLE_EQ(r.gate[2 * 4 + 1], 0.5);
  EXPECT_DOUBLE_EQ(r.gate[1 * 4 + 2], 0.5);  // t7's all-zero logits
}

TEST(Moe, TopKAboveExpertsIsRefusedNamingTheKey) {
  WorkloadSpec w = fd_moe();
  w.top_k = 4;
  const auto [key, message] = w.model_kind().spec_problem(w);
  EXPECT_EQ(key, "top_k");
  EXPECT_NE(message.find("top_k 4"), std::string::npos) << message;
  MemoryTracker mem;
  auto be = make_cpu_backend<double>();
  EXPECT_THROW(make_model<double>(w, *be, mem, 1), ConfigError);
  EXPECT_EQ(fd_moe().model_kind().spec_problem(fd_moe()).first, "");
  // tp splits the heads; ep the experts (fd_moe: 3).
  EXPECT_EQ(w.model_kind().tp_problem(w, w.heads), "");
  EXPECT_NE(w.model_kind().tp_problem(w, w.heads + 1).find("does not divide"), std::string::npos);
  EXPECT_EQ(w.model_kind().ep_problem(w, static_cast<int>(w.experts)), "");
  EXPECT_NE(w.model_kind().ep_problem(w, 2).find("ep 2 does not divide"), std::string::npos);
}

// The model routes as moe_route defines, on its own logits, and drops some assignments.
TEST(Moe, TheModelDropsTokens) {
  for (const WorkloadSpec& w : {fd_moe(), *find_workload("moe-tiny")}) {
    MemoryTracker mem;
    auto be = make_cpu_backend<double>();
    auto m = make_model<double>(w, *be, mem, 1234);
    DataSource data(w, 1234);
    const int64_t rows = 8;
    Batch<double> b = make_batch<double>(w, mem, rows);
    data.fill(0, rows, 0, rows, b, *be);
    std::vector<MoeRouting> seen;
    set_moe_routing_tap([&](const MoeRouting& r) { seen.push_back(r); });
    m->forward_backward(b, rows);
    set_moe_routing_tap({});
    ASSERT_EQ(seen.size(), size_t(w.layers));
    int64_t dropped = 0;
    for (const MoeRouting& r : seen) {
      const MoeRouting again = moe_route(r.logits, rows, w.seq, w.experts, w.top_k, moe_capacity(w));
      EXPECT_EQ(r.slot, again.slot);
      EXPECT_EQ(r.token, again.token);
      dropped += r.dropped();
    }
    EXPECT_GT(dropped, 0) << w.name;
  }
}

// d loss / d p by central differences with h = 1e-6, as gpt_test: 1e-6 relative with a 1e-8
// floor. The routing is piecewise constant in the parameters: a step of h that moved a token
// across a top-k or capacity boundary would show as an error of order 1, so the sweep also
// checks that the routing did not change.
// Without and with the auxiliary loss.
class MoeGradients : public ::testing::TestWithParam<double> {};

TEST_P(MoeGradients, MatchFiniteDifferences) {
  WorkloadSpec w = fd_moe();
  w.aux_loss = GetParam();
  MemoryTracker mem;
  auto be = make_cpu_backend<double>();
  auto model = make_model<double>(w, *be, mem, 5);
  Model<double>& m = *model;
  for (int64_t i = 0; i < m.num_params(); ++i) m.params()[i] += 0.02 * std::sin(double(3 * i + 1));
  DataSource data(w, 5);
  const int64_t rows = 3;
  Batch<double> b = make_batch<double>(w, mem, rows);
  data.fill(0, rows, 0, rows, b, *be);
  std::vector<std::vector<int32_t>> routes;
  set_moe_routing_tap([&](const MoeRouting& r) { routes.push_back(r.token); });
  m.forward_backward(b, rows);
  const std::vector<std::vector<int32_t>> base = routes;
  int64_t dropped = 0;
  set_moe_routing_tap([&](const MoeRouting& r) { dropped += r.dropped(); });
  m.forward_backward(b, rows);
  EXPECT_GT(dropped, 0);
  std::vector<double> analytic = grads_of(m);
  const double h = 1e-6;
  for (int64_t i = 0; i < m.num_params(); ++i) {
    const double p = m.params()[i];
    auto loss_at = [&](double v) {
      m.params()[i] = v;
      routes.clear();
      set_moe_routing_tap([&](const MoeRouting& r) { routes.push_back(r.token); });
      const double loss = m.forward_backward(b, rows);
      EXPECT_EQ(routes, base) << "parameter " << i << " changed the routing";
      return loss;
    };
    const double fd = (loss_at(p + h) - loss_at(p - h)) / (2 * h);
    m.params()[i] = p;
    ASSERT_NEAR(analytic[i], fd, 1e-6 * std::abs(fd) + 1e-8) << "parameter " << i;
  }
  set_moe_routing_tap({});
  // Router, experts and attention all have gradients (a router gradient of 0 would pass the
  // sweep if the gates were ignored; the gates are used, so some are nonzero).
  double router = 0;
  const int64_t C = w.embd, router_at = w.vocab * C + w.seq * C + 2 * C + 3 * C * C + 3 * C + C * C + C + 2 * C;
  for (int64_t i = 0; i < C * w.experts; ++i) router += std::abs(analytic[router_at + i]);
  EXPECT_GT(router, 1e-6);
}
INSTANTIATE_TEST_SUITE_P(AuxLoss, MoeGradients, ::testing::Values(0.0, 0.1));

// At uniform routing (all logits equal: every token picks experts 0..k-1, P = 1/E) each
// sequence's aux is E * k * (1/k)(1/E) = 1, so the loss is coef * rows / norm. Its gradient
// (descent lowers the chosen experts' logits, raises the other's) is, per token,
// coef E / (S norm) * p_e (f_e - sum p f) = 0.1 * 3 / 16 * (1/3) (1/2 - 1/3) for a chosen e.
TEST(Moe, AuxLossAtUniformRouting) {
  const MoeRouting r = moe_route(std::vector<double>(2 * 4 * 3, 0.5), 2, 4, 3, 2, 8);
  std::vector<double> d(2 * 4 * 3, 0.0);
  EXPECT_NEAR(moe_aux_loss(r, 0.1, 4.0, &d), 0.1 * 2 / 4.0, 1e-15);
  const double chosen = 0.1 * 3 / 16 * (1.0 / 3) * (0.5 - 1.0 / 3);
  for (int64_t t = 0; t < 8; ++t) {
    EXPECT_NEAR(d[t * 3 + 0], chosen, 1e-15);
    EXPECT_NEAR(d[t * 3 + 1], chosen, 1e-15);
    EXPECT_NEAR(d[t * 3 + 2], -2 * chosen, 1e-15);
    EXPECT_NEAR(d[t * 3 + 0] + d[t * 3 + 1] + d[t * 3 + 2], 0, 1e-15);
  }
  EXPECT_EQ(moe_aux_loss(r, 0.0, 4.0, nullptr), 0.0);
}

// Same seed, same batch: bitwise the same loss and gradients, in a fresh model and on rerun.
TEST(Moe, Deterministic) {
  const WorkloadSpec& w = *find_workload("moe-tiny");
  auto run = [&] {
    MemoryTracker mem;
    auto be = make_cpu_backend<double>();
    auto m = make_model<double>(w, *be, mem, 77);
    DataSource data(w, 77);
    Batch<double> b = make_batch<double>(w, mem, 4);
    data.fill(3, 4, 0, 4, b, *be);
    const double loss = m->forward_backward(b, 4);
    EXPECT_EQ(m->forward_backward(b, 4), loss);
    std::vector<double> g = grads_of(*m);
    g.push_back(loss);
    return g;
  };
  EXPECT_EQ(run(), run());
}

TEST(Moe, MicrobatchesAndStagesEqualTheWholeBatch) { expect_microbatches_and_stages_equal_whole_batch(fd_moe()); }

// What forward saves is exactly saved_bytes: the activation peak of one forward equals the
// model's statement.
TEST(Moe, ActivationBytesAreExact) {
  const WorkloadSpec& w = *find_workload("moe-tiny");
  MemoryTracker mem;
  auto be = make_cpu_backend<double>();
  auto m = make_model<double>(w, *be, mem, 3);
  DataSource data(w, 3);
  Batch<double> b = make_batch<double>(w, mem, 4);
  data.fill(0, 4, 0, 4, b, *be);
  const int64_t before = mem.current(MemCategory::activation);
  Micro<double> mb{&b, 0, 4, 4.0};
  m->forward(0, mb, nullptr, nullptr);
  EXPECT_EQ(mem.current(MemCategory::activation) - before, m->activation_bytes(4));
  m->backward(0, mb, nullptr, nullptr);
  EXPECT_EQ(mem.current(MemCategory::activation), before);
  EXPECT_LE(mem.peak(MemCategory::workspace), m->workspace_bytes(4));
}

}  // namespace
}  // namespace pts
