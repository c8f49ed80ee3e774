// `ptsuite compare` over small hand-made run directories in a temporary folder: each kind of
// finding is seen once (exact and float mismatches, a planted slowdown, a missing case, bad
// input), and a run compared with itself or with a rerun's jitter finds nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <random>

#include "core/error.hpp"
#include "harness/compare.hpp"
#include "harness/csv.hpp"

namespace pts {
namespace {
namespace fs = std::filesystem;

// A run of two cases with `timed` timed steps each (2 warm-up); step times drawn around
// `ms` with 3 % jitter from `seed`, times `slow` for the case "a", times `machine` for both
// (a busy machine). With `probe`, steps.csv has probe_time_s: 4 ms times `machine`, 3 %
// jitter of its own; both stretched by `stolen` of their time waiting for a CPU (cpu_wait_s,
// probe_cpu_wait_s).
struct FakeRun {
  double ms = 10, slow = 1, loss_b = 2.5, machine = 1, stolen = 0;  // stolen: CPU wait / busy time
  bool probe = false;
  int timed = 30, seed = 1;
  std::string payload_a = "1024", git = "abc", compiler = "12.2.0", reference_b = "oracle";
  bool with_case_b = true;

  fs::path write(const fs::path& dir) const {
    fs::create_directories(dir);
    std::ofstream(dir / "cases.csv")
        << "case,strategy,dtype,reference,warmup_steps,step_time_s,comm_payload_bytes,verdict,reason\n"
        << "a,ddp,float64,oracle,2,0.01," << payload_a << ",PASS,\"x, y\"\n"
        << (with_case_b ? "b,fsdp,float32," + reference_b + ",2,0.01,2048,PASS,\n" : "");
    std::ofstream steps(dir / "steps.csv");
    steps << "case,step,loss,oracle_loss,step_time_s," << (probe ? "cpu_wait_s,probe_time_s,probe_cpu_wait_s," : "")
          << "wall_s\n";
    std::mt19937 gen(seed);
    std::normal_distribution<double> jitter(1.0, 0.03);
    for (const char* c : {"a", "b"}) {
      if (std::string(c) == "b" && !with_case_b) continue;
      for (int s = 0; s < timed + 2; ++s) {
        const double t = ms * 1e-3 * machine * jitter(gen) * (std::string(c) == "a" ? slow : 1);
        steps << c << "," << s << "," << fmt_double(std::string(c) == "b" ? loss_b : 2.0 - s * 0.01) << ",,"
              << fmt_double(t * (1 + stolen)) << ",";
        const double p = 4e-3 * machine * jitter(gen);
        if (probe)
          steps << fmt_double(t * stolen) << "," << fmt_double(p * (1 + stolen)) << "," << fmt_double(p * stolen) << ",";
        steps << "\n";
      }
    }
    std::ofstream(dir / "memory.csv") << "case,rank,category,peak_bytes,expected_bytes\n"
                                      << "a,0,param,100,100\na,0,workspace," << 50 * seed << ",\n";
    std::ofstream(dir / "env.json") << R"({"git_sha": ")" << git << R"(", "host": "vm", "time": ")" << seed
                                    << R"(", "versions": {"compiler": ")" << compiler << R"(", "mpi": "4.1", "openblas": "Zen"}})";
    return dir;
  }
};

class CompareTest : public ::testing::Test {
 protected:
  fs::path root_ = fs::temp_directory_path() / ("ptsuite_compare_test_" + std::to_string(::getpid()));
  void TearDown() override { fs::remove_all(root_); }
  Comparison run(const FakeRun& base, const FakeRun& cur, CompareOptions o = {}) {
    return compare_runs(base.write(root_ / "base").string(), cur.write(root_ / "cur").string(), o);
  }
};

int count(const Comparison& c, Finding::Kind k) {
  int n = 0;
  for (const Finding& f : c.findings) n += f.kind == k;
  return n;
}

