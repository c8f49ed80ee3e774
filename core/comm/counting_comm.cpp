#include "core/comm/counting_comm.hpp"

#include <chrono>
#include <numeric>

namespace pts {

void CommStats::record(const std::string& axis, CommOp op, int group_size, size_t count, DType t) {
  CommCount& c = counts_[{axis, op}];
  uint64_t bytes = payload_bytes(op, group_size, count, t);
  c.calls += 1;
  c.payload_bytes += bytes;
  c.bus_bytes += static_cast<double>(bytes) * bus_factor(op, group_size);
}

void CommStats::add_wait(const std::string& axis, CommOp op, double seconds) {
  counts_[{axis, op}].wait_s += seconds;
}

void CommStats::add_model(const std::string& axis, CommOp op, double seconds) {
  counts_[{axis, op}].model_s += seconds;
}

CommCount CommStats::get(const std::string& axis, CommOp op) const {
  auto it = counts_.find({axis, op});
  return it == counts_.end() ? CommCount{} : it->second;
}

double CommStats::total_bus_bytes() const {
  double s = 0;
  for (const auto& [k, c] : counts_) s += c.bus_bytes;
  return s;
}

double CommStats::total_wait_s() const {
  double s = 0;
  for (const auto& [k, c] : counts_) s += c.wait_s;
  return s;
}

namespace {
// Times the wait of the request it wraps and books it under (axis, op).
class TimedRequest final : public Request {
 public:
  TimedRequest(RequestPtr inner, std::shared_ptr<CommStats> stats, std::string axis, CommOp op)
      : inner_(std::move(inner)), stats_(std::move(stats)), axis_(std::move(axis)), op_(op) {}
  bool test() override { return inner_->test(); }
  void wait() override {
    auto t0 = std::chrono::steady_clock::now();
    inner_->wait();
    std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
    stats_->add_wait(axis_, op_, dt.count());
  }

 private:
  RequestPtr inner_;
  std::shared_ptr<CommStats> stats_;
  std::string axis_;
  CommOp op_;
};
}  // namespace

CountingComm::CountingComm(std::unique_ptr<Comm> inner, std::shared_ptr<CommStats> stats)
    : inner_(std::move(inner)), stats_(std::move(stats)) {}

std::unique_ptr<Comm> CountingComm::split(int color, int key, const std::string& axis) {
  return std::make_unique<CountingComm>(inner_->split(color, key, axis), stats_);
}

RequestPtr CountingComm::counted(CommOp op, size_t count, DType t, RequestPtr inner) {
  stats_->record(axis(), op, size(), count, t);
  return std::make_unique<TimedRequest>(std::move(inner), stats_, axis(), op);
}

RequestPtr CountingComm::iall_reduce(const void* s, void* r, size_t n, DType t) {
  return counted(CommOp::all_reduce, n, t, inner_->iall_reduce(s, r, n, t));
}
RequestPtr CountingComm::ireduce_scatter(const void* s, void* r, size_t n, DType t) {
  return counted(CommOp::reduce_scatter, n, t, inner_->ireduce_scatter(s, r, n, t));
}
RequestPtr CountingComm::iall_gather(const void* s, void* r, size_t n, DType t) {
  return counted(CommOp::all_gather, n, t, inner_->iall_gather(s, r, n, t));
}
RequestPtr CountingComm::ibroadcast(void* b, size_t n, DType t, int root) {
  return counted(CommOp::broadcast, n, t, inner_->ibroadcast(b, n, t, root));
}
RequestPtr CountingComm::iall_to_all(const void* s, void* r, size_t n, DType t) {
  return counted(CommOp::all_to_all, n, t, inner_->iall_to_all(s, r, n, t));
}
// Counted by what this rank receives, the output's size (payload_bytes, comm.hpp).
RequestPtr CountingComm::iall_to_allv(const void* s, const std::vector<size_t>& sn, void* r,
                                      const std::vector<size_t>& rn, DType t) {
  const size_t received = std::accumulate(rn.begin(), rn.end(), size_t{0});
  return counted(CommOp::all_to_allv, received, t, inner_->iall_to_allv(s, sn, r, rn, t));
}
RequestPtr CountingComm::isend(const void* b, size_t n, DType t, int peer, int tag) {
  return counted(CommOp::send, n, t, inner_->isend(b, n, t, peer, tag));
}
RequestPtr CountingComm::irecv(void* b, size_t n, DType t, int peer, int tag) {
  return counted(CommOp::recv, n, t, inner_->irecv(b, n, t, peer, tag));
}
void CountingComm::barrier() {
  stats_->record(axis(), CommOp::barrier, size(), 0, DType::u8);
  auto t0 = std::chrono::steady_clock::now();
  inner_->barrier();
  std::chrono::duration<double> dt = std::chrono::steady_clock::now() - t0;
  stats_->add_wait(axis(), CommOp::barrier, dt.count());
}

}  // namespace pts
