// The bucket planner of gradient averaging, on its own: which ready gradients go out together.
#include "runtime/dist/bucket_plan.h"

#include <gtest/gtest.h>

#include <vector>

namespace dtrain::clip {
namespace {

using Members = std::vector<size_t>;

std::vector<Members> MembersOf(const std::vector<PlannedBucket>& plan) {
  std::vector<Members> out;
  for (const PlannedBucket& b : plan) out.push_back(b.members);
  return out;
}

TEST(BucketPlan, ChainLinksGoInPlaceUpToTheThreshold) {
  // Gradients 0..3 lie end to end in one buffer (a chain), 100 bytes each.
  std::vector<GradientSlot> slots(4, GradientSlot{100, 1});
  auto plan = PlanBuckets(slots, {{0, 1, 2, 3}}, {0, 1, 2, 3}, 250);
  EXPECT_EQ(MembersOf(plan), (std::vector<Members>{{0, 1}, {2, 3}}));
  for (const PlannedBucket& b : plan) EXPECT_EQ(b.chain, 0);
}

TEST(BucketPlan, AGradientNotReadyEverywhereSplitsTheChain) {
  std::vector<GradientSlot> slots(4, GradientSlot{100, 1});
  auto plan = PlanBuckets(slots, {{3, 2, 1, 0}}, {0, 1, 3}, 1000);
  // Memory order is 3, 2, 1, 0; 2 is missing, so 3 and 1-0 cannot be one view.
  EXPECT_EQ(MembersOf(plan), (std::vector<Members>{{3}, {1, 0}}));
}

TEST(BucketPlan, OtherGradientsAreFusedInIndexOrderByKeyAndThreshold) {
  std::vector<GradientSlot> slots = {{100, 1}, {100, 1}, {100, 2}, {100, 2}, {100, 2}, {50, 2}};
  auto plan = PlanBuckets(slots, {}, {0, 1, 2, 3, 4, 5}, 200);
  // A new bucket where the fusion key changes (another dtype or device) and where the
  // threshold would be crossed.
  EXPECT_EQ(MembersOf(plan), (std::vector<Members>{{0, 1}, {2, 3}, {4, 5}}));
  for (const PlannedBucket& b : plan) EXPECT_EQ(b.chain, -1);
}

TEST(BucketPlan, ChainsComeFirstThenTheRestAndOnlyReadyOnes) {
  std::vector<GradientSlot> slots(5, GradientSlot{10, 7});
  auto plan = PlanBuckets(slots, {{3, 4}}, {0, 2, 3, 4}, 1000);
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].members, (Members{3, 4}));
  EXPECT_EQ(plan[0].chain, 0);
  EXPECT_EQ(plan[1].members, (Members{0, 2}));
  EXPECT_EQ(plan[1].chain, -1);
}

TEST(BucketPlan, NoThresholdMeansOneCollectivePerGradient) {
  std::vector<GradientSlot> slots(3, GradientSlot{10, 1});
  auto plan = PlanBuckets(slots, {{0, 1}}, {0, 1, 2}, 0);
  EXPECT_EQ(MembersOf(plan), (std::vector<Members>{{0}, {1}, {2}}));
}

TEST(BucketPlan, AGradientLargerThanTheThresholdGoesAlone) {
  std::vector<GradientSlot> slots = {{10, 1}, {500, 1}, {10, 1}};
  auto plan = PlanBuckets(slots, {}, {0, 1, 2}, 100);
  EXPECT_EQ(MembersOf(plan), (std::vector<Members>{{0}, {1}, {2}}));
}

TEST(BucketPlan, NothingReadyNothingPlanned) {
  std::vector<GradientSlot> slots(3, GradientSlot{10, 1});
  EXPECT_TRUE(PlanBuckets(slots, {{0, 1, 2}}, {}, 100).empty());
}

}  // namespace
}  // namespace dtrain::clip
