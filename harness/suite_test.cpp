// The suite parser: matrix expansion and generated names, then every error path, each
// pinned to the exact "FILE:LINE: key 'KEY':" prefix a user is pointed at. Line numbers
// below count from 1 at the first line of each raw string.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "harness/schema.hpp"
#include "harness/suite.hpp"
#include "strategies/testing/broken_strategies.hpp"
#include "strategies/trainer.hpp"
#include "workloads/workload.hpp"

namespace pts {
namespace {

const StrategyRegistry& registry() {
  static const StrategyRegistry r = builtin_strategies();
  return r;
}

Suite parse(const std::string& text, int world_size = 8) {
  return parse_suite(text, "test.toml", registry(), world_size);
}

// The ConfigError message parsing `text` raises; a test failure if it parses.
std::string error_of(const std::string& text, int world_size = 8, const StrategyRegistry& r = registry()) {
  try {
    parse_suite(text, "test.toml", r, world_size);
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a ConfigError, but the suite parsed:\n" << text;
  return "";
}

testing::AssertionResult contains(const std::string& haystack, const std::string& needle) {
  if (haystack.find(needle) != std::string::npos) return testing::AssertionSuccess();
  return testing::AssertionFailure() << "'" << haystack << "'\n  does not contain '" << needle << "'";
}

std::vector<std::string> names_of(const Suite& s) {
  std::vector<std::string> n;
  for (const auto& c : s.cases) n.push_back(c.name);
  return n;
}

// --- expansion and names ---------------------------------------------------------------

TEST(Suite, TwoListsExpandToTheirCartesianProductLastListFastest) {
  Suite s = parse(R"(description = "two lists"
[[case]]
strategy = "ddp"
dp = [1, 2]
dtype = ["float64", "float32"]
)");
  EXPECT_EQ(s.path, "test.toml");
  EXPECT_EQ(s.description, "two lists");
  ASSERT_EQ(s.cases.size(), 4u);
  EXPECT_EQ(names_of(s), (std::vector<std::string>{"ddp-dp1-float64", "ddp-dp1-float32", "ddp-dp2-float64",
                                                    "ddp-dp2-float32"}));
  const int want_dp[] = {1, 1, 2, 2};
  const char* want_dtype[] = {"float64", "float32", "float64", "float32"};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(s.cases[i].layout.dp, want_dp[i]) << i;
    EXPECT_EQ(s.cases[i].dtype, want_dtype[i]) << i;
    EXPECT_EQ(s.cases[i].strategy, "ddp") << i;
  }
}

// The axes nest in key order (toml++ keeps a table's keys sorted), not in the order the
// file lists them: dp is the outer axis here although optimizer comes first.
TEST(Suite, MatrixAxesNestInKeyOrder) {
  Suite s = parse(R"([[case]]
strategy = "ddp"
optimizer = ["sgd", "adamw"]
dp = [1, 2]
)");
  EXPECT_EQ(names_of(s), (std::vector<std::string>{"ddp-dp1-sgd", "ddp-dp1-adamw", "ddp-dp2-sgd", "ddp-dp2-adamw"}));
}

TEST(Suite, ThreeListsExpandToTwelveCases) {
  Suite s = parse(R"([[case]]
strategy = "ddp"
dp = [1, 2, 4]
dtype = ["float64", "float32"]
optimizer = ["sgd", "adamw"]
)");
  ASSERT_EQ(s.cases.size(), 12u);
  EXPECT_EQ(s.cases.front().name, "ddp-dp1-float64-sgd");
  EXPECT_EQ(s.cases[1].name, "ddp-dp1-float64-adamw");
  EXPECT_EQ(s.cases[2].name, "ddp-dp1-float32-sgd");
  EXPECT_EQ(s.cases.back().name, "ddp-dp4-float32-adamw");
}

TEST(Suite, ASingleCaseWithoutListsIsNamedAfterItsStrategy) {
  Suite s = parse(R"([[case]]
strategy = "ddp"
dp = 2
)");
  EXPECT_EQ(names_of(s), (std::vector<std::string>{"ddp"}));
  EXPECT_EQ(s.cases[0].layout.dp, 2);
}

TEST(Suite, AOneElementListDoesNotVaryAndAddsNoLabel) {
  Suite s = parse(R"([[case]]
strategy = "ddp"
dp = [2]
dtype = ["float64", "float32"]
)");
  EXPECT_EQ(names_of(s), (std::vector<std::string>{"ddp-float64", "ddp-float32"}));
  EXPECT_EQ(s.cases[0].layout.dp, 2);
}

TEST(Suite, ExplicitNameIsFollowedByTheVaryingLabels) {
  Suite s = parse(R"([[case]]
name = "base"
strategy = "ddp"
dp = 2
dtype = ["float64", "float32"]
)");
  EXPECT_EQ(names_of(s), (std::vector<std::string>{"base-float64", "base-float32"}));
}

TEST(Suite, AVaryingStrategyIsNotRepeatedInTheName) {
  Suite s = parse(R"([[case]]
strategy = ["single", "ddp"]
)");
  EXPECT_EQ(names_of(s), (std::vector<std::string>{"single", "ddp"}));
}

TEST(Suite, AVaryingStrategyUnderAnExplicitNameIsALabel) {
  Suite s = parse(R"([[case]]
name = "cmp"
strategy = ["single", "ddp"]
)");
  EXPECT_EQ(names_of(s), (std::vector<std::string>{"cmp-single", "cmp-ddp"}));
}

TEST(Suite, BoolLabelIsTheKeyOrNoKey) {
  Suite s = parse(R"([[case]]
strategy = "ddp"
dp = 2
overlap = [true, false]
)");
  EXPECT_EQ(names_of(s), (std::vector<std::string>{"ddp-overlap", "ddp-no-overlap"}));
  EXPECT_TRUE(s.cases[0].overlap);
  EXPECT_FALSE(s.cases[1].overlap);
}

TEST(Suite, NumberLabelIsKeyAndValue) {
  Suite s = parse(R"([[case]]
strategy = "single"
lr = [0.5, 0.25]
)");
  EXPECT_EQ(names_of(s), (std::vector<std::string>{"single-lr0.5", "single-lr0.25"}));
  EXPECT_EQ(s.cases[0].optimizer.lr, 0.5);
  EXPECT_EQ(s.cases[1].optimizer.lr, 0.25);
}

TEST(Suite, DefaultsApplyToEveryCaseAndACaseOverridesThem) {
  Suite s = parse(R"([defaults]
workload = "mlp-tiny"
steps = 6
warmup_steps = 2
global_batch = 64
lr = 0.5
dtype = ["float64", "float32"]
seed = 7

[[case]]
strategy = "single"

[[case]]
strategy = "ddp"
dp = 4
steps = 3
dtype = "float32"
lr = 1
)");
  ASSERT_EQ(names_of(s), (std::vector<std::string>{"single-float64", "single-float32", "ddp"}));
  for (const CaseConfig& c : s.cases) {
    EXPECT_EQ(c.workload, "mlp-tiny") << c.name;
    EXPECT_EQ(c.warmup_steps, 2) << c.name;
    EXPECT_EQ(c.global_batch, 64) << c.name;
    EXPECT_EQ(c.seed, 7u) << c.name;
  }
  EXPECT_EQ(s.cases[0].steps, 6);
  EXPECT_EQ(s.cases[0].optimizer.lr, 0.5);
  const CaseConfig& ddp = s.cases[2];
  EXPECT_EQ(ddp.steps, 3);
  EXPECT_EQ(ddp.dtype, "float32");  // a scalar overrides a defaults list: no matrix
  EXPECT_EQ(ddp.optimizer.lr, 1.0);  // an integer is accepted where a number is wanted
  EXPECT_EQ(ddp.layout.dp, 4);
}

// `ptsuite run --set KEY=VALUE`: over [defaults], each case's own value and a generated
// case's, for every case; a plain word is a string, anything else a TOML value.
TEST(Suite, SetOverridesReplaceTheKeyInEveryCase) {
  const std::string text = R"([defaults]
workload = "mlp-tiny"
steps = 6
global_batch = 32

[[case]]
strategy = "single"
steps = 4
dtype = ["float64", "float32"]

[[case]]
strategy = "ddp"
dp = 2
backend = "cpu"
)";
  Suite s = parse_suite(text, "test.toml", registry(), 8, {"steps=3", "backend=cpu", "lr = 0.25"});
  ASSERT_EQ(names_of(s), (std::vector<std::string>{"single-float64", "single-float32", "ddp"}));
  for (const CaseConfig& c : s.cases) {
    EXPECT_EQ(c.steps, 3) << c.name;
    EXPECT_EQ(c.backend, "cpu") << c.name;
    EXPECT_EQ(c.optimizer.lr, 0.25) << c.name;
  }
  // A list is a matrix axis, as in the file.
  Suite m = parse_suite(text, "test.toml", registry(), 8, {"global_batch=[16, 32]"});
  EXPECT_EQ(m.cases.size(), 6u);
  // Generated cases too.
  Suite g = parse_suite("[[generate]]\nstrategies = [\"ddp\"]\n", "test.toml", registry(), 8, {"steps=2"});
  ASSERT_FALSE(g.cases.empty());
  for (const CaseConfig& c : g.cases) EXPECT_EQ(c.steps, 2) << c.name;
}

TEST(SuiteErrors, BadSetOverridesAreNamed) {
  const std::string text = "[[case]]\nstrategy = \"ddp\"\ndp = 2\n";
  auto error = [&](std::vector<std::string> o) {
    try {
      parse_suite(text, "test.toml", registry(), 8, o);
    } catch (const ConfigError& e) {
      return std::string(e.what());
    }
    ADD_FAILURE() << "expected a ConfigError for --set " << o[0];
    return std::string();
  };
  EXPECT_TRUE(contains(error({"backend"}), "--set 'backend': expected KEY=VALUE"));
  EXPECT_TRUE(contains(error({"=3"}), "--set '=3': expected KEY=VALUE"));
  EXPECT_TRUE(contains(error({"backend=tpu"}), "key 'backend': unknown backend 'tpu'"));
  EXPECT_TRUE(contains(error({"stepz=3"}), "stepz"));
  EXPECT_TRUE(contains(error({"steps=nan"}), "steps"));
  EXPECT_TRUE(contains(error({"lr=a\"b"}), "neither a TOML value nor a plain word"));
}

TEST(Suite, EveryKeySetsItsField) {
  Suite s = parse(R"([[case]]
name = "all"
strategy = "hybrid"
workload = "gpt-tiny"
dtype = "float64"
backend = "cpu"
dp = 2
tp = 1
pp = 1
cp = 2
steps = 5
warmup_steps = 3
global_batch = 16
optimizer = "adamw"
lr = 0.125
momentum = 0.5
weight_decay = 0.25
beta1 = 0.75
beta2 = 0.875
eps = 0.0625
seed = 99
check = "precision"
reference = "oracle"
target_loss = 2.5
target_window = 7
bucket_bytes = 1024
overlap = true
prefetch = false
reshard_after_forward = false
link = { bus_gbps = 2.5, latency_us = 7 }
emulate_compute = { f_ms = 1, b_ms = 2, w_ms = 3 }
data = "synthetic"
timing_probe = true
zero_stage = 2
schedule = "gpipe"
virtual_stages = 1
microbatches = 2
stage_layers = "4"
slow_rank = 1
slow_factor = 2.5
)");
  ASSERT_EQ(s.cases.size(), 1u);
  const CaseConfig& c = s.cases[0];
  EXPECT_EQ(c.name, "all");
  EXPECT_EQ(c.strategy, "hybrid");
  EXPECT_EQ(c.workload, "gpt-tiny");
  EXPECT_EQ(c.dtype, "float64");
  EXPECT_EQ(c.backend, "cpu");
  EXPECT_EQ(c.layout.dp, 2);
  EXPECT_EQ(c.layout.tp, 1);
  EXPECT_EQ(c.layout.pp, 1);
  EXPECT_EQ(c.layout.cp, 2);
  EXPECT_EQ(c.steps, 5);
  EXPECT_EQ(c.warmup_steps, 3);
  EXPECT_EQ(c.global_batch, 16);
  EXPECT_EQ(c.optimizer.kind, "adamw");
  EXPECT_EQ(c.optimizer.lr, 0.125);
  EXPECT_EQ(c.optimizer.momentum, 0.5);
  EXPECT_EQ(c.optimizer.weight_decay, 0.25);
  EXPECT_EQ(c.optimizer.beta1, 0.75);
  EXPECT_EQ(c.optimizer.beta2, 0.875);
  EXPECT_EQ(c.optimizer.eps, 0.0625);
  EXPECT_EQ(c.seed, 99u);
  EXPECT_EQ(c.check, "precision");
  EXPECT_EQ(c.reference, "oracle");
  EXPECT_EQ(c.target_loss, 2.5);
  EXPECT_EQ(c.target_window, 7);
  EXPECT_EQ(c.bucket_bytes, 1024);
  EXPECT_TRUE(c.overlap);
  EXPECT_FALSE(c.prefetch);
  EXPECT_FALSE(c.reshard_after_forward);
  EXPECT_EQ(c.link.bus_gbps, 2.5);
  EXPECT_EQ(c.link.latency_us, 7.0);
  EXPECT_EQ(c.emulate_compute.f_ms, 1.0);
  EXPECT_EQ(c.emulate_compute.b_ms, 2.0);
  EXPECT_EQ(c.emulate_compute.w_ms, 3.0);
  EXPECT_EQ(c.data, "synthetic");
  EXPECT_TRUE(c.timing_probe);
  EXPECT_EQ(c.zero_stage, 2);
  EXPECT_EQ(c.schedule, "gpipe");
  EXPECT_EQ(c.virtual_stages, 1);
  EXPECT_EQ(c.microbatches, 2);
  EXPECT_EQ(c.stage_layers, std::vector<int>{4});
  EXPECT_EQ(c.slow_rank, 1);
  EXPECT_EQ(c.slow_factor, 2.5);
  // One per key above, plus the options of strategies other than hybrid (sync_every,
  // outer_lr, outer_momentum, outer_dtype, staleness: harness/async_test.cpp sets them;
  // servers: harness/param_server_test.cpp).
  EXPECT_EQ(suite_keys(registry()).size(), 40u + 6u);
}

// A strategy declares its options: the parser takes them (with their defaults) for cases of
// that strategy only, and cases.csv gets a column for each.
TEST(StrategyOptions, DeclaredOptionsAreParsedDefaultedAndBecomeColumns) {
  StrategyRegistry reg = builtin_strategies();
  StrategyInfo info = *reg.find("ddp");
  info.name = "ddp-every";
  OptionSpec every;
  every.key = "exchange_every";
  every.type = OptionType::integer;
  every.default_value = int64_t{4};
  every.unit = "steps";
  every.meaning = "steps between synchronisations";
  info.options.push_back(every);
  reg.add(info);
  Suite s = parse_suite(R"([defaults]
exchange_every = 8
dp = 2

[[case]]
name = "set"
strategy = "ddp-every"
exchange_every = 2

[[case]]
name = "from-defaults"
strategy = "ddp-every"

[[case]]
name = "other"
strategy = "ddp"
)", "test.toml", reg, 8);
  ASSERT_EQ(s.cases.size(), 3u);
  EXPECT_EQ(s.cases[0].option<int64_t>("exchange_every"), 2);
  EXPECT_EQ(s.cases[1].option<int64_t>("exchange_every"), 8);
  EXPECT_EQ(s.cases[2].options.count("exchange_every"), 0u);  // the [defaults] value is for ddp-every only
  Suite d = parse_suite("[[case]]\nstrategy = \"ddp-every\"\ndp = 2\n", "test.toml", reg, 8);
  EXPECT_EQ(d.cases[0].option<int64_t>("exchange_every"), 4);  // the declared default
  const auto cols = cases_schema(reg).names();
  EXPECT_NE(std::find(cols.begin(), cols.end(), "exchange_every"), cols.end());
  EXPECT_NE(std::find(cols.begin(), cols.end(), "bucket_bytes"), cols.end());  // the trainer's, declared too
  const auto shipped = cases_schema().names();
  EXPECT_EQ(std::find(shipped.begin(), shipped.end(), "exchange_every"), shipped.end());
  // Declared twice with another type: refused.
  StrategyInfo clash = *reg.find("ddp");
  clash.name = "ddp-clash";
  every.type = OptionType::string;
  clash.options.push_back(every);
  EXPECT_THROW(reg.add(clash), Error);
}

TEST(SuiteErrors, UnknownBackendNamesTheKnownOnes) {
  std::string e = error_of("[[case]]\nstrategy = \"ddp\"\nbackend = \"tpu\"\n");
  EXPECT_TRUE(contains(e, "test.toml:3: key 'backend': unknown backend 'tpu'; known: cpu")) << e;
}

TEST(SuiteKeys, EmulateComputeIsReadAndItsBadValuesNamed) {
  const std::string head = "[[case]]\nstrategy = \"pp-1f1b\"\nworkload = \"gpt-tiny\"\npp = 2\n";
  Suite s = parse(head + "emulate_compute = { f_ms = 5, b_ms = 10.5, w_ms = 2 }\n");
  ASSERT_EQ(s.cases.size(), 1u);
  EXPECT_EQ(s.cases[0].emulate_compute.f_ms, 5.0);
  EXPECT_EQ(s.cases[0].emulate_compute.b_ms, 10.5);
  EXPECT_EQ(s.cases[0].emulate_compute.w_ms, 2.0);
  EXPECT_TRUE(s.cases[0].emulate_compute.enabled());
  EXPECT_FALSE(parse(head).cases[0].emulate_compute.enabled());
  std::string e = error_of(head + "emulate_compute = { f_ms = 5, x_ms = 3 }\n");
  EXPECT_TRUE(contains(e, "test.toml:5: key 'emulate_compute.x_ms': unknown setting")) << e;
  e = error_of(head + "emulate_compute = { f_ms = nan }\n");
  EXPECT_TRUE(contains(e, "key 'emulate_compute.f_ms': must be a finite number of milliseconds in [0, 60000]")) << e;
  e = error_of(head + "emulate_compute = { b_ms = 60001 }\n");
  EXPECT_TRUE(contains(e, "key 'emulate_compute.b_ms': must be a finite number")) << e;
  e = error_of(head + "emulate_compute = { f_ms = 0 }\n");
  EXPECT_TRUE(contains(e, "key 'emulate_compute': needs f_ms, b_ms or w_ms > 0")) << e;
  e = error_of(head + "emulate_compute = 5\n");
  EXPECT_TRUE(contains(e, "key 'emulate_compute': must be a table { f_ms = ms, b_ms = ms, w_ms = ms }")) << e;
}

TEST(StrategyOptions, AnOptionTheCasesStrategyDoesNotDeclareIsAnError) {
  std::string e = error_of("[[case]]\nstrategy = \"ddp\"\ndp = 2\nzero_stage = 2\n");
  EXPECT_TRUE(contains(e, "test.toml:4: key 'zero_stage': is not an option of strategy 'ddp'; declared by: hybrid")) << e;
  e = error_of("[[case]]\nstrategy = \"single\"\nbucket_bytes = 2\n");
  EXPECT_TRUE(contains(e, "key 'bucket_bytes': is not an option of strategy 'single'")) << e;
}

// --- errors: each names the file, the line and the key ---------------------------------

TEST(SuiteErrors, UnknownKey) {
  std::string e = error_of(R"([[case]]
strategy = "ddp"
zeta = 3
)");
  EXPECT_TRUE(contains(e, "test.toml:3: key 'zeta': unknown key; known keys: "));
  for (const std::string& k : suite_keys(registry())) EXPECT_TRUE(contains(e, k));
}

TEST(SuiteErrors, UnknownKeyInDefaults) {
  std::string e = error_of(R"([defaults]
steps = 4
stpes = 4

[[case]]
strategy = "single"
)");
  EXPECT_TRUE(contains(e, "test.toml:3: key 'stpes': unknown key"));
}

TEST(SuiteErrors, StringWhereAnIntegerIsWanted) {
  std::string e = error_of(R"([[case]]
strategy = "ddp"
dp = "2"
)");
  EXPECT_TRUE(contains(e, "test.toml:3: key 'dp': must be an integer"));
}

TEST(SuiteErrors, FloatWhereAnIntegerIsWanted) {
  std::string e = error_of(R"([[case]]
strategy = "single"

steps = 4.0
)");
  EXPECT_TRUE(contains(e, "test.toml:4: key 'steps': must be an integer"));
}

TEST(SuiteErrors, WrongTypeInsideAListNamesTheElementsLine) {
  std::string e = error_of(R"([[case]]
strategy = "ddp"
dp = [
  1,
  "two",
]
)");
  EXPECT_TRUE(contains(e, "test.toml:5: key 'dp': must be an integer"));
}

TEST(SuiteErrors, WrongTypeForBoolAndString) {
  EXPECT_TRUE(contains(error_of("[[case]]\noverlap = 1\n"), "test.toml:2: key 'overlap': must be true or false"));
  EXPECT_TRUE(contains(error_of("[[case]]\nstrategy = 3\n"), "test.toml:2: key 'strategy': must be a string"));
  EXPECT_TRUE(contains(error_of("[[case]]\nlr = \"fast\"\n"), "test.toml:2: key 'lr': must be a number"));
}

TEST(SuiteErrors, UnknownStrategyListsTheKnownOnes) {
  std::string e = error_of(R"([defaults]
steps = 4
[[case]]
strategy = "zero9"
)");
  EXPECT_TRUE(contains(e, "test.toml:4: key 'strategy': unknown strategy 'zero9'; known: "));
  for (const StrategyInfo& s : registry().all()) EXPECT_TRUE(contains(e, s.name));
}

// Test-only strategies are not shipped: the builtin registry rejects them and a registry
// they were added to accepts them.
TEST(SuiteErrors, BrokenStrategiesAreOnlyKnownWhereAdded) {
  const std::string text = "[[case]]\nstrategy = \"ddp-sum\"\ndp = 2\n";
  EXPECT_TRUE(contains(error_of(text), "test.toml:2: key 'strategy': unknown strategy 'ddp-sum'"));
  StrategyRegistry with_broken = builtin_strategies();
  add_broken_strategies(with_broken);
  Suite s = parse_suite(text, "test.toml", with_broken, 2);
  EXPECT_EQ(names_of(s), (std::vector<std::string>{"ddp-sum"}));
}

TEST(SuiteErrors, UnknownWorkloadListsTheKnownOnes) {
  std::string e = error_of(R"([[case]]
strategy = "single"
workload = "gpt-huge"
)");
  EXPECT_TRUE(contains(e, "test.toml:3: key 'workload': unknown workload 'gpt-huge'; known: "));
  for (const WorkloadSpec& w : builtin_workloads()) EXPECT_TRUE(contains(e, w.name));
}

TEST(SuiteErrors, UnknownWorkloadSetInDefaultsPointsAtTheDefaults) {
  std::string e = error_of(R"([defaults]
workload = "gpt-huge"

[[case]]
strategy = "single"
)");
  EXPECT_TRUE(contains(e, "test.toml:2: key 'workload': unknown workload 'gpt-huge'"));
}

TEST(SuiteErrors, BadDtype) {
  std::string e = error_of(R"([[case]]
strategy = "single"
dtype = ["float64", "bfloat16"]
)");
  EXPECT_TRUE(contains(e, "test.toml:3: key 'dtype': must be float32 or float64, got 'bfloat16'"));
}

TEST(SuiteErrors, BadOptimizerAndCheck) {
  EXPECT_TRUE(contains(error_of("[[case]]\noptimizer = \"lion\"\n"),
                       "test.toml:2: key 'optimizer': must be sgd or adamw, got 'lion'"));
  EXPECT_TRUE(contains(error_of("[[case]]\ncheck = \"some\"\n"),
                       "test.toml:2: key 'check': must be auto, exact, precision or none, got 'some'"));
  EXPECT_TRUE(contains(error_of("[[case]]\ndtype = \"float32\"\ncheck = \"exact\"\n"),
                       "test.toml:3: key 'check': exact needs dtype float64"));
}

TEST(SuiteErrors, LayoutLargerThanTheWorldSpellsOutTheProduct) {
  std::string e = error_of(R"([[case]]
strategy = "ddp"
dp = 2
tp = 2
pp = 2
)",
                           6);
  EXPECT_TRUE(contains(e, "test.toml:3: key 'dp': dp(2) * tp(2) * pp(2) = 8, but 6 ranks are running"));
  EXPECT_TRUE(contains(e, "mpirun -np 8"));
}

