// Comm over NCCL, for device buffers, one rank per GPU. Each communicator pairs an NCCL
// communicator with an MPI one over the same ranks: MPI bootstraps it (rank 0's unique id
// broadcast), splits it, and serves barrier(). Collectives run on the communicator's own
// stream after the work already queued on the compute stream (an event orders them), so
// they overlap the compute queued before them; sends and receives run on two more streams,
// so two peers that each send before they receive cannot block each other. NCCL matches
// point-to-point messages between a pair of ranks in the order they are posted: tags are
// not used (the pipeline's messages are posted in tag order; the parameter server, which
// needs tags, runs on the staged MPI communicator instead).
// Only built with PTSUITE_CUDA.
#pragma once
#include <cuda_runtime_api.h>
#include <nccl.h>

#include <memory>

#include "core/comm/comm.hpp"
#include "core/comm/mpi/mpi_comm.hpp"

namespace pts {

class NcclComm final : public Comm {
 public:
  // Collective over `mpi`'s ranks; the calling thread's device is the rank's (select_cuda_device).
  explicit NcclComm(std::unique_ptr<MpiComm> mpi);
  ~NcclComm() override;
  NcclComm(const NcclComm&) = delete;
  NcclComm& operator=(const NcclComm&) = delete;

  int rank() const override { return mpi_->rank(); }
  int size() const override { return mpi_->size(); }
  const std::string& axis() const override { return mpi_->axis(); }
  std::unique_ptr<Comm> split(int color, int key, const std::string& axis) override;

  RequestPtr iall_reduce(const void* send, void* recv, size_t count, DType t) override;
  RequestPtr ireduce_scatter(const void* send, void* recv, size_t recv_count, DType t) override;
  RequestPtr iall_gather(const void* send, void* recv, size_t send_count, DType t) override;
  RequestPtr ibroadcast(void* buf, size_t count, DType t, int root) override;
  RequestPtr iall_to_all(const void* send, void* recv, size_t count, DType t) override;
  RequestPtr iall_to_allv(const void* send, const std::vector<size_t>& send_counts, void* recv,
                          const std::vector<size_t>& recv_counts, DType t) override;
  RequestPtr isend(const void* buf, size_t count, DType t, int peer, int tag) override;
  RequestPtr irecv(void* buf, size_t count, DType t, int peer, int tag) override;
  void barrier() override;

 private:
  template <class Launch>
  RequestPtr launch(CommOp op, cudaStream_t stream, Launch&& body);
  std::unique_ptr<MpiComm> mpi_;
  ncclComm_t comm_ = nullptr;
  cudaStream_t coll_ = nullptr, send_ = nullptr, recv_ = nullptr;
};

// Throws Error "NCCL: <what>: <ncclGetErrorString>" when `status` is not ncclSuccess.
void nccl_check(ncclResult_t status, const char* what);

// "2.28.3": the NCCL library this build runs against.
std::string nccl_version();

}  // namespace pts
