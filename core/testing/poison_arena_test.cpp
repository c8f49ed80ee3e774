// The poison arena: tensors get zeroed memory from it, it counts them, and touching a tensor's
// memory after the tensor is gone faults (so a layer holding on to freed memory cannot pass
// a run on the cpu-poison backend).
#include "core/testing/poison_arena.hpp"

#include <gtest/gtest.h>

#include "core/tensor.hpp"

namespace pts {
namespace {

TEST(PoisonArena, ServesZeroedTensorsAndCountsThem) {
  PoisonArena arena(size_t{1} << 30);
  MemoryTracker mem(arena);
  {
    Tensor<double> a(mem, MemCategory::param, {1000});
    EXPECT_TRUE(arena.owns(a.data()));
    EXPECT_EQ(a[999], 0.0);
    a[999] = 2.5;
    EXPECT_EQ(a[999], 2.5);
    EXPECT_EQ(arena.live_bytes(), 8000);  // the bytes asked for (8000 is a multiple of 64)
    EXPECT_EQ(arena.allocations(), 1);
  }
  EXPECT_EQ(arena.live_bytes(), 0);
  Tensor<float> b(mem, MemCategory::grad, {3});
  EXPECT_EQ(arena.allocations(), 2);
}

TEST(PoisonArenaDeathTest, TouchingFreedMemoryFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        PoisonArena arena(size_t{1} << 30);
        MemoryTracker mem(arena);
        double* stale = nullptr;
        {
          Tensor<double> t(mem, MemCategory::activation, {16});
          stale = t.data();
        }
        volatile double v = stale[3];  // use after free
        (void)v;
      },
      "");
}

TEST(PoisonArena, DeviceViewServesZeroedMemoryThroughTheHostView) {
  PoisonArena arena(size_t{1} << 30, PoisonArena::View::device);
  MemoryTracker mem(arena);
  Tensor<double> a(mem, MemCategory::param, {1000});
  EXPECT_TRUE(arena.owns(a.data()));
  double* host = static_cast<double*>(arena.host_view(a.data()));
  EXPECT_NE(static_cast<void*>(host), static_cast<void*>(a.data()));
  EXPECT_EQ(host[999], 0.0);
  host[999] = 2.5;
  EXPECT_EQ(static_cast<double*>(arena.host_view(a.data() + 999))[0], 2.5);
}

// A GPU's memory as the host sees it: a live tensor's handed-out address cannot be read.
TEST(PoisonArenaDeathTest, DeviceViewFaultsOnAHostReadOfALiveTensor) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        PoisonArena arena(size_t{1} << 30, PoisonArena::View::device);
        MemoryTracker mem(arena);
        Tensor<double> t(mem, MemCategory::activation, {16});
        volatile double v = t.data()[3];  // host code reading device memory
        (void)v;
      },
      "host code touched device memory");
}

}  // namespace
}  // namespace pts
