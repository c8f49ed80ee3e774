#include "core/comm/case_comm.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string_view>
#include <vector>

#include "core/comm/mpi/mpi_comm.hpp"
#include "core/comm/staging_comm.hpp"
#include "core/error.hpp"
#ifdef PTSUITE_CUDA
#include "core/comm/nccl/nccl_comm.hpp"
#include "core/cuda/device.hpp"
#endif

namespace pts {
namespace {

#ifdef PTSUITE_CUDA
// Staging through the compute stream: a copy to the host waits for the kernels that wrote the
// buffer; cudaMemcpyDefault also takes host pointers (a strategy's host-side counters).
class CudaStaging final : public StagingCopy {
 public:
  void to_host(void* host, const void* src, size_t bytes) override { copy(host, src, bytes); }
  void from_host(void* dst, const void* host, size_t bytes) override { copy(dst, host, bytes); }

 private:
  static void copy(void* dst, const void* src, size_t bytes) {
    PTS_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, compute_stream()));
    PTS_CUDA_CHECK(cudaStreamSynchronize(compute_stream()));
  }
};

// True when no two ranks of `group` use the same GPU (its PCI address on its host).
bool one_gpu_per_rank(MPI_Comm group) {
  constexpr int kLen = 320;
  char mine[kLen] = {};
  const std::string id = cuda_device_identity(select_cuda_device());
  std::strncpy(mine, id.c_str(), kLen - 1);
  int n = 0;
  PTS_MPI_CHECK(MPI_Comm_size(group, &n));
  std::vector<char> all(static_cast<size_t>(n) * kLen);
  PTS_MPI_CHECK(MPI_Allgather(mine, kLen, MPI_CHAR, all.data(), kLen, MPI_CHAR, group));
  std::vector<std::string_view> ids;
  for (int r = 0; r < n; ++r) ids.emplace_back(all.data() + r * kLen);
  std::sort(ids.begin(), ids.end());
  return std::adjacent_find(ids.begin(), ids.end()) == ids.end();
}
#endif

}  // namespace

std::vector<std::string> comm_backend_list() {
#ifdef PTSUITE_CUDA
  return {"mpi", "nccl", "mpi-staged"};
#else
  return {"mpi"};
#endif
}

std::string comm_backend_names() {
#ifdef PTSUITE_CUDA
  return "mpi, nccl (" + nccl_version() + "), mpi-staged";
#else
  return "mpi";
#endif
}

std::unique_ptr<Comm> make_named_comm(const std::string& name, MPI_Comm group, const std::string& axis) {
  std::unique_ptr<MpiComm> mpi = MpiComm::duplicate(group, axis);
  if (name == "mpi") return mpi;
#ifdef PTSUITE_CUDA
  if (name == "nccl") return std::make_unique<NcclComm>(std::move(mpi));
  if (name == "mpi-staged") return std::make_unique<StagingComm>(std::move(mpi), std::make_shared<CudaStaging>());
#endif
  std::string known;
  for (const std::string& n : comm_backend_list()) known += (known.empty() ? "" : ", ") + n;
  throw ConfigError("communicator '" + name + "' is not in this build; available: " + known);
}

CaseComm make_case_comm(MPI_Comm group, const std::string& axis, const BackendInfo& backend, bool tagged_p2p) {
  if (!backend.device_memory) return {make_named_comm("mpi", group, axis), "mpi"};
  if (backend.staging) return {std::make_unique<StagingComm>(MpiComm::duplicate(group, axis), backend.staging()), "mpi-staged"};
#ifdef PTSUITE_CUDA
  const char* forced = std::getenv("PTSUITE_COMM");
  const bool force_staged = forced && std::string_view(forced) == "mpi-staged";
  // Every rank reaches the same answer: the GPU check is collective, the rest the same input.
  const std::string name = !force_staged && !tagged_p2p && one_gpu_per_rank(group) ? "nccl" : "mpi-staged";
  return {make_named_comm(name, group, axis), name};
#else
  (void)tagged_p2p;
  throw Error("a backend with device memory needs a build with PTSUITE_CUDA");
#endif
}

}  // namespace pts
