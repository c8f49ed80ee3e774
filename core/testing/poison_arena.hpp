// A test allocator standing in for a device's memory: every tensor comes from one reserved
// arena that nothing else uses, addresses are never reused, and freed memory is poisoned
// (filled with 0xFF, a NaN in float and double) and then made inaccessible, so any read or
// write of a tensor after its release faults at once instead of reading stale numbers. A
// backend built on it ("cpu-poison") runs the quick suite in harness/poison_backend_test.
#pragma once
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "core/memory.hpp"

namespace pts {

class PoisonArena final : public Allocator {
 public:
  explicit PoisonArena(size_t reserve_bytes = size_t{64} << 30);
  ~PoisonArena() override;
  void* allocate(size_t bytes) override;
  void release(void* p, size_t bytes) override;
  bool owns(const void* p) const;
  int64_t live_bytes() const { return live_; }
  int64_t allocations() const { return allocations_; }

 private:
  std::mutex mu_;
  char* base_ = nullptr;
  size_t size_ = 0, next_ = 0;
  int64_t live_ = 0, allocations_ = 0;
};

}  // namespace pts
