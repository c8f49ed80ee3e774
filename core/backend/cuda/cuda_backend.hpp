// The CUDA backend: cuBLAS for gemm (attention's S x S products as strided batched gemms),
// kernels for every other op, all on the rank's compute stream (core/cuda/device.hpp), tensors in device
// memory from CudaAllocator. Only built with PTSUITE_CUDA.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "core/backend/backend.hpp"

namespace pts {

// Device memory for tensors: cudaMallocAsync from the device's default pool (it keeps freed
// memory for reuse), zero-filled with cudaMemsetAsync, both on the compute stream every backend
// op runs on; freed with cudaFreeAsync on it. Counts the bytes it handed out (live and peak);
// device_used_bytes() is the driver's view (cudaMemGetInfo: total - free, every context on
// the GPU included) for a cross-check. Out of memory throws Error naming the bytes asked for.
class CudaAllocator final : public Allocator {
 public:
  void* allocate(size_t bytes) override;
  void release(void* p, size_t bytes) override;
  int64_t live_bytes() const;
  int64_t peak_bytes() const;
  int64_t device_used_bytes() const override;
  // Hands the pool's cached, unused memory back to the driver (after the stream's work).
  void trim();

 private:
  mutable std::mutex mu_;
  int64_t live_ = 0, peak_ = 0;
};
// The process's one device allocator (one rank per GPU): every CUDA backend instance hands it
// out, so a tensor may outlive the backend that allocated it.
CudaAllocator& cuda_allocator();

// How float32 gemms compute (float64 ones always in full float64):
//   full: CUBLAS_DEFAULT_MATH, full float32 ("cuda");
//   tf32: TF32 tensor cores, inputs rounded to 10 mantissa bits ("cuda-tf32");
//   bf16: bfloat16 tensor cores, inputs rounded to bfloat16, float32 accumulation and output
//         (cublasGemmEx, CUBLAS_COMPUTE_32F_FAST_16BF: "cuda-bf16"), while weights, gradients,
//         optimizer state and every other op stay float32: bf16 compute with float32 master
//         weights, the way mixed-precision training runs its matrix products.
enum class GemmMath { full, tf32, bf16 };

// A backend on the GPU select_cuda_device() picks (throws Error when none is visible).
template <class T>
std::unique_ptr<Backend<T>> make_cuda_backend(const std::string& name, GemmMath math);

// Adds "cuda" (TF32 off) and "cuda-tf32" to the backend registry. Called by main; the
// factories throw Error when no GPU is visible, so registering is safe on any machine.
void register_cuda_backends();
// Whether this process sees a GPU (cuda_device_count() > 0).
bool cuda_backends_available();

}  // namespace pts
