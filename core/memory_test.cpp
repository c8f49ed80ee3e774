// Tests for memory accounting: tensors count their bytes under their category, views are
// free, destruction releases, peaks are exact, and an optimizer holds its analytic state.
#include "core/memory.hpp"

#include <gtest/gtest.h>

#include <optional>
#include <vector>

#include "core/backend/backend.hpp"
#include "core/optimizer.hpp"
#include "core/tensor.hpp"

namespace pts {
namespace {

constexpr MemCategory kAllCategories[] = {MemCategory::param,      MemCategory::grad,
                                          MemCategory::optimizer,  MemCategory::activation,
                                          MemCategory::comm,       MemCategory::workspace};

TEST(MemCategory, NamesRoundTrip) {
  for (MemCategory c : kAllCategories) EXPECT_EQ(mem_category_from_string(to_string(c)), c);
  EXPECT_THROW(mem_category_from_string("params"), Error);
}

TEST(MemoryTracker, TensorCountsItsBytesUnderItsCategoryOnly) {
  for (MemCategory c : kAllCategories) {
    SCOPED_TRACE(to_string(c));
    MemoryTracker mem;
    {
      Tensor<float> t(mem, c, {3, 5});
      EXPECT_EQ(t.bytes(), 3 * 5 * 4);
      for (MemCategory other : kAllCategories)
        EXPECT_EQ(mem.current(other), other == c ? 60 : 0) << to_string(other);
      EXPECT_EQ(mem.current_total(), 60);
      for (int64_t i = 0; i < t.numel(); ++i) EXPECT_EQ(t[i], 0.0f) << "not zero-filled at " << i;
    }
    EXPECT_EQ(mem.current(c), 0);
    EXPECT_EQ(mem.current_total(), 0);
    EXPECT_EQ(mem.peak(c), 60);
    EXPECT_EQ(mem.peak_total(), 60);
  }
}

// Tensors take their bytes from the tracker's allocator (a backend's own memory), zeroed,
// and give them back to it.
TEST(MemoryTracker, TensorsAllocateThroughTheTrackersAllocator) {
  struct Counting final : Allocator {
    int64_t live = 0, calls = 0;
    void* allocate(size_t bytes) override {
      ++calls, live += static_cast<int64_t>(bytes);
      return host_allocator().allocate(bytes);
    }
    void release(void* p, size_t bytes) override {
      live -= static_cast<int64_t>(bytes);
      host_allocator().release(p, bytes);
    }
  } counting;
  MemoryTracker mem(counting);
  {
    Tensor<double> a(mem, MemCategory::param, {3});  // 24 bytes, rounded to 64
    Tensor<float> b(mem, MemCategory::grad, {100});  // 400 -> 448
    EXPECT_EQ(counting.calls, 2);
    EXPECT_EQ(counting.live, 64 + 448);
    EXPECT_EQ(a[2], 0.0);
    EXPECT_EQ(mem.current_total(), 24 + 400);
  }
  EXPECT_EQ(counting.live, 0);
}

TEST(MemoryTracker, ElementSizeAndOddShapesAreCountedExactly) {
  MemoryTracker mem;
  Tensor<double> d(mem, MemCategory::param, {37});
  Tensor<int32_t> i(mem, MemCategory::param, {7, 1, 3});
  Tensor<float> scalar(mem, MemCategory::param, {});  // numel of an empty shape is 1
  Tensor<float> none(mem, MemCategory::param, {0, 4});
  EXPECT_EQ(mem.current(MemCategory::param), 37 * 8 + 21 * 4 + 4 + 0);
  EXPECT_FALSE(none.empty());
  EXPECT_EQ(none.bytes(), 0);
}

TEST(MemoryTracker, ViewsDoNotAllocateAndKeepStorageAlive) {
  MemoryTracker mem;
  std::optional<Tensor<float>> flat(Tensor<float>(mem, MemCategory::param, {100}));
  (*flat)[30] = 3.0f;
  Tensor<float> w = flat->view(20, {4, 5});
  Tensor<float> b = flat->view(40, {5});
  Tensor<float> nested = w.view(10, {2});  // elements 30, 31 of flat
  EXPECT_EQ(mem.current(MemCategory::param), 400);
  EXPECT_EQ(mem.peak(MemCategory::param), 400);
  EXPECT_EQ(w.data(), flat->data() + 20);
  EXPECT_EQ(b.data(), flat->data() + 40);
  EXPECT_EQ(nested[0], 3.0f);
  EXPECT_EQ(w.shape(), (Shape{4, 5}));
  EXPECT_THROW(flat->view(96, {5}), Error);
  EXPECT_THROW(w.view(-1, {1}), Error);
  // The storage lives until its last view goes.
  flat.reset();
  EXPECT_EQ(mem.current(MemCategory::param), 400);
  w = Tensor<float>();
  b = Tensor<float>();
  EXPECT_EQ(mem.current(MemCategory::param), 400);
  nested = Tensor<float>();
  EXPECT_EQ(mem.current(MemCategory::param), 0);
  EXPECT_EQ(mem.peak(MemCategory::param), 400);
}

TEST(MemoryTracker, PeakPerCategoryAndPeakOfTheSum) {
  MemoryTracker mem;
  std::optional<Tensor<char>> p(Tensor<char>(mem, MemCategory::param, {100}));
  {
    Tensor<char> g(mem, MemCategory::grad, {50});
    EXPECT_EQ(mem.current_total(), 150);
  }
  p.reset();
  Tensor<char> a1(mem, MemCategory::activation, {120});
  std::optional<Tensor<char>> a2(Tensor<char>(mem, MemCategory::activation, {80}));
  a2.reset();
  Tensor<char> w(mem, MemCategory::workspace, {10});
  // Timeline of the total: 100, 150, 100, 0, 120, 200, 120, 130.
  EXPECT_EQ(mem.peak(MemCategory::param), 100);
  EXPECT_EQ(mem.peak(MemCategory::grad), 50);
  EXPECT_EQ(mem.peak(MemCategory::activation), 200);
  EXPECT_EQ(mem.peak(MemCategory::workspace), 10);
  EXPECT_EQ(mem.peak(MemCategory::optimizer), 0);
  EXPECT_EQ(mem.peak(MemCategory::comm), 0);
  EXPECT_EQ(mem.peak_total(), 200);  // the sum of the peaks would be 360
  EXPECT_EQ(mem.current(MemCategory::activation), 120);
  EXPECT_EQ(mem.current_total(), 130);
}

TEST(MemoryTracker, ProcessPeakRssIsPositive) { EXPECT_GT(process_peak_rss_bytes(), 0); }

// Optimizer state: SGD with momentum one buffer of n elements, AdamW two (m and v).
TEST(Optimizer, HoldsItsAnalyticStateBytes) {
  auto backend = make_cpu_backend<double>();
  for (int64_t n : {1, 37, 1000}) {
    SCOPED_TRACE(testing::Message() << "n " << n);
    MemoryTracker mem;
    OptimizerConfig sgd;
    sgd.kind = "sgd";
    OptimizerConfig adamw;
    adamw.kind = "adamw";
    {
      Optimizer<double> opt(sgd, *backend, mem, n);
      EXPECT_EQ(mem.current(MemCategory::optimizer), n * 8);
    }
    EXPECT_EQ(mem.current(MemCategory::optimizer), 0);
    {
      Optimizer<double> opt(adamw, *backend, mem, n);
      EXPECT_EQ(mem.current(MemCategory::optimizer), 2 * n * 8);
    }
    EXPECT_EQ(mem.current(MemCategory::optimizer), 0);
    EXPECT_EQ(mem.peak(MemCategory::optimizer), 2 * n * 8);
    EXPECT_EQ(mem.peak_total(), 2 * n * 8);
  }
}

// The optimizer hands its state to the backend as (m) or (m, v) and counts steps from 1.
TEST(Optimizer, StepMatchesDirectBackendCalls) {
  auto backend = make_cpu_backend<double>();
  MemoryTracker mem;
  const int64_t n = 5;
  for (const char* kind : {"sgd", "adamw"}) {
    SCOPED_TRACE(kind);
    OptimizerConfig cfg;
    cfg.kind = kind;
    cfg.weight_decay = 0.25;
    Optimizer<double> opt(cfg, *backend, mem, n);
    std::vector<double> p = {1, -2, 3, -4, 5}, q = p, m(n, 0.0), v(n, 0.0);
    for (int64_t t = 1; t <= 3; ++t) {
      std::vector<double> g = {0.5 * t, -1.0, 2.0, 0.25, -3.0 * t};
      opt.step(p.data(), g.data());
      if (cfg.kind == "adamw")
        backend->adamw(q.data(), g.data(), m.data(), v.data(), n,
                       {cfg.lr, cfg.beta1, cfg.beta2, cfg.eps, cfg.weight_decay}, t);
      else
        backend->sgd_momentum(q.data(), g.data(), m.data(), n,
                              {cfg.lr, cfg.momentum, cfg.weight_decay});
      EXPECT_EQ(p, q) << "step " << t;  // same calls on the same data: bit for bit
    }
  }
}

}  // namespace
}  // namespace pts
