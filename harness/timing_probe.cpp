// The timing probe: a fixed gemm and a fixed all_reduce, timed after each step.
#include "harness/timing_probe.hpp"

#include <chrono>
#include <type_traits>

#include "core/comm/mpi/watchdog.hpp"
#include "core/error.hpp"

namespace pts {
namespace {

constexpr int64_t kDim = TimingProbeShape::kGemmDim;
constexpr int kCount = TimingProbeShape::kReduceCount;

size_t round_up_64(size_t bytes) { return (bytes + 63) / 64 * 64; }

}  // namespace

template <class T>
TimingProbe<T>::TimingProbe(Backend<T>& backend)
    : backend_(backend),
      matrix_bytes_(round_up_64(sizeof(T) * kDim * kDim)),
      reduce_bytes_(round_up_64(sizeof(T) * kCount)) {
  Allocator& alloc = backend_.allocator();
  a_ = static_cast<T*>(alloc.allocate(matrix_bytes_));
  b_ = static_cast<T*>(alloc.allocate(matrix_bytes_));
  c_ = static_cast<T*>(alloc.allocate(matrix_bytes_));
  in_ = static_cast<T*>(alloc.allocate(reduce_bytes_));
  out_ = static_cast<T*>(alloc.allocate(reduce_bytes_));
  // Small exact values (0.5 * 0.5 * kDim): no denormals, no overflow, the same every run.
  backend_.fill(a_, T(0.5), kDim * kDim);
  backend_.fill(b_, T(0.5), kDim * kDim);
  backend_.fill(in_, T(1), kCount);
}

template <class T>
TimingProbe<T>::~TimingProbe() {
  Allocator& alloc = backend_.allocator();
  alloc.release(a_, matrix_bytes_);
  alloc.release(b_, matrix_bytes_);
  alloc.release(c_, matrix_bytes_);
  alloc.release(in_, reduce_bytes_);
  alloc.release(out_, reduce_bytes_);
}

template <class T>
double TimingProbe<T>::run(MpiComm& side) {
  MPI_Request req;
  PTS_MPI_CHECK(MPI_Ibarrier(side.native(), &req));
  watched_wait(&req, "barrier (harness)", side.axis(), side.native(), true);
  const auto t0 = std::chrono::steady_clock::now();
  const MPI_Datatype type = std::is_same_v<T, float> ? MPI_FLOAT : MPI_DOUBLE;
  for (int round = 0; round < TimingProbeShape::kRounds; ++round) {
    backend_.gemm(Trans::no, Trans::no, kDim, kDim, kDim, T(1), a_, kDim, b_, kDim, T(0), c_, kDim);
    PTS_MPI_CHECK(MPI_Iallreduce(in_, out_, kCount, type, MPI_SUM, side.native(), &req));
    watched_wait(&req, "all_reduce (harness)", side.axis(), side.native(), true);
  }
  double local = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), slowest = 0;
  PTS_MPI_CHECK(MPI_Iallreduce(&local, &slowest, 1, MPI_DOUBLE, MPI_MAX, side.native(), &req));
  watched_wait(&req, "all_reduce (harness)", side.axis(), side.native(), true);
  return slowest;
}

template class TimingProbe<float>;
template class TimingProbe<double>;

}  // namespace pts
