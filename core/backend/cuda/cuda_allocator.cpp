// CudaAllocator: tensor memory on the GPU, zero-filled, counted.
#include <cuda_runtime_api.h>

#include <algorithm>

#include "core/backend/cuda/cuda_backend.hpp"
#include "core/cuda/device.hpp"
#include "core/error.hpp"

namespace pts {

void* CudaAllocator::allocate(size_t bytes) {
  void* p = nullptr;
  const cudaError_t st = cudaMalloc(&p, bytes);
  if (st == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();  // not sticky: clear it so later calls do not report it
    size_t free_b = 0, total_b = 0;
    (void)cudaMemGetInfo(&free_b, &total_b);
    throw Error("CUDA: out of device memory allocating " + std::to_string(bytes) + " bytes (" +
                std::to_string(free_b) + " of " + std::to_string(total_b) + " bytes free, " +
                std::to_string(live_bytes()) + " held by ptsuite tensors); use a smaller workload or more ranks");
  }
  cuda_check(st, "cudaMalloc");
  cuda_check(cudaMemset(p, 0, bytes), "cudaMemset");
  std::lock_guard<std::mutex> lock(mu_);
  live_ += static_cast<int64_t>(bytes);
  peak_ = std::max(peak_, live_);
  return p;
}

void CudaAllocator::release(void* p, size_t bytes) {
  if (!p) return;
  const cudaError_t st = cudaFree(p);
  // A tensor released during process exit, after the runtime has unloaded, has nothing to free.
  if (st != cudaErrorCudartUnloading) cuda_check(st, "cudaFree");
  std::lock_guard<std::mutex> lock(mu_);
  live_ -= static_cast<int64_t>(bytes);
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