TEST(SuiteErrors, LayoutThatFitsTheWorldExactlyIsAccepted) {
  Suite s = parse("[[case]]\nstrategy = \"ddp\"\ndp = 4\n", 4);
  EXPECT_EQ(s.cases.size(), 1u);
  EXPECT_TRUE(contains(error_of("[[case]]\nstrategy = \"ddp\"\ndp = 4\n", 3),
                       "test.toml:3: key 'dp': dp(4) * tp(1) * pp(1) = 4, but 3 ranks are running"));
}

TEST(SuiteErrors, NonPositiveAxis) {
  EXPECT_TRUE(contains(error_of("[[case]]\nstrategy = \"ddp\"\ndp = 0\n"), "test.toml:3: key 'dp': must be at least 1"));
}

TEST(SuiteErrors, TensorParallelForDdp) {
  std::string e = error_of(R"([[case]]
strategy = "ddp"
dp = 2
tp = 2
)");
  EXPECT_TRUE(contains(e, "test.toml:4: key 'tp': ddp needs dp(2) * tp(1) * pp(1), got dp(2) * tp(2) * pp(1) = 4"));
}

// --- model-parallel layouts that do not fit the model --------------------------------

TEST(SuiteErrors, TensorParallelMustDivideTheHeads) {
  std::string e = error_of("[[case]]\nstrategy = \"tp\"\nworkload = \"gpt-tiny\"\ntp = 3\nglobal_batch = 6\n");
  EXPECT_TRUE(contains(e, "test.toml:4: key 'tp': tp 3 does not divide gpt-tiny's 4 heads")) << e;
}

