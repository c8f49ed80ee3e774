// The pipeline schedules and the stage split as pure functions: each schedule runs every
// microbatch's forward before its backward, 1F1B holds at most min(p - s, m) microbatches
// in flight and GPipe m, and stages cover the model's blocks contiguously.
#include "strategies/pipeline_parallel.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "strategies/registry.hpp"

namespace pts {
namespace {

std::string render(const std::vector<PipeStep>& steps) {
  std::string s;
  for (const auto& st : steps) {
    s += st.forward ? 'F' : 'B';
    s += std::to_string(st.micro);
    s += ' ';
  }
  return s;
}

int most_in_flight(const std::vector<PipeStep>& steps) {
  int now = 0, most = 0;
  for (const auto& st : steps) most = std::max(most, now += st.forward ? 1 : -1);
  return most;
}

TEST(PipelineSchedule, OrdersAsPublished) {
  EXPECT_EQ(render(find_schedule("gpipe")->steps(0, 2, 3)), "F0 F1 F2 B0 B1 B2 ");
  // 4 stages, 6 microbatches: stage s warms up with 3 - s forwards.
  EXPECT_EQ(render(find_schedule("1f1b")->steps(0, 4, 6)), "F0 F1 F2 F3 B0 F4 B1 F5 B2 B3 B4 B5 ");
  EXPECT_EQ(render(find_schedule("1f1b")->steps(2, 4, 6)), "F0 F1 B0 F2 B1 F3 B2 F4 B3 F5 B4 B5 ");
  EXPECT_EQ(render(find_schedule("1f1b")->steps(3, 4, 6)), "F0 B0 F1 B1 F2 B2 F3 B3 F4 B4 F5 B5 ");
  // Fewer microbatches than stages: warm-up is cut at m.
  EXPECT_EQ(render(find_schedule("1f1b")->steps(0, 4, 2)), "F0 F1 B0 B1 ");
}

TEST(PipelineSchedule, EveryMicrobatchOnceForwardBeforeBackwardAndInFlightAsStated) {
  for (const char* sched : {"gpipe", "1f1b"})
    for (int p : {1, 2, 3, 4, 8})
      for (int m : {1, 2, 3, 4, 8, 16})
        for (int s = 0; s < p; ++s) {
          SCOPED_TRACE(std::string(sched) + " p" + std::to_string(p) + " m" + std::to_string(m) + " s" + std::to_string(s));
          const auto steps = find_schedule(sched)->steps(s, p, m);
          ASSERT_EQ(steps.size(), size_t(2 * m));
          std::vector<int> forward_at(m, -1), backward_at(m, -1);
          for (size_t i = 0; i < steps.size(); ++i) (steps[i].forward ? forward_at : backward_at)[steps[i].micro] = int(i);
          for (int k = 0; k < m; ++k) {
            ASSERT_GE(forward_at[k], 0);
            ASSERT_GT(backward_at[k], forward_at[k]);
            if (k > 0) {
              ASSERT_GT(backward_at[k], backward_at[k - 1]);  // backwards in order: 0 first
            }
          }
          EXPECT_EQ(most_in_flight(steps), find_schedule(sched)->in_flight(s, p, m));
        }
  EXPECT_EQ(find_schedule("1f1b")->in_flight(0, 4, 16), 4);
  EXPECT_EQ(find_schedule("gpipe")->in_flight(0, 4, 16), 16);
}

TEST(PipelineSchedule, BubbleTheory) {
  EXPECT_DOUBLE_EQ(OneFOneB().bubble(1, 4), 0.0);
  EXPECT_DOUBLE_EQ(OneFOneB().bubble(2, 8), 1.0 / 9.0);
  EXPECT_DOUBLE_EQ(OneFOneB().bubble(4, 4), 3.0 / 7.0);
}

TEST(StageBlocks, EmbeddingFirstHeadLastLayersBalancedOrAsGiven) {
  const WorkloadSpec& gpt = *find_workload("gpt-tiny");  // blocks: embedding, 4 layers, head
  using Ranges = std::vector<std::pair<int, int>>;
  EXPECT_EQ(stage_blocks(gpt, 1, {}), (Ranges{{0, 6}}));
  EXPECT_EQ(stage_blocks(gpt, 2, {}), (Ranges{{0, 3}, {3, 6}}));
  EXPECT_EQ(stage_blocks(gpt, 4, {}), (Ranges{{0, 2}, {2, 3}, {3, 4}, {4, 6}}));
  EXPECT_EQ(stage_blocks(gpt, 2, {3, 1}), (Ranges{{0, 4}, {4, 6}}));
  EXPECT_EQ(stage_blocks(gpt, 2, {0, 4}), (Ranges{{0, 1}, {1, 6}}));  // the first stage: embedding alone
  const WorkloadSpec& mlp = *find_workload("mlp-tiny");  // blocks: 2 hidden layers, head
  EXPECT_EQ(stage_blocks(mlp, 2, {}), (Ranges{{0, 1}, {1, 3}}));
  EXPECT_THROW(stage_blocks(mlp, 4, {}), CaseError);
  EXPECT_THROW(stage_blocks(gpt, 3, {2, 0, 2}), CaseError);  // a middle stage with nothing
}

}  // namespace
}  // namespace pts