TEST(MannWhitney, MatchesTheExactFiguresOfSmallSamples) {
  // x = {1, 2, 3}, y = {4, 5, 6}: U_y = 9 of 9 pairs; the normal approximation with
  // continuity correction: z = (9 - 4.5 - 0.5) / sqrt(3 * 3 * 7 / 12) = 1.7457, p = 0.0404.
  EXPECT_NEAR(mann_whitney_greater({1, 2, 3}, {4, 5, 6}), 0.0404, 5e-4);
  // Identical samples: every value tied, no evidence either way.
  EXPECT_EQ(mann_whitney_greater({1, 1, 1}, {1, 1, 1}), 1.0);
  // Symmetric: the opposite direction is near 1.
  EXPECT_GT(mann_whitney_greater({4, 5, 6}, {1, 2, 3}), 0.95);
}

TEST_F(CompareTest, ARunAgainstARerunWithJitterFindsNothing) {
  FakeRun a, b;
  b.seed = 2;  // other jitter, other workspace peak (info), other time in env.json
  Comparison c = run(a, b);
  EXPECT_TRUE(c.same_build);
  EXPECT_EQ(c.cases_compared, 2);
  EXPECT_EQ(c.timings_tested, 2);
  EXPECT_EQ(c.exit_code(), 0) << format_comparison(c, "text");
  EXPECT_EQ(count(c, Finding::Kind::regression), 0);
}

TEST_F(CompareTest, ATenPercentSlowdownIsFlaggedNamingCaseAndColumn) {
  FakeRun a, b;
  b.seed = 2;
  b.slow = 1.10;
  Comparison c = run(a, b);
  ASSERT_EQ(count(c, Finding::Kind::regression), 1) << format_comparison(c, "text");
  const Finding& f = c.findings[0];
  EXPECT_EQ(f.case_name, "a");
  EXPECT_EQ(f.column, "step_time_s");
  EXPECT_NEAR(f.ratio, 1.10, 0.03);  // 3 % jitter per step, medians of 30
  EXPECT_EQ(c.exit_code(), 1);
  // The same slowdown under a given band of 20 % is not reported; as a speed-up it is an
  // improvement, which does not fail the gate.
  EXPECT_EQ(run(a, b, {0.20}).exit_code(), 0);
  // --timing-band off: the timings are not tested at all.
  CompareOptions off;
  off.timings = false;
  Comparison skipped = run(a, b, off);
  EXPECT_EQ(skipped.exit_code(), 0);
  EXPECT_EQ(skipped.timings_tested, 0);
  Comparison faster = run(b, a);
  EXPECT_EQ(count(faster, Finding::Kind::improvement), 1);
  EXPECT_EQ(faster.exit_code(), 0);
}

// With reruns of the baseline's build in BASELINE/reruns/, the band is the spread of the
// runs' medians: a rerun 30 % slower than the baseline (a busy machine) is within it.
TEST_F(CompareTest, TheBandCoversTheSpreadOfTheBaselinesReruns) {
  FakeRun a, b, busy;
  b.seed = 2, b.slow = 1.2;
  busy.seed = 3, busy.slow = 1.3;
  Comparison without = run(a, b);
  EXPECT_EQ(without.exit_code(), 1);
  busy.write(root_ / "busy");
  fs::create_directories(root_ / "base" / "reruns" / "1");
  fs::copy_file(root_ / "busy" / "steps.csv", root_ / "base" / "reruns" / "1" / "steps.csv");
  Comparison with = compare_runs((root_ / "base").string(), (root_ / "cur").string(), {});
  EXPECT_EQ(with.exit_code(), 0) << format_comparison(with, "text");
  b.slow = 1.6;  // beyond the spread of the baseline's runs
  b.write(root_ / "cur");
  Comparison beyond = compare_runs((root_ / "base").string(), (root_ / "cur").string(), {});
  ASSERT_EQ(count(beyond, Finding::Kind::regression), 1) << format_comparison(beyond, "text");
  EXPECT_NE(beyond.findings[0].detail.find("spread of the 2 baseline runs' medians"), std::string::npos);
}