// Context parallelism: 2 cp must divide S (gpt-tiny: 16), the workload must have sequences
// (mlp-tiny none) whose tokens may be split (moe-tiny's capacity group is a sequence), and the
// presets without a cp axis refuse it; each names the key.
TEST(SuiteErrors, ContextParallelMustFitTheSequences) {
  const std::string gpt = "[[case]]\nstrategy = \"cp\"\nworkload = \"gpt-tiny\"\n";
  std::string e = error_of(gpt + "cp = 3\n");
  EXPECT_TRUE(contains(e, "test.toml:4: key 'cp': cp 3 needs gpt-tiny's sequence length S = 16 to split into 2 * cp = 6")) << e;
  e = error_of("[[case]]\nstrategy = \"cp\"\ncp = 2\n");
  EXPECT_TRUE(contains(e, "test.toml:3: key 'cp': cp 2 splits sequences, and workload kind mlp has none")) << e;
  e = error_of("[[case]]\nstrategy = \"cp\"\nworkload = \"moe-tiny\"\ncp = 2\n");
  EXPECT_TRUE(contains(e, "test.toml:4: key 'cp': cp 2: moe-tiny's capacity group is a whole sequence")) << e;
  e = error_of("[[case]]\nstrategy = \"tp\"\nworkload = \"gpt-tiny\"\ncp = 2\n");
  EXPECT_TRUE(contains(e, "test.toml:4: key 'cp': tp needs dp(1) * tp(1) * pp(1), got dp(1) * cp(2) * tp(1) * pp(1) = 2")) << e;
  e = error_of(gpt + "cp = 0\n");
  EXPECT_TRUE(contains(e, "test.toml:4: key 'cp': must be at least 1")) << e;
  Suite s = parse(gpt + "cp = 4\n");
  ASSERT_EQ(s.cases.size(), 1u);
  EXPECT_EQ(s.cases[0].layout.num_ranks(), 4);
}

