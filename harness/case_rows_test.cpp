// The per-step figures finish_case derives from a run: wall_s (the running sum of step times)
// and the first step that reaches a target loss. Times are dyadic fractions, so the sums
// are exact and compared with EXPECT_EQ.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "harness/case_rows.hpp"

namespace pts {
namespace {

TEST(WallTimes, AreTheRunningSumOfStepTimes) {
  EXPECT_EQ(wall_times({0.5, 0.25, 0.125, 1.0}), (std::vector<double>{0.5, 0.75, 0.875, 1.875}));
  EXPECT_TRUE(wall_times({}).empty());
}

TEST(ReachTarget, IsTheFirstStepAtOrBelowTheTargetCountedFromOne) {
  const std::vector<double> losses = {4.0, 3.0, 2.0, 2.5, 1.0};
  const std::vector<double> wall = wall_times({0.5, 0.25, 0.125, 0.0625, 0.5});
  auto hit = reach_target(losses, wall, 2.5);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->steps, 3);  // steps 0, 1 and 2 ran; step 2's loss is the first <= 2.5
  EXPECT_EQ(hit->wall_s, 0.875);
  hit = reach_target(losses, wall, 2.0);  // equal counts as reached
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->steps, 3);
  hit = reach_target(losses, wall, 4.0);  // the loss before the first update already meets it
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->steps, 1);
  EXPECT_EQ(hit->wall_s, 0.5);
  EXPECT_FALSE(reach_target(losses, wall, 0.5).has_value());
}

// With a window the mean of the last `window` losses (fewer at the start) must reach it: a
// single lucky batch does not.
TEST(ReachTarget, AWindowComparesTheMeanOfTheLastSteps) {
  const std::vector<double> losses = {4.0, 1.0, 4.0, 2.0, 2.0, 1.0};
  const std::vector<double> wall = wall_times({0.5, 0.5, 0.5, 0.5, 0.5, 0.5});
  EXPECT_EQ(reach_target(losses, wall, 2.0, 1)->steps, 2);  // the lucky batch
  auto hit = reach_target(losses, wall, 2.0, 2);             // means 4, 2.5, 2.5, 3, 2
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->steps, 5);
  EXPECT_EQ(hit->wall_s, 2.5);
  EXPECT_EQ(reach_target(losses, wall, 2.4, 3)->steps, 4);  // means 4, 2.5, 3, 2.33..
  EXPECT_FALSE(reach_target(losses, wall, 1.5, 3).has_value());
}

TEST(ReachTarget, ANanLossNeverReachesIt) {
  EXPECT_FALSE(reach_target({NAN, NAN}, {1.0, 2.0}, 10.0).has_value());
  auto hit = reach_target({NAN, 1.0}, {1.0, 2.0}, 10.0);
  ASSERT_TRUE(hit.has_value());
  EXPECT_EQ(hit->steps, 2);
}

}  // namespace
}  // namespace pts
