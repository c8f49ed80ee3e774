// The timing probe: a fixed gemm and a fixed all_reduce, timed after each step.
#include "harness/timing_probe.hpp"

#include <algorithm>
#include <chrono>
#include <fstream>
#include <type_traits>

#include "core/comm/mpi/watchdog.hpp"
#include "core/error.hpp"

namespace pts {
namespace {

constexpr int64_t kDim = TimingProbeShape::kGemmDim;
constexpr int kCount = TimingProbeShape::kReduceCount;

size_t round_up_64(size_t bytes) { return (bytes + 63) / 64 * 64; }

}  // namespace

double cpu_wait_s() {
  std::ifstream in("/proc/thread-self/schedstat");  // "<on-cpu ns> <run_delay ns> <timeslices>"
  double on_cpu_ns = 0, run_delay_ns = 0;
  if (!(in >> on_cpu_ns >> run_delay_ns)) return 0;
  return run_delay_ns * 1e-9;
}

template <class T>
TimingProbe<T>::TimingProbe(Backend<T>& backend)
    : backend_(backend),
      matrix_bytes_(round_up_64(sizeof(T) * kDim * kDim)),
      reduce_bytes_(round_up_64(sizeof(T) * kCount)) {
  Allocator& alloc = backend_.allocator();
  a_ = static_cast<T*>(alloc.allocate(matrix_bytes_));
  b_ = static_cast<T*>(alloc.allocate(matrix_bytes_));
  c_ = static_cast<T*>(alloc.allocate(matrix_bytes_));
  // The all_reduce is plain MPI, so its buffers are host memory whatever the backend.
  in_ = static_cast<T*>(host_allocator().allocate(reduce_bytes_));
  out_ = static_cast<T*>(host_allocator().allocate(reduce_bytes_));
  // Small exact values (0.5 * 0.5 * kDim): no denormals, no overflow, the same every run.
  backend_.fill(a_, T(0.5), kDim * kDim);
  backend_.fill(b_, T(0.5), kDim * kDim);
  std::fill(in_, in_ + kCount, T(1));
}

template <class T>
TimingProbe<T>::~TimingProbe() {
  Allocator& alloc = backend_.allocator();
  alloc.release(a_, matrix_bytes_);
  alloc.release(b_, matrix_bytes_);
  alloc.release(c_, matrix_bytes_);
  host_allocator().release(in_, reduce_bytes_);
  host_allocator().release(out_, reduce_bytes_);
}

template <class T>
typename TimingProbe<T>::Timing TimingProbe<T>::run(MpiComm& side) {
  MPI_Request req;
  PTS_MPI_CHECK(MPI_Ibarrier(side.native(), &req));
  watched_wait(&req, "barrier (harness)", side.axis(), side.native(), true);
  const double wait0 = cpu_wait_s();
  const auto t0 = std::chrono::steady_clock::now();
  const MPI_Datatype type = std::is_same_v<T, float> ? MPI_FLOAT : MPI_DOUBLE;
  for (int round = 0; round < TimingProbeShape::kRounds; ++round) {
    backend_.gemm(Trans::no, Trans::no, kDim, kDim, kDim, T(1), a_, kDim, b_, kDim, T(0), c_, kDim);
    backend_.synchronize();  // a device backend's gemm is queued: time it done
    PTS_MPI_CHECK(MPI_Iallreduce(in_, out_, kCount, type, MPI_SUM, side.native(), &req));
    watched_wait(&req, "all_reduce (harness)", side.axis(), side.native(), true);
  }
  const double local[2] = {std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(),
                           cpu_wait_s() - wait0};
  double most[2] = {};
  PTS_MPI_CHECK(MPI_Iallreduce(local, most, 2, MPI_DOUBLE, MPI_MAX, side.native(), &req));
  watched_wait(&req, "all_reduce (harness)", side.axis(), side.native(), true);
  return {most[0], most[1]};
}

template class TimingProbe<float>;
template class TimingProbe<double>;

}  // namespace pts
