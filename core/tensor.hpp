// Tensor<T>: contiguous, row-major, shaped storage whose bytes are counted by a
// MemoryTracker under one category. Views share storage (flat parameter buffers).
#pragma once
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/memory.hpp"

namespace pts {

using Shape = std::vector<int64_t>;

inline int64_t shape_numel(const Shape& s) {
  return std::accumulate(s.begin(), s.end(), int64_t{1}, std::multiplies<>());
}

template <class T>
class Tensor {
 public:
  Tensor() = default;
  // Allocates zero-filled storage of shape `shape`, counted under `category`.
  Tensor(MemoryTracker& tracker, MemCategory category, Shape shape)
      : storage_(std::make_shared<Storage>(tracker, category, shape_numel(shape))),
        shape_(std::move(shape)) {}

  T* data() { return storage_ ? storage_->ptr + offset_ : nullptr; }
  const T* data() const { return storage_ ? storage_->ptr + offset_ : nullptr; }
  const Shape& shape() const { return shape_; }
  int64_t dim(int i) const { return shape_.at(i); }
  int64_t numel() const { return shape_numel(shape_); }
  int64_t bytes() const { return numel() * static_cast<int64_t>(sizeof(T)); }
  bool empty() const { return !storage_; }
  T& operator[](int64_t i) { return data()[i]; }
  const T& operator[](int64_t i) const { return data()[i]; }

  // A view of numel(shape) elements starting `offset` elements into this tensor.
  Tensor view(int64_t offset, Shape shape) const {
    PTS_REQUIRE(offset >= 0 && offset + shape_numel(shape) <= numel(),
                "tensor view out of range");
    Tensor v;
    v.storage_ = storage_;
    v.offset_ = offset_ + offset;
    v.shape_ = std::move(shape);
    return v;
  }
  void fill(T value) { std::fill(data(), data() + numel(), value); }
  void zero() { std::memset(data(), 0, bytes()); }

 private:
  struct Storage {
    Storage(MemoryTracker& t, MemCategory c, int64_t n)
        : tracker(&t), category(c), bytes(std::max<int64_t>(n, 1) * sizeof(T)) {
      // 64-byte alignment for SIMD and BLAS; aligned_alloc needs a multiple of the alignment.
      rounded = (static_cast<size_t>(bytes) + 63) / 64 * 64;
      ptr = static_cast<T*>(tracker->allocator().allocate(rounded));
      bytes = n * sizeof(T);
      tracker->allocate(category, bytes);
    }
    ~Storage() {
      tracker->release(category, bytes);
      tracker->allocator().release(ptr, rounded);
    }
    Storage(const Storage&) = delete;
    Storage& operator=(const Storage&) = delete;
    MemoryTracker* tracker;
    MemCategory category;
    int64_t bytes;
    size_t rounded = 0;
    T* ptr = nullptr;
  };
  std::shared_ptr<Storage> storage_;
  int64_t offset_ = 0;
  Shape shape_;
};

}  // namespace pts