// Expert parallelism: ep must divide the experts (moe-tiny: 4), the workload must have
// experts, and the batch must split over dp * ep; each names the key.
TEST(SuiteErrors, ExpertParallelMustFitTheExperts) {
  const std::string moe = "[[case]]\nstrategy = \"ep\"\nworkload = \"moe-tiny\"\nglobal_batch = 8\n";
  std::string e = error_of(moe + "ep = 3\n");
  EXPECT_TRUE(contains(e, "test.toml:5: key 'ep': ep 3 does not divide moe-tiny's 4 experts; choose a divisor of 4")) << e;
  e = error_of("[[case]]\nstrategy = \"ep\"\nworkload = \"gpt-tiny\"\nep = 2\n");
  EXPECT_TRUE(contains(e, "test.toml:4: key 'ep': ep 2 splits experts, and workload kind gpt has none")) << e;
  e = error_of("[[case]]\nstrategy = \"hybrid\"\nworkload = \"moe-tiny\"\nglobal_batch = 6\ndp = 2\nep = 2\n");
  EXPECT_TRUE(contains(e, "key 'global_batch': global_batch 6 is not divisible by dp * ep(4)")) << e;
  e = error_of("[[case]]\nstrategy = \"cp\"\nworkload = \"moe-tiny\"\nep = 2\n");
  EXPECT_TRUE(contains(e, "test.toml:4: key 'ep': cp needs dp(1) * tp(1) * pp(1), got dp(1) * ep(2) * tp(1) * pp(1) = 2")) << e;
  e = error_of(moe + "ep = 0\n");
  EXPECT_TRUE(contains(e, "test.toml:5: key 'ep': must be at least 1")) << e;
  Suite s = parse(moe + "ep = 4\n");
  ASSERT_EQ(s.cases.size(), 1u);
  EXPECT_EQ(s.cases[0].layout.ep, 4);
  EXPECT_EQ(s.cases[0].layout.num_ranks(), 4);
}

// The MLP's width splits unevenly (64 over 3: 22, 21, 21); only heads must divide.
TEST(Suite, TensorParallelSplitsTheMlpWidthUnevenly) {
  Suite s = parse("[[case]]\nstrategy = \"tp\"\ntp = 3\n");
  ASSERT_EQ(s.cases.size(), 1u);
  EXPECT_EQ(s.cases[0].layout.tp, 3);
}

TEST(SuiteErrors, MorePipelineStagesThanLayers) {
  std::string e = error_of("[[case]]\nstrategy = \"pp-1f1b\"\npp = 4\n");
  EXPECT_TRUE(contains(e, "test.toml:3: key 'pp': pp 4 needs at least 4 layers; mlp-tiny has 2")) << e;
}

TEST(SuiteErrors, StageLayersMustFitTheModel) {
  std::string base = "[[case]]\nstrategy = \"pp-gpipe\"\nworkload = \"gpt-tiny\"\npp = 2\n";
  EXPECT_TRUE(contains(error_of(base + "stage_layers = \"3,2\"\n"),
                       "test.toml:5: key 'stage_layers': stage_layers sums to 5 but gpt-tiny has 4 layers"));
  EXPECT_TRUE(contains(error_of(base + "stage_layers = \"4\"\n"),
                       "test.toml:5: key 'stage_layers': stage_layers lists 1 stages but pp is 2"));
  EXPECT_TRUE(contains(error_of(base + "stage_layers = \"2,x\"\n"),
                       "test.toml:5: key 'stage_layers': expected comma-separated layer counts"));
  // A middle stage with no layer holds no block.
  std::string e = error_of("[[case]]\nstrategy = \"pp-gpipe\"\nworkload = \"gpt-tiny\"\npp = 4\n"
                           "stage_layers = \"2,0,1,1\"\n");
  EXPECT_TRUE(contains(e, "key 'stage_layers': stage 1 of 4 would hold no block of gpt-tiny")) << e;
}

TEST(SuiteErrors, BatchMustSplitIntoMicrobatches) {
  std::string e = error_of("[[case]]\nstrategy = \"pp-1f1b\"\nworkload = \"gpt-tiny\"\npp = 2\nmicrobatches = 3\n");
  EXPECT_TRUE(contains(e, "key 'global_batch': global_batch 32 is not divisible by dp * microbatches (3)")) << e;
}

TEST(SuiteErrors, UnknownSchedule) {
  std::string e = error_of("[[case]]\nstrategy = \"hybrid\"\nworkload = \"gpt-tiny\"\npp = 2\nschedule = \"zb\"\n");
  EXPECT_TRUE(contains(e, "test.toml:5: key 'schedule': unknown schedule 'zb'; known: 1f1b, gpipe")) << e;
}

TEST(SuiteErrors, MissingTokenFileIsNamedBeforeAnythingRuns) {
  std::string e = error_of("[[case]]\nstrategy = \"single\"\nworkload = \"gpt-tiny\"\ndata = \"/nonexistent/train.bin\"\n");
  EXPECT_TRUE(contains(e, "test.toml:4: key 'data': token file /nonexistent/train.bin: cannot open it")) << e;
  e = error_of("[[case]]\nstrategy = \"single\"\ndata = \"x.bin\"\n");
  EXPECT_TRUE(contains(e, "key 'data': a token file needs a workload that reads tokens (gpt)")) << e;
}

TEST(SuiteErrors, SingleNeedsOneRank) {
  std::string e = error_of("[[case]]\nstrategy = \"single\"\ndp = 2\n");
  EXPECT_TRUE(contains(e, "test.toml:3: key 'dp': single needs dp(1) * tp(1) * pp(1), got dp(2) * tp(1) * pp(1) = 2"));
}

TEST(SuiteErrors, GlobalBatchNotDivisibleByDp) {
  std::string e = error_of(R"([[case]]
strategy = "ddp"
global_batch = 30
dp = [2, 4]
)");
  EXPECT_TRUE(contains(e, "test.toml:3: key 'global_batch': global_batch 30 is not divisible by dp(4)"));
}

