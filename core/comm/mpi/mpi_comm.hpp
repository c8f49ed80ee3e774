// Comm over MPI (host buffers). Wraps an MPI communicator it owns (or borrows, for
// MPI_COMM_WORLD / MPI_COMM_SELF).
#pragma once
#include <mpi.h>

#include "core/comm/comm.hpp"

namespace pts {

class MpiComm final : public Comm {
 public:
  // Borrows `comm` (not freed) when own == false.
  MpiComm(MPI_Comm comm, std::string axis, bool own);
  ~MpiComm() override;
  MpiComm(const MpiComm&) = delete;
  MpiComm& operator=(const MpiComm&) = delete;

  // A private duplicate of `comm`: traffic on it can never match traffic elsewhere.
  static std::unique_ptr<MpiComm> duplicate(MPI_Comm comm, std::string axis);

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const std::string& axis() const override { return axis_; }
  MPI_Comm native() const { return comm_; }
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
  MPI_Comm comm_;
  std::string axis_;
  bool own_;
  int rank_ = 0, size_ = 1;
};

MPI_Datatype mpi_type(DType t);

}  // namespace pts
