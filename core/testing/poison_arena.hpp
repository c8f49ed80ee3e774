// A test allocator standing in for a device's memory: every tensor comes from one reserved
// arena that nothing else uses, addresses are never reused, and freed memory is poisoned
// (filled with 0xFF, a NaN in float and double) and then made inaccessible, so any read or
// write of a tensor after its release faults at once instead of reading stale numbers. A
// backend built on it ("cpu-poison") runs the quick suite in harness/poison_backend_test.
//
// View::device goes one step further, to a GPU's: the addresses it hands out are a second
// mapping of the same memory that is never accessible, so host code touching a live tensor
// (anything but a backend op or a staging copy, which reach the bytes through host_view())
// faults, and the fault is reported as a host access to device memory.
#pragma once
#include <cstddef>
#include <cstdint>
#include <mutex>

#include "core/memory.hpp"

namespace pts {

class PoisonArena final : public Allocator {
 public:
  enum class View { host, device };
  explicit PoisonArena(size_t reserve_bytes = size_t{64} << 30, View view = View::host);
  ~PoisonArena() override;
  PoisonArena(const PoisonArena&) = delete;
  PoisonArena& operator=(const PoisonArena&) = delete;
  void* allocate(size_t bytes) override;
  void release(void* p, size_t bytes) override;
  // Whether p lies in the addresses this arena hands out (the device view's, for View::device).
  bool owns(const void* p) const;
  // Where the host reaches the bytes at p (an address owns() accepts): p itself for View::host.
  void* host_view(const void* p) const;
  // View::device: (re)install the handler that names a fault in the device view, in front of
  // whatever SIGSEGV handler is installed now (the harness's crash report installs its own).
  void watch_faults() const;
  int64_t live_bytes() const { return live_; }
  int64_t allocations() const { return allocations_; }

 private:
  std::mutex mu_;
  View view_;
  int fd_ = -1;
  char* base_ = nullptr;  // the host's mapping
  char* dev_ = nullptr;   // View::device: the handed-out, never accessible mapping
  size_t size_ = 0, next_ = 0;
  int64_t live_ = 0, allocations_ = 0;
  char* handed() const { return view_ == View::device ? dev_ : base_; }
};

}  // namespace pts