TEST(SuiteErrors, DefaultGlobalBatchNotDivisiblePointsAtTheCase) {
  // global_batch is not set anywhere (default 32): the error points at the [[case]] line.
  std::string e = error_of(R"([defaults]
steps = 4

[[case]]
strategy = "ddp"
dp = 3
)");
  EXPECT_TRUE(contains(e, "test.toml:4: key 'global_batch': global_batch 32 is not divisible by dp(3)"));
}

TEST(SuiteErrors, WarmupNotBelowSteps) {
  std::string e = error_of(R"([defaults]
warmup_steps = 3
[[case]]
strategy = "single"
steps = 3
)");
  EXPECT_TRUE(contains(e, "test.toml:2: key 'warmup_steps': must be in [0, steps), got 3 with steps 3"));
  EXPECT_EQ(parse("[[case]]\nsteps = 3\nwarmup_steps = 2\n").cases.at(0).warmup_steps, 2);
}

// target_loss: unset by default; a number for every strategy; with check left to auto it
// stays a float64 case's companion (auto picks exact there, but the user did not ask for it).
TEST(Suite, TargetLossIsUnsetByDefaultAndTakesANumberForAnyStrategy) {
  Suite s = parse(R"([defaults]
target_loss = 3
[[case]]
strategy = ["single", "ddp"]
[[case]]
name = "none"
)");
  EXPECT_EQ(names_of(s), (std::vector<std::string>{"single", "ddp", "none"}));
  EXPECT_EQ(s.cases[0].target_loss, 3.0);  // an integer is accepted where a number is wanted
  EXPECT_EQ(s.cases[1].target_loss, 3.0);
  EXPECT_FALSE(parse("[[case]]\nstrategy = \"single\"\n").cases.at(0).target_loss.has_value());
  EXPECT_EQ(parse("[[case]]\ntarget_loss = [2.5, 0.125]\n").cases.at(1).name, "single-target_loss0.125");
  EXPECT_EQ(parse("[[case]]\ndtype = \"float32\"\ncheck = \"precision\"\ntarget_loss = 1e-3\n")
                .cases.at(0).target_loss, 1e-3);
}

TEST(SuiteErrors, TargetLossMustBeAFinitePositiveNumber) {
  for (const char* bad : {"0", "-1.5"})
    EXPECT_TRUE(contains(error_of(std::string("[[case]]\nstrategy = \"single\"\ntarget_loss = ") + bad + "\n"),
                         "test.toml:3: key 'target_loss': must be a finite training loss > 0 (nats), got "))
        << bad;
  EXPECT_TRUE(contains(error_of("[[case]]\ntarget_loss = -1.5\n"), "got -1.5"));
  EXPECT_TRUE(contains(error_of("[[case]]\ntarget_loss = \"low\"\n"), "test.toml:2: key 'target_loss': must be a number"));
  EXPECT_TRUE(contains(error_of("[[case]]\ntarget_loss = [1.0, 0]\n"), "test.toml:2: key 'target_loss': must be a finite"));
}

// --- bad numbers and resource limits: refused before anything runs ----------------------

TEST(SuiteErrors, NonFiniteNumbersAreRefusedWhereverTheyAreSet) {
  for (const char* bad : {"inf", "-inf", "nan"}) {
    SCOPED_TRACE(bad);
    const std::string v(bad);
    EXPECT_TRUE(contains(error_of("[[case]]\nlr = " + v + "\n"), "test.toml:2: key 'lr': must be a finite number, got "));
    EXPECT_TRUE(contains(error_of("[defaults]\nmomentum = " + v + "\n[[case]]\n"),
                         "test.toml:2: key 'momentum': must be a finite number"));
    EXPECT_TRUE(contains(error_of("[[case]]\nbeta2 = [0.9, " + v + "]\n"), "test.toml:2: key 'beta2': must be a finite"));
    // A strategy's declared options, whatever the strategy itself checks.
    EXPECT_TRUE(contains(error_of("[[case]]\nstrategy = \"diloco\"\ndp = 2\nouter_lr = " + v + "\n"),
                         "test.toml:4: key 'outer_lr': must be a finite number"));
    EXPECT_TRUE(contains(error_of("[[case]]\nstrategy = \"ddp\"\ndp = 2\nslow_rank = 1\nslow_factor = " + v + "\n"),
                         "test.toml:5: key 'slow_factor': must be a finite number"));
    EXPECT_TRUE(contains(error_of("[[case]]\nlink = { bus_gbps = 10, latency_us = " + v + " }\n"),
                         "test.toml:2: key 'link.latency_us': must be a finite, non-negative number"));
    EXPECT_TRUE(contains(error_of("[[case]]\nlink = { bus_gbps = " + v + " }\n"),
                         "test.toml:2: key 'link.bus_gbps': must be a finite"));
  }
}

// Integers past INT32_MAX would wrap where they are stored or used as int.
TEST(SuiteErrors, IntegersPastAnIntAreOutOfRange) {
  EXPECT_TRUE(contains(error_of("[[case]]\ntarget_window = 9223372036854775807\n"),
                       "test.toml:2: key 'target_window': is out of range: 9223372036854775807 (at most 2147483647)"));
  EXPECT_TRUE(contains(error_of("[[case]]\nstrategy = \"ddp\"\nmicrobatches = 2147483648\n"),
                       "test.toml:3: key 'microbatches': is out of range: 2147483648"));
  EXPECT_EQ(parse("[[case]]\nseed = 9223372036854775807\n").cases.at(0).seed, 9223372036854775807u);
}

TEST(SuiteErrors, LinkSettingsFarFromOverflowingTheClock) {
  EXPECT_TRUE(contains(error_of("[[case]]\nlink = { bus_gbps = 1e-300 }\n"),
                       "test.toml:2: key 'link.bus_gbps': must be at least 1e-6 GB/s"));
  EXPECT_TRUE(contains(error_of("[[case]]\nlink = { bus_gbps = 1, latency_us = 1e7 }\n"),
                       "test.toml:2: key 'link.latency_us': must be at most 1e6 us"));
}

// Found probing by hand (suite_fuzz keeps to 4 KB inputs): a 50,000-level dotted key
// overflowed the stack inside toml++.
TEST(SuiteErrors, ADottedKeyNestedThousandsDeepIsRefusedBeforeParsing) {
  std::string deep = "[[case]]\n";
  for (int i = 0; i < 50000; ++i) deep += "a.";
  EXPECT_EQ(error_of(deep + "b = 1\n"), "test.toml:2: more than 1000 dots on one line; no suite key nests that deep");
}

TEST(SuiteErrors, OptimizerSettingsOutsideTheirRanges) {
  EXPECT_TRUE(contains(error_of("[[case]]\nlr = 0\n"), "test.toml:2: key 'lr': must be positive"));
  EXPECT_TRUE(contains(error_of("[[case]]\nmomentum = 1\n"), "test.toml:2: key 'momentum': must be in [0, 1), got 1"));
  EXPECT_TRUE(contains(error_of("[[case]]\nmomentum = -0.5\n"), "key 'momentum': must be in [0, 1), got -0.5"));
  EXPECT_TRUE(contains(error_of("[[case]]\nweight_decay = -1\n"), "test.toml:2: key 'weight_decay': must not be negative"));
  EXPECT_TRUE(contains(error_of("[[case]]\noptimizer = \"adamw\"\nbeta1 = 1.5\n"),
                       "test.toml:3: key 'beta1': must be in [0, 1), got 1.5"));
  EXPECT_TRUE(contains(error_of("[[case]]\noptimizer = \"adamw\"\neps = 0\nbeta2 = 1\n"),
                       "test.toml:4: key 'beta2': must be in [0, 1), got 1"));
  EXPECT_TRUE(contains(error_of("[[case]]\noptimizer = \"adamw\"\neps = 0\n"), "test.toml:3: key 'eps': must be positive, got 0"));
  EXPECT_NO_THROW(parse("[[case]]\nmomentum = 0\nweight_decay = 0\nbeta1 = 0\n"));
}

