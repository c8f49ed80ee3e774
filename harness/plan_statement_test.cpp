// One source of truth for the planner (issue 13): for every kind of layout on 4 ranks, what
// a built strategy states on each rank (expected_comm of every step, expected_memory) equals
// what its registry entry's pure statement computes for that rank's coordinates without
// building anything (StrategyInfo::statement, the planner's input). Exact equality of every
// op, count, byte and memory field: both go through the same formulas, so any difference is
// a formula computed twice. Also the rank correlation --validate reports (Kendall's tau-b).
#include <cmath>

#include <gtest/gtest.h>
#include <mpi.h>

#include "core/comm/mpi/mpi_comm.hpp"
#include "harness/plan.hpp"
#include "harness/suite.hpp"
#include "strategies/registry.hpp"

namespace pts {
namespace {

constexpr const char* kSuite = R"(
[defaults]
workload = "gpt-tiny"
steps = 3
global_batch = 16

[[case]]
name = "ddp"
strategy = "ddp"
dp = 4
bucket_bytes = 4096
overlap = [false, true]
dtype = ["float64", "float32"]

[[case]]
name = "zero"
strategy = ["zero1", "zero2", "fsdp"]
dp = 4
microbatches = [1, 2]
optimizer = ["sgd", "adamw"]

[[case]]
name = "fsdp-opts"
strategy = "fsdp"
dp = 4
prefetch = [false, true]
reshard_after_forward = [false, true]
overlap = true

[[case]]
name = "tp"
strategy = "tp"
tp = 4
dtype = ["float64", "float32"]

[[case]]
name = "pp"
strategy = ["pp-gpipe", "pp-1f1b"]
pp = 4
microbatches = [1, 4, 8]

[[case]]
name = "pp-split"
strategy = "pp-1f1b"
pp = 4
microbatches = 8
stage_layers = ["0,2,2,0", "1,1,1,1", "2,1,1,0"]

[[case]]
name = "hybrid"
strategy = "hybrid"
dp = 2
tp = 2
pp = 1
zero_stage = [0, 1, 2, 3]
dtype = ["float64", "float32"]

[[case]]
name = "hybrid-pp"
strategy = "hybrid"
dp = 2
tp = 1
pp = 2
zero_stage = [0, 3]
schedule = ["gpipe", "1f1b"]
microbatches = [2, 4]
stage_layers = "1,3"

[[case]]
name = "hybrid-schedules"
workload = "gpt-deep"
strategy = "hybrid"
dp = 2
tp = 1
pp = 2
zero_stage = [0, 3]
schedule = ["interleaved-1f1b", "zb-h1", "zbv"]
microbatches = [2, 4]

[[case]]
name = "hybrid-tp-pp"
strategy = "hybrid"
dp = 1
tp = 2
pp = 2
microbatches = 4

[[case]]
name = "hybrid-cp"
strategy = "hybrid"
dp = 2
cp = 2
zero_stage = [0, 3]
overlap = [false, true]

[[case]]
name = "hybrid-cp-pp"
strategy = "hybrid"
cp = 2
pp = 2
microbatches = 2
schedule = ["1f1b", "zbv"]

[[case]]
name = "hybrid-ep"
workload = "moe-tiny-aux"
strategy = "hybrid"
dp = 2
ep = 2
zero_stage = [0, 3]

[[case]]
name = "hybrid-ep-tp"
workload = "moe-tiny"
strategy = "hybrid"
ep = 2
tp = 2

[[case]]
name = "mlp"
workload = ["mlp-deep", "gpt-odd"]
strategy = "hybrid"
dp = 2
tp = 2
zero_stage = [1, 3]
)";

template <class T>
void expect_same(const StrategyInfo& info, const CaseConfig& c, const WorkloadSpec& w, Mesh& mesh) {
  std::unique_ptr<Backend<T>> backend = make_backend<T>(c.backend);
  MemoryTracker mem(backend->allocator());
  const StrategyContext<T> ctx{c, w, mesh, *backend, mem};
  std::unique_ptr<Strategy<T>> built;
  if constexpr (std::is_same_v<T, float>) built = info.make_f32(ctx);
  else built = info.make_f64(ctx);
  for (int step = 0; step < c.steps; ++step) {
    const RankStatement pure = info.statement(c, w, mesh.coord(), step);
    const std::vector<ExpectedOp> stated = built->expected_comm(step);
    ASSERT_EQ(pure.comm.size(), stated.size()) << c.name << " step " << step;
    for (size_t i = 0; i < stated.size(); ++i) {
      EXPECT_EQ(pure.comm[i].axis, stated[i].axis) << c.name << " op " << i;
      EXPECT_EQ(pure.comm[i].op, stated[i].op) << c.name << " op " << i;
      EXPECT_EQ(pure.comm[i].group_size, stated[i].group_size) << c.name << " op " << i;
      EXPECT_EQ(pure.comm[i].calls, stated[i].calls) << c.name << " op " << i;
      EXPECT_EQ(pure.comm[i].payload_bytes, stated[i].payload_bytes) << c.name << " op " << i;
    }
  }
  const MemoryExpectation e = built->expected_memory(), p = info.statement(c, w, mesh.coord(), 0).memory;
  EXPECT_EQ(p.param, e.param) << c.name;
  EXPECT_EQ(p.grad, e.grad) << c.name;
  EXPECT_EQ(p.optimizer, e.optimizer) << c.name;
  EXPECT_EQ(p.comm_max, e.comm_max) << c.name;
  EXPECT_EQ(p.activation, e.activation) << c.name;
  EXPECT_EQ(p.workspace_max, e.workspace_max) << c.name;
  EXPECT_GT(p.param, 0) << c.name;
  EXPECT_GE(p.activation, 0) << c.name;
}

TEST(PlanStatement, PureStatementEqualsBuiltStrategyOnEveryRank) {
  MpiComm world(MPI_COMM_WORLD, "world", false);
  ASSERT_EQ(world.size(), 4) << "run with mpirun -np 4";
  const StrategyRegistry reg = builtin_strategies();
  const Suite suite = parse_suite(kSuite, "plan_statement.toml", reg, world.size());
  ASSERT_GE(suite.cases.size(), 40u);
  for (const CaseConfig& c : suite.cases) {
    const StrategyInfo* info = reg.find(c.strategy);
    ASSERT_NE(info, nullptr);
    ASSERT_TRUE(info->statement) << c.strategy << " has no pure statement";
    const WorkloadSpec* w = find_workload(c.workload);
    ASSERT_EQ(c.layout.num_ranks(), 4) << c.name;
    Mesh mesh(world, c.layout);
    if (c.dtype == "float32") expect_same<float>(*info, c, *w, mesh);
    else expect_same<double>(*info, c, *w, mesh);
  }
}

// The strategies the planner does not enumerate say so (no statement) rather than guess.
TEST(PlanStatement, OnlyTrainerPresetsArePredicted) {
  const StrategyRegistry reg = builtin_strategies();
  for (const char* name : {"ddp", "zero1", "zero2", "fsdp", "tp", "pp-gpipe", "pp-1f1b", "cp", "ep", "hybrid"})
    EXPECT_TRUE(reg.find(name)->statement) << name;
  for (const char* name : {"single", "local-sgd", "diloco", "delayed-sgd", "param-server"})
    EXPECT_FALSE(reg.find(name)->statement) << name;
}

// validate's tau is tau-b: a tie in the predicted order (gpipe and 1f1b predicted alike) gets
// no credit, where tau without the tied pairs would call this order perfect.
TEST(PlanAccuracy, KendallTauB) {
  EXPECT_DOUBLE_EQ(kendall_tau_b({1, 2, 3, 4}, {0.1, 0.2, 0.3, 0.4}), 1.0);
  EXPECT_DOUBLE_EQ(kendall_tau_b({1, 2, 3, 4}, {4, 3, 2, 1}), -1.0);
  EXPECT_DOUBLE_EQ(kendall_tau_b({1, 2, 3}, {2, 1, 3}), 1.0 / 3);
  EXPECT_DOUBLE_EQ(kendall_tau_b({1, 1, 2, 3}, {1, 2, 3, 4}), 5 / std::sqrt(30.0));
}

}  // namespace
}  // namespace pts
