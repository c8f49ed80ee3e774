// The pipeline's step against its schedule's closed form (2 ranks): with emulate_compute every
// forward takes 20 ms and every backward 40 ms, so each stage's idle share of the step is the
// schedule's, (pp-1)/(m+pp-1), to within kScheduleBubbleTol; gpipe and 1f1b pass
// check_schedule and every other check, and a 1F1B without warm-up (one microbatch through
// the pipe at a time: right numbers, bytes and activations) fails check_schedule alone.
#include <gtest/gtest.h>
#include <mpi.h>

#include "harness/testing/suite_run.hpp"
#include "strategies/testing/broken_strategies.hpp"

namespace pts {
namespace {

const char* kSuite = R"(
[defaults]
workload = "gpt-tiny"
steps = 4
warmup_steps = 1
global_batch = 8
pp = 2
microbatches = 4
dtype = "float64"

[[case]]
strategy = ["pp-gpipe", "pp-1f1b", "pp-1f1b-serial"]
emulate_compute = { f_ms = 20, b_ms = 40 }

[[case]]
name = "real-compute"
strategy = "pp-1f1b-serial"
)";

const testing_support::Cases& run_once() {
  static const testing_support::Cases cases = [] {
    StrategyRegistry reg = builtin_strategies();
    add_broken_strategies(reg);
    return testing_support::run_suite_text(kSuite, "schedule-emulation", reg);
  }();
  return cases;
}

bool root() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank == 0;
}

TEST(ScheduleEmulation, GpipeAnd1f1bIdleAsTheirClosedFormSays) {
  const testing_support::Cases& cases = run_once();
  if (!root()) return;
  for (const char* name : {"pp-gpipe", "pp-1f1b"}) {
    const auto& row = cases.rows.at(name);
    EXPECT_EQ(row.at("schedule"), "PASS") << name << ": " << row.at("reason");
    EXPECT_EQ(row.at("verdict"), "PASS") << name << ": " << row.at("reason");
    EXPECT_EQ(row.at("bubble_theory"), "0.2") << name;  // (2-1)/(4+2-1)
    EXPECT_EQ(row.at("emulate_f_ms"), "20");
    std::printf("%s: bubble_frac %s against %s\n", name, row.at("bubble_frac").c_str(), row.at("bubble_theory").c_str());
  }
}

TEST(ScheduleEmulation, ASerial1f1bFailsOnlyTheScheduleCheck) {
  const testing_support::Cases& cases = run_once();
  if (!root()) return;
  const auto& row = cases.rows.at("pp-1f1b-serial");
  EXPECT_EQ(row.at("schedule"), "FAIL");
  EXPECT_EQ(row.at("exact"), "PASS");
  EXPECT_EQ(row.at("comm"), "PASS");
  EXPECT_EQ(row.at("memory"), "PASS");
  EXPECT_EQ(row.at("verdict"), "FAIL");
  EXPECT_NE(row.at("reason").find("against the schedule's 0.2"), std::string::npos) << row.at("reason");
  std::printf("pp-1f1b-serial: bubble_frac %s; %s\n", row.at("bubble_frac").c_str(), row.at("reason").c_str());
}

// Without emulate_compute the step's shape is this machine's: the check skips (the serial
// schedule passes), and the case records no emulation.
TEST(ScheduleEmulation, RealComputeIsNotJudged) {
  const testing_support::Cases& cases = run_once();
  if (!root()) return;
  const auto& row = cases.rows.at("real-compute");
  EXPECT_EQ(row.at("schedule"), "SKIP");
  EXPECT_EQ(row.at("verdict"), "PASS") << row.at("reason");
  EXPECT_EQ(row.at("emulate_f_ms"), "");
}

}  // namespace
}  // namespace pts
