// The conformance checks, end to end under MPI (4 ranks): the real ddp passes every check
// at dp 2, 3 (one rank idle) and 4, and each planted bug is caught by the check meant for
// it, and only where it should be. Verdicts are read from the run's cases.csv on disk.
#include <cstdio>
#include <filesystem>

#include "harness/testing/suite_run.hpp"
#include "strategies/trainer.hpp"
#include "strategies/testing/broken_strategies.hpp"

namespace pts {
namespace {

// Throws while being built on mesh rank 1 only: the case must be recorded as FAIL on
// every rank and the suite must go on.
template <class T>
class ThrowsOnRank1 final : public Strategy<T> {
 public:
  explicit ThrowsOnRank1(const StrategyContext<T>& ctx) {
    if (ctx.mesh.world().rank() == 1) throw Error("planted failure on rank 1");
  }
  void load_batch(int) override {}
  double train_step(int) override { return 0; }
  std::vector<double> full_params(Comm&) override { return {}; }
  std::vector<ExpectedOp> expected_comm(int) const override { return {}; }
  MemoryExpectation expected_memory() const override { return {}; }
};

constexpr const char* kSuite = R"(
[defaults]
workload = "mlp-tiny"
steps = 4
warmup_steps = 1
global_batch = 24
lr = 0.05
bucket_bytes = 2048

[[case]]
strategy = ["ddp", "ddp-sum", "ddp-skip-bucket", "ddp-leak", "ddp-scratch-copy"]
dp = [2, 3, 4]
dtype = ["float64", "float32"]

[[case]]
strategy = ["zero1", "zero2", "fsdp", "zero1-shard-shift", "zero2-shard-shift", "fsdp-double-gather"]
dp = [2, 3, 4]
dtype = ["float64", "float32"]

[[case]]
name = "sharded-adamw-overlap"
strategy = ["zero1", "zero2", "fsdp"]
optimizer = "adamw"
overlap = true
dp = [3, 4]
dtype = ["float64", "float32"]

[[case]]
name = "fsdp-options"
strategy = "fsdp"
workload = "mlp-small"
global_batch = 12
steps = 2
prefetch = [true, false]
reshard_after_forward = [true, false]
dp = 4

[[case]]
strategy = "fsdp-no-free"
workload = "mlp-small"
global_batch = 12
steps = 2
prefetch = [true, false]
dp = 4

[[case]]
name = "ddp-link"
strategy = "ddp"
dp = 2
overlap = [true, false]
link = { bus_gbps = 5, latency_us = 20 }

[[case]]
name = "ddp-adamw"
strategy = "ddp"
optimizer = "adamw"
dp = [3, 4]
dtype = ["float64", "float32"]

[[case]]
name = "ddp-overlap"
strategy = "ddp"
overlap = true
dp = 4
dtype = ["float64", "float32"]

[[case]]
name = "gpt-synthetic"
strategy = "ddp"
workload = "gpt-tiny"
global_batch = 8
steps = 2
dp = 2

[[case]]
name = "gpt-tokens"
strategy = "ddp"
workload = "gpt-tiny"
data = "TOKENS"
global_batch = 8
steps = 2
dp = 2

[[case]]
strategy = "ddp-sum-twin"
dp = [2, 3, 4]
dtype = ["float64", "float32"]

[[case]]
strategy = "throws"
dp = 2

[[case]]
name = "after-throw"
strategy = "ddp"
dp = 2
)";

using testing_support::Cases;

// Runs kSuite once on all ranks; rank 0 reads cases.csv back from disk.
const Cases& run_once() {
  static const Cases cases = [] {
    StrategyRegistry reg = builtin_strategies();
    add_broken_strategies(reg);
    reg.add(strategy_entry<ThrowsOnRank1>("throws", "test: throws on rank 1", validate_parallel));
    // A token file for the gpt case that differs from another only in its data.
    std::string tokens = (std::filesystem::temp_directory_path() / "ptsuite-conformance-tokens.bin").string();
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    if (rank == 0) {
      std::vector<uint16_t> t(4096);
      for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<uint16_t>((i * 7 + i / 13) % 90);
      std::FILE* f = std::fopen(tokens.c_str(), "wb");
      std::fwrite(t.data(), sizeof(uint16_t), t.size(), f);
      std::fclose(f);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    std::string suite = kSuite;
    suite.replace(suite.find("TOKENS"), 6, tokens);
    return testing_support::run_suite_text(suite.c_str(), "conformance", reg);
  }();
  return cases;
}

void expect_case(const std::string& name, const std::string& exact, const std::string& precision,
                 const std::string& comm, const std::string& memory, const std::string& verdict) {
  testing_support::expect_case(run_once(), name, exact, precision, comm, memory, verdict);
}

class DpSizes : public testing::TestWithParam<int> {
 protected:
  std::string n(const std::string& strategy, const std::string& dtype) const {
    return strategy + "-dp" + std::to_string(GetParam()) + "-" + dtype;
  }
};

TEST_P(DpSizes, DdpPassesEveryCheck) {
  expect_case(n("ddp", "float64"), "PASS", "SKIP", "PASS", "PASS", "PASS");
  expect_case(n("ddp", "float32"), "SKIP", "PASS", "PASS", "PASS", "PASS");
}

TEST_P(DpSizes, MissingAverageFailsEquivalence) {
  expect_case(n("ddp-sum", "float64"), "FAIL", "SKIP", "PASS", "PASS", "FAIL");
  expect_case(n("ddp-sum", "float32"), "SKIP", "FAIL", "PASS", "PASS", "FAIL");
}

TEST_P(DpSizes, SkippedBucketFailsEquivalenceAndVolume) {
  expect_case(n("ddp-skip-bucket", "float64"), "FAIL", "SKIP", "FAIL", "PASS", "FAIL");
  expect_case(n("ddp-skip-bucket", "float32"), "SKIP", "FAIL", "FAIL", "PASS", "FAIL");
}

TEST_P(DpSizes, ExtraGradientCopyFailsMemory) {
  expect_case(n("ddp-leak", "float64"), "PASS", "SKIP", "PASS", "FAIL", "FAIL");
  expect_case(n("ddp-leak", "float32"), "SKIP", "PASS", "PASS", "FAIL", "FAIL");
}

TEST_P(DpSizes, ScratchGradientCopyFailsTheWorkspaceBound) {
  expect_case(n("ddp-scratch-copy", "float64"), "PASS", "SKIP", "PASS", "FAIL", "FAIL");
  expect_case(n("ddp-scratch-copy", "float32"), "SKIP", "PASS", "PASS", "FAIL", "FAIL");
}

TEST_P(DpSizes, ShardedStagesPassEveryCheck) {
  for (const char* s : {"zero1", "zero2", "fsdp"}) {
    expect_case(n(s, "float64"), "PASS", "SKIP", "PASS", "PASS", "PASS");
    expect_case(n(s, "float32"), "SKIP", "PASS", "PASS", "PASS", "PASS");
  }
}

TEST_P(DpSizes, ShiftedShardUpdateFailsEquivalence) {
  for (const char* s : {"zero1-shard-shift", "zero2-shard-shift"}) {
    expect_case(n(s, "float64"), "FAIL", "SKIP", "PASS", "PASS", "FAIL");
    expect_case(n(s, "float32"), "SKIP", "FAIL", "PASS", "PASS", "FAIL");
  }
}

TEST_P(DpSizes, DoubleGatherFailsVolume) {
  expect_case(n("fsdp-double-gather", "float64"), "PASS", "SKIP", "FAIL", "PASS", "FAIL");
  expect_case(n("fsdp-double-gather", "float32"), "SKIP", "PASS", "FAIL", "PASS", "FAIL");
}

INSTANTIATE_TEST_SUITE_P(Conformance, DpSizes, testing::Values(2, 3, 4));

TEST(Conformance, ShardedWithAdamwAndOverlapPass) {
  for (const char* s : {"zero1", "zero2", "fsdp"})
    for (const char* dp : {"dp3", "dp4"}) {
      // Labels follow key order: dp, dtype, strategy.
      std::string base = std::string("sharded-adamw-overlap-") + dp + "-";
      expect_case(base + "float64-" + s, "PASS", "SKIP", "PASS", "PASS", "PASS");
      expect_case(base + "float32-" + s, "SKIP", "PASS", "PASS", "PASS", "PASS");
    }
}

TEST(Conformance, FsdpOptionsPassAndALeakedUnitFailsMemory) {
  for (const char* n : {"fsdp-options-prefetch-reshard_after_forward", "fsdp-options-prefetch-no-reshard_after_forward",
                        "fsdp-options-no-prefetch-reshard_after_forward",
                        "fsdp-options-no-prefetch-no-reshard_after_forward"})
    expect_case(n, "PASS", "SKIP", "PASS", "PASS", "PASS");
  expect_case("fsdp-no-free-prefetch", "PASS", "SKIP", "PASS", "FAIL", "FAIL");
  expect_case("fsdp-no-free-no-prefetch", "PASS", "SKIP", "PASS", "FAIL", "FAIL");
}

TEST(Conformance, LinkModelChangesNoResult) {
  expect_case("ddp-link-overlap", "PASS", "SKIP", "PASS", "PASS", "PASS");
  expect_case("ddp-link-no-overlap", "PASS", "SKIP", "PASS", "PASS", "PASS");
}

TEST(Conformance, AdamwAndOverlapPass) {
  for (const char* n : {"ddp-adamw-dp3-float64", "ddp-adamw-dp4-float64", "ddp-overlap-float64"})
    expect_case(n, "PASS", "SKIP", "PASS", "PASS", "PASS");
  for (const char* n : {"ddp-adamw-dp3-float32", "ddp-adamw-dp4-float32", "ddp-overlap-float32"})
    expect_case(n, "SKIP", "PASS", "PASS", "PASS", "PASS");
}

// The reference is cached by its whole configuration: two gpt cases that differ only in
// their data get their own oracles (sharing one, the token-file case would fail exact).
TEST(Conformance, CasesDifferingOnlyInDataGetTheirOwnOracle) {
  expect_case("gpt-synthetic", "PASS", "SKIP", "PASS", "PASS", "PASS");
  expect_case("gpt-tokens", "PASS", "SKIP", "PASS", "PASS", "PASS");
  StrategyRegistry reg = builtin_strategies();
  CaseConfig a;
  a.workload = "gpt-tiny";
  CaseConfig b = a;
  b.data = "tokens.bin";
  EXPECT_NE(config_key(reference_config(*reg.find("ddp"), a)), config_key(reference_config(*reg.find("ddp"), b)));
  // ...while what does not change the oracle's training does not split the cache.
  b = a;
  b.strategy = "fsdp";
  b.layout.dp = 4;
  b.bucket_bytes = 1;
  EXPECT_EQ(config_key(reference_config(*reg.find("ddp"), a)), config_key(reference_config(*reg.find("fsdp"), b)));
}

// A strategy names its reference: summing gradients over dp is wrong against the oracle
// (ddp-sum fails) but right against its twin, single-device SGD at lr x dp.
TEST_P(DpSizes, StrategyIsCheckedAgainstTheReferenceItNames) {
  expect_case(n("ddp-sum-twin", "float64"), "PASS", "SKIP", "PASS", "PASS", "PASS");
  expect_case(n("ddp-sum-twin", "float32"), "SKIP", "PASS", "PASS", "PASS", "PASS");
}

TEST(Conformance, ThrowOnOneRankIsRecordedAndTheSuiteGoesOn) {
  expect_case("throws", "SKIP", "SKIP", "SKIP", "SKIP", "FAIL");
  expect_case("after-throw", "PASS", "SKIP", "PASS", "PASS", "PASS");
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) {
    EXPECT_NE(run_once().rows.at("throws").at("reason").find("rank 1 threw: planted failure"), std::string::npos);
  }
}

}  // namespace
}  // namespace pts
