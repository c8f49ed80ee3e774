// A decorator that counts every call on a Comm: per (axis, op) the calls, payload bytes,
// bus bytes (nccl-tests factors) and seconds blocked in wait(). Counting is exact. A
// LinkComm underneath books its modeled seconds into the same CommStats (model_s).
#pragma once
#include <map>
#include <memory>
#include <utility>

#include "core/comm/comm.hpp"

namespace pts {

struct CommCount {
  uint64_t calls = 0;
  uint64_t payload_bytes = 0;
  double bus_bytes = 0;
  double wait_s = 0;
  double model_s = 0;  // modeled link time (LinkComm); 0 without a link model
};

// Counters shared by a communicator and every group split from it.
class CommStats {
 public:
  using Key = std::pair<std::string, CommOp>;  // (axis, op)
  void record(const std::string& axis, CommOp op, int group_size, size_t count, DType t);
  void add_wait(const std::string& axis, CommOp op, double seconds);
  void add_model(const std::string& axis, CommOp op, double seconds);
  const std::map<Key, CommCount>& counts() const { return counts_; }
  CommCount get(const std::string& axis, CommOp op) const;
  double total_bus_bytes() const;
  double total_wait_s() const;
  void reset() { counts_.clear(); }

 private:
  std::map<Key, CommCount> counts_;
};

class CountingComm final : public Comm {
 public:
  CountingComm(std::unique_ptr<Comm> inner, std::shared_ptr<CommStats> stats);
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const std::string& axis() const override { return inner_->axis(); }
  std::unique_ptr<Comm> split(int color, int key, const std::string& axis) override;
  const std::shared_ptr<CommStats>& stats() const { return stats_; }

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
  RequestPtr counted(CommOp op, size_t count, DType t, RequestPtr inner);
  std::unique_ptr<Comm> inner_;
  std::shared_ptr<CommStats> stats_;
};

}  // namespace pts
