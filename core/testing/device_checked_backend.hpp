// Backend's memory contract (core/backend/backend.hpp) held as a GPU holds it, for tests: an
// observer of an ObservedBackend whose inner backend's tensors come from a PoisonArena checks
// that every tensor argument of every op points into the arena (device memory) and every int32
// ids / labels array and upload / download host buffer does not. A layer, strategy or harness
// path that handed an op a host buffer, or handed the loader's ids over as if they were a
// tensor, aborts with the op's name, as it faults on a GPU. On an arena's device view the
// inner backend and the staging copies reach the bytes through its host view, and host code
// touching a tensor anywhere else faults.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "core/comm/staging_comm.hpp"

#include "core/backend/observed_backend.hpp"
#include "core/testing/poison_arena.hpp"

namespace pts {

class DeviceContractCheck final : public BackendObserver {
 public:
  explicit DeviceContractCheck(const PoisonArena& arena) : arena_(arena) {}
  // Null is allowed: an empty tensor has no bytes.
  void before(const char* op, std::initializer_list<const void*> device,
              std::initializer_list<const void*> host) override {
    for (const void* p : device)
      if (p && !arena_.owns(p)) fault(op, "a tensor argument is host memory, not the backend's");
    for (const void* p : host)
      if (p && arena_.owns(p)) fault(op, "a host argument (ids, labels, an upload or download buffer) is the backend's memory");
  }
  // The inner (CPU) backend reaches a tensor through the arena's host view.
  void* map(const void* p) override { return arena_.owns(p) ? arena_.host_view(p) : const_cast<void*>(p); }

 private:
  const PoisonArena& arena_;
  [[noreturn]] static void fault(const char* op, const char* what) {
    std::fprintf(stderr, "device-checked backend: %s: %s\n", op, what);
    std::abort();
  }
};

// `inner` (built on `arena`) with every op checked; `check` outlives the backend.
template <class T>
std::unique_ptr<Backend<T>> device_checked(std::unique_ptr<Backend<T>> inner, DeviceContractCheck& check) {
  return std::make_unique<ObservedBackend<T>>(std::move(inner), check);
}

// The staged communicator's copies between a device-view arena and the host. A buffer outside
// the arena is host memory and copied as it is, as cudaMemcpyDefault does on a GPU (a
// strategy's host-side counters: core/comm/case_comm.cpp).
class ArenaStagingCopy final : public StagingCopy {
 public:
  explicit ArenaStagingCopy(const PoisonArena& arena) : arena_(arena) {}
  void to_host(void* host, const void* src, size_t bytes) override { std::memcpy(host, view(src), bytes); }
  void from_host(void* dst, const void* host, size_t bytes) override { std::memcpy(view(dst), host, bytes); }

 private:
  const PoisonArena& arena_;
  void* view(const void* p) const { return arena_.owns(p) ? arena_.host_view(p) : const_cast<void*>(p); }
};

}  // namespace pts
