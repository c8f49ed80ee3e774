// The pipeline's pure functions: the stage split over virtual stages, each rank's chunks, the
// case's table with its refusals, and the stated activation peak replaying a table (1F1B
// holds min(p - s, m) microbatches, GPipe m, the split schedules their weight passes' too).
#include "strategies/pipeline_parallel.hpp"

#include <gtest/gtest.h>

#include "strategies/registry.hpp"

namespace pts {
namespace {

using Ranges = std::vector<std::pair<int, int>>;

TEST(StageBlocks, EmbeddingFirstHeadLastLayersBalancedOrAsGiven) {
  const WorkloadSpec& gpt = *find_workload("gpt-tiny");  // blocks: embedding, 4 layers, head
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

TEST(RankChunks, LoopingAndVShapedPlacement) {
  const WorkloadSpec& gpt = *find_workload("gpt-tiny");  // 4 virtual stages of one layer at pp 2, v 2
  const ScheduleTable inter = make_schedule_table("interleaved-1f1b", 2, 2, 2);
  EXPECT_EQ(rank_chunks(gpt, inter, 0, {}), (Ranges{{0, 2}, {3, 4}}));  // virtual stages 0 and 2
  EXPECT_EQ(rank_chunks(gpt, inter, 1, {}), (Ranges{{2, 3}, {4, 6}}));  // 1 and 3
  const ScheduleTable v = make_schedule_table("zbv", 2, 2, 2);
  EXPECT_EQ(rank_chunks(gpt, v, 0, {}), (Ranges{{0, 2}, {4, 6}}));  // virtual stages 0 and 3
  EXPECT_EQ(rank_chunks(gpt, v, 1, {}), (Ranges{{2, 3}, {3, 4}}));  // 1 and 2: the V turns here
  // Eight virtual stages do not fit four layers; three do not divide them.
  try {
    rank_chunks(gpt, make_schedule_table("interleaved-1f1b", 4, 4, 2), 0, {});
    ADD_FAILURE() << "pp 4 x virtual_stages 2 on 4 layers was accepted";
  } catch (const CaseError& e) {
    EXPECT_EQ(e.key, "virtual_stages");
  }
  EXPECT_THROW(rank_chunks(gpt, make_schedule_table("interleaved-1f1b", 1, 3, 3), 0, {}), CaseError);
  // stage_layers then lists every virtual stage.
  EXPECT_EQ(rank_chunks(gpt, inter, 0, {2, 0 + 1, 1, 0}).size(), 2u);
}

CaseConfig pipeline_case(const std::string& schedule, int pp, int m, int v = 0) {
  CaseConfig c;
  c.layout.pp = pp;
  c.schedule = schedule;
  c.microbatches = m;
  c.virtual_stages = v;
  return c;
}

TEST(CaseTable, DefaultsAndRefusals) {
  EXPECT_EQ(case_table(pipeline_case("interleaved-1f1b", 2, 4), *find_schedule("interleaved-1f1b"))->v, 2);
  EXPECT_EQ(case_table(pipeline_case("zbv", 2, 4), *find_schedule("zbv"))->v, 2);
  EXPECT_EQ(case_table(pipeline_case("1f1b", 2, 4), *find_schedule("1f1b"))->v, 1);
  try {
    case_table(pipeline_case("interleaved-1f1b", 2, 3), *find_schedule("interleaved-1f1b"));
    ADD_FAILURE() << "m = 3 on pp 2 was accepted";
  } catch (const CaseError& e) {
    EXPECT_EQ(e.key, "microbatches");
  }
  try {
    case_table(pipeline_case("1f1b", 2, 4, 2), *find_schedule("1f1b"));
    ADD_FAILURE() << "1f1b with two chunks was accepted";
  } catch (const CaseError& e) {
    EXPECT_EQ(e.key, "virtual_stages");
  }
}

TEST(ActivationPeak, ReplaysTheTable) {
  const std::vector<ChunkBytes> one{{100, 0}};
  for (int p : {1, 2, 4})
    for (int m : {1, 2, 4, 8})
      for (int s = 0; s < p; ++s) {
        EXPECT_EQ(activation_peak(make_schedule_table("1f1b", p, m), s, one), std::min(p - s, m) * 100);
        EXPECT_EQ(activation_peak(make_schedule_table("gpipe", p, m), s, one), m * 100);
      }
  // zb-h1 at p 2, m 4 on rank 0: F0 F1 B0 (F2 ...: one B held for its W at most p at a time).
  const ScheduleTable zb = make_schedule_table("zb-h1", 2, 4);
  const std::vector<ChunkBytes> split{{100, 10}};
  int64_t now = 0, peak = 0;
  for (const PipeAction& a : zb.ranks[0]) {
    now += a.kind == PipeKind::F ? 100 : a.kind == PipeKind::B ? 10 : -110;
    peak = std::max(peak, now);
  }
  EXPECT_EQ(activation_peak(zb, 0, split), peak);
  EXPECT_GE(peak, 2 * 100);  // at least 1f1b's two microbatches
  // Chunks count separately: interleaved rank 0 holds both chunks' microbatches.
  const ScheduleTable inter = make_schedule_table("interleaved-1f1b", 2, 2, 2);
  EXPECT_EQ(activation_peak(inter, 0, {{100, 0}, {1, 0}}), 2 * 100 + 2 * 1);
}

}  // namespace
}  // namespace pts
