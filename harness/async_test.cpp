// The communication-reducing dp algorithms (local-sgd, diloco, delayed-sgd) end to end under
// MPI (4 ranks): each passes exact (float64) and precision (float32) against its serial
// twin and its comm and memory checks; the twin is not the oracle (a case forced to the
// oracle fails where the algorithm differs from ddp, and passes at the degenerate
// settings); each planted bug is caught. Also the suite errors their options raise.
#include <cmath>

#include "harness/suite.hpp"
#include "harness/testing/suite_run.hpp"
#include "strategies/testing/broken_strategies.hpp"

namespace pts {
namespace {

constexpr const char* kSuite = R"(
[defaults]
workload = "mlp-tiny"
steps = 5
global_batch = 24
lr = 0.05

[[case]]
strategy = ["local-sgd", "diloco", "local-sgd-sum", "diloco-uphill", "diloco-no-momentum"]
sync_every = 2
dp = [3, 4]
dtype = ["float64", "float32"]

[[case]]
name = "bf16"
strategy = "diloco"
outer_dtype = "bfloat16"
sync_every = 2
dp = [3, 4]
dtype = ["float64", "float32"]

[[case]]
strategy = ["delayed-sgd", "delayed-sgd-late"]
staleness = [0, 2]
dp = [3, 4]
dtype = ["float64", "float32"]

[[case]]
name = "oracle-local-sgd"
strategy = "local-sgd"
reference = "oracle"
sync_every = [1, 2]
dp = 4

[[case]]
name = "oracle-diloco"
strategy = "diloco"
reference = "oracle"
outer_lr = 1.0
outer_momentum = 0
sync_every = 1
dp = 4

[[case]]
name = "oracle-delayed-sgd"
strategy = "delayed-sgd"
reference = "oracle"
staleness = [0, 1]
dp = 4
)";

const testing_support::Cases& run_once() {
  static const testing_support::Cases cases = [] {
    StrategyRegistry reg = builtin_strategies();
    add_broken_strategies(reg);
    return testing_support::run_suite_text(kSuite, "async", reg);
  }();
  return cases;
}

void expect_case(const std::string& name, const std::string& exact, const std::string& precision,
                 const std::string& comm, const std::string& memory, const std::string& verdict) {
  testing_support::expect_case(run_once(), name, exact, precision, comm, memory, verdict);
}

class Async : public testing::TestWithParam<int> {
 protected:
  std::string n(const std::string& strategy, const std::string& dtype, const std::string& rest = "") const {
    return strategy + "-dp" + std::to_string(GetParam()) + "-" + dtype + rest;
  }
};

TEST_P(Async, EachAlgorithmMatchesItsTwinAndItsStatements) {
  for (const char* s : {"local-sgd", "diloco"}) {
    expect_case(n(s, "float64"), "PASS", "SKIP", "PASS", "PASS", "PASS");
    expect_case(n(s, "float32"), "SKIP", "PASS", "PASS", "PASS", "PASS");
  }
  expect_case(n("bf16", "float64"), "PASS", "SKIP", "PASS", "PASS", "PASS");
  expect_case(n("bf16", "float32"), "SKIP", "PASS", "PASS", "PASS", "PASS");
  for (const char* s : {"-staleness0", "-staleness2"}) {
    expect_case(n("delayed-sgd", "float64", s), "PASS", "SKIP", "PASS", "PASS", "PASS");
    expect_case(n("delayed-sgd", "float32", s), "SKIP", "PASS", "PASS", "PASS", "PASS");
  }
}

TEST_P(Async, SummedParametersAndWrongOuterStepsFailEquivalence) {
  for (const char* s : {"local-sgd-sum", "diloco-uphill", "diloco-no-momentum"}) {
    expect_case(n(s, "float64"), "FAIL", "SKIP", "PASS", "PASS", "FAIL");
    expect_case(n(s, "float32"), "SKIP", "FAIL", "PASS", "PASS", "FAIL");
  }
}

// One step too late: the wrong gradient (exact), one all-reduce too few (comm) and one
// gradient buffer too many (memory).
TEST_P(Async, ADelayOffByOneFailsEquivalenceVolumeAndMemory) {
  for (const char* s : {"-staleness0", "-staleness2"}) {
    expect_case(n("delayed-sgd-late", "float64", s), "FAIL", "SKIP", "FAIL", "FAIL", "FAIL");
    expect_case(n("delayed-sgd-late", "float32", s), "SKIP", "FAIL", "FAIL", "FAIL", "FAIL");
  }
}

INSTANTIATE_TEST_SUITE_P(Conformance, Async, testing::Values(3, 4));

// The degenerate identities hold against the oracle; away from them the oracle is the wrong
// reference, which is why these strategies name a twin.
TEST(Async, TheOracleHoldsOnlyAtTheDegenerateSettings) {
  expect_case("oracle-local-sgd-sync_every1", "PASS", "SKIP", "PASS", "PASS", "PASS");
  expect_case("oracle-local-sgd-sync_every2", "FAIL", "SKIP", "PASS", "PASS", "FAIL");
  expect_case("oracle-diloco", "PASS", "SKIP", "PASS", "PASS", "PASS");  // H 1, outer lr 1, no momentum
  expect_case("oracle-delayed-sgd-staleness0", "PASS", "SKIP", "PASS", "PASS", "PASS");
  expect_case("oracle-delayed-sgd-staleness1", "FAIL", "SKIP", "PASS", "PASS", "FAIL");
}

// Bad settings are refused while the suite is read, naming the file, line and key.
std::string error_of(const std::string& text) {
  return testing_support::suite_error(text, builtin_strategies(), 8);
}

TEST(AsyncOptions, BadSettingsAreRefusedNamingTheKey) {
  const std::string head = "[[case]]\nstrategy = ";
  auto has = [](const std::string& e, const std::string& want) { return e.find(want) != std::string::npos; };
  std::string e = error_of(head + "\"local-sgd\"\ndp = 2\nsync_every = 0\n");
  EXPECT_TRUE(has(e, "test.toml:4: key 'sync_every': sync_every must be at least 1")) << e;
  e = error_of(head + "\"delayed-sgd\"\ndp = 2\nstaleness = -1\n");
  EXPECT_TRUE(has(e, "test.toml:4: key 'staleness': must not be negative, got -1")) << e;
  e = error_of(head + "\"diloco\"\ndp = 2\nouter_dtype = \"fp8\"\n");
  EXPECT_TRUE(has(e, "test.toml:4: key 'outer_dtype': unknown outer_dtype 'fp8'; known: same, bfloat16")) << e;
  e = error_of(head + "\"diloco\"\ndp = 2\nouter_momentum = 1.0\n");
  EXPECT_TRUE(has(e, "test.toml:4: key 'outer_momentum': outer_momentum must be in [0, 1)")) << e;
  e = error_of(head + "\"diloco\"\ndp = 2\nouter_lr = -0.5\n");
  EXPECT_TRUE(has(e, "test.toml:4: key 'outer_lr': outer_lr must be a positive finite number")) << e;
  e = error_of(head + "\"delayed-sgd\"\ndp = 2\nsteps = 4\nstaleness = 4\n");
  EXPECT_TRUE(has(e, "test.toml:5: key 'staleness': staleness 4 would apply no gradient in 4 steps")) << e;
  e = error_of(head + "\"local-sgd\"\ndp = 2\nslow_factor = 1e6\n");
  EXPECT_TRUE(has(e, "test.toml:4: key 'slow_factor': slow_factor must be in [1, 10000]")) << e;
  e = error_of(head + "\"local-sgd\"\ndp = 2\nslow_rank = 2\n");
  EXPECT_TRUE(has(e, "test.toml:4: key 'slow_rank': slow_rank 2 is not a rank of the case's 2")) << e;
  // Options these algorithms do not have are refused, not ignored.
  e = error_of(head + "\"local-sgd\"\ndp = 2\noverlap = true\n");
  EXPECT_TRUE(has(e, "test.toml:4: key 'overlap': is not an option of strategy 'local-sgd'")) << e;
  e = error_of(head + "\"ddp\"\ndp = 2\nsync_every = 2\n");
  EXPECT_TRUE(has(e, "test.toml:4: key 'sync_every': is not an option of strategy 'ddp'; declared by: local-sgd, diloco"))
      << e;
  e = error_of(head + "\"ddp\"\ndp = 2\nreference = \"twin\"\n");
  EXPECT_TRUE(has(e, "test.toml:4: key 'reference': must be auto (the strategy's own reference) or oracle")) << e;
}

}  // namespace
}  // namespace pts