// Two builds measured in rounds (ci/compare_ab.sh): each side's run directory holds its first
// run and reruns/<n>/ the rest. Whole runs move together on a shared machine (`machine`, a
// level per run drawn here with about 5 % spread), so the steps of one run are no samples of
// another: the runs' medians are tested instead.
void write_rounds(const fs::path& dir, FakeRun run, const std::vector<double>& levels, int seed0) {
  for (size_t r = 0; r < levels.size(); ++r) {
    run.machine = levels[r];
    run.seed = seed0 + static_cast<int>(r);
    if (r == 0) {
      run.write(dir);
    } else {
      const fs::path tmp = dir.parent_path() / ("tmp" + std::to_string(r));
      run.write(tmp);
      fs::create_directories(dir / "reruns" / std::to_string(r + 1));
      fs::copy_file(tmp / "steps.csv", dir / "reruns" / std::to_string(r + 1) / "steps.csv");
      fs::remove_all(tmp);
    }
  }
}

TEST_F(CompareTest, MeasuredInRoundsTheRunsAreTheSamples) {
  const std::vector<double> base_levels = {0.93, 1.00, 1.07, 0.97, 1.04, 0.95, 1.06, 1.01};
  const std::vector<double> cur_levels = {1.08, 1.05, 0.99, 0.96, 0.94, 1.02, 0.98, 1.03};
  FakeRun proto;
  write_rounds(root_ / "base", proto, base_levels, 1);
  write_rounds(root_ / "same", proto, cur_levels, 21);
  // The same build: the first runs of the two sides 16 % apart, but no shift between the
  // sides. The steps of the two first runs alone would flag it.
  Comparison same = compare_runs((root_ / "base").string(), (root_ / "same").string(), {});
  EXPECT_EQ(same.exit_code(), 0) << format_comparison(same, "text");
  EXPECT_EQ(same.timings_tested, 2);
  FakeRun first_b = proto, first_s = proto;
  first_b.machine = 0.93, first_s.machine = 1.08, first_s.seed = 21;
  EXPECT_EQ(run(first_b, first_s).exit_code(), 1) << "the steps' test of two single runs flags the 16 % level shift";
  // Case a 12 % slower in every run of the current build: flagged, with the runs' test.
  FakeRun slow = proto;
  slow.slow = 1.12;
  write_rounds(root_ / "slow", slow, cur_levels, 41);
  Comparison c = compare_runs((root_ / "base").string(), (root_ / "slow").string(), {});
  ASSERT_EQ(count(c, Finding::Kind::regression), 1) << format_comparison(c, "text");
  EXPECT_EQ(c.findings[0].case_name, "a");
  EXPECT_NE(c.findings[0].detail.find("medians of 8 and 8 runs' medians"), std::string::npos) << c.findings[0].detail;
  EXPECT_NEAR(c.findings[0].ratio, 1.12, 0.04);
  // Faster by the same: an improvement (the gate passes).
  Comparison faster = compare_runs((root_ / "slow").string(), (root_ / "base").string(), {});
  EXPECT_EQ(count(faster, Finding::Kind::improvement), 1) << format_comparison(faster, "text");
  EXPECT_EQ(faster.exit_code(), 0);
  // Four runs a side are too few for the runs' test (a complete separation has p = 1/70):
  // the steps of the first runs are tested, as without rounds.
  for (const char* side : {"base", "slow"})
    for (int r = 5; r <= 8; ++r) fs::remove_all(root_ / side / "reruns" / std::to_string(r));
  Comparison few = compare_runs((root_ / "base").string(), (root_ / "slow").string(), {});
  for (const Finding& f : few.findings) EXPECT_NE(f.detail.find("timed steps"), std::string::npos) << f.detail;
  EXPECT_GT(few.timings_tested, 0);
}

// A rerun that shows the slowdown again confirms it; one that does not turns it into a note.
TEST_F(CompareTest, ATimingChangeStandsOnlyIfEveryRerunShowsIt) {
  FakeRun a, b, again;
  b.seed = 2, b.slow = 1.3;  // a burst of other work during the case, say
  again.seed = 3;
  Comparison c = run(a, b);
  ASSERT_EQ(c.exit_code(), 1);
  Comparison burst = c;
  confirm_timings(burst, {again.write(root_ / "again").string()}, {});
  EXPECT_EQ(burst.exit_code(), 0) << format_comparison(burst, "text");
  EXPECT_EQ(count(burst, Finding::Kind::note), 1);
  again.slow = 1.3;
  confirm_timings(c, {again.write(root_ / "again").string()}, {});
  EXPECT_EQ(c.exit_code(), 1) << format_comparison(c, "text");
  EXPECT_EQ(count(c, Finding::Kind::regression), 1);
}

