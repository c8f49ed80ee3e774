// Model parallelism end to end under MPI (8 ranks): tensor parallel at tp 1, 2, 4; both
// pipeline schedules at pp 1, 2, 4 with m in {1, pp, 2pp}; hybrids 2x2x2, 4x2x1, 2x1x4,
// 1x2x4 (and 2x2x2 with ZeRO-1, ZeRO-2 and FSDP on dp), on gpt-tiny and on mlp-tiny where the
// layout applies; and a hybrid under the emulated link, which changes no result. Every one
// passes every check in float64 and float32; each planted bug
// (row-parallel layer without its all-reduce, wrong vocabulary shard offset, 1F1B dropping
// the last microbatch's gradient, 1F1B holding GPipe's activations) fails exactly the
// checks meant for it.
#include "harness/testing/suite_run.hpp"
#include "strategies/testing/broken_strategies.hpp"

namespace pts {
namespace {

using testing_support::Cases;

constexpr const char* kSuite = R"(
[defaults]
workload = "gpt-tiny"
steps = 3
warmup_steps = 1
global_batch = 8
lr = 0.05

[[case]]
name = "gpt-tp1"
strategy = "tp"
dp = 1
tp = 1
pp = 1
dtype = ["float64", "float32"]

[[case]]
name = "gpt-tp2"
strategy = "tp"
dp = 1
tp = 2
pp = 1
dtype = ["float64", "float32"]

[[case]]
name = "gpt-tp4"
strategy = "tp"
dp = 1
tp = 4
pp = 1
dtype = ["float64", "float32"]

[[case]]
name = "gpt-pp1-m2-gpipe"
strategy = "pp-gpipe"
dp = 1
tp = 1
pp = 1
microbatches = 2
dtype = ["float64", "float32"]

[[case]]
name = "gpt-pp2-m1-gpipe"
strategy = "pp-gpipe"
dp = 1
tp = 1
pp = 2
microbatches = 1
dtype = ["float64", "float32"]

[[case]]
name = "gpt-pp2-m2-gpipe"
strategy = "pp-gpipe"
dp = 1
tp = 1
pp = 2
microbatches = 2
dtype = ["float64", "float32"]

[[case]]
name = "gpt-pp2-m4-gpipe"
strategy = "pp-gpipe"
dp = 1
tp = 1
pp = 2
microbatches = 4
dtype = ["float64", "float32"]

[[case]]
name = "gpt-pp4-m1-gpipe"
strategy = "pp-gpipe"
dp = 1
tp = 1
pp = 4
microbatches = 1
dtype = ["float64", "float32"]

[[case]]
name = "gpt-pp4-m4-gpipe"
strategy = "pp-gpipe"
dp = 1
tp = 1
pp = 4
microbatches = 4
dtype = ["float64", "float32"]

[[case]]
name = "gpt-pp4-m8-gpipe"
strategy = "pp-gpipe"
dp = 1
tp = 1
pp = 4
microbatches = 8
dtype = ["float64", "float32"]

[[case]]
name = "gpt-pp1-m2-1f1b"
strategy = "pp-1f1b"
dp = 1
tp = 1
pp = 1
microbatches = 2
dtype = ["float64", "float32"]

[[case]]
name = "gpt-pp2-m1-1f1b"
strategy = "pp-1f1b"
dp = 1
tp = 1
pp = 2
microbatches = 1
dtype = ["float64", "float32"]

[[case]]
name = "gpt-pp2-m2-1f1b"
strategy = "pp-1f1b"
dp = 1
tp = 1
pp = 2
microbatches = 2
dtype = ["float64", "float32"]

[[case]]
name = "gpt-pp2-m4-1f1b"
strategy = "pp-1f1b"
dp = 1
tp = 1
pp = 2
microbatches = 4
dtype = ["float64", "float32"]

[[case]]
name = "gpt-pp4-m1-1f1b"
strategy = "pp-1f1b"
dp = 1
tp = 1
pp = 4
microbatches = 1
dtype = ["float64", "float32"]

[[case]]
name = "gpt-pp4-m4-1f1b"
strategy = "pp-1f1b"
dp = 1
tp = 1
pp = 4
microbatches = 4
dtype = ["float64", "float32"]

[[case]]
name = "gpt-pp4-m8-1f1b"
strategy = "pp-1f1b"
dp = 1
tp = 1
pp = 4
microbatches = 8
dtype = ["float64", "float32"]

[[case]]
name = "gpt-stage-layers"
strategy = "pp-1f1b"
dp = 1
tp = 1
pp = 2
microbatches = 4
stage_layers = "3,1"
dtype = ["float64", "float32"]

[[case]]
name = "gpt-hybrid-2x2x2"
strategy = "hybrid"
dp = 2
tp = 2
pp = 2
dtype = ["float64", "float32"]

[[case]]
name = "gpt-hybrid-4x2x1"
strategy = "hybrid"
dp = 4
tp = 2
pp = 1
dtype = ["float64", "float32"]

[[case]]
name = "gpt-hybrid-2x1x4"
strategy = "hybrid"
dp = 2
tp = 1
pp = 4
dtype = ["float64", "float32"]

[[case]]
name = "gpt-hybrid-1x2x4"
strategy = "hybrid"
dp = 1
tp = 2
pp = 4
dtype = ["float64", "float32"]

[[case]]
name = "gpt-hybrid-2x2x2-zero1"
strategy = "hybrid"
dp = 2
tp = 2
pp = 2
zero_stage = 1
dtype = ["float64", "float32"]

[[case]]
name = "gpt-hybrid-2x2x2-fsdp"
strategy = "hybrid"
dp = 2
tp = 2
pp = 2
zero_stage = 3
dtype = ["float64", "float32"]

[[case]]
name = "gpt-hybrid-2x2x2-zero2-gpipe"
strategy = "hybrid"
dp = 2
tp = 2
pp = 2
microbatches = 4
zero_stage = 2
schedule = "gpipe"
dtype = ["float64", "float32"]

[[case]]
name = "gpt-hybrid-2x2x2-link"
strategy = "hybrid"
dp = 2
tp = 2
pp = 2
overlap = true
link = { bus_gbps = 5, latency_us = 20 }
dtype = ["float64", "float32"]

[[case]]
name = "mlp-tp2"
strategy = "tp"
dp = 1
tp = 2
pp = 1
workload = "mlp-tiny"
dtype = ["float64", "float32"]

[[case]]
name = "mlp-tp4"
strategy = "tp"
dp = 1
tp = 4
pp = 1
workload = "mlp-tiny"
dtype = ["float64", "float32"]

[[case]]
name = "mlp-pp2"
strategy = "pp-1f1b"
dp = 1
tp = 1
pp = 2
microbatches = 4
workload = "mlp-tiny"
dtype = ["float64", "float32"]

[[case]]
name = "mlp-hybrid-2x2x2"
strategy = "hybrid"
dp = 2
tp = 2
pp = 2
workload = "mlp-tiny"
dtype = ["float64", "float32"]

[[case]]
name = "bug-row-reduce"
strategy = "tp-no-row-reduce"
dp = 1
tp = 2
pp = 1
dtype = ["float64", "float32"]

[[case]]
name = "bug-vocab-overlap"
strategy = "tp-vocab-overlap"
dp = 1
tp = 2
pp = 1
dtype = ["float64", "float32"]

[[case]]
name = "gpt-cp2"
strategy = "cp"
cp = 2
dtype = ["float64", "float32"]

[[case]]
name = "gpt-cp4"
strategy = "cp"
cp = 4
dtype = ["float64", "float32"]

[[case]]
name = "moe-ep2"
strategy = "ep"
workload = "moe-tiny-aux"
ep = 2
dtype = ["float64", "float32"]

[[case]]
name = "moe-ep4"
strategy = "ep"
workload = "moe-tiny-aux"
ep = 4
dtype = ["float64", "float32"]

[[case]]
name = "moe-hybrid-dp2-ep2-tp2"
strategy = "hybrid"
workload = "moe-tiny-aux"
dp = 2
ep = 2
tp = 2
zero_stage = 3
dtype = ["float64", "float32"]

[[case]]
name = "bug-cp-ring-backwards"
strategy = "cp-ring-backwards"
cp = 4
dtype = ["float64", "float32"]

[[case]]
name = "bug-cp-ring-stuck"
strategy = "cp-ring-stuck"
cp = 4
dtype = ["float64", "float32"]

[[case]]
name = "bug-ep-misrouted"
strategy = "ep-misrouted"
workload = "moe-tiny"
ep = 2
dtype = ["float64", "float32"]

[[case]]
name = "bug-ep-padded"
strategy = "ep-padded"
workload = "moe-tiny"
ep = 2
dtype = ["float64", "float32"]

[[case]]
name = "bug-ep-dense-unsummed"
strategy = "ep-dense-unsummed"
workload = "moe-tiny"
ep = 2
dtype = ["float64", "float32"]

[[case]]
name = "bug-drop-last"
strategy = "pp-1f1b-drop-last"
dp = 1
tp = 1
pp = 2
microbatches = 4
dtype = ["float64", "float32"]

[[case]]
name = "gpt-deep-pp2-m4"
workload = "gpt-deep"
strategy = "hybrid"
dp = 1
tp = 1
pp = 2
microbatches = 4
schedule = ["interleaved-1f1b", "zb-h1", "zbv"]
dtype = ["float64", "float32"]

[[case]]
name = "gpt-deep-pp4-m8"
workload = "gpt-deep"
strategy = "hybrid"
dp = 1
tp = 1
pp = 4
microbatches = 8
schedule = ["interleaved-1f1b", "zb-h1", "zbv"]
dtype = ["float64", "float32"]

[[case]]
name = "gpt-hybrid-2x2x2-zb"
strategy = "hybrid"
dp = 2
tp = 2
pp = 2
microbatches = 2
zero_stage = [0, 3]
overlap = true
schedule = ["interleaved-1f1b", "zb-h1", "zbv"]
dtype = ["float64", "float32"]

[[case]]
name = "bug-skip-w"
strategy = "pp-zb-h1-skip-w"
dp = 1
tp = 1
pp = 2
microbatches = 4
dtype = ["float64", "float32"]

[[case]]
name = "bug-all-forwards"
strategy = "pp-1f1b-all-forwards"
dp = 1
tp = 1
pp = 2
microbatches = 4
dtype = ["float64", "float32"]
)";

const Cases& run_once() {
  static const Cases cases = [] {
    StrategyRegistry reg = builtin_strategies();
    add_broken_strategies(reg);
    return testing_support::run_suite_text(kSuite, "model-parallel", reg);
  }();
  return cases;
}

void expect(const std::string& name, const std::string& exact, const std::string& precision, const std::string& comm,
            const std::string& memory, const std::string& verdict) {
  testing_support::expect_case(run_once(), name, exact, precision, comm, memory, verdict);
}

class Layouts : public testing::TestWithParam<std::string> {};

TEST_P(Layouts, PassEveryCheck) {
  expect(GetParam() + "-float64", "PASS", "SKIP", "PASS", "PASS", "PASS");
  expect(GetParam() + "-float32", "SKIP", "PASS", "PASS", "PASS", "PASS");
}

INSTANTIATE_TEST_SUITE_P(ModelParallel, Layouts,
                         testing::Values("gpt-tp1", "gpt-tp2", "gpt-tp4", "gpt-pp1-m2-gpipe",
                                         "gpt-pp2-m1-gpipe", "gpt-pp2-m2-gpipe", "gpt-pp2-m4-gpipe",
                                         "gpt-pp4-m1-gpipe", "gpt-pp4-m4-gpipe", "gpt-pp4-m8-gpipe",
                                         "gpt-pp1-m2-1f1b", "gpt-pp2-m1-1f1b", "gpt-pp2-m2-1f1b",
                                         "gpt-pp2-m4-1f1b", "gpt-pp4-m1-1f1b", "gpt-pp4-m4-1f1b",
                                         "gpt-pp4-m8-1f1b", "gpt-stage-layers", "gpt-hybrid-2x2x2",
                                         "gpt-hybrid-4x2x1", "gpt-hybrid-2x1x4", "gpt-hybrid-1x2x4",
                                         "gpt-hybrid-2x2x2-zero1", "gpt-hybrid-2x2x2-fsdp",
                                         "gpt-hybrid-2x2x2-zero2-gpipe", "gpt-hybrid-2x2x2-link", "mlp-tp2",
                                         "mlp-tp4", "mlp-pp2", "mlp-hybrid-2x2x2", "gpt-cp2", "gpt-cp4",
                                         "moe-ep2", "moe-ep4", "moe-hybrid-dp2-ep2-tp2"),
                         [](const testing::TestParamInfo<std::string>& i) {
                           std::string n = i.param;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

// The row-parallel projection's partial sums are never added up: the forward is wrong
// (equivalence) and one all-reduce per block is missing (volume).
TEST(PlantedBugs, RowParallelWithoutAllReduce) {
  expect("bug-row-reduce-float64", "FAIL", "SKIP", "FAIL", "PASS", "FAIL");
  expect("bug-row-reduce-float32", "SKIP", "FAIL", "FAIL", "PASS", "FAIL");
}

// Looking tokens up one row off in the embedding and the loss: only equivalence can see it.
TEST(PlantedBugs, WrongVocabularyShardOffset) {
  expect("bug-vocab-overlap-float64", "FAIL", "SKIP", "PASS", "PASS", "FAIL");
  expect("bug-vocab-overlap-float32", "SKIP", "FAIL", "PASS", "PASS", "FAIL");
}

// Context parallelism's ring turning the wrong way places keys at other positions (only the
// numbers show it: the bytes are the same); a ring that never passes anything on is wrong and
// sends nothing.
TEST(PlantedBugs, ContextParallelRing) {
  expect("bug-cp-ring-backwards-float64", "FAIL", "SKIP", "PASS", "PASS", "FAIL");
  expect("bug-cp-ring-backwards-float32", "SKIP", "FAIL", "PASS", "PASS", "FAIL");
  expect("bug-cp-ring-stuck-float64", "FAIL", "SKIP", "FAIL", "PASS", "FAIL");
  expect("bug-cp-ring-stuck-float32", "SKIP", "FAIL", "FAIL", "PASS", "FAIL");
}

// Expert parallelism: tokens at the wrong rank's expert (the numbers; the bytes follow the
// routing taken, so they agree), empty capacity slots dispatched too (the numbers are right:
// only the all_to_allv bytes show it), dense gradients never summed over ep (the numbers and
// the missing all_reduce).
TEST(PlantedBugs, ExpertParallelDispatch) {
  expect("bug-ep-misrouted-float64", "FAIL", "SKIP", "PASS", "PASS", "FAIL");
  expect("bug-ep-misrouted-float32", "SKIP", "FAIL", "PASS", "PASS", "FAIL");
  expect("bug-ep-padded-float64", "PASS", "SKIP", "FAIL", "PASS", "FAIL");
  expect("bug-ep-padded-float32", "SKIP", "PASS", "FAIL", "PASS", "FAIL");
  expect("bug-ep-dense-unsummed-float64", "FAIL", "SKIP", "FAIL", "PASS", "FAIL");
  expect("bug-ep-dense-unsummed-float32", "SKIP", "FAIL", "FAIL", "PASS", "FAIL");
}

// GPipe's order under 1F1B's name: the numbers and the bytes are right, but the first stage
// holds m microbatches of activations instead of pp, which only the tracker sees.
TEST(PlantedBugs, OneFOneBRunningAllForwardsFirstHoldsTooManyActivations) {
  expect("bug-all-forwards-float64", "PASS", "SKIP", "PASS", "FAIL", "FAIL");
  expect("bug-all-forwards-float32", "SKIP", "PASS", "PASS", "FAIL", "FAIL");
}

// The schedule never runs the last microbatch's backward: its gradient is lost (exact,
// precision), its gradient is never sent (comm) and its activations are never freed (memory).
TEST(PlantedBugs, OneFOneBDroppingTheLastMicrobatch) {
  expect("bug-drop-last-float64", "FAIL", "SKIP", "FAIL", "FAIL", "FAIL");
  expect("bug-drop-last-float32", "SKIP", "FAIL", "FAIL", "FAIL", "FAIL");
}

// The chunked and split schedules at pp 2 and 4 and inside a 2x2x2 hybrid (ZeRO 0 and 3,
// overlapped): exact, as accurate as single-device float32, their point-to-point bytes and
// their activation peaks (the table replayed) exactly as stated.
TEST(Schedules, ChunkedAndSplitPassEveryCheck) {
  for (const std::string s : {"interleaved-1f1b", "zb-h1", "zbv"}) {
    for (const std::string c : {"gpt-deep-pp2-m4-", "gpt-deep-pp4-m8-"}) {
      expect(c + "float64-" + s, "PASS", "SKIP", "PASS", "PASS", "PASS");
      expect(c + "float32-" + s, "SKIP", "PASS", "PASS", "PASS", "PASS");
    }
    for (const std::string z : {"0", "3"}) {
      expect("gpt-hybrid-2x2x2-zb-float64-" + s + "-zero_stage" + z, "PASS", "SKIP", "PASS", "PASS", "PASS");
      expect("gpt-hybrid-2x2x2-zb-float32-" + s + "-zero_stage" + z, "SKIP", "PASS", "PASS", "PASS", "PASS");
    }
  }
}

// A weight-gradient pass the table never runs: nothing waits for it, the step completes, and
// the last microbatch's weight gradients on the first stage are missing (exact, precision).
TEST(PlantedBugs, ZeroBubbleSkippingAWeightPass) {
  expect("bug-skip-w-float64", "FAIL", "SKIP", "PASS", "PASS", "FAIL");
  expect("bug-skip-w-float32", "SKIP", "FAIL", "PASS", "PASS", "FAIL");
}

// Tables that cannot run are refused before anything runs, naming the schedule key: a weight
// pass listed twice, and an interleaved rank that swaps its chunks (its first forward waits for
// a virtual stage that waits for it).
TEST(PlantedBugs, SchedulesThatCannotRunAreRefused) {
  StrategyRegistry reg = builtin_strategies();
  add_broken_strategies(reg);
  const WorkloadSpec& w = *find_workload("gpt-tiny");
  CaseConfig c;
  c.layout.pp = 2;
  c.microbatches = 4;
  for (const auto& [name, says] : {std::pair<std::string, std::string>{"pp-zb-h1-w-twice", "runs W0 chunk 0 2 times"},
                                   {"pp-interleaved-swapped", "deadlocks: rank 0 waits forever at F0 chunk 1"}}) {
    try {
      reg.find(name)->validate(c, w);
      ADD_FAILURE() << name << " was accepted";
    } catch (const CaseError& e) {
      EXPECT_EQ(e.key, "schedule") << name;
      EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace pts
