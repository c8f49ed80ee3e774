// The conformance checks on crafted inputs. Inputs are integers or 1 + k * 2^-m, so every
// difference and norm below is exact in float64 and the expected values are compared with
// EXPECT_EQ; each check is seen both passing and failing.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "harness/checks.hpp"

namespace pts {
namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

testing::AssertionResult contains(const std::string& haystack, const std::string& needle) {
  if (haystack.find(needle) != std::string::npos) return testing::AssertionSuccess();
  return testing::AssertionFailure() << "'" << haystack << "'\n  does not contain '" << needle << "'";
}

// --- rel_l2_error ------------------------------------------------------------------------

TEST(RelL2Error, ExactOnCraftedVectors) {
  EXPECT_EQ(rel_l2_error({3, 4}, {3, 4}), 0.0);
  EXPECT_EQ(rel_l2_error({4, 4}, {3, 4}), 1.0 / 5.0);  // ||(1, 0)|| / ||(3, 4)||
  EXPECT_EQ(rel_l2_error({6, 8}, {3, 4}), 1.0);        // ||(3, 4)|| / 5
  EXPECT_EQ(rel_l2_error({1, 2, 3, 4}, {1, 2, 3, 4 + 12}), 12.0 / std::sqrt(1 + 4 + 9 + 256.0));
  EXPECT_EQ(rel_l2_error({0, 0}, {0, 0}), 0.0);
  EXPECT_EQ(rel_l2_error({3, 4}, {0, 0}), 5.0);  // absolute when the reference is zero
  EXPECT_EQ(rel_l2_error({}, {}), 0.0);
}

// --- check_exact -------------------------------------------------------------------------

const std::vector<double> kLosses = {2.5, 2.0, 1.5, 1.25};
const std::vector<double> kParams = {1, -2, 3, -4, 0.5, 0.25};

TEST(CheckExact, PassesOnIdenticalInputs) {
  CheckResult r = check_exact(kLosses, kLosses, kParams, kParams);
  EXPECT_EQ(r.verdict, Verdict::pass);
  EXPECT_EQ(r.value, 0.0);
  EXPECT_EQ(r.reason, "");
}

// 1e-14 is the size of a summation-order difference (see kExactRelTol): it must pass.
TEST(CheckExact, PassesAtSummationOrderNoise) {
  std::vector<double> losses = kLosses, params = kParams;
  losses[2] *= 1 + 1e-14;
  params[3] *= 1 + 1e-14;
  CheckResult r = check_exact(losses, kLosses, params, kParams);
  EXPECT_EQ(r.verdict, Verdict::pass) << r.reason;
  EXPECT_GT(r.value, 0.0);
  EXPECT_LT(r.value, 1e-13);
}

TEST(CheckExact, FailsAtALossStepOff1e9) {
  std::vector<double> losses = kLosses;
  losses[2] *= 1 + 1e-9;
  CheckResult r = check_exact(losses, kLosses, kParams, kParams);
  EXPECT_EQ(r.verdict, Verdict::fail);
  EXPECT_TRUE(contains(r.reason, "loss at step 2"));
  EXPECT_TRUE(contains(r.reason, "exceeds 1.000e-12"));
  EXPECT_NEAR(r.value, 1e-9, 1e-15);  // relative error of one rounded product
}

TEST(CheckExact, FailsAtParametersOff1e9) {
  std::vector<double> params = kParams;
  params[0] *= 1 + 1e-9;
  CheckResult r = check_exact(kLosses, kLosses, params, kParams);
  EXPECT_EQ(r.verdict, Verdict::fail);
  EXPECT_TRUE(contains(r.reason, "final parameters"));
  EXPECT_EQ(r.value, rel_l2_error(params, kParams));
}

TEST(CheckExact, NamesTheWorstPlace) {
  std::vector<double> losses = kLosses, params = kParams;
  losses[1] *= 1 + 1e-9;
  params[0] *= 1 + 1e-6;
  EXPECT_TRUE(contains(check_exact(losses, kLosses, params, kParams).reason, "final parameters"));
  losses[3] *= 1 + 1e-3;
  EXPECT_TRUE(contains(check_exact(losses, kLosses, params, kParams).reason, "loss at step 3"));
}

TEST(CheckExact, FailsOnNaNInALoss) {
  std::vector<double> losses = kLosses;
  losses[1] = kNaN;
  CheckResult r = check_exact(losses, kLosses, kParams, kParams);
  EXPECT_EQ(r.verdict, Verdict::fail);
  EXPECT_TRUE(contains(r.reason, "non-finite"));
  EXPECT_TRUE(contains(r.reason, "loss at step 1"));
}

// A NaN parameter must not be hidden by the finite loss errors compared after it.
TEST(CheckExact, FailsOnNaNInTheParameters) {
  std::vector<double> params = kParams;
  params[4] = kNaN;
  CheckResult r = check_exact(kLosses, kLosses, params, kParams);
  EXPECT_EQ(r.verdict, Verdict::fail);
  EXPECT_TRUE(contains(r.reason, "non-finite"));
  EXPECT_TRUE(contains(r.reason, "final parameters"));
  EXPECT_EQ(check_exact({}, {}, params, kParams).verdict, Verdict::fail);
}

TEST(CheckExact, FailsOnInfinity) {
  std::vector<double> params = kParams;
  params[0] = std::numeric_limits<double>::infinity();
  EXPECT_EQ(check_exact(kLosses, kLosses, params, kParams).verdict, Verdict::fail);
}

TEST(CheckExact, FailsWhenParameterCountsDiffer) {
  std::vector<double> params = kParams;
  params.pop_back();
  CheckResult r = check_exact(kLosses, kLosses, params, kParams);
  EXPECT_EQ(r.verdict, Verdict::fail);
  EXPECT_EQ(r.reason, "exact: 5 parameters, oracle has 6");
}

// --- check_precision ---------------------------------------------------------------------

// Oracle all ones (||o|| = 2, floor 2e-7); single32 off by 2^-10 in one element.
const std::vector<double> kOracle = {1, 1, 1, 1};
std::vector<double> off_by(double d, size_t at = 2) {
  std::vector<double> v = kOracle;
  v[at] += d;
  return v;
}
const double kUlp10 = std::ldexp(1.0, -10);

TEST(CheckPrecision, RatioIsExactOnCraftedVectors) {
  CheckResult r = check_precision(off_by(2 * kUlp10, 0), kOracle, off_by(kUlp10));
  EXPECT_EQ(r.value, 2.0);
  EXPECT_EQ(r.verdict, Verdict::pass);
  EXPECT_EQ(r.reason, "");
}

TEST(CheckPrecision, PassesAtTheBoundAndFailsAbove) {
  CheckResult at = check_precision(off_by(4 * kUlp10), kOracle, off_by(kUlp10));
  EXPECT_EQ(at.value, kPrecisionRatio);
  EXPECT_EQ(at.verdict, Verdict::pass);
  CheckResult above = check_precision(off_by(5 * kUlp10), kOracle, off_by(kUlp10));
  EXPECT_EQ(above.value, 5.0);
  EXPECT_EQ(above.verdict, Verdict::fail);
  EXPECT_TRUE(contains(above.reason, "err_ratio 5.000e+00 exceeds 4.000e+00"));
}

TEST(CheckPrecision, ErrorsSpreadOverElementsUseTheL2Norm) {
  // ||(3, 4) * 2^-10|| / ||(1) * 2^-10|| = 5.
  std::vector<double> p = kOracle;
  p[0] += 3 * kUlp10;
  p[1] -= 4 * kUlp10;
  EXPECT_EQ(check_precision(p, kOracle, off_by(kUlp10)).value, 5.0);
}

// When single32 happens to equal the oracle, the ratio is taken against the floor
// kPrecisionFloorRel * ||oracle|| = 2e-7 instead of 0.
TEST(CheckPrecision, FloorAppliesWhenSingle32EqualsTheOracle) {
  const double floor = kPrecisionFloorRel * 2.0;
  CheckResult same = check_precision(kOracle, kOracle, kOracle);  // 0 / floor, not 0 / 0
  EXPECT_EQ(same.value, 0.0);
  EXPECT_EQ(same.verdict, Verdict::pass);
  const double small = std::ldexp(1.0, -22);  // 2.4e-7: ratio 1.19
  CheckResult near = check_precision(off_by(small), kOracle, kOracle);
  EXPECT_EQ(near.value, small / floor);
  EXPECT_EQ(near.verdict, Verdict::pass);
  const double large = std::ldexp(1.0, -20);  // 9.5e-7: ratio 4.77
  CheckResult far = check_precision(off_by(large), kOracle, kOracle);
  EXPECT_EQ(far.value, large / floor);
  EXPECT_EQ(far.verdict, Verdict::fail);
}

TEST(CheckPrecision, FailsOnNaNAndOnSizeMismatch) {
  std::vector<double> p = kOracle;
  p[1] = kNaN;
  CheckResult r = check_precision(p, kOracle, off_by(kUlp10));
  EXPECT_EQ(r.verdict, Verdict::fail);
  EXPECT_TRUE(contains(r.reason, "non-finite"));
  EXPECT_EQ(check_precision({1, 1, 1}, kOracle, kOracle).verdict, Verdict::fail);
  EXPECT_EQ(check_precision(kOracle, kOracle, {1, 1, 1}).verdict, Verdict::fail);
}

// --- check_comm --------------------------------------------------------------------------

// Per step: 2 all-reduces over dp of 256 floats (1024 bytes each) and one broadcast over tp.
constexpr int kSteps = 3;
const std::vector<ExpectedOp> kExpected = run_expectation(
    [](int) { return std::vector<ExpectedOp>{{"dp", CommOp::all_reduce, 2, 2, 2048}, {"tp", CommOp::broadcast, 2, 1, 80}}; },
    kSteps);

CommStats matching_stats() {
  CommStats s;
  for (int step = 0; step < kSteps; ++step) {
    s.record("dp", CommOp::all_reduce, 2, 256, DType::f32);
    s.record("dp", CommOp::all_reduce, 2, 256, DType::f32);
    s.record("tp", CommOp::broadcast, 2, 10, DType::f64);
  }
  return s;
}

TEST(CheckComm, PassesOnExactMatch) {
  CommStats s = matching_stats();
  ASSERT_EQ(s.get("dp", CommOp::all_reduce).payload_bytes, 6144u);
  CheckResult r = check_comm(s, kExpected);
  EXPECT_EQ(r.verdict, Verdict::pass) << r.reason;
  EXPECT_EQ(check_comm(CommStats{}, {}).verdict, Verdict::pass);
}

TEST(CheckComm, FailsOnOneExtraCall) {
  CommStats s = matching_stats();
  s.record("dp", CommOp::all_reduce, 2, 0, DType::f32);  // same bytes, one call more
  CheckResult r = check_comm(s, kExpected);
  EXPECT_EQ(r.verdict, Verdict::fail);
  EXPECT_EQ(r.reason, "comm: dp/all_reduce counted 7 calls, 6144 bytes; expected 6 calls, 6144 bytes");
}

TEST(CheckComm, FailsOnMissingBytes) {
  CommStats s;
  for (int step = 0; step < kSteps; ++step) {
    s.record("dp", CommOp::all_reduce, 2, 256, DType::f32);
    s.record("dp", CommOp::all_reduce, 2, step == 1 ? 255 : 256, DType::f32);  // 4 bytes short
    s.record("tp", CommOp::broadcast, 2, 10, DType::f64);
  }
  CheckResult r = check_comm(s, kExpected);
  EXPECT_EQ(r.verdict, Verdict::fail);
  EXPECT_EQ(r.reason, "comm: dp/all_reduce counted 6 calls, 6140 bytes; expected 6 calls, 6144 bytes");
}

TEST(CheckComm, FailsOnAStatedOpNeverCalled) {
  CommStats s;
  for (int step = 0; step < kSteps; ++step) s.record("tp", CommOp::broadcast, 2, 10, DType::f64);
  CheckResult r = check_comm(s, kExpected);
  EXPECT_EQ(r.verdict, Verdict::fail);
  EXPECT_TRUE(contains(r.reason, "dp/all_reduce counted 0 calls, 0 bytes; expected 6 calls, 6144 bytes"));
}

TEST(CheckComm, FailsOnAnUnexpectedOp) {
  CommStats s = matching_stats();
  s.record("dp", CommOp::all_gather, 2, 4, DType::f32);
  CheckResult r = check_comm(s, kExpected);
  EXPECT_EQ(r.verdict, Verdict::fail);
  EXPECT_EQ(r.reason, "comm: dp/all_gather counted 1 calls the strategy does not state");
}

TEST(CheckComm, FailsOnAStatedOpOnTheWrongAxis) {
  CommStats s = matching_stats();
  s.record("world", CommOp::all_reduce, 2, 256, DType::f32);
  CheckResult r = check_comm(s, kExpected);
  EXPECT_EQ(r.verdict, Verdict::fail);
  EXPECT_TRUE(contains(r.reason, "world/all_reduce counted 1 calls the strategy does not state"));
}

TEST(CheckComm, RunExpectationSumsAScheduleThatVariesByStep) {
  // An all-reduce of the parameters every 2 steps, and no broadcast on step 0.
  auto every_other = [](int step) {
    std::vector<ExpectedOp> ops;
    if (step % 2 == 1) ops.push_back({"dp", CommOp::all_reduce, 2, 1, 4000});
    if (step > 0) ops.push_back({"tp", CommOp::broadcast, 2, 1, 80});
    return ops;
  };
  std::vector<ExpectedOp> run = run_expectation(every_other, 5);
  ASSERT_EQ(run.size(), 2u);
  EXPECT_EQ(run[0].axis, "dp");  // first stated on step 1, before tp's broadcast
  EXPECT_EQ(run[0].calls, 2u);
  EXPECT_EQ(run[0].payload_bytes, 8000u);
  EXPECT_EQ(run[1].axis, "tp");
  EXPECT_EQ(run[1].calls, 4u);
  EXPECT_EQ(run[1].payload_bytes, 320u);
  CommStats s;
  for (int step = 0; step < 5; ++step) {
    if (step % 2 == 1) s.record("dp", CommOp::all_reduce, 2, 1000, DType::f32);
    if (step > 0) s.record("tp", CommOp::broadcast, 2, 10, DType::f64);
  }
  EXPECT_EQ(check_comm(s, run).verdict, Verdict::pass);
  s.record("tp", CommOp::broadcast, 2, 10, DType::f64);  // also on step 0: one too many
  EXPECT_EQ(check_comm(s, run).reason, "comm: tp/broadcast counted 5 calls, 400 bytes; expected 4 calls, 320 bytes");
  EXPECT_THROW(run_expectation([](int step) { return std::vector<ExpectedOp>{{"dp", CommOp::all_reduce, step + 2, 1, 8}}; }, 2),
               Error);
}

TEST(CheckComm, AnOpWithOnlyWaitTimeIsNotACall) {
  CommStats s = matching_stats();
  s.add_wait("pp", CommOp::recv, 0.5);  // an entry with zero calls
  EXPECT_EQ(check_comm(s, kExpected).verdict, Verdict::pass);
}

// --- check_memory ------------------------------------------------------------------------

TEST(CheckMemory, PassesWhenPeaksEqualTheExpectation) {
  MemoryTracker t;
  t.allocate(MemCategory::param, 400);
  t.allocate(MemCategory::grad, 400);
  t.allocate(MemCategory::optimizer, 300);
  t.release(MemCategory::optimizer, 300);
  t.allocate(MemCategory::optimizer, 800);  // peak 800, not 1100
  t.allocate(MemCategory::activation, 12345);  // not part of the check
  ASSERT_EQ(t.peak(MemCategory::optimizer), 800);
  CheckResult r = check_memory(t, {400, 400, 800});
  EXPECT_EQ(r.verdict, Verdict::pass) << r.reason;
  EXPECT_EQ(check_memory(MemoryTracker{}, {}).verdict, Verdict::pass);
}

TEST(CheckMemory, FailsNamingTheCategoryOffByOneByte) {
  MemoryTracker t;
  t.allocate(MemCategory::param, 400);
  t.allocate(MemCategory::grad, 401);
  t.allocate(MemCategory::optimizer, 800);
  CheckResult r = check_memory(t, {400, 400, 800});
  EXPECT_EQ(r.verdict, Verdict::fail);
  EXPECT_EQ(r.reason, "memory: grad peak 401 bytes, expected 400");

  t.release(MemCategory::param, 400);  // the peak stays 400
  r = check_memory(t, {401, 401, 799});
  EXPECT_EQ(r.reason, "memory: param peak 400 bytes, expected 401, optimizer peak 800 bytes, expected 799");
}

TEST(Verdict, Names) {
  EXPECT_STREQ(to_string(Verdict::pass), "PASS");
  EXPECT_STREQ(to_string(Verdict::fail), "FAIL");
  EXPECT_STREQ(to_string(Verdict::skip), "SKIP");
  EXPECT_EQ(CheckResult{}.verdict, Verdict::skip);  // nothing checked is never a pass
}

// The trace check on crafted traces: two workers (ranks 0, 1) pushing steps 0 and 1 to one
// server (rank 2), bound 1.
std::vector<PushedUpdate> two_by_two() { return {{0, 2, 0}, {1, 2, 0}, {0, 2, 1}, {1, 2, 1}}; }
std::vector<AppliedUpdate> applied_in_order(int staleness_of_last) {
  return {{2, 0, 0, 0, 0, 0}, {2, 1, 0, 0, 1, 0}, {2, 0, 1, 2, 2, 0}, {2, 1, 1, 1, 3, staleness_of_last}};
}

TEST(CheckTrace, PassesWhenEveryPushIsAppliedOnceWithinTheBound) {
  const CheckResult r = check_trace(two_by_two(), applied_in_order(1), 1);
  EXPECT_EQ(r.verdict, Verdict::pass) << r.reason;
  EXPECT_EQ(r.value, 1.0);  // the largest staleness applied
}

TEST(CheckTrace, FailsOnADroppedGradient) {
  std::vector<AppliedUpdate> a = applied_in_order(0);
  a.erase(a.begin() + 1);
  const CheckResult r = check_trace(two_by_two(), a, 1);
  EXPECT_EQ(r.verdict, Verdict::fail);
  EXPECT_EQ(r.reason, "trace: worker 1's gradient of step 0 on server rank 2 pushed 1x, applied 0x");
}

TEST(CheckTrace, FailsOnAGradientAppliedTwiceOrNeverPushed) {
  std::vector<AppliedUpdate> a = applied_in_order(0);
  a.push_back(a[0]);
  a.push_back({2, 0, 5, 3, 5, 0});
  const CheckResult r = check_trace(two_by_two(), a, 1);
  EXPECT_EQ(r.verdict, Verdict::fail);
  EXPECT_EQ(r.reason, "trace: worker 0's gradient of step 0 on server rank 2 pushed 1x, applied 2x, "
                      "worker 0's gradient of step 5 on server rank 2 pushed 0x, applied 1x");
}

TEST(CheckTrace, FailsOnStalenessAboveTheBound) {
  const CheckResult r = check_trace(two_by_two(), applied_in_order(2), 1);
  EXPECT_EQ(r.verdict, Verdict::fail);
  EXPECT_EQ(r.reason, "trace: worker 1's gradient of step 1 on server rank 2 applied with staleness 2 > bound 1");
  EXPECT_EQ(r.value, 2.0);
}

}  // namespace
}  // namespace pts
