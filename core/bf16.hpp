// bfloat16 as a 16-bit pattern: the upper half of an IEEE float. Used where a transfer is
// sent in lower precision (DiLoCo's outer gradient with outer_dtype = "bfloat16").
// A double is rounded to float first, then to bfloat16 (round to nearest, ties to even);
// NaN stays a quiet NaN.
#pragma once
#include <cstdint>
#include <cstring>

namespace pts {

inline uint16_t bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) return static_cast<uint16_t>((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);  // nearest, ties to even (overflow rounds to inf)
  return static_cast<uint16_t>(u >> 16);
}
inline uint16_t bf16_bits(double d) { return bf16_bits(static_cast<float>(d)); }

inline float bf16_value(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace pts
