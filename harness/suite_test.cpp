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

TEST(Suite, EveryKeySetsItsField) {
  Suite s = parse(R"([[case]]
name = "all"
strategy = "hybrid"
workload = "mlp-tiny"
dtype = "float64"
backend = "cpu"
dp = 2
tp = 1
pp = 1
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
check = "exact"
bucket_bytes = 1024
overlap = true
prefetch = false
reshard_after_forward = false
link = { bus_gbps = 2.5, latency_us = 7 }
data = "synthetic"
zero_stage = 2
schedule = "gpipe"
microbatches = 2
stage_layers = "2"
)");
  ASSERT_EQ(s.cases.size(), 1u);
  const CaseConfig& c = s.cases[0];
  EXPECT_EQ(c.name, "all");
  EXPECT_EQ(c.strategy, "hybrid");
  EXPECT_EQ(c.workload, "mlp-tiny");
  EXPECT_EQ(c.dtype, "float64");
  EXPECT_EQ(c.backend, "cpu");
  EXPECT_EQ(c.layout.dp, 2);
  EXPECT_EQ(c.layout.tp, 1);
  EXPECT_EQ(c.layout.pp, 1);
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
  EXPECT_EQ(c.check, "exact");
  EXPECT_EQ(c.bucket_bytes, 1024);
  EXPECT_TRUE(c.overlap);
  EXPECT_FALSE(c.prefetch);
  EXPECT_FALSE(c.reshard_after_forward);
  EXPECT_EQ(c.link.bus_gbps, 2.5);
  EXPECT_EQ(c.link.latency_us, 7.0);
  EXPECT_EQ(c.data, "synthetic");
  EXPECT_EQ(c.zero_stage, 2);
  EXPECT_EQ(c.schedule, "gpipe");
  EXPECT_EQ(c.microbatches, 2);
  EXPECT_EQ(c.stage_layers, std::vector<int>{2});
  // One per key above (a new key needs a line here), and param-server's four options (ParamServerOptions).
  EXPECT_EQ(suite_keys(registry()).size(), 30u + 4u);
}

// A strategy declares its options: the parser takes them (with their defaults) for cases of
// that strategy only, and cases.csv gets a column for each.
TEST(StrategyOptions, DeclaredOptionsAreParsedDefaultedAndBecomeColumns) {
  StrategyRegistry reg = builtin_strategies();
  StrategyInfo info = *reg.find("ddp");
  info.name = "ddp-every";
  OptionSpec every;
  every.key = "sync_every";
  every.type = OptionType::integer;
  every.default_value = int64_t{4};
  every.unit = "steps";
  every.meaning = "steps between synchronisations";
  info.options.push_back(every);
  reg.add(info);
  Suite s = parse_suite(R"([defaults]
sync_every = 8
dp = 2

[[case]]
name = "set"
strategy = "ddp-every"
sync_every = 2

[[case]]
name = "from-defaults"
strategy = "ddp-every"

[[case]]
name = "other"
strategy = "ddp"
)", "test.toml", reg, 8);
  ASSERT_EQ(s.cases.size(), 3u);
  EXPECT_EQ(s.cases[0].option<int64_t>("sync_every"), 2);
  EXPECT_EQ(s.cases[1].option<int64_t>("sync_every"), 8);
  EXPECT_EQ(s.cases[2].options.count("sync_every"), 0u);  // the [defaults] value is for ddp-every only
  Suite d = parse_suite("[[case]]\nstrategy = \"ddp-every\"\ndp = 2\n", "test.toml", reg, 8);
  EXPECT_EQ(d.cases[0].option<int64_t>("sync_every"), 4);  // the declared default
  const auto cols = cases_schema(reg).names();
  EXPECT_NE(std::find(cols.begin(), cols.end(), "sync_every"), cols.end());
  EXPECT_NE(std::find(cols.begin(), cols.end(), "bucket_bytes"), cols.end());  // the trainer's, declared too
  const auto shipped = cases_schema().names();
  EXPECT_EQ(std::find(shipped.begin(), shipped.end(), "sync_every"), shipped.end());
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
  EXPECT_EQ(e, "test.toml: no [[case]] tables; nothing to run");
  EXPECT_EQ(error_of(""), "test.toml: no [[case]] tables; nothing to run");
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

// --- files -------------------------------------------------------------------------------

TEST(SuiteFiles, MissingFile) {
  try {
    load_suite("no/such/suite.toml", registry(), 8);
    FAIL() << "expected a ConfigError";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), "no/such/suite.toml: cannot open suite file");
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
