#include "core/cuda/device.hpp"

#include <cstdio>
#include <cstdlib>

#include <unistd.h>

#include "core/error.hpp"

namespace pts {

void cuda_check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw Error(std::string("CUDA: ") + what + ": " + cudaGetErrorString(status));
}

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky "no driver" error
    return 0;
  }
  return n;
}

int select_cuda_device() {
  const int n = cuda_device_count();
  if (n == 0) throw Error("CUDA: no GPU visible to this process (cudaGetDeviceCount is 0; check CUDA_VISIBLE_DEVICES)");
  int local = 0;
  for (const char* var : {"OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID", "MPI_LOCALRANKID"})
    if (const char* v = std::getenv(var)) {
      local = std::atoi(v);
      break;
    }
  const int device = local % n;
  cuda_check(cudaSetDevice(device), "cudaSetDevice");
  return device;
}

cudaStream_t compute_stream() {
  static cudaStream_t stream = [] {
    select_cuda_device();
    cudaStream_t s = nullptr;
    // Blocking: it waits on the legacy default stream, where the allocator zero-fills memory.
    PTS_CUDA_CHECK(cudaStreamCreate(&s));
    return s;
  }();
  return stream;
}

std::string cuda_device_identity(int device) {
  char bus[32] = {};
  cuda_check(cudaDeviceGetPCIBusId(bus, sizeof bus, device), "cudaDeviceGetPCIBusId");
  char host[256] = {};
  gethostname(host, sizeof host - 1);
  return std::string("PCI ") + bus + " on host " + host;
}

std::string cuda_device_name(int device) {
  cudaDeviceProp p{};
  if (cudaGetDeviceProperties(&p, device) != cudaSuccess) return "unknown GPU";
  char mem[32];
  std::snprintf(mem, sizeof mem, "%.1f GiB", p.totalGlobalMem / double(1 << 30));
  return std::string(p.name) + " (sm_" + std::to_string(p.major) + std::to_string(p.minor) + ", " + mem + ")";
}

}  // namespace pts
