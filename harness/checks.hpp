// The conformance checks. Each returns PASS/FAIL/SKIP with a reason; SKIP is never FAIL.
//
// Tolerances and where they come from:
// - exact (float64): losses and final parameters may differ from the float64 oracle only
//   by summation order (gemm blocking, the dp all-reduce). Measured over the conformance
//   suite the largest such error is a few 1e-16 to 1e-15 (see README, "Tolerances"); the
//   bound kExactRelTol = 1e-12 leaves a margin of over 100x, while a real bug (a missing
//   1/dp, a skipped bucket, a shard update one element off) gives errors of 8e-3 and more.
// - precision (float32): err_ratio = ||p - p_oracle64|| / max(||p_single32 - p_oracle64||,
//   floor) must stay <= kPrecisionRatio. A parallel float32 run is conformant when it is
//   about as accurate as single-device float32; reordering moves that error by a small
//   factor. The floor (kPrecisionFloorRel * ||p_oracle64||, float32's epsilon scale) keeps the
//   ratio meaningful when the single-device error happens to be tiny.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "core/comm/counting_comm.hpp"
#include "core/memory.hpp"
#include "strategies/strategy.hpp"

namespace pts {

enum class Verdict { pass, fail, skip };
const char* to_string(Verdict v);

struct CheckResult {
  Verdict verdict = Verdict::skip;
  std::string reason;
  double value = std::numeric_limits<double>::quiet_NaN();
};

inline constexpr double kExactRelTol = 1e-12;
inline constexpr double kPrecisionRatio = 4.0;
inline constexpr double kPrecisionFloorRel = 1e-7;

// ||a||_2 and ||a - b||_2 (a and b of one size).
double l2(const std::vector<double>& a);
double l2_diff(const std::vector<double>& a, const std::vector<double>& b);
// ||a - b||_2 / ||b||_2 (0 when both are zero).
double rel_l2_error(const std::vector<double>& a, const std::vector<double>& b);

CheckResult check_exact(const std::vector<double>& losses, const std::vector<double>& oracle_losses,
                        const std::vector<double>& params, const std::vector<double>& oracle_params);
CheckResult check_precision(const std::vector<double>& params, const std::vector<double>& oracle64_params,
                            const std::vector<double>& single32_params);
// A strategy's per-step statements summed over steps 0..steps-1, one entry per (axis, op).
std::vector<ExpectedOp> run_expectation(const std::function<std::vector<ExpectedOp>(int)>& per_step, int steps);
// Counted calls and payload over the run must equal the run's expectation (run_expectation),
// per (axis, op), exactly; any op counted but not expected fails too.
CheckResult check_comm(const CommStats& counted, const std::vector<ExpectedOp>& expected_run);
// Peak param, grad and optimizer bytes (and activation bytes where the strategy states them:
// microbatches in flight x what one holds) must equal the expectation exactly, and the peaks
// of comm buffers and of workspace must not exceed comm_max and workspace_max where stated.
CheckResult check_memory(const MemoryTracker& tracker, const MemoryExpectation& expected);
// An asynchronous run's trace (every rank's, gathered): each pushed gradient applied exactly
// once by the server it was pushed to, none applied that was not pushed, and no applied
// gradient staler than `bound`. value: the largest staleness applied.
CheckResult check_trace(const std::vector<PushedUpdate>& pushed, const std::vector<AppliedUpdate>& applied, int bound);

// A pipeline's measured bubble against its schedule's closed form, with emulated compute
// (emulate_compute: every forward and backward a fixed time, so the step's shape is the
// schedule's): each stage's bubble_frac within kScheduleBubbleTol of (pp-1)/(m+pp-1).
// stages: (measured, theory) per stage. value: the largest difference.
inline constexpr double kScheduleBubbleTol = 0.03;
CheckResult check_bubble(const std::vector<std::pair<double, double>>& stages);

}  // namespace pts
