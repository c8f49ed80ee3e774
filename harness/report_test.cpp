// RankReport's encoding: a report decodes back equal, bit for bit in its doubles, whether
// its strings, vectors and optional parts are filled or empty; a cut or padded encoding is
// refused.
#include <gtest/gtest.h>

#include <bit>
#include <cstdint>
#include <limits>
#include <string>

#include "core/error.hpp"
#include "harness/report.hpp"

namespace pts {
namespace {

using namespace std::string_literals;

uint64_t bits(double v) { return std::bit_cast<uint64_t>(v); }

RankReport filled() {
  RankReport r;
  r.rank = 7;
  r.error = "threw: \"bad\"\nline two\0after a NUL"s;
  r.peak = {1, 0, -1, std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min(), 1 << 20};
  r.peak_total = 123456789012345;
  r.rss = 987654321;
  r.device_used = 123456789;
  r.stage = 3;
  r.bubble_theory = 1.0 / 3.0;
  r.busy_median = 1e-300;
  r.wait_median = -0.0;
  r.comm = {{"dp", CommOp::all_reduce, 12, 4096, 1.0 / 3.0, 5e-324, 0.1},
            {"", CommOp::barrier, 0, 0, -0.0, 0, 1.7976931348623157e308}};
  r.counted_bus = 2.0 / 3.0;
  RankExpectation e;
  e.param = 4096;
  e.grad = 0;
  e.optimizer = 8192;
  e.activation = 0;  // set to zero is not unset
  e.comm = {{"tp", CommOp::all_gather, 3, 99}, {"pp", CommOp::send, 1, 1}};
  e.bus_per_step = 1e-300;
  e.check_comm = {Verdict::fail, "dp all_reduce: 12 calls, expected 11"};
  e.check_memory = {Verdict::pass, ""};
  r.expected = e;
  r.trace.bound = 2;
  r.trace.pushed = {{0, 3, 0}, {1, 3, 7}};
  r.trace.served = {{3, 1, 4, int64_t{1} << 40, -1}};
  r.trace.applied = {{3, 0, 1, 5, std::numeric_limits<int64_t>::max(), 2}, {3, 1, 0, 0, 0, 0}};
  return r;
}

TEST(RankReportEncoding, FilledReportRoundTripsExactly) {
  const RankReport r = filled();
  const RankReport back = decode_report(encode(r));
  EXPECT_EQ(back, r);
  // == treats -0.0 as 0.0; the bits must survive too.
  EXPECT_EQ(bits(back.bubble_theory), bits(1.0 / 3.0));
  EXPECT_EQ(bits(back.busy_median), bits(1e-300));
  EXPECT_EQ(bits(back.wait_median), bits(-0.0));
  EXPECT_EQ(bits(back.counted_bus), bits(2.0 / 3.0));
  ASSERT_EQ(back.comm.size(), 2u);
  EXPECT_EQ(bits(back.comm[0].bus_bytes), bits(1.0 / 3.0));
  EXPECT_EQ(bits(back.comm[0].wait_s), bits(5e-324));
  EXPECT_EQ(bits(back.comm[1].bus_bytes), bits(-0.0));
  EXPECT_EQ(bits(back.comm[1].model_s), bits(1.7976931348623157e308));
  ASSERT_TRUE(back.expected);
  EXPECT_EQ(bits(back.expected->bus_per_step), bits(1e-300));
  EXPECT_EQ(back.expected->activation, std::optional<int64_t>(0));
  EXPECT_EQ(back.error.size(), r.error.size());
}

TEST(RankReportEncoding, EmptyReportRoundTrips) {
  const RankReport r;  // no error, no ops, no expectation
  const RankReport back = decode_report(encode(r));
  EXPECT_EQ(back, r);
  EXPECT_FALSE(back.expected);
  EXPECT_EQ(bits(back.busy_median), bits(-1.0));
}

TEST(RankReportEncoding, EmptyPartsOfAnExpectationRoundTrip) {
  RankReport r = filled();
  r.error.clear();
  r.comm.clear();
  r.expected->activation.reset();
  r.expected->comm.clear();
  r.expected->check_comm = {};
  const RankReport back = decode_report(encode(r));
  EXPECT_EQ(back, r);
  EXPECT_FALSE(back.expected->activation);
  EXPECT_EQ(back.expected->check_comm.verdict, Verdict::skip);
}

TEST(RankReportEncoding, RefusesCutAndPaddedBytes) {
  const std::string bytes = encode(filled());
  EXPECT_THROW(decode_report(bytes.substr(0, bytes.size() - 1)), Error);
  EXPECT_THROW(decode_report(bytes.substr(0, 3)), Error);
  EXPECT_THROW(decode_report(""), Error);
  EXPECT_THROW(decode_report(bytes + "x"), Error);
}

}  // namespace
}  // namespace pts
