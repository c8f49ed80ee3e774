// Tests for the counter-based RNG: Philox known answers, determinism, shard == slice of the
// whole (bit for bit), and the statistics of uniform and normal draws.
#include "core/rng.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

namespace pts {
namespace {

// Known-answer vectors of Philox4x32-10 from Random123's tests/kat_vectors
// (counter words, key words -> output words).
TEST(Philox, MatchesRandom123KnownAnswers) {
  struct Kat {
    Philox4x32 counter;
    std::array<uint32_t, 2> key;
    Philox4x32 expected;
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& k : kats) EXPECT_EQ(philox4x32_10(k.counter, k.key), k.expected);
}

TEST(CounterRng, WordsLayOutCounterAndKeyAsDocumented) {
  // counter = (index lo, index hi, stream lo, stream hi), key = (seed lo, seed hi).
  const uint64_t seed = 0x0123456789abcdefull, stream = 0xfedcba9876543210ull,
                 index = 0x1122334455667788ull;
  CounterRng rng(seed, stream);
  EXPECT_EQ(rng.words(index),
            philox4x32_10({0x55667788u, 0x11223344u, 0x76543210u, 0xfedcba98u},
                          {0x89abcdefu, 0x01234567u}));
}

TEST(CounterRng, SameInputsGiveSameWordsAndOtherInputsDiffer) {
  const uint64_t seeds[] = {0, 1, 42, 0xffffffffull, 0x100000000ull};
  const uint64_t streams[] = {0, 1, 7, 0x100000000ull};
  for (uint64_t seed : seeds)
    for (uint64_t stream : streams) {
      CounterRng a(seed, stream), b(seed, stream);
      CounterRng other_seed(seed + 1, stream), other_stream(seed, stream + 1);
      for (uint64_t index : {uint64_t{0}, uint64_t{1}, uint64_t{999}, uint64_t{1} << 40}) {
        SCOPED_TRACE(testing::Message() << "seed " << seed << " stream " << stream << " index "
                                        << index);
        EXPECT_EQ(a.words(index), b.words(index));
        EXPECT_EQ(a.normal(index), b.normal(index));  // same bits -> same double
        EXPECT_NE(a.words(index), other_seed.words(index));
        EXPECT_NE(a.words(index), other_stream.words(index));
        EXPECT_NE(a.words(index), a.words(index + 1));
      }
    }
}

// Shard boundaries splitting [0, n) into k nearly equal pieces, the first n % k one longer.
std::vector<uint64_t> shard_offsets(uint64_t n, uint64_t k) {
  std::vector<uint64_t> off{0};
  for (uint64_t s = 0; s < k; ++s) off.push_back(off.back() + n / k + (s < n % k ? 1 : 0));
  return off;
}

template <class T>
void check_shards_equal_slices_of_whole() {
  const uint64_t n = 1000;
  const double scale = 0.02;
  CounterRng rng(1234, 5);
  std::vector<T> whole(n);
  rng.fill_normal(whole.data(), 0, n, scale);
  for (uint64_t k : {1, 2, 3, 4, 7}) {
    // Besides the even split, a deliberately lopsided one: shard s gets weight s + 1.
    std::vector<std::vector<uint64_t>> splits = {shard_offsets(n, k), {0}};
    uint64_t weight_sum = k * (k + 1) / 2;
    for (uint64_t s = 0; s < k; ++s)
      splits[1].push_back(s + 1 == k ? n : splits[1].back() + n * (s + 1) / weight_sum);
    for (const auto& off : splits) {
      ASSERT_EQ(off.back(), n);
      std::vector<T> stitched(n);
      for (uint64_t s = 0; s < k; ++s) {
        uint64_t count = off[s + 1] - off[s];
        std::vector<T> shard(count + 1, T(-7));  // one sentinel past the end
        rng.fill_normal(shard.data(), off[s], count, scale);
        EXPECT_EQ(shard[count], T(-7)) << "fill_normal wrote past count";
        std::memcpy(stitched.data() + off[s], shard.data(), count * sizeof(T));
        for (uint64_t i = 0; i < count; ++i)
          ASSERT_EQ(shard[i], whole[off[s] + i]) << "k " << k << " shard " << s << " i " << i;
      }
      EXPECT_EQ(std::memcmp(stitched.data(), whole.data(), n * sizeof(T)), 0) << "k " << k;
    }
  }
}

TEST(CounterRng, ShardsEqualSlicesOfTheWholeDouble) { check_shards_equal_slices_of_whole<double>(); }
TEST(CounterRng, ShardsEqualSlicesOfTheWholeFloat) { check_shards_equal_slices_of_whole<float>(); }

TEST(CounterRng, FillNormalIsScaledNormal) {
  CounterRng rng(9, 3);
  std::vector<double> out(64);
  rng.fill_normal(out.data(), 100, out.size(), 0.5);
  // scale is a power of two, so scale * normal is exact.
  for (size_t i = 0; i < out.size(); ++i) EXPECT_EQ(out[i], 0.5 * rng.normal(100 + i));
}

// Statistical checks: n independent draws; every bound is 5 standard errors, so a correct
// generator fails one with probability ~6e-7 (and the draws are fixed, so never flakes).
constexpr int kDraws = 100000;

TEST(CounterRng, UniformIsInOpenUnitIntervalWithMeanAndVarianceOfU01) {
  CounterRng rng(2024, 1);
  double sum = 0, sum_sq = 0;
  for (int i = 0; i < kDraws; ++i) {
    double u = rng.uniform(i);
    ASSERT_GT(u, 0.0) << "index " << i;
    ASSERT_LT(u, 1.0) << "index " << i;
    sum += u;
    sum_sq += u * u;
  }
  const double n = kDraws, mean = sum / n, var = sum_sq / n - mean * mean;
  // U(0,1): mean 1/2 with standard error sqrt(1/12 / n); variance 1/12 with standard error
  // sqrt((mu4 - sigma^4) / n) = sqrt((1/80 - 1/144) / n) = sqrt(1/(180 n)).
  EXPECT_NEAR(mean, 0.5, 5 * std::sqrt(1.0 / 12 / n));
  EXPECT_NEAR(var, 1.0 / 12, 5 * std::sqrt(1.0 / 180 / n));
}

TEST(CounterRng, NormalHasMeanZeroAndVarianceOne) {
  CounterRng rng(77, 0);
  double sum = 0, sum_sq = 0;
  for (int i = 0; i < kDraws; ++i) {
    double z = rng.normal(i);
    ASSERT_TRUE(std::isfinite(z)) << "index " << i;
    sum += z;
    sum_sq += z * z;
  }
  const double n = kDraws, mean = sum / n, var = sum_sq / n - mean * mean;
  // N(0,1): the mean has sd 1/sqrt(n); the sample variance has sd sqrt(2/n).
  EXPECT_LT(std::abs(mean), 5 / std::sqrt(n));
  EXPECT_LT(std::abs(var - 1), 5 * std::sqrt(2 / n));
}

}  // namespace
}  // namespace pts
