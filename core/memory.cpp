#include "core/memory.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/error.hpp"

namespace pts {

namespace {
class HostAllocator final : public Allocator {
 public:
  void* allocate(size_t bytes) override {
    void* p = std::aligned_alloc(64, bytes);
    if (!p) throw Error("out of memory allocating " + std::to_string(bytes) + " bytes");
    std::memset(p, 0, bytes);
    return p;
  }
  void release(void* p, size_t) override { std::free(p); }
};
}  // namespace

Allocator& host_allocator() {
  static HostAllocator host;
  return host;
}

const char* to_string(MemCategory c) {
  switch (c) {
    case MemCategory::param: return "param";
    case MemCategory::grad: return "grad";
    case MemCategory::optimizer: return "optimizer";
    case MemCategory::activation: return "activation";
    case MemCategory::comm: return "comm";
    case MemCategory::workspace: return "workspace";
  }
  return "?";
}

MemCategory mem_category_from_string(const std::string& s) {
  for (int i = 0; i < kNumMemCategories; ++i)
    if (s == to_string(static_cast<MemCategory>(i))) return static_cast<MemCategory>(i);
  throw Error("unknown memory category '" + s + "'");
}

void MemoryTracker::allocate(MemCategory c, int64_t bytes) {
  int i = index(c);
  current_[i] += bytes;
  current_total_ += bytes;
  peak_[i] = std::max(peak_[i], current_[i]);
  peak_total_ = std::max(peak_total_, current_total_);
}

void MemoryTracker::release(MemCategory c, int64_t bytes) {
  current_[index(c)] -= bytes;
  current_total_ -= bytes;
}

int64_t process_peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<int64_t>(u.ru_maxrss) * 1024;  // Linux reports KiB
}


}  // namespace pts
