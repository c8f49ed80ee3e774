// Comm over a host communicator for buffers that live elsewhere (a GPU shared by several
// ranks, where NCCL cannot run): every operation copies its input to host memory, runs the
// host communicator's operation there and copies the result back. What the strategies see is
// unchanged (the same calls, the same counts: a CountingComm on top counts payload, not
// staging); the CSV names it in `comm_backend` ("mpi-staged").
#pragma once
#include <cstddef>
#include <memory>

#include "core/comm/comm.hpp"

namespace pts {

// Copies between a buffer of the backend's memory and host memory. Both directions complete
// before they return (the staged host buffer is read or reused at once).
class StagingCopy {
 public:
  virtual ~StagingCopy() = default;
  virtual void to_host(void* host, const void* src, size_t bytes) = 0;
  virtual void from_host(void* dst, const void* host, size_t bytes) = 0;
};

// memcpy: host memory standing in for a device's, so the staged path is tested without one.
std::shared_ptr<StagingCopy> host_staging_copy();

class StagingComm final : public Comm {
 public:
  StagingComm(std::unique_ptr<Comm> host, std::shared_ptr<StagingCopy> copy);
  int rank() const override { return host_->rank(); }
  int size() const override { return host_->size(); }
  const std::string& axis() const override { return host_->axis(); }
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
  void barrier() override { host_->barrier(); }

 private:
  std::unique_ptr<Comm> host_;
  std::shared_ptr<StagingCopy> copy_;
};

}  // namespace pts
