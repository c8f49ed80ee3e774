#include "core/comm/link_comm.hpp"

#include <algorithm>
#include <cmath>
#include <thread>

#include "core/error.hpp"

namespace pts {

double LinkModel::seconds(double bus_bytes) const {
  if (!enabled()) return 0.0;
  return latency_us * 1e-6 + bus_bytes / (bus_gbps * 1e9);
}

namespace {
// Completes the inner request, then sleeps until the modeled completion: the rank is idle,
// as it would be waiting on a network, so its core is free for other ranks' compute.
class LinkRequest final : public Request {
 public:
  LinkRequest(RequestPtr inner, LinkComm::Clock::time_point done) : inner_(std::move(inner)), done_(done) {}
  void wait() override {
    inner_->wait();
    std::this_thread::sleep_until(done_);
  }
  bool test() override { return inner_->test() && LinkComm::Clock::now() >= done_; }

 private:
  RequestPtr inner_;
  LinkComm::Clock::time_point done_;
};
}  // namespace

LinkComm::LinkComm(std::unique_ptr<Comm> inner, LinkModel model, std::shared_ptr<CommStats> stats)
    : inner_(std::move(inner)), model_(model), stats_(std::move(stats)) {
  // Written so that nan fails too; inf would overflow the clock arithmetic of occupy().
  if (!(model_.bus_gbps >= 0 && model_.latency_us >= 0 && std::isfinite(model_.bus_gbps) &&
        std::isfinite(model_.latency_us)))
    throw Error("link model needs finite bus_gbps >= 0 and latency_us >= 0, got bus_gbps " +
                std::to_string(model_.bus_gbps) + " latency_us " + std::to_string(model_.latency_us) +
                "; use bus_gbps 0 for no link model");
}

std::unique_ptr<Comm> LinkComm::split(int color, int key, const std::string& axis) {
  return std::make_unique<LinkComm>(inner_->split(color, key, axis), model_, stats_);
}

double LinkComm::op_seconds(CommOp op, size_t count, DType t) const {
  if (size() == 1) return 0.0;  // a group of one moves nothing
  const double bus = static_cast<double>(payload_bytes(op, size(), count, t)) * bus_factor(op, size());
  return model_.seconds(bus);
}

LinkComm::Clock::time_point LinkComm::occupy(CommOp op, Clock::time_point issue, double seconds) {
  const Clock::time_point start = std::max(issue, link_free_at_);
  // Rounded up, so that sleeping until `done` never undercuts the modeled time.
  link_free_at_ = start + std::chrono::ceil<Clock::duration>(std::chrono::duration<double>(seconds));
  if (stats_) stats_->add_model(axis(), op, seconds);
  return link_free_at_;
}

RequestPtr LinkComm::modeled(CommOp op, Clock::time_point issue, double seconds, RequestPtr inner) {
  if (!model_.enabled()) return inner;
  return std::make_unique<LinkRequest>(std::move(inner), occupy(op, issue, seconds));
}

// Each operation reads the clock before issuing on the inner comm: the issue time is when the
// caller asked, not when the inner library returned.
RequestPtr LinkComm::iall_reduce(const void* s, void* r, size_t n, DType t) {
  const auto issue = Clock::now();
  return modeled(CommOp::all_reduce, issue, op_seconds(CommOp::all_reduce, n, t), inner_->iall_reduce(s, r, n, t));
}
RequestPtr LinkComm::ireduce_scatter(const void* s, void* r, size_t n, DType t) {
  const auto issue = Clock::now();
  return modeled(CommOp::reduce_scatter, issue, op_seconds(CommOp::reduce_scatter, n, t),
                 inner_->ireduce_scatter(s, r, n, t));
}
RequestPtr LinkComm::iall_gather(const void* s, void* r, size_t n, DType t) {
  const auto issue = Clock::now();
  return modeled(CommOp::all_gather, issue, op_seconds(CommOp::all_gather, n, t), inner_->iall_gather(s, r, n, t));
}
RequestPtr LinkComm::ibroadcast(void* b, size_t n, DType t, int root) {
  const auto issue = Clock::now();
  return modeled(CommOp::broadcast, issue, op_seconds(CommOp::broadcast, n, t), inner_->ibroadcast(b, n, t, root));
}
RequestPtr LinkComm::iall_to_all(const void* s, void* r, size_t n, DType t) {
  const auto issue = Clock::now();
  return modeled(CommOp::all_to_all, issue, op_seconds(CommOp::all_to_all, n, t), inner_->iall_to_all(s, r, n, t));
}
// payload * bus factor assumes all_to_all's equal blocks; with per-peer counts the link
// carries what leaves and reaches this rank, both directions at once, so the busier one
// sets the time. Equal counts give all_to_all's bus bytes, (n - 1) * count * size.
RequestPtr LinkComm::iall_to_allv(const void* s, const std::vector<size_t>& sn, void* r,
                                  const std::vector<size_t>& rn, DType t) {
  const auto issue = Clock::now();
  check_all_to_allv_counts(*this, sn, rn);
  size_t sent = 0, received = 0;
  for (int p = 0; p < size(); ++p)
    if (p != rank()) sent += sn[p], received += rn[p];
  const double bus = static_cast<double>(std::max(sent, received)) * static_cast<double>(dtype_size(t));
  const double seconds = size() == 1 ? 0.0 : model_.seconds(bus);
  return modeled(CommOp::all_to_allv, issue, seconds, inner_->iall_to_allv(s, sn, r, rn, t));
}
RequestPtr LinkComm::isend(const void* b, size_t n, DType t, int peer, int tag) {
  const auto issue = Clock::now();
  return modeled(CommOp::send, issue, op_seconds(CommOp::send, n, t), inner_->isend(b, n, t, peer, tag));
}
RequestPtr LinkComm::irecv(void* b, size_t n, DType t, int peer, int tag) {
  const auto issue = Clock::now();
  return modeled(CommOp::recv, issue, op_seconds(CommOp::recv, n, t), inner_->irecv(b, n, t, peer, tag));
}

// A barrier carries no bytes: it costs one latency on the link.
void LinkComm::barrier() {
  const auto issue = Clock::now();
  inner_->barrier();
  if (!model_.enabled()) return;
  const double seconds = size() == 1 ? 0.0 : model_.seconds(0.0);
  std::this_thread::sleep_until(occupy(CommOp::barrier, issue, seconds));
}

}  // namespace pts