TEST(SuiteLimits, EachLimitIsStatedAndNamesTheKeyThatRaisesIt) {
  EXPECT_TRUE(contains(error_of("[[case]]\nsteps = 2147483647\n"),
                       "test.toml:2: key 'steps': 2147483647 steps is over the limit of 100000 (limits.max_steps); "
                       "if you mean it, raise the limit in the suite: [limits] max_steps = ..."));
  EXPECT_TRUE(contains(error_of("[[case]]\nglobal_batch = 1000000000000\n"),
                       "test.toml:2: key 'global_batch': 1000000000000 samples is over the limit of 65536 "
                       "(limits.max_global_batch)"));
  // Each axis fits an int, their product does not: refused in double, never overflowed.
  EXPECT_TRUE(contains(error_of("[[case]]\nstrategy = \"hybrid\"\ndp = 2000000000\ntp = 2000000000\npp = 4\n"),
                       "test.toml:3: key 'dp': dp(2000000000) * tp(2000000000) * pp(4) = 1.6e+19 ranks is over the "
                       "limit of 4096 (limits.max_ranks)"));
  const std::string flops = error_of("[[case]]\nworkload = \"gpt2-124m\"\nsteps = 100000\nglobal_batch = 512\n");
  EXPECT_TRUE(contains(flops, "test.toml:3: key 'steps': steps(100000) * global_batch(512) * "));
  EXPECT_TRUE(contains(flops, "FLOPs is over the limit of 1e+17 (limits.max_flops)"));
}

TEST(SuiteLimits, TheCaseCountIsCheckedBeforeACaseIsBuilt) {
  // 200 x 200 = 40,000 cases: refused at the longest axis, before any is expanded.
  std::string seeds, batches;
  for (int i = 1; i <= 200; ++i) {
    seeds += (i > 1 ? ", " : "") + std::to_string(i);
    batches += (i > 1 ? ", " : "") + std::to_string(i);
  }
  const std::string text = "[[case]]\nseed = [" + seeds + "]\nglobal_batch = [" + batches + "]\n";
  EXPECT_TRUE(contains(error_of(text), "key 'global_batch': this table expands to 40000 cases, which takes the suite "
                                       "to 40000, over the limit of 10000 (limits.max_cases)"));
  EXPECT_EQ(parse("[limits]\nmax_cases = 40000\n" + text).cases.size(), 40000u);
  // Across tables: the second table takes the suite over.
  EXPECT_TRUE(contains(error_of("[limits]\nmax_cases = 2\n[[case]]\nseed = [1, 2]\n[[case]]\nstrategy = \"single\"\n"),
                       "test.toml:5: key 'case': this table expands to 1 cases, which takes the suite to 3"));
}

TEST(SuiteLimits, ALimitsTableRaisesOrLowersEachLimit) {
  Suite s = parse(R"([limits]
max_steps = 3000000
max_global_batch = 2000000
max_ranks = 8
max_cases = 5
max_flops = 1e30
[[case]]
steps = 3000000
global_batch = 2000000
)");
  EXPECT_EQ(s.limits.max_steps, 3000000);
  EXPECT_EQ(s.limits.max_flops, 1e30);
  EXPECT_EQ(s.cases.at(0).steps, 3000000);
  EXPECT_TRUE(contains(error_of("[limits]\nmax_steps = 2\n[[case]]\nsteps = 3\n"),
                       "test.toml:4: key 'steps': 3 steps is over the limit of 2 (limits.max_steps)"));
  EXPECT_TRUE(contains(error_of("[limits]\nmax_stpes = 2\n[[case]]\n"),
                       "test.toml:2: key 'limits.max_stpes': unknown limit; known: max_cases, max_flops"));
  EXPECT_TRUE(contains(error_of("[limits]\nmax_steps = 0\n[[case]]\n"),
                       "test.toml:2: key 'limits.max_steps': must be an integer in [1, 2147483647]"));
  EXPECT_TRUE(contains(error_of("[limits]\nmax_flops = inf\n[[case]]\n"),
                       "test.toml:2: key 'limits.max_flops': must be a finite number > 0"));
  EXPECT_TRUE(contains(error_of("limits = 3\n[[case]]\n"), "test.toml:1: key 'limits': must be a table"));
}

// An explicitly set check = "exact" (in the case or in [defaults]) is refused next to a
// target; the error points at target_loss and names the line of the check.
TEST(SuiteErrors, TargetLossWithAnExplicitExactCheck) {
  EXPECT_TRUE(contains(error_of("[[case]]\ncheck = \"exact\"\ntarget_loss = 2.0\n"),
                       "test.toml:3: key 'target_loss': cannot be combined with check = \"exact\" (line 2)"));
  EXPECT_TRUE(contains(error_of(R"([defaults]
check = "exact"
[[case]]
strategy = "ddp"
dp = 2
target_loss = 2.0
)"),
                       "test.toml:6: key 'target_loss': cannot be combined with check = \"exact\" (line 2)"));
  EXPECT_TRUE(contains(error_of(R"([defaults]
target_loss = 2.0
[[case]]
check = ["precision", "exact"]
)"),
                       "test.toml:2: key 'target_loss': cannot be combined with check = \"exact\" (line 4)"));
}

TEST(SuiteErrors, DuplicateGeneratedNames) {
  std::string e = error_of(R"([[case]]
strategy = "ddp"
dp = [1, 2]

[[case]]
strategy = "ddp"
dp = [2, 4]
)");
  EXPECT_TRUE(contains(e, "test.toml:5: key 'name': case name 'ddp-dp2' is also generated by the case at line 1"));
}

TEST(SuiteErrors, EmptyList) {
  std::string e = error_of(R"([[case]]
strategy = "ddp"
dtype = []
)");
  EXPECT_TRUE(contains(e, "test.toml:3: key 'dtype': an empty list expands to no cases"));
}

TEST(SuiteErrors, NameCannotBeAList) {
  EXPECT_TRUE(contains(error_of("[[case]]\nname = [\"a\", \"b\"]\n"),
                       "test.toml:2: key 'name': must be a single string, not a list"));
}

TEST(SuiteErrors, TomlSyntaxErrorNamesFileAndLine) {
  std::string e = error_of(R"([[case]]
strategy = "ddp"
dp = = 2
)");
  EXPECT_EQ(e.rfind("test.toml:3: ", 0), 0u) << e;
}

TEST(SuiteErrors, NoCaseTables) {
  std::string e = error_of(R"(description = "nothing"
[defaults]
steps = 4
)");
  EXPECT_EQ(e, "test.toml: no [[case]] or [[generate]] tables; nothing to run");
  EXPECT_EQ(error_of(""), "test.toml: no [[case]] or [[generate]] tables; nothing to run");
}

TEST(SuiteErrors, UnknownTopLevelKey) {
  std::string e = error_of(R"(description = "x"
[[case]]
strategy = "single"

[cases]
steps = 2
)");
  EXPECT_TRUE(contains(e, "test.toml:5: key 'cases': unknown top-level key"));
}

// --- [[generate]]: cases from the registry's conformance matrices -------------------------

// A strategy registered with one line, as a user adds one: a trainer preset over dp.
StrategyRegistry registry_with(StrategyInfo extra) {
  StrategyRegistry r = builtin_strategies();
  r.add(std::move(extra));
  return r;
}
StrategyInfo new_dp_strategy() {
  return trainer_entry("ddp-new", "a dp algorithm only this test registers", "dp",
                       {dp_algorithm_for_stage(0), find_schedule("1f1b"), nullptr});
}

size_t matrix_size(const StrategyInfo& info) {
  size_t total = 0;
  for (const MatrixEntry& e : info.matrix) {
    size_t n = 1;
    for (const MatrixSetting& s : e.settings) n *= s.values.size();
    total += n;
  }
  return total;
}

std::vector<std::string> names_of(const Suite& s, const std::string& strategy) {
  std::vector<std::string> n;
  for (const auto& c : s.cases)
    if (c.strategy == strategy) n.push_back(c.name);
  return n;
}

// The point of the matrix: a strategy added with one registry line is in the shipped
// conformance suite, on its whole matrix, with no edit to the suite file.
TEST(Generate, ANewStrategyIsInTheConformanceSuiteWithNoEditToIt) {
  const StrategyRegistry with_new = registry_with(new_dp_strategy());
  const auto file = std::filesystem::path(__FILE__).parent_path().parent_path() / "suite" / "conformance.toml";
  const Suite before = load_suite(file.string(), registry(), 8);
  const Suite after = load_suite(file.string(), with_new, 8);
  EXPECT_TRUE(names_of(before, "ddp-new").empty());
  const std::vector<std::string> added = names_of(after, "ddp-new");
  EXPECT_EQ(added.size(), 31u);
  EXPECT_EQ(added.size(), matrix_size(*with_new.find("ddp-new")));
  EXPECT_EQ(after.cases.size(), before.cases.size() + added.size());
  // Named as ddp's cases are, with its own name in place of ddp's.
  for (const char* name : {"ddp-new-dp1-float64-sgd", "ddp-new-dp4-float32-adamw", "overlap-dp3-float64-ddp-new",
                                  "wd-dp-dp3-float32-adamw-ddp-new", "link-ddp-new"})
    EXPECT_NE(std::find(added.begin(), added.end(), name), added.end()) << name;
  // ...and configured from the suite's [defaults] under the matrix entry.
  for (const CaseConfig& c : after.cases) {
    if (c.strategy != "ddp-new") continue;
    EXPECT_EQ(c.steps, 5) << c.name;
    EXPECT_EQ(c.global_batch, 24) << c.name;
    EXPECT_EQ(c.bucket_bytes, 4096) << c.name;
  }
}