// With the timing probe in both runs the ratio step / probe is tested: a machine 50 % slower
// in the current run (steps and probes alike) is no regression, a 10 % slower step on it is.
TEST_F(CompareTest, WithTheProbeABusyMachineCancelsAndASlowerStepStandsOut) {
  FakeRun a, b;
  b.seed = 2, b.machine = 1.5;
  ASSERT_EQ(run(a, b).exit_code(), 1);  // without the probe: both cases flagged
  a.probe = b.probe = true;
  Comparison busy = run(a, b);
  EXPECT_EQ(busy.exit_code(), 0) << format_comparison(busy, "text");
  EXPECT_EQ(busy.timings_tested, 2);
  b.slow = 1.10;
  Comparison slower = run(a, b);
  ASSERT_EQ(count(slower, Finding::Kind::regression), 1) << format_comparison(slower, "text");
  const Finding& f = slower.findings[0];
  EXPECT_EQ(f.case_name, "a");
  EXPECT_EQ(f.column, "step_time_s");
  EXPECT_NEAR(f.ratio, 1.10, 0.03);  // of the medians of step / probe: the machine's 1.5 cancels
  EXPECT_NE(f.detail.find("(step_time_s - cpu_wait_s) / (probe_time_s - probe_cpu_wait_s)"), std::string::npos)
      << f.detail;
  // Other processes holding the cores stretch steps and probe by their CPU wait, which the
  // test takes out: a current run that waited 80 % of its busy time is still 10 % slower.
  b.stolen = 0.8;
  Comparison waited = run(a, b);
  ASSERT_EQ(count(waited, Finding::Kind::regression), 1) << format_comparison(waited, "text");
  EXPECT_NEAR(waited.findings[0].ratio, 1.10, 0.03);
  b.slow = 1;
  EXPECT_EQ(run(a, b).exit_code(), 0);
  b.slow = 1.10;
  // One run without the probe: raw step times, and the busy machine shows again.
  a.probe = false;
  EXPECT_EQ(count(run(a, b), Finding::Kind::regression), 2);
}

// With the probe, the reruns' band is the spread of their medians of step / probe: a rerun
// on a busier machine does not widen it, a rerun whose ratio moved by 20 % does.
TEST_F(CompareTest, WithTheProbeTheBandIsTheSpreadOfTheRerunsRatios) {
  FakeRun a, b, rerun;
  a.probe = b.probe = rerun.probe = true;
  b.seed = 2, b.slow = 1.15;
  rerun.seed = 3, rerun.machine = 1.4;  // busier: the ratio stays
  rerun.write(root_ / "rerun");
  a.write(root_ / "base");
  fs::create_directories(root_ / "base" / "reruns" / "1");
  fs::copy_file(root_ / "rerun" / "steps.csv", root_ / "base" / "reruns" / "1" / "steps.csv");
  Comparison c = compare_runs((root_ / "base").string(), b.write(root_ / "cur").string(), {});
  ASSERT_EQ(count(c, Finding::Kind::regression), 1) << format_comparison(c, "text");
  rerun.slow = 1.2;  // the same build's ratio moved by 20 % in a rerun: 15 % is within that
  rerun.write(root_ / "rerun");
  fs::copy_file(root_ / "rerun" / "steps.csv", root_ / "base" / "reruns" / "1" / "steps.csv",
                fs::copy_options::overwrite_existing);
  Comparison within = compare_runs((root_ / "base").string(), (root_ / "cur").string(), {});
  EXPECT_EQ(within.exit_code(), 0) << format_comparison(within, "text");
}

