// CudaAllocator: tensor memory on the GPU, zero-filled, counted. Stream-ordered on the rank's
// compute stream (cudaMallocAsync / cudaFreeAsync from the device's default pool, which keeps
// what it has: a step's activations are reused, not returned to the driver and asked for again).
// cudaFree waits for the whole device: a few hundred per step serialised host and GPU.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <mutex>

#include "core/backend/cuda/cuda_backend.hpp"
#include "core/cuda/device.hpp"
#include "core/error.hpp"

namespace pts {

namespace {
// The compute stream, with the device's default pool told to keep freed memory.
cudaStream_t pool_stream() {
  static cudaStream_t stream = [] {
    cudaStream_t s = compute_stream();  // selects the device
    int device = 0;
    cuda_check(cudaGetDevice(&device), "cudaGetDevice");
    cudaMemPool_t pool = nullptr;
    cuda_check(cudaDeviceGetDefaultMemPool(&pool, device), "cudaDeviceGetDefaultMemPool");
    uint64_t keep = UINT64_MAX;
    cuda_check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), "cudaMemPoolSetAttribute");
    return s;
  }();
  return stream;
}
}  // namespace

void* CudaAllocator::allocate(size_t bytes) {
  void* p = nullptr;
  const cudaStream_t stream = pool_stream();
  const cudaError_t st = cudaMallocAsync(&p, bytes, stream);
  if (st == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // not sticky: clear it so later calls do not report it
    size_t free_b = 0, total_b = 0;
    (void)cudaMemGetInfo(&free_b, &total_b);
    throw Error("CUDA: out of device memory allocating " + std::to_string(bytes) + " bytes (" +
                std::to_string(free_b) + " of " + std::to_string(total_b) + " bytes free, " +
                std::to_string(live_bytes()) + " held by ptsuite tensors); use a smaller workload or more ranks");
  }
  cuda_check(st, "cudaMallocAsync");
  cuda_check(cudaMemsetAsync(p, 0, bytes, stream), "cudaMemsetAsync");
  std::lock_guard<std::mutex> lock(mu_);
  live_ += static_cast<int64_t>(bytes);
  peak_ = std::max(peak_, live_);
  return p;
}

void CudaAllocator::release(void* p, size_t bytes) {
  if (!p) return;
  // Stream-ordered: the memory is reused only by work queued on the compute stream after every
  // op that read it. Communication on other streams has been waited for (Request::wait blocks
  // the host until the operation's event has passed) before a strategy releases its buffers.
  const cudaError_t st = cudaFreeAsync(p, pool_stream());
  // A tensor released during process exit, after the runtime has unloaded, has nothing to free.
  if (st != cudaErrorCudartUnloading) cuda_check(st, "cudaFreeAsync");
  std::lock_guard<std::mutex> lock(mu_);
  live_ -= static_cast<int64_t>(bytes);
}

void CudaAllocator::trim() {
  const cudaStream_t stream = pool_stream();
  cuda_check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  int device = 0;
  cuda_check(cudaGetDevice(&device), "cudaGetDevice");
  cudaMemPool_t pool = nullptr;
  cuda_check(cudaDeviceGetDefaultMemPool(&pool, device), "cudaDeviceGetDefaultMemPool");
  cuda_check(cudaMemPoolTrimTo(pool, 0), "cudaMemPoolTrimTo");
}

int64_t CudaAllocator::live_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return live_;
}
int64_t CudaAllocator::peak_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return peak_;
}

int64_t CudaAllocator::device_used_bytes() const {
  size_t free_b = 0, total_b = 0;
  cuda_check(cudaMemGetInfo(&free_b, &total_b), "cudaMemGetInfo");
  return static_cast<int64_t>(total_b - free_b);
}

CudaAllocator& cuda_allocator() {
  static CudaAllocator a;
  return a;
}

}  // namespace pts
