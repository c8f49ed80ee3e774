// How a rank waits, on 2 ranks: on shared cores (set_shared_cores) a wait sleeps between its
// polls from the first one, so the CPU time it burns is a small part of the time it waits,
// with the watchdog on and off. What is measured is this thread's CPU time against its own
// wall time over one wait, a ratio that a loaded machine only makes smaller.
#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <ctime>
#include <thread>

#include "core/comm/mpi/watchdog.hpp"

namespace pts {
namespace {

double thread_cpu_s() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

struct WaitCost {
  double wall_s = 0, cpu_s = 0;
};

// Rank 1 sends after `delay_s`; rank 0 waits for it with watched_wait. Rank 0's cost.
WaitCost wait_for_late_peer(double delay_s) {
  int rank = 0, value = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Barrier(MPI_COMM_WORLD);
  WaitCost cost;
  if (rank == 1) {
    std::this_thread::sleep_for(std::chrono::duration<double>(delay_s));
    value = 7;
    MPI_Send(&value, 1, MPI_INT, 0, 0, MPI_COMM_WORLD);
  } else if (rank == 0) {
    MPI_Request req;
    MPI_Irecv(&value, 1, MPI_INT, 1, 0, MPI_COMM_WORLD, &req);
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = thread_cpu_s();
    watched_wait(&req, "recv", "world", MPI_COMM_WORLD);
    cost.cpu_s = thread_cpu_s() - c0;
    cost.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(value, 7);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return cost;
}

class SharedCoresWait : public testing::TestWithParam<double> {
 protected:
  void SetUp() override {
    timeout_ = watchdog_timeout();
    set_watchdog_timeout(GetParam());
    set_shared_cores(true);
  }
  void TearDown() override {
    set_shared_cores(false);
    set_watchdog_timeout(timeout_);
  }
  double timeout_ = 0;
};

// A 15 ms wait sits inside the 20 ms a rank on a core of its own yields for: yielding, it
// would burn about as much CPU as it waits; sleeping 50 us per poll, a small part of that.
TEST_P(SharedCoresWait, SleepsFromTheFirstPoll) {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  const WaitCost cost = wait_for_late_peer(0.015);
  if (rank != 0) return;
  EXPECT_GE(cost.wall_s, 0.010) << "rank 0 did not wait for the late send";
  EXPECT_LT(cost.cpu_s, 0.25 * cost.wall_s) << "a wait on shared cores burned " << cost.cpu_s << " s of CPU in "
                                            << cost.wall_s << " s";
}

// The watchdog's timeout (300 s, the default) and off (0: still polled, since MPI_Wait
// busy-polls).
INSTANTIATE_TEST_SUITE_P(Watchdog, SharedCoresWait, testing::Values(300.0, 0.0));

}  // namespace
}  // namespace pts