// Every shipped strategy but the oracle has a matrix, and the conformance suite holds all of it.
TEST(Generate, TheConformanceSuiteHoldsEveryShippedMatrix) {
  const auto file = std::filesystem::path(__FILE__).parent_path().parent_path() / "suite" / "conformance.toml";
  const Suite s = load_suite(file.string(), registry(), 8);
  for (const StrategyInfo& info : registry().all()) {
    SCOPED_TRACE(info.name);
    EXPECT_EQ(info.matrix.empty(), info.name == "single");
    if (info.matrix.empty()) continue;
    const Suite alone = matrix_suite(registry(), info.name);
    EXPECT_EQ(alone.cases.size(), matrix_size(info));
    const std::vector<std::string> in_suite = names_of(s, info.name);
    for (const CaseConfig& c : alone.cases)
      EXPECT_NE(std::find(in_suite.begin(), in_suite.end(), c.name), in_suite.end()) << c.name;
  }
}

// Each preset kind's matrix covers what issue 8 asks of it.
TEST(Generate, TrainerMatricesFollowTheirAxes) {
  auto cases = [](const std::string& strategy) { return matrix_suite(registry(), strategy).cases; };
  auto has = [](const std::vector<CaseConfig>& cs, auto pred) { return std::any_of(cs.begin(), cs.end(), pred); };
  for (const char* s : {"ddp", "zero1", "zero2", "fsdp", "tp", "pp-gpipe", "pp-1f1b", "ddp-2phase", "hybrid"}) {
    SCOPED_TRACE(s);
    const auto cs = cases(s);
    for (const char* dtype : {"float64", "float32"})
      for (const char* opt : {"sgd", "adamw"})
        EXPECT_TRUE(has(cs, [&](const CaseConfig& c) {
          return c.dtype == dtype && c.optimizer.kind == opt && c.optimizer.weight_decay > 0;
        })) << dtype << " " << opt << " with weight decay";
  }
  // Padding in every unit: mlp-deep at dp 3.
  EXPECT_TRUE(has(cases("zero2"), [](const CaseConfig& c) { return c.workload == "mlp-deep" && c.layout.dp == 3; }));
  // fsdp alone takes its options through its matrix.
  EXPECT_TRUE(has(cases("fsdp"), [](const CaseConfig& c) { return !c.prefetch && !c.reshard_after_forward; }));
  EXPECT_FALSE(has(cases("ddp"), [](const CaseConfig& c) { return !c.prefetch; }));
  // Uneven splits at every tp: gpt-odd at 2 and 4, mlp-deep at 3.
  for (int tp : {2, 4})
    EXPECT_TRUE(has(cases("tp"), [&](const CaseConfig& c) { return c.workload == "gpt-odd" && c.layout.tp == tp; }));
  EXPECT_TRUE(has(cases("tp"), [](const CaseConfig& c) { return c.workload == "mlp-deep" && c.layout.tp == 3; }));
  // Every schedule with m in {1, pp, 2pp}.
  for (const char* s : {"pp-gpipe", "pp-1f1b"})
    for (int pp : {2, 4})
      for (int m : {1, pp, 2 * pp})
        EXPECT_TRUE(has(cases(s), [&](const CaseConfig& c) { return c.layout.pp == pp && c.microbatches == m; }))
            << s << " pp " << pp << " m " << m;
  for (const char* schedule : {"1f1b", "gpipe"})
    for (int m : {1, 2, 4})
      EXPECT_TRUE(has(cases("hybrid"), [&](const CaseConfig& c) {
        return c.schedule == schedule && c.layout.pp == 2 && c.microbatches == m;
      })) << schedule << " m " << m;
  for (int stage : {0, 1, 2, 3})
    EXPECT_TRUE(has(cases("hybrid"), [&](const CaseConfig& c) { return c.zero_stage == stage; })) << stage;
}

// Generated cases are named as a [[case]] table saying the same would be; a stem several
// strategies share carries the strategy as a label, at its key's place.
TEST(Generate, NamesAreTheHandWrittenOnes) {
  Suite s = parse(R"([[generate]]
strategies = ["ddp", "tp"]
)");
  const auto ddp = names_of(s, "ddp");
  EXPECT_EQ(ddp.front(), "ddp-dp1-float64-sgd");
  for (const char* name : {"overlap-dp2-float64-ddp", "wd-dp-dp3-float64-adamw-ddp", "link-ddp"})
    EXPECT_NE(std::find(ddp.begin(), ddp.end(), name), ddp.end()) << name;
  const auto tp = names_of(s, "tp");
  for (const char* name : {"gpt-tp-float64-tp1", "wd-tp-adamw-float32-tp4-gpt-odd", "uneven-tp3-float64-sgd"})
    EXPECT_NE(std::find(tp.begin(), tp.end(), name), tp.end()) << name;
}

TEST(Generate, DefaultsApplyUnderAnEntryAndTheTablesSettingsOverIt) {
  Suite s = parse(R"([defaults]
steps = 7
workload = "mlp-small"
lr = 0.5

[[generate]]
strategies = "tp"
dtype = "float64"
lr = 0.25
)");
  const StrategyInfo& tp = *registry().find("tp");
  ASSERT_EQ(s.cases.size(), matrix_size(tp) / 2);  // every entry lists both dtypes
  for (const CaseConfig& c : s.cases) {
    EXPECT_EQ(c.dtype, "float64") << c.name;          // the table's, over the entry's list
    EXPECT_EQ(c.optimizer.lr, 0.25) << c.name;        // the table's, over the entry's and the defaults'
    EXPECT_EQ(c.steps, 7) << c.name;                  // the defaults', which the entry leaves alone
    EXPECT_NE(c.workload, "mlp-small") << c.name;     // every entry names its workload
    EXPECT_EQ(c.name.find("float"), std::string::npos) << c.name;  // dtype no longer varies
  }
}

// An option in a [[generate]] table applies to the selected strategies that declare it.
TEST(Generate, AnOptionAppliesWhereDeclared) {
  Suite s = parse(R"([[generate]]
strategies = ["ddp", "hybrid"]
zero_stage = 2
)");
  for (const CaseConfig& c : s.cases) EXPECT_EQ(c.zero_stage, c.strategy == "hybrid" ? 2 : -1) << c.name;
}

// An entry may list option values and set any suite key; a registry line adds or replaces
// entries (with_matrix), and a strategy without a matrix is left out of "*".
TEST(Generate, ARegistryLineAddsAndReplacesEntries) {
  StrategyInfo info = new_dp_strategy();
  OptionSpec every;
  every.key = "sync_every";
  every.type = OptionType::integer;
  every.default_value = int64_t{1};
  info.options.push_back(every);
  const StrategyRegistry r = registry_with(with_matrix(
      info, {{"", {{"dp", {2}}, {"dtype", {"float64"}}, {"steps", {3}}}},  // replaces the unnamed entry
             {"sync", {{"sync_every", {1, 3}}, {"dp", {2, 4}}, {"check", {"exact"}}}}}));
  Suite s = parse_suite("[[generate]]\nstrategies = [\"ddp-new\"]\n", "test.toml", r, 8);
  const auto names = names_of(s, "ddp-new");
  EXPECT_EQ(names.size(), 1u + 6u + 8u + 1u + 4u);
  EXPECT_EQ(names.front(), "ddp-new");
  EXPECT_EQ(s.cases.front().steps, 3);
  EXPECT_EQ(std::vector<std::string>(names.end() - 4, names.end()),
            (std::vector<std::string>{"sync-dp2-sync_every1", "sync-dp2-sync_every3", "sync-dp4-sync_every1",
                                      "sync-dp4-sync_every3"}));
  EXPECT_EQ(s.cases.back().option<int64_t>("sync_every"), 3);
  EXPECT_EQ(s.cases.back().check, "exact");
  StrategyInfo bare = new_dp_strategy();
  bare.name = "ddp-bare";
  bare.matrix.clear();
  const StrategyRegistry r2 = registry_with(bare);
  EXPECT_TRUE(names_of(parse_suite("[[generate]]\nstrategies = \"*\"\n", "test.toml", r2, 8), "ddp-bare").empty());
  EXPECT_TRUE(contains(error_of("[[generate]]\nstrategies = \"ddp-bare\"\n", 8, r2),
                       "test.toml:2: key 'strategies': strategy 'ddp-bare' declares no conformance matrix"));
}

