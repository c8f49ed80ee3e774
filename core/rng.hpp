// Counter-based random numbers (Philox4x32-10, Salmon et al., SC'11): every value is a
// pure function of (seed, stream, index), so a rank holding a shard generates exactly its
// slice of what the single-device oracle generates, with no state to pass around.
#pragma once
#include <array>
#include <cstdint>

namespace pts {

using Philox4x32 = std::array<uint32_t, 4>;
Philox4x32 philox4x32_10(Philox4x32 counter, std::array<uint32_t, 2> key);

class CounterRng {
 public:
  CounterRng(uint64_t seed, uint64_t stream) : seed_(seed), stream_(stream) {}
  // Four random words for `index`: counter = (index, stream), key = seed.
  Philox4x32 words(uint64_t index) const;
  // Uniform in (0, 1), 52 random bits, from words 0-1 of `index`.
  double uniform(uint64_t index) const;
  // Standard normal by Box-Muller from the two 52-bit uniforms of `index`.
  double normal(uint64_t index) const;
  // out[i] = scale * normal(begin + i) for i < count.
  template <class T>
  void fill_normal(T* out, uint64_t begin, uint64_t count, double scale) const {
    for (uint64_t i = 0; i < count; ++i) out[i] = static_cast<T>(scale * normal(begin + i));
  }

 private:
  uint64_t seed_, stream_;
};

}  // namespace pts
