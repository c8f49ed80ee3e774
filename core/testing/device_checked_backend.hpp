// Backend's memory contract (core/backend/backend.hpp) held as a GPU holds it, for tests: an
// observer of an ObservedBackend whose inner backend's tensors come from a PoisonArena checks
// that every tensor argument of every op points into the arena (device memory) and every int32
// ids / labels array and upload / download host buffer does not. A layer, strategy or harness
// path that handed an op a host buffer, or handed the loader's ids over as if they were a
// tensor, aborts with the op's name, as it faults on a GPU.
#pragma once
#include <cstdio>
#include <cstdlib>
#include <memory>

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

 private:
  const PoisonArena& arena_;
  [[noreturn]] static void fault(const char* op, const char* what) {
    std::fprintf(stderr, "device-checked backend: %s: %s\n", op, what);
    std::abort();
  }
};

// `inner` (built on `arena`) with every op checked.
template <class T>
std::unique_ptr<Backend<T>> device_checked(std::unique_ptr<Backend<T>> inner, const PoisonArena& arena) {
  static DeviceContractCheck check(arena);
  return std::make_unique<ObservedBackend<T>>(std::move(inner), check);
}

}  // namespace pts
