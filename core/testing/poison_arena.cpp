#include "core/testing/poison_arena.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <string>

#include "core/error.hpp"

namespace pts {
namespace {
size_t page() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }
size_t round_to_pages(size_t bytes) { return (bytes + page() - 1) / page() * page(); }
}  // namespace

PoisonArena::PoisonArena(size_t reserve_bytes) : size_(round_to_pages(reserve_bytes)) {
  void* p = mmap(nullptr, size_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) throw Error("poison arena: cannot reserve " + std::to_string(size_) + " bytes");
  base_ = static_cast<char*>(p);
}

PoisonArena::~PoisonArena() { munmap(base_, size_); }

void* PoisonArena::allocate(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t span = round_to_pages(bytes);
  if (next_ + span > size_) throw Error("poison arena exhausted after " + std::to_string(next_) + " bytes");
  char* p = base_ + next_;
  next_ += span;
  if (mprotect(p, span, PROT_READ | PROT_WRITE) != 0) throw Error("poison arena: mprotect failed");
  // Fresh anonymous pages are zero, as the Allocator contract asks.
  live_ += static_cast<int64_t>(bytes);
  ++allocations_;
  return p;
}

void PoisonArena::release(void* ptr, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  PTS_REQUIRE(owns(ptr), "poison arena: releasing memory it did not allocate");
  const size_t span = round_to_pages(bytes);
  std::memset(ptr, 0xFF, span);
  // Give the pages back and fault on any later touch; the range is never handed out again.
  madvise(ptr, span, MADV_DONTNEED);
  mprotect(ptr, span, PROT_NONE);
  live_ -= static_cast<int64_t>(bytes);
}

bool PoisonArena::owns(const void* p) const {
  const char* c = static_cast<const char*>(p);
  return c >= base_ && c < base_ + next_;
}

}  // namespace pts
