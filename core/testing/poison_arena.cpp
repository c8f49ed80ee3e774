#include "core/testing/poison_arena.hpp"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <string>

#include "core/error.hpp"

namespace pts {
namespace {
size_t page() { return static_cast<size_t>(sysconf(_SC_PAGESIZE)); }
size_t round_to_pages(size_t bytes) { return (bytes + page() - 1) / page() * page(); }

// The device view's range, for the fault handler: a fault inside it is host code reading or
// writing a tensor directly, which a GPU's memory would not allow.
std::atomic<const char*> g_dev_begin{nullptr}, g_dev_end{nullptr};
struct sigaction g_previous {};

void on_fault(int sig, siginfo_t* info, void* ctx) {
  const char* a = static_cast<const char*>(info->si_addr);
  if (a >= g_dev_begin.load() && a < g_dev_end.load()) {
    static const char msg[] =
        "poison arena (device view): host code touched device memory (a tensor's bytes read or written "
        "outside a backend op or a staging copy; on a GPU this faults)\n";
    (void)!write(2, msg, sizeof msg - 1);
  }
  sigaction(SIGSEGV, &g_previous, nullptr);  // the previous handler (or the default) takes the fault
  (void)ctx;
  raise(sig);
}
}  // namespace

PoisonArena::PoisonArena(size_t reserve_bytes, View view) : view_(view), size_(round_to_pages(reserve_bytes)) {
  if (view_ == View::host) {
    void* p = mmap(nullptr, size_, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw Error("poison arena: cannot reserve " + std::to_string(size_) + " bytes");
    base_ = static_cast<char*>(p);
    return;
  }
  // One memory file mapped twice: the host's view (opened page by page as tensors are
  // allocated) and the device view handed out, never accessible.
  fd_ = memfd_create("ptsuite-device-arena", 0);
  if (fd_ < 0 || ftruncate(fd_, static_cast<off_t>(size_)) != 0)
    throw Error("poison arena: cannot create a " + std::to_string(size_) + "-byte memory file");
  void* h = mmap(nullptr, size_, PROT_NONE, MAP_SHARED | MAP_NORESERVE, fd_, 0);
  void* d = mmap(nullptr, size_, PROT_NONE, MAP_SHARED | MAP_NORESERVE, fd_, 0);
  if (h == MAP_FAILED || d == MAP_FAILED) throw Error("poison arena: cannot map the device view");
  base_ = static_cast<char*>(h);
  dev_ = static_cast<char*>(d);
  g_dev_begin = dev_;
  g_dev_end = dev_ + size_;
  watch_faults();
}

void PoisonArena::watch_faults() const {
  if (view_ != View::device) return;
  struct sigaction now {};
  sigaction(SIGSEGV, nullptr, &now);
  if ((now.sa_flags & SA_SIGINFO) && now.sa_sigaction == on_fault) return;
  struct sigaction sa {};
  sa.sa_sigaction = on_fault;
  sa.sa_flags = SA_SIGINFO;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, &g_previous);
}

PoisonArena::~PoisonArena() {
  munmap(base_, size_);
  if (dev_) {
    munmap(dev_, size_);
    g_dev_begin = nullptr;
    g_dev_end = nullptr;
  }
  if (fd_ >= 0) close(fd_);
}

void* PoisonArena::allocate(size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  const size_t span = round_to_pages(bytes);
  if (next_ + span > size_) throw Error("poison arena exhausted after " + std::to_string(next_) + " bytes");
  const size_t at = next_;
  next_ += span;
  if (mprotect(base_ + at, span, PROT_READ | PROT_WRITE) != 0) throw Error("poison arena: mprotect failed");
  // Fresh pages (anonymous or of the memory file) are zero, as the Allocator contract asks.
  live_ += static_cast<int64_t>(bytes);
  ++allocations_;
  return handed() + at;
}

void PoisonArena::release(void* ptr, size_t bytes) {
  std::lock_guard<std::mutex> lock(mu_);
  PTS_REQUIRE(owns(ptr), "poison arena: releasing memory it did not allocate");
  const size_t span = round_to_pages(bytes);
  char* host = static_cast<char*>(host_view(ptr));
  std::memset(host, 0xFF, span);
  // Give the pages back and fault on any later touch; the range is never handed out again.
  if (view_ == View::device) fallocate(fd_, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, host - base_, span);
  else madvise(host, span, MADV_DONTNEED);
  mprotect(host, span, PROT_NONE);
  live_ -= static_cast<int64_t>(bytes);
}

bool PoisonArena::owns(const void* p) const {
  const char* c = static_cast<const char*>(p);
  return c >= handed() && c < handed() + next_;
}

void* PoisonArena::host_view(const void* p) const {
  return base_ + (static_cast<const char*>(p) - handed());
}

}  // namespace pts
