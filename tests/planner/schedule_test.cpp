#include <gtest/gtest.h>

#include <algorithm>
#include <cstdio>

#include "common/error.h"
#include "planner/graph.h"
#include "planner/reuse.h"
#include "planner/schedule.h"
#include "planner/zoo.h"
#include "tests/support/test_graphs.h"

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

namespace ergon::planner {
namespace {

/// a -> b -> c and a -> c: a (1 s), b (2 s), c (1 s); paging a takes 0.5 s each way. The
/// board idles at 1 W, computes at 3 W and pages at 1.5 W.
TrainingGraph timed_triangle() {
  TrainingGraph g;
  g.name = "triangle";
  g.idle_power_w = 1;
  auto node = [](int id, const char* name, double time_s) {
    return testing::node_with_idle(id, name, time_s, 100, 0.5, 0.5);
  };
  g.nodes = {node(0, "a", 1), node(1, "b", 2), node(2, "c", 1)};
  g.edges = {{0, 1}, {0, 2}, {1, 2}};
  g.validate();
  return g;
}

Schedule steps(std::vector<Step> s) { return {std::move(s)}; }

constexpr StepKind kC = StepKind::kCompute, kOut = StepKind::kPageOut, kIn = StepKind::kPageIn,
                   kFree = StepKind::kFree;

TEST(SimulatorTiming, StoreAllTakesItsComputeTimeAndOnePassOfEnergy) {
  const auto g = timed_triangle();
  const auto r = simulate(g, store_all_schedule(g));
  ASSERT_TRUE(r.valid) << r.error;
  EXPECT_DOUBLE_EQ(r.makespan_s, 4);
  EXPECT_DOUBLE_EQ(r.total_energy_j, g.single_pass_energy_j());  // 2 W extra x 4 s + 1 W x 4 s
}

TEST(SimulatorTiming, APageOutOverlapsTheComputesAfterIt) {
  const auto g = timed_triangle();
  const auto r = simulate(g, steps({{kC, 0}, {kOut, 0}, {kC, 1}, {kC, 2}}));
  ASSERT_TRUE(r.valid) << r.error;
  EXPECT_DOUBLE_EQ(r.makespan_s, 4);  // 1-1.5 s on storage, under b's 1-3 s
  EXPECT_DOUBLE_EQ(r.paging_time_s, 0.5);
  // Only the transfer's energy above idle is extra: 0.5 W x 0.5 s.
  EXPECT_DOUBLE_EQ(r.total_energy_j, 12 + 0.25);
  EXPECT_DOUBLE_EQ(r.energy_j, 12 + 0.75);  // POET's sum charges idle for the transfer too
}

TEST(SimulatorTiming, APageInRightBeforeItsReaderStallsIt) {
  const auto g = timed_triangle();
  // a is paged out under b, dropped once b has read it, paged back in for c: c waits for it.
  const auto r =
      simulate(g, steps({{kC, 0}, {kOut, 0}, {kC, 1}, {kFree, 0}, {kIn, 0}, {kC, 2}}));
  ASSERT_TRUE(r.valid) << r.error;
  EXPECT_DOUBLE_EQ(r.makespan_s, 4.5);  // page-in 3-3.5 s, c 3.5-4.5 s
  EXPECT_DOUBLE_EQ(r.total_energy_j, 8 + 2 * 0.25 + 4.5);
}

TEST(SimulatorTiming, AFreeWaitsForItsPageOutAndHoldsBackWhatFollows) {
  const auto g = timed_triangle();
  // b is paged out and dropped at once; the page-in after the free is handed out only when
  // the page-out is done.
  const auto r = simulate(g, steps({{kC, 0}, {kC, 1}, {kOut, 1}, {kFree, 1}, {kIn, 1}, {kC, 2}}));
  ASSERT_TRUE(r.valid) << r.error;
  // b 1-3 s; page-out 3-3.5 s; the free waits for it; page-in 3.5-4 s; c 4-5 s.
  EXPECT_DOUBLE_EQ(r.makespan_s, 5);
  EXPECT_DOUBLE_EQ(r.compute_time_s, 4);
}

TEST(ReuseDistances, WeightsTheLastStepReadAreNearAtTheNextIterationsFirstDeeperLayersFurther) {
  const auto g = build_training_graph(zoo_model("mlp", 1), LinearCosts());
  ASSERT_TRUE(g.forward);
  const Schedule s = store_all_schedule(g);
  const auto touched = reuse_distances(g, s);
  ASSERT_EQ(touched.size(), s.steps.size() - static_cast<std::size_t>(std::count_if(
                                                  s.steps.begin(), s.steps.end(),
                                                  [](const Step& st) { return st.kind == StepKind::kFree; })));
  // In a loop every tensor was touched in the iteration before.
  for (const auto& step : touched)
    for (const TouchedTensor& t : step) EXPECT_LT(t.distance_bytes, kNeverTouched);
  // Forward layer i reads its weights (the largest tensor it touches): the first layer's were
  // read by the iteration's last step (its own backward), each deeper layer's a layer further back.
  const auto& ops = g.forward->ops;
  double previous = -1;
  int linears = 0;
  for (int i = 0; i < static_cast<int>(ops.size()); ++i) {
    if (ops[static_cast<std::size_t>(i)].param_bytes == 0) continue;
    const auto& step = touched[static_cast<std::size_t>(i)];  // store-all: entry i computes node i
    const auto weights = std::max_element(step.begin(), step.end(), [](const TouchedTensor& a, const TouchedTensor& b) {
      return a.bytes < b.bytes;
    });
    if (linears++ == 0) {
      EXPECT_EQ(weights->distance_bytes, 0) << ops[static_cast<std::size_t>(i)].name;
    }
    EXPECT_GT(weights->distance_bytes, previous) << ops[static_cast<std::size_t>(i)].name;
    previous = weights->distance_bytes;
  }
  EXPECT_GE(linears, 3);
}

TEST(ReuseDistances, AGraphWithoutTensorShapesHasNone) {
  const auto g = small();
  ASSERT_FALSE(g.forward);
  EXPECT_TRUE(reuse_distances(g, store_all_schedule(g)).empty());
}

}  // namespace
}  // namespace ergon::planner