TEST(Generate, GeneratedAndWrittenCasesMix) {
  Suite s = parse(R"([[case]]
strategy = "single"

[[generate]]
strategies = ["zero1"]
)");
  EXPECT_EQ(s.cases.size(), matrix_size(*registry().find("zero1")) + 1);
  EXPECT_EQ(s.cases.back().name, "single");
}

TEST(MatrixText, IsTheSuiteTextOfEachEntry) {
  const std::string t = matrix_text(*registry().find("ddp"));
  EXPECT_EQ(t.rfind("# ddp: 31 cases from 4 matrix entries", 0), 0u) << t;
  EXPECT_TRUE(contains(t, "[[case]]  # 16 cases\nstrategy = \"ddp\"\ndp = [1, 2, 3, 4]\n"));
  EXPECT_TRUE(contains(t, "link = { bus_gbps = 2, latency_us = 10 }\n"));
  EXPECT_TRUE(contains(t, "weight_decay = 0.01\n"));
  EXPECT_TRUE(contains(t, "name = \"overlap\"\nstrategy = \"ddp\"\n"));
}

TEST(GenerateErrors, UnknownStrategyNamesTheKnownOnes) {
  std::string e = error_of(R"([[generate]]
strategies = ["ddp",
              "dpp"]
)");
  EXPECT_TRUE(contains(e, "test.toml:3: key 'strategies': unknown strategy 'dpp'; known: single, ddp,")) << e;
  e = error_of("[[generate]]\nstrategies = \"tpp\"\n");
  EXPECT_TRUE(contains(e, "test.toml:2: key 'strategies': unknown strategy 'tpp'")) << e;
}

TEST(GenerateErrors, UnknownKeyNamesFileLineAndKey) {
  std::string e = error_of(R"([[generate]]
strategies = "*"
stpes = 3
)");
  EXPECT_TRUE(contains(e, "test.toml:3: key 'stpes': unknown key; known keys: ")) << e;
}

TEST(GenerateErrors, StrategiesIsRequiredAndAStringOrAListOfThem) {
  EXPECT_TRUE(contains(error_of("[[generate]]\nsteps = 3\n"),
                       "test.toml:1: key 'strategies': a [[generate]] table needs it; write strategies = \"*\""));
  EXPECT_TRUE(contains(error_of("[[generate]]\nstrategies = 3\n"), "test.toml:2: key 'strategies': must be strings"));
  EXPECT_TRUE(contains(error_of("[[generate]]\nstrategies = []\n"),
                       "test.toml:2: key 'strategies': an empty list generates no cases"));
  EXPECT_TRUE(contains(error_of("[generate]\nstrategies = \"*\"\n"),
                       "test.toml:1: key 'generate': must be one or more [[generate]] tables"));
}

TEST(GenerateErrors, NameAndStrategyBelongToTheMatrix) {
  EXPECT_TRUE(contains(error_of("[[generate]]\nstrategies = \"*\"\nname = \"x\"\n"),
                       "test.toml:3: key 'name': cannot be set in a [[generate]] table"));
  EXPECT_TRUE(contains(error_of("[[generate]]\nstrategies = \"*\"\nstrategy = \"ddp\"\n"),
                       "test.toml:3: key 'strategy': cannot be set in a [[generate]] table"));
}

TEST(GenerateErrors, AnOptionNoSelectedStrategyDeclares) {
  EXPECT_TRUE(contains(error_of("[[generate]]\nstrategies = [\"ddp\", \"tp\"]\nzero_stage = 1\n"),
                       "test.toml:3: key 'zero_stage': no strategy this [[generate]] selects declares it; declared by: "
                       "hybrid"));
}

// A generated case that cannot run here fails like a written one, at the [[generate]] line,
// and says which strategy and entry it came from.
TEST(GenerateErrors, AGeneratedCaseThatDoesNotFitNamesItsEntry) {
  std::string e = error_of("\n[[generate]]\nstrategies = [\"hybrid\"]\n", 4);
  EXPECT_TRUE(contains(e, "test.toml:2: key 'dp': dp(2) * tp(2) * pp(2) = 8, but 4 ranks are running")) << e;
  EXPECT_TRUE(contains(e, "(in the cases generated for strategy 'hybrid' by its matrix entry 'gpt-hybrid-2x2x2'; "
                          "see ptsuite matrix hybrid)")) << e;
  // A table setting that breaks an entry: the same, naming the table's line for the key.
  e = error_of("[[generate]]\nstrategies = [\"ddp\"]\nglobal_batch = 10\n");
  EXPECT_TRUE(contains(e, "test.toml:3: key 'global_batch': global_batch 10 is not divisible by dp(3)")) << e;
}

// A registry entry's mistakes are found when a suite generates from it, pointing at the
// [[generate]] table and the entry.
TEST(GenerateErrors, AMalformedEntryNamesTheStrategyAndEntry) {
  const StrategyRegistry r = registry_with(with_matrix(new_dp_strategy(), {{"bad", {{"zeta", {1}}}}}));
  std::string e = error_of("[[generate]]\nstrategies = \"*\"\n", 8, r);
  EXPECT_TRUE(contains(e, "test.toml:1: key 'zeta': unknown key")) << e;
  EXPECT_TRUE(contains(e, "strategy 'ddp-new' by its matrix entry 'bad'")) << e;
  const StrategyRegistry r2 = registry_with(with_matrix(new_dp_strategy(), {{"bad", {{"zero_stage", {1}}}}}));
  e = error_of("[[generate]]\nstrategies = \"ddp-new\"\n", 8, r2);
  EXPECT_TRUE(contains(e, "test.toml:1: key 'zero_stage': is not an option of strategy 'ddp-new'")) << e;
}

TEST(GenerateErrors, AWrittenCaseNamedLikeAGeneratedOne) {
  std::string e = error_of(R"([[generate]]
strategies = ["ddp"]

[[case]]
strategy = "ddp"
dp = 4
name = "link-ddp"
)");
  EXPECT_TRUE(contains(e, "test.toml:4: key 'name': case name 'link-ddp' is also generated by the case at line 1")) << e;
}

// --- files -------------------------------------------------------------------------------

TEST(SuiteFiles, MissingFile) {
  try {
    load_suite("no/such/suite.toml", registry(), 8);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "no/such/suite.toml: cannot open suite file");
  }
}

TEST(SuiteFiles, ASuiteIsARegularFile) {
  for (const char* path : {"/dev/zero", "/"}) {
    try {
      load_suite(path, registry(), 8);
      ADD_FAILURE() << "expected a ConfigError for " << path;
    } catch (const ConfigError& e) {
      EXPECT_EQ(std::string(e.what()), std::string(path) + ": not a regular file; a suite is a TOML file");
    }
  }
}

// The defaults of Limits leave headroom: every shipped suite stays ten times under each.
TEST(SuiteFiles, EveryShippedSuiteIsFarUnderTheDefaultLimits) {
  const auto dir = std::filesystem::path(__FILE__).parent_path().parent_path() / "suite";
  const Limits limits;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".toml") continue;
    SCOPED_TRACE(entry.path().string());
    const Suite s = load_suite(entry.path().string(), registry(), 8);
    EXPECT_LE(10 * int64_t(s.cases.size()), limits.max_cases);
    for (const CaseConfig& c : s.cases) {
      SCOPED_TRACE(c.name);
      EXPECT_LE(10 * int64_t(c.steps), limits.max_steps);
      EXPECT_LE(10 * c.global_batch, limits.max_global_batch);
      EXPECT_LE(10 * c.layout.num_ranks(), limits.max_ranks);
      EXPECT_LE(10 * c.steps * c.global_batch * find_workload(c.workload)->flops_per_sample(), limits.max_flops);
    }
  }
}

TEST(SuiteFiles, EveryShippedSuiteParsesOnEightRanks) {
  const auto dir = std::filesystem::path(__FILE__).parent_path().parent_path() / "suite";
  int suites = 0;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    if (entry.path().extension() != ".toml") continue;
    ++suites;
    SCOPED_TRACE(entry.path().string());
    try {
      Suite s = load_suite(entry.path().string(), registry(), 8);
      EXPECT_FALSE(s.cases.empty());
    } catch (const ConfigError& e) {
      ADD_FAILURE() << e.what();
    }
  }
  EXPECT_GE(suites, 1) << "no suite files in " << dir;
}

}  // namespace
}  // namespace pts