TEST_F(CompareTest, ExactColumnsMustBeIdentical) {
  FakeRun a, b;
  b.payload_a = "1025";
  Comparison c = run(a, b);
  ASSERT_EQ(count(c, Finding::Kind::mismatch), 1) << format_comparison(c, "text");
  EXPECT_EQ(c.findings[0].column, "comm_payload_bytes");
  EXPECT_EQ(c.findings[0].baseline, "1024");
  EXPECT_EQ(c.findings[0].current, "1025");
  EXPECT_EQ(c.exit_code(), 1);
}

// float32 loss 2.5 vs 2.5 (1 + 1e-6): not bitwise (one build), but within the float32
// cross-build tolerance 1e-12 / eps64 * eps32 = 5.4e-4 once the compiler differs.
TEST_F(CompareTest, FloatColumnsAreBitwiseWithinABuildAndWithinToleranceAcross) {
  FakeRun a, b;
  b.loss_b = 2.5 * (1 + 1e-6);
  Comparison same = run(a, b);
  ASSERT_EQ(count(same, Finding::Kind::mismatch), 1) << format_comparison(same, "text");
  EXPECT_EQ(same.findings[0].column, "loss");
  EXPECT_EQ(same.findings[0].case_name, "b");
  b.compiler = "13.1.0";
  Comparison across = run(a, b);
  EXPECT_FALSE(across.same_build);
  EXPECT_EQ(across.exit_code(), 0) << format_comparison(across, "text");
  ASSERT_EQ(across.env.size(), 1u);
  EXPECT_EQ(across.env[0].key, "versions.compiler");
  b.loss_b = 2.5 * (1 + 1e-3);  // beyond it
  EXPECT_EQ(run(a, b).exit_code(), 1);
}

// An asynchronous case's losses differ run to run (it is checked against its own trace's
// replay): not compared; its verdict still is.
TEST_F(CompareTest, AnAsynchronousCaseKeepsItsVerdictButNotItsLosses) {
  FakeRun a, b;
  b.loss_b = 2.75;
  for (FakeRun* r : {&a, &b}) r->reference_b = "replay:param-server";
  EXPECT_EQ(run(a, b).exit_code(), 0);
}

TEST_F(CompareTest, AnIncompleteRunReportsItsMissingCase) {
  FakeRun a, b;
  b.with_case_b = false;
  Comparison c = run(a, b);
  EXPECT_EQ(count(c, Finding::Kind::missing_case), 1);
  EXPECT_EQ(c.exit_code(), 1);
  Comparison extra = run(b, a);  // a case the baseline lacks is reported, not a failure
  EXPECT_EQ(count(extra, Finding::Kind::new_case), 1);
  EXPECT_EQ(extra.exit_code(), 0) << format_comparison(extra, "text");
}

TEST_F(CompareTest, BadInputIsAConfigError) {
  FakeRun a;
  a.write(root_ / "base");
  fs::create_directories(root_ / "empty");
  EXPECT_THROW(compare_runs((root_ / "base").string(), (root_ / "nowhere").string(), {}), ConfigError);
  EXPECT_THROW(compare_runs((root_ / "base").string(), (root_ / "empty").string(), {}), ConfigError);
  std::ofstream(root_ / "empty" / "cases.csv") << "case,verdict\na,PASS,extra\n";
  EXPECT_THROW(compare_runs((root_ / "base").string(), (root_ / "empty").string(), {}), ConfigError);
  EXPECT_THROW(format_comparison(Comparison{}, "yaml"), ConfigError);
}

TEST_F(CompareTest, EveryFormatNamesTheRegression) {
  FakeRun a, b;
  b.slow = 1.5;
  Comparison c = run(a, b);
  for (const char* format : {"text", "markdown", "json"}) {
    const std::string out = format_comparison(c, format);
    EXPECT_NE(out.find("step_time_s"), std::string::npos) << format;
    EXPECT_NE(out.find("regression"), std::string::npos) << format;
  }
  // json: what fails the gate, case and column, under "regressions".
  const std::string json = format_comparison(c, "json");
  EXPECT_NE(json.find("\"regressions\": [\n    {"), std::string::npos) << json;
}

}  // namespace
}  // namespace pts
