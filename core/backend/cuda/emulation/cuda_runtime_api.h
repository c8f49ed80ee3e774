// A host emulation of the CUDA runtime calls the CUDA backend makes, so that its kernels and
// its use of cuBLAS are checked on a machine without a GPU (cuda_backend_emulated_test):
// device memory is host memory (garbage-filled on malloc, poisoned on free, so a missing
// zero fill or a use after free shows), streams are immediate, kernels are host functions.
// It proves indexing, reductions and operand mapping; it cannot show races, timing, or the
// GPU's own arithmetic (expf, tanh), which the real test on a GPU does.
#pragma once
#include <math.h>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <cstdio>
#include <cstdlib>
#include <ucontext.h>
#include <bit>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

enum cudaError_t { cudaSuccess = 0, cudaErrorMemoryAllocation = 2, cudaErrorCudartUnloading = 4, cudaErrorNoDevice = 100 };
enum cudaMemcpyKind { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice };
typedef struct CUstream_st* cudaStream_t;
struct cudaDeviceProp { char name[256]; size_t totalGlobalMem; int major, minor; };
struct dim3 { unsigned x = 1, y = 1, z = 1; };

namespace emu {
inline std::mutex mu;
inline std::map<void*, size_t> live;
inline size_t used = 0;
constexpr size_t kTotal = size_t{80} << 30;
// Whether p points into (or one past) a live cudaMalloc block: a host pointer handed to a
// kernel, a gemm or the wrong side of a copy aborts the emulation, as it faults on a GPU.
inline bool device(const void* p) {
  std::lock_guard<std::mutex> l(mu);
  auto it = live.upper_bound(const_cast<void*>(p));
  if (it == live.begin()) return false;
  --it;
  const char* b = static_cast<const char*>(it->first);
  return static_cast<const char*>(p) <= b + it->second;
}
inline void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "emulated CUDA: %s\n", what);
    std::abort();
  }
}
// Every pointer argument of a kernel launch is device memory (null allowed).
template <class... A>
void device_args(const char* kernel, const A&... args) {
  auto one = [&](const auto& a) {
    if constexpr (std::is_pointer_v<std::decay_t<decltype(a)>>) {
      if (a != nullptr && !device(a)) {
        std::fprintf(stderr, "emulated CUDA: kernel %s was given a host pointer\n", kernel);
        std::abort();
      }
    }
  };
  (one(args), ...);
}
inline void copy_sides(void* d, const void* s, int kind) {  // cudaMemcpyKind
  require(kind == 0 ? device(d) && !device(s) : kind == 1 ? !device(d) && device(s) : device(d) && device(s),
          "cudaMemcpy with a pointer on the wrong side for its kind");
}
}  // namespace emu

inline const char* cudaGetErrorString(cudaError_t e) { return e == cudaErrorMemoryAllocation ? "out of memory" : "emulated error"; }
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline cudaError_t cudaGetDeviceCount(int* n) { *n = 1; return cudaSuccess; }
inline cudaError_t cudaSetDevice(int) { return cudaSuccess; }
inline cudaError_t cudaDeviceGetPCIBusId(char* b, int len, int) { std::snprintf(b, len, "emulated"); return cudaSuccess; }
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int) { std::strcpy(p->name, "emulated"); p->totalGlobalMem = emu::kTotal; p->major = 9; p->minor = 0; return cudaSuccess; }
inline cudaError_t cudaMalloc(void** p, size_t bytes) {
  std::lock_guard<std::mutex> l(emu::mu);
  if (bytes > emu::kTotal - emu::used) return cudaErrorMemoryAllocation;
  *p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  std::memset(*p, 0x5A, bytes);  // garbage, as cudaMalloc gives
  emu::live[*p] = bytes;
  emu::used += bytes;
  return cudaSuccess;
}
inline cudaError_t cudaFree(void* p) {
  std::lock_guard<std::mutex> l(emu::mu);
  auto it = emu::live.find(p);
  if (it == emu::live.end()) std::abort();
  std::memset(p, 0x7F, it->second);  // poison
  emu::used -= it->second;
  emu::live.erase(it);
  std::free(p);
  return cudaSuccess;
}
inline cudaError_t cudaMemset(void* p, int v, size_t n) { std::memset(p, v, n); return cudaSuccess; }
// The stream-ordered allocator: immediate, as every stream is; the pool's settings are kept.
typedef struct CUmemPool_st* cudaMemPool_t;
enum cudaMemPoolAttr { cudaMemPoolAttrReleaseThreshold = 4 };
inline cudaError_t cudaGetDevice(int* d) { *d = 0; return cudaSuccess; }
inline cudaError_t cudaDeviceGetDefaultMemPool(cudaMemPool_t* p, int) { *p = reinterpret_cast<cudaMemPool_t>(&emu::used); return cudaSuccess; }
inline cudaError_t cudaMemPoolSetAttribute(cudaMemPool_t, cudaMemPoolAttr, void*) { return cudaSuccess; }
inline cudaError_t cudaMemPoolTrimTo(cudaMemPool_t, size_t) { return cudaSuccess; }
inline cudaError_t cudaMallocAsync(void** p, size_t bytes, cudaStream_t) { return cudaMalloc(p, bytes); }
inline cudaError_t cudaFreeAsync(void* p, cudaStream_t) { return cudaFree(p); }
inline cudaError_t cudaMemsetAsync(void* p, int v, size_t n, cudaStream_t) { emu::require(n == 0 || emu::device(p), "cudaMemsetAsync on host memory"); std::memset(p, v, n); return cudaSuccess; }
inline cudaError_t cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind k) { if (n) emu::copy_sides(d, s, k); std::memcpy(d, s, n); return cudaSuccess; }
inline cudaError_t cudaMemcpyAsync(void* d, const void* s, size_t n, cudaMemcpyKind k, cudaStream_t) { if (n) emu::copy_sides(d, s, k); std::memcpy(d, s, n); return cudaSuccess; }
inline cudaError_t cudaMemGetInfo(size_t* f, size_t* t) { std::lock_guard<std::mutex> l(emu::mu); *t = emu::kTotal; *f = emu::kTotal - emu::used; return cudaSuccess; }
inline cudaError_t cudaStreamCreate(cudaStream_t* s) { *s = reinterpret_cast<cudaStream_t>(new int(0)); return cudaSuccess; }
inline cudaError_t cudaStreamDestroy(cudaStream_t s) { delete reinterpret_cast<int*>(s); return cudaSuccess; }
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }

// Device code: kernels compile as host functions. A block's threads are fibers (ucontext) run
// in turn on the calling thread; __syncthreads() switches to the next fiber, so every thread
// reaches a barrier before any passes it. Blocks run one after another. A kernel whose
// first thread finishes without a barrier has none (a barrier must be reached by every
// thread of a block), so the rest of its threads and blocks run as plain calls. Odd blocks
// run their threads in reverse order: a read racing with another thread's write between two
// barriers (a bug on a GPU) then sees the write in one order and misses it in the other.
#define __global__
#define __device__
#define __host__
#define __shared__ static
inline dim3 threadIdx, blockIdx, blockDim, gridDim;

namespace emu {
struct Fibers {
  ucontext_t sched;
  std::vector<ucontext_t> ctx;
  std::vector<std::vector<char>> stacks;
  std::vector<char> finished;
  unsigned cur = 0;
  bool in_fiber = false, synced = false;
  const std::function<void()>* fn = nullptr;
};
inline Fibers fibers;
inline void fiber_entry() {
  (*fibers.fn)();
  fibers.finished[fibers.cur] = 1;
  swapcontext(&fibers.ctx[fibers.cur], &fibers.sched);
}
// getcontext returns twice; kept out of launch() so that no loop variable there is at risk.
[[gnu::noinline]] inline void init_context(ucontext_t* c) { getcontext(c); }
inline void start_fiber(unsigned t) {
  Fibers& f = fibers;
  f.ctx[t].uc_stack.ss_sp = f.stacks[t].data();
  f.ctx[t].uc_stack.ss_size = f.stacks[t].size();
  f.ctx[t].uc_link = nullptr;
  makecontext(&f.ctx[t], fiber_entry, 0);
  f.finished[t] = 0;
}
// Runs thread t until it finishes or reaches a barrier.
inline void resume(unsigned t) {
  Fibers& f = fibers;
  f.cur = t;
  threadIdx.x = t;
  f.in_fiber = true;
  swapcontext(&f.sched, &f.ctx[t]);
  f.in_fiber = false;
}
inline void launch(unsigned grid, unsigned block, size_t, cudaStream_t, const std::function<void()>& fn) {
  Fibers& f = fibers;
  f.fn = &fn;
  if (f.ctx.size() < block) {
    f.ctx.resize(block);
    f.stacks.resize(block);
    for (unsigned t = 0; t < block; ++t) {
      init_context(&f.ctx[t]);
      f.stacks[t].resize(size_t{256} << 10);
    }
  }
  f.finished.assign(block, 1);
  blockDim.x = block;
  gridDim.x = grid;
  bool plain = false;
  for (unsigned b = 0; b < grid; ++b) {
    blockIdx.x = b;
    const bool rev = b % 2 == 1;
    if (plain) {
      for (unsigned i = 0; i < block; ++i) {
        threadIdx.x = rev ? block - 1 - i : i;
        fn();
      }
      continue;
    }
    // Thread `first` alone first: does this kernel have a barrier?
    const unsigned first = rev ? block - 1 : 0;
    auto nth = [&](unsigned i) { return rev ? block - 1 - i : i; };
    f.synced = false;
    start_fiber(first);
    resume(first);
    if (!f.synced) {
      plain = true;
      for (unsigned i = 1; i < block; ++i) {
        threadIdx.x = nth(i);
        fn();
      }
      continue;
    }
    for (unsigned i = 1; i < block; ++i) {  // the others reach the first barrier
      start_fiber(nth(i));
      resume(nth(i));
    }
    for (bool any = true; any;) {  // then every round passes one barrier
      any = false;
      for (unsigned i = 0; i < block; ++i)
        if (!f.finished[nth(i)]) {
          resume(nth(i));
          any = true;
        }
    }
  }
}
}  // namespace emu
inline void __syncthreads() {
  emu::Fibers& f = emu::fibers;
  if (!f.in_fiber) std::abort();  // a barrier in a kernel whose first thread run had none
  f.synced = true;
  const unsigned t = f.cur;
  swapcontext(&f.ctx[t], &f.sched);
  threadIdx.x = t;
}
inline uint32_t __float_as_uint(float f) { return std::bit_cast<uint32_t>(f); }
inline float __uint_as_float(uint32_t u) { return std::bit_cast<float>(u); }
