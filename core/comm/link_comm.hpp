// An emulated interconnect: a Comm decorator that makes every operation complete no earlier
// than its modeled time on a link of given bus bandwidth and latency, so that on one CPU
// machine overlap and prefetch hide communication as they would hide a real network.
#pragma once
#include <chrono>
#include <memory>

#include "core/comm/comm.hpp"
#include "core/comm/counting_comm.hpp"

namespace pts {

// One link: time(op) = latency + bus_bytes / bandwidth. bus_gbps is in GB/s (1e9 bytes per
// second), the unit of nccl-tests' busbw, so a measured busbw can be plugged in directly:
// e.g. 100 MB of all_reduce bus bytes at 50 GB/s and 5 us latency = 5e-6 + 2e-3 s.
struct LinkModel {
  double bus_gbps = 0;
  double latency_us = 0;
  bool enabled() const { return bus_gbps > 0; }
  // latency_us * 1e-6 + bus_bytes / (bus_gbps * 1e9); 0 when !enabled() (no link, no cost).
  double seconds(double bus_bytes) const;
};

// Decorates (and owns) an inner Comm. Each operation is issued on the inner comm at once, so
// data and results are real; its wait() first waits for the inner request, then sleeps
// (never spins) until the operation's modeled completion.
//
// The link of one communicator carries one operation at a time, like one NCCL stream:
//   start = max(issue time, link free), done = start + model.seconds(bus bytes), link free = done,
// with bus bytes = payload_bytes(op) * bus_factor(op) (comm.hpp), except all_to_allv's: the
// bytes this rank sends to or receives from the other ranks, whichever is more. A barrier
// costs the latency only, and a group of one rank moves nothing (0 s). Groups split from a
// LinkComm get a link of their own with the same model. The modeled clock is per rank: it
// does not see another rank's late issue (the real inner wait does).
//
// With stats (may be null), each operation's modeled duration (done - start) is booked as
// model_s under (axis, op) when it is issued. Layered as CountingComm(LinkComm(inner)) over
// one CommStats, wait_s is then the measured time and model_s the modeled one.
class LinkComm final : public Comm {
 public:
  using Clock = std::chrono::steady_clock;

  // Throws Error if bus_gbps or latency_us is negative.
  LinkComm(std::unique_ptr<Comm> inner, LinkModel model, std::shared_ptr<CommStats> stats = nullptr);
  int rank() const override { return inner_->rank(); }
  int size() const override { return inner_->size(); }
  const std::string& axis() const override { return inner_->axis(); }
  std::unique_ptr<Comm> split(int color, int key, const std::string& axis) override;
  const LinkModel& model() const { return model_; }

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
  // Puts an operation of `seconds` issued at `issue` on the link; returns its modeled done.
  Clock::time_point occupy(CommOp op, Clock::time_point issue, double seconds);
  double op_seconds(CommOp op, size_t count, DType t) const;
  RequestPtr modeled(CommOp op, Clock::time_point issue, double seconds, RequestPtr inner);

  std::unique_ptr<Comm> inner_;
  LinkModel model_;
  std::shared_ptr<CommStats> stats_;
  Clock::time_point link_free_at_{};
};

}  // namespace pts
