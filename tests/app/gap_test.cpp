// The gap a plan proves follows from how well its costs are known: no plan proves 1e-6 on
// costs known to about 1 %.

#include <gtest/gtest.h>

#include "app/plan.h"

namespace ergon::app {
namespace {

TEST(DefaultGap, PublishedProfilesProveATenthOfAPercentAndSaySo) {
  PlanArgs args;
  args.model = "mlp";
  args.board = "pi4";
  const auto graph = load_graph(args);
  const GapChoice g = choose_gap(args, graph);
  EXPECT_DOUBLE_EQ(g.gap, 0.001);
  EXPECT_NE(g.why.find("published profiles"), std::string::npos) << g.why;
  EXPECT_DOUBLE_EQ(make_request(args, graph).relative_gap, 0.001);
}

TEST(DefaultGap, MeasuredCostsProveTheirOwnUncertaintyWithinAFloorAndACeiling) {
  PlanArgs args;
  planner::TrainingGraph graph;
  graph.energy_rel_sigma = 0.02;
  EXPECT_DOUBLE_EQ(choose_gap(args, graph).gap, 0.02);
  EXPECT_NE(choose_gap(args, graph).why.find("2 %"), std::string::npos) << choose_gap(args, graph).why;
  graph.energy_rel_sigma = 1e-5;
  EXPECT_DOUBLE_EQ(choose_gap(args, graph).gap, kMinDefaultGap);
  graph.energy_rel_sigma = 0.3;
  EXPECT_DOUBLE_EQ(choose_gap(args, graph).gap, kMaxDefaultGap);
}

TEST(DefaultGap, AnExplicitGapWins) {
  PlanArgs args;
  args.gap = 1e-6;
  planner::TrainingGraph graph;
  graph.energy_rel_sigma = 0.02;
  EXPECT_DOUBLE_EQ(choose_gap(args, graph).gap, 1e-6);
  EXPECT_NE(choose_gap(args, graph).why.find("--gap"), std::string::npos);
}

// The issue's own case: BERT-tiny at 50 % of the Pi 4 with the defaults (total). The local
// search ended 0.8 % above the memory bound, and neither 15 minutes of CBC nor a bound of its
// own closed that; kicking the plan (iterated local search) finds one the memory bound proves
// within the default gap, in under a second on one thread. The limit is ample so that the
// test asserts what is found, not how fast.
TEST(DefaultGap, BertTinyOnThePi4AtHalfMemoryIsProvenWithinIt) {
  PlanArgs args;
  args.model = "bert-tiny";
  args.board = "pi4";
  args.budget = "50%";
  args.threads = 1;
  args.time_limit_s = 120;
  const PlanOutcome out = plan(args);
  ASSERT_TRUE(out.result.schedule) << out.result.why;
  EXPECT_EQ(out.result.status, planner::ModelStatus::kOptimal) << "gap " << out.result.gap;
  EXPECT_LE(out.result.gap, out.gap.gap);
}

}  // namespace
}  // namespace ergon::app
