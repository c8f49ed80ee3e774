// The timing probe (suite key timing_probe): a fixed amount of work every rank of a case runs
// after each timed step, timed like the step. Its time says how fast the machine was at that
// moment, so `ptsuite compare` can test step_time_s / probe_time_s, a ratio of two timings
// measured in the same run, instead of a step time that moves with the machine's load.
#pragma once
#include <cstdint>

#include "core/backend/backend.hpp"
#include "core/comm/mpi/mpi_comm.hpp"

namespace pts {

// The probe's work, the same for every case (independent of strategy, workload and layout):
// kRounds rounds of one kGemmDim^3 gemm in the case's precision on its backend (2 * 256^3 =
// 34 MFLOP) and an all_reduce (sum) of kReduceCount values of that type over the harness's
// side communicator (64 KiB in float64), about 4 ms in float64 and 2 ms in float32 on an
// idle 2-core EPYC VM. Compute and communication in rounds, as a step has both: a burst of
// other work that slows either, or a rank descheduled while the other waits for it, moves
// the probe as it moves the step.
struct TimingProbeShape {
  static constexpr int64_t kGemmDim = 256;
  static constexpr int kReduceCount = 8192;
  static constexpr int kRounds = 4;
};

// Seconds this thread has spent runnable but waiting for a CPU since it started (Linux
// /proc/thread-self/schedstat, run_delay); 0 where the kernel does not say. On a shared
// machine a step is stretched by this wait: other processes held the cores.
double cpu_wait_s();

template <class T>
class TimingProbe {
 public:
  // Buffers from the backend's allocator, not the case's MemoryTracker: the probe's memory
  // is the harness's, not the strategy's, and stays out of memory.csv.
  explicit TimingProbe(Backend<T>& backend);
  ~TimingProbe();
  TimingProbe(const TimingProbe&) = delete;
  TimingProbe& operator=(const TimingProbe&) = delete;

  // Collective over `side`: the ranks start together (a barrier), each runs the work and
  // times it; returns the slowest rank's seconds (as a step's time is the slowest rank's) and
  // the most seconds a rank spent waiting for a CPU meanwhile.
  struct Timing {
    double time_s = 0, cpu_wait_s = 0;
  };
  Timing run(MpiComm& side);

 private:
  Backend<T>& backend_;
  size_t matrix_bytes_, reduce_bytes_;
  T *a_, *b_, *c_, *in_, *out_;
};

}  // namespace pts
