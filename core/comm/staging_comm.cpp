#include "core/comm/staging_comm.hpp"

#include <cstring>
#include <numeric>
#include <utility>
#include <vector>

namespace pts {
namespace {

class MemcpyStaging final : public StagingCopy {
 public:
  // An empty buffer's pointer may be null, which memcpy does not allow even for 0 bytes.
  void to_host(void* host, const void* src, size_t bytes) override {
    if (bytes) std::memcpy(host, src, bytes);
  }
  void from_host(void* dst, const void* host, size_t bytes) override {
    if (bytes) std::memcpy(dst, host, bytes);
  }
};

// One staged operation: the host buffers it runs on, the host request, and where its result
// goes back to (nowhere for a send, a broadcast's root).
class StagedRequest final : public Request {
 public:
  StagedRequest(std::shared_ptr<StagingCopy> copy, size_t in_bytes, void* out, size_t out_bytes)
      : copy_(std::move(copy)), in_(in_bytes), out_host_(out_bytes), out_(out) {}
  std::byte* in() { return in_.data(); }
  std::byte* out_host() { return out_host_.data(); }
  void start(RequestPtr inner) { inner_ = std::move(inner); }

  void wait() override {
    inner_->wait();
    finish();
  }
  bool test() override { return inner_->test(); }

 private:
  void finish() {
    if (out_ && !copied_) copy_->from_host(out_, out_host_.data(), out_host_.size());
    copied_ = true;
  }
  std::shared_ptr<StagingCopy> copy_;
  std::vector<std::byte> in_, out_host_;
  void* out_;
  RequestPtr inner_;
  bool copied_ = false;
};

}  // namespace

std::shared_ptr<StagingCopy> host_staging_copy() { return std::make_shared<MemcpyStaging>(); }

StagingComm::StagingComm(std::unique_ptr<Comm> host, std::shared_ptr<StagingCopy> copy)
    : host_(std::move(host)), copy_(std::move(copy)) {}

std::unique_ptr<Comm> StagingComm::split(int color, int key, const std::string& axis) {
  return std::make_unique<StagingComm>(host_->split(color, key, axis), copy_);
}

// Every collective runs out of place on the host: an in-place call's input is copied out
// before the host operation overwrites anything, so both forms come out the same.
RequestPtr StagingComm::iall_reduce(const void* send, void* recv, size_t count, DType t) {
  const size_t bytes = count * dtype_size(t);
  auto r = std::make_unique<StagedRequest>(copy_, bytes, recv, bytes);
  copy_->to_host(r->in(), send, bytes);
  r->start(host_->iall_reduce(r->in(), r->out_host(), count, t));
  return r;
}

RequestPtr StagingComm::ireduce_scatter(const void* send, void* recv, size_t recv_count, DType t) {
  const size_t bytes = recv_count * dtype_size(t);
  auto r = std::make_unique<StagedRequest>(copy_, bytes * size(), recv, bytes);
  copy_->to_host(r->in(), send, bytes * size());
  r->start(host_->ireduce_scatter(r->in(), r->out_host(), recv_count, t));
  return r;
}

RequestPtr StagingComm::iall_gather(const void* send, void* recv, size_t send_count, DType t) {
  const size_t bytes = send_count * dtype_size(t);
  auto r = std::make_unique<StagedRequest>(copy_, bytes, recv, bytes * size());
  copy_->to_host(r->in(), send, bytes);
  r->start(host_->iall_gather(r->in(), r->out_host(), send_count, t));
  return r;
}

RequestPtr StagingComm::ibroadcast(void* buf, size_t count, DType t, int root) {
  const size_t bytes = count * dtype_size(t);
  const bool is_root = rank() == root;
  auto r = std::make_unique<StagedRequest>(copy_, 0, is_root ? nullptr : buf, bytes);
  if (is_root) copy_->to_host(r->out_host(), buf, bytes);
  r->start(host_->ibroadcast(r->out_host(), count, t, root));
  return r;
}

RequestPtr StagingComm::iall_to_all(const void* send, void* recv, size_t count, DType t) {
  const size_t bytes = count * dtype_size(t) * size();
  auto r = std::make_unique<StagedRequest>(copy_, bytes, recv, bytes);
  copy_->to_host(r->in(), send, bytes);
  r->start(host_->iall_to_all(r->in(), r->out_host(), count, t));
  return r;
}

// The host operation gets the caller's counts (it copies them); in and out are packed, so
// each is the sum of its counts.
RequestPtr StagingComm::iall_to_allv(const void* send, const std::vector<size_t>& send_counts, void* recv,
                                     const std::vector<size_t>& recv_counts, DType t) {
  check_all_to_allv_counts(*this, send_counts, recv_counts);
  const size_t in_bytes = std::accumulate(send_counts.begin(), send_counts.end(), size_t{0}) * dtype_size(t);
  const size_t out_bytes = std::accumulate(recv_counts.begin(), recv_counts.end(), size_t{0}) * dtype_size(t);
  auto r = std::make_unique<StagedRequest>(copy_, in_bytes, recv, out_bytes);
  copy_->to_host(r->in(), send, in_bytes);
  r->start(host_->iall_to_allv(r->in(), send_counts, r->out_host(), recv_counts, t));
  return r;
}

RequestPtr StagingComm::isend(const void* buf, size_t count, DType t, int peer, int tag) {
  const size_t bytes = count * dtype_size(t);
  auto r = std::make_unique<StagedRequest>(copy_, bytes, nullptr, 0);
  copy_->to_host(r->in(), buf, bytes);
  r->start(host_->isend(r->in(), count, t, peer, tag));
  return r;
}

RequestPtr StagingComm::irecv(void* buf, size_t count, DType t, int peer, int tag) {
  const size_t bytes = count * dtype_size(t);
  auto r = std::make_unique<StagedRequest>(copy_, 0, buf, bytes);
  r->start(host_->irecv(r->out_host(), count, t, peer, tag));
  return r;
}

}  // namespace pts
