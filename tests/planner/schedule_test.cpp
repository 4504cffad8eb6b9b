#include <gtest/gtest.h>

#include <cstdio>

#include "common/error.h"
#include "planner/graph.h"
#include "planner/schedule.h"
#include "planner/zoo.h"
#include "test_graphs.h"

namespace ergon::planner {
namespace {

using testing::LinearCosts;
using testing::random_forward;

TrainingGraph small() { return build_training_graph(random_forward(3, 2, true), LinearCosts()); }

TEST(TrainingGraph, BackwardNodesDependOnGradientsAndSavedTensors) {
  ForwardGraph f;
  f.name = "two";
  f.input_bytes = 100;
  f.ops.push_back({.name = "a", .op = "linear", .inputs = {kGraphInput}, .forward_flops = 10,
                   .backward_flops = 20, .output_bytes = 40, .param_bytes = 8});
  f.ops.push_back({.name = "b", .op = "relu", .inputs = {0}, .forward_flops = 10,
                   .backward_flops = 10, .output_bytes = 40, .backward_needs_inputs = false,
                   .backward_needs_output = true});
  const auto g = build_training_graph(f, LinearCosts(), 2);
  ASSERT_EQ(g.size(), 5);  // a, b, loss, b.backward, a.backward
  EXPECT_EQ(g.nodes[2].phase, NodePhase::kLoss);
  EXPECT_EQ(g.nodes[3].name, "b.backward");
  // a.backward needs a's input, the data batch, which is not a node.
  const std::vector<std::pair<int, int>> edges = {{0, 1}, {1, 2}, {1, 3}, {2, 3}, {3, 4}};
  EXPECT_EQ(g.edges, edges);
  EXPECT_EQ(g.nodes[4].output_bytes, 0U);  // no gradient w.r.t. the data batch
  EXPECT_EQ(g.nodes[3].output_bytes, 40U);
  EXPECT_EQ(g.fixed_bytes, 8U * 4);        // params + grads + 2 optimizer copies
}

TEST(Simulator, StoreAllRunsEveryNodeOnceAtTheStoreAllPeak) {
  const auto g = small();
  const auto report = simulate(g, store_all_schedule(g));
  ASSERT_TRUE(report.valid) << report.error;
  EXPECT_EQ(report.computes, g.size());
  EXPECT_EQ(report.recomputes, 0);
  EXPECT_EQ(report.peak_bytes, g.store_all_peak_bytes());
  EXPECT_NEAR(report.energy_j, g.single_pass_energy_j(), 1e-12);
  EXPECT_NEAR(report.compute_time_s, g.single_pass_time_s(), 1e-12);
}

TEST(Simulator, RejectsAMissingInputAndNamesIt) {
  const auto g = small();
  Schedule s = store_all_schedule(g);
  // Free node 0 right after computing it: node 1 then lacks its input.
  s.steps.insert(s.steps.begin() + 1, {StepKind::kFree, 0});
  const auto report = simulate(g, s);
  EXPECT_FALSE(report.valid);
  EXPECT_NE(report.error.find("not in memory"), std::string::npos) << report.error;
}

TEST(Simulator, RejectsMemoryOverTheBudget) {
  const auto g = small();
  const auto report = simulate(g, store_all_schedule(g), g.store_all_peak_bytes() - 1);
  EXPECT_FALSE(report.valid);
  EXPECT_NE(report.error.find("over the budget"), std::string::npos) << report.error;
}

TEST(Simulator, PagingOutAndBackInRestoresATensorAtItsCost) {
  const auto g = small();
  Schedule s;
  s.steps = {{StepKind::kCompute, 0}, {StepKind::kPageOut, 0}, {StepKind::kFree, 0},
             {StepKind::kPageIn, 0}};
  const auto report = simulate(g, s);
  EXPECT_FALSE(report.valid);  // the other nodes are never computed
  EXPECT_NE(report.error.find("never computed"), std::string::npos);
  Schedule bad;
  bad.steps = {{StepKind::kCompute, 0}, {StepKind::kFree, 0}, {StepKind::kPageIn, 0}};
  EXPECT_NE(simulate(g, bad).error.find("not on storage"), std::string::npos);
}

TEST(ScheduleEncoding, RoundTripsInAFewBytesPerStep) {
  const auto g = small();
  const Schedule s = store_all_schedule(g);
  const auto bytes = encode_schedule(s, g.size());
  EXPECT_LE(bytes.size(), 5 + s.steps.size());  // < 32 nodes: one byte per step
  int nodes = 0;
  const Schedule back = decode_schedule(bytes, &nodes);
  EXPECT_EQ(nodes, g.size());
  EXPECT_EQ(back.steps, s.steps);
}

TEST(ScheduleEncoding, MalformedBytesAreRefusedNotTrusted) {
  EXPECT_THROW(decode_schedule({'X', 'S', 1, 0, 0}), InputError);
  EXPECT_THROW(decode_schedule({'E', 'S', 9, 0, 0}), InputError);
  EXPECT_THROW(decode_schedule({'E', 'S', 1, 2, 1, 0x80}), InputError);  // cut varint
  EXPECT_THROW(decode_schedule({'E', 'S', 1, 2, 1, 8 * 4}), InputError);  // node 8 of 2
  auto ok = encode_schedule(store_all_schedule(small()), small().size());
  ok.push_back(0);
  EXPECT_THROW(decode_schedule(ok), InputError);
}

TEST(TrainingGraph, ValidateNamesTheProblem) {
  auto g = small();
  g.edges.emplace_back(5, 2);
  try {
    g.validate();
    FAIL() << "accepted a backward edge";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("goes backwards"), std::string::npos);
  }
  g = small();
  g.nodes[3].energy_j = -1;
  EXPECT_THROW(g.validate(), InputError);
}

}  // namespace
}  // namespace ergon::planner

namespace ergon::planner {
namespace {

TEST(ScheduleEncoding, ResNet18ScheduleFitsInAFewHundredBytes) {
  const auto g = build_training_graph(zoo_model("resnet18", 1), testing::LinearCosts());
  const auto bytes = encode_schedule(store_all_schedule(g), g.size());
  std::printf("resnet18: %d nodes, %zu steps, %zu bytes encoded\n", g.size(),
              store_all_schedule(g).steps.size(), bytes.size());
  EXPECT_LT(bytes.size(), 600U);
}

}  // namespace
}  // namespace ergon::planner
