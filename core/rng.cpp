#include "core/rng.hpp"

#include <cmath>
#include <numbers>

namespace pts {

Philox4x32 philox4x32_10(Philox4x32 c, std::array<uint32_t, 2> k) {
  // Round constants from the Philox paper (multipliers) and the Weyl key schedule.
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = static_cast<uint64_t>(kM0) * c[0];
    uint64_t p1 = static_cast<uint64_t>(kM1) * c[2];
    c = {static_cast<uint32_t>(p1 >> 32) ^ c[1] ^ k[0], static_cast<uint32_t>(p1),
         static_cast<uint32_t>(p0 >> 32) ^ c[3] ^ k[1], static_cast<uint32_t>(p0)};
    k[0] += kW0;
    k[1] += kW1;
  }
  return c;
}

Philox4x32 CounterRng::words(uint64_t index) const {
  return philox4x32_10({static_cast<uint32_t>(index), static_cast<uint32_t>(index >> 32),
                        static_cast<uint32_t>(stream_), static_cast<uint32_t>(stream_ >> 32)},
                       {static_cast<uint32_t>(seed_), static_cast<uint32_t>(seed_ >> 32)});
}

namespace {
// 52 bits from two words, mapped to the open interval (0, 1): (k + 1/2) / 2^52 is exact
// in a double for every k < 2^52, so neither 0 nor 1 can come out.
double to_unit(uint32_t hi, uint32_t lo) {
  uint64_t bits = ((static_cast<uint64_t>(hi) << 32) | lo) >> 12;
  return (static_cast<double>(bits) + 0.5) * 0x1.0p-52;
}
}  // namespace

double CounterRng::uniform(uint64_t index) const {
  Philox4x32 w = words(index);
  return to_unit(w[0], w[1]);
}

double CounterRng::normal(uint64_t index) const {
  Philox4x32 w = words(index);
  double u1 = to_unit(w[0], w[1]), u2 = to_unit(w[2], w[3]);
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

}  // namespace pts
