// Memory accounting by category: every tensor allocation is tagged and counted, so a
// strategy's per-rank memory can be compared with its analytic formula exactly.
#pragma once
#include <array>
#include <cstdint>
#include <cstddef>
#include <string>

namespace pts {

enum class MemCategory { param, grad, optimizer, activation, comm, workspace };
inline constexpr int kNumMemCategories = 6;
const char* to_string(MemCategory c);
MemCategory mem_category_from_string(const std::string& s);

// Where tensor bytes come from. Host memory by default; a backend with memory of its own (a
// GPU, a test arena) supplies its allocator, and the tracker hands it to every Tensor.
class Allocator {
 public:
  virtual ~Allocator() = default;
  // `bytes` (a multiple of 64) of zero-filled memory aligned to 64 bytes; throws when out of memory.
  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* p, size_t bytes) = 0;
  // The device's own count of its used memory (a GPU's cudaMemGetInfo: total - free, every
  // process on it counted), the cross-check beside the tracker; -1 for host memory.
  virtual int64_t device_used_bytes() const { return -1; }
};
Allocator& host_allocator();

// Current and peak bytes per category on one rank. One tracker per training run, owned by
// whoever runs it, and passed to everything that allocates.
class MemoryTracker {
 public:
  explicit MemoryTracker(Allocator& allocator = host_allocator()) : allocator_(&allocator) {}
  Allocator& allocator() const { return *allocator_; }
  void allocate(MemCategory c, int64_t bytes);
  void release(MemCategory c, int64_t bytes);
  int64_t current(MemCategory c) const { return current_[index(c)]; }
  int64_t peak(MemCategory c) const { return peak_[index(c)]; }
  int64_t current_total() const { return current_total_; }
  int64_t peak_total() const { return peak_total_; }  // peak of the sum, not sum of peaks

 private:
  static int index(MemCategory c) { return static_cast<int>(c); }
  Allocator* allocator_;
  std::array<int64_t, kNumMemCategories> current_{}, peak_{};
  int64_t current_total_ = 0, peak_total_ = 0;
};

// Peak resident set size of this process (getrusage), bytes; a cross-check for the tracker.
int64_t process_peak_rss_bytes();

}  // namespace pts
