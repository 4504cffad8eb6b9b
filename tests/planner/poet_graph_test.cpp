// POET's own ResNet-18 CIFAR on its Cortex-M4 profile (github.com/ShishirPatil/poet at
// 6e63098, exported by docs/research/poet_repo.md's script; tests/data/graphs/README.md): a
// graph Ergon did not build, read and planned as POET's README asks.

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <limits>

#include "brute_force.h"
#include "planner/baselines.h"
#include "planner/bounds.h"
#include "planner/graph_json.h"
#include "planner/milp.h"
#include "planner/poet.h"
#include "planner/schedule.h"
#include "planner/stage_plan.h"

namespace ergon::planner {
namespace {

TrainingGraph poet_m4_graph() {
  return read_graph_json(std::filesystem::path(ERGON_TEST_DATA_DIR) / "graphs" / "poet_resnet18_cifar_m4.json");
}

// POET's solve.py prints these for the same DFGraph: what Ergon reads is POET's graph.
TEST(PoetGraph, ReadsWithPoetsOwnOnePassTimeAndEnergy) {
  const TrainingGraph g = poet_m4_graph();
  EXPECT_EQ(g.size(), 133);
  EXPECT_EQ(g.edges.size(), 269U);
  EXPECT_NEAR(g.single_pass_time_s(), 49.685779, 1e-6);
  EXPECT_NEAR(g.single_pass_energy_j(), 0.545669, 1e-6);
}

// The README's case: 737,719 B of activations, 1.5x one pass's compute time, POET's
// objective. A schedule within both, with its bound and gap stated, inside the time limit.
TEST(PoetGraph, PlansTheReadmesCortexM4CaseWithinItsBudgetAndDeadline) {
  const TrainingGraph g = poet_m4_graph();
  auto solver = make_cbc_solver();
  PlanRequest req;
  req.objective = Objective::kPoet;
  req.budget_bytes = 737719;
  req.deadline_s = 1.5 * g.single_pass_time_s();
  req.time_limit_s = 5;
  req.relative_gap = 1e-3;
  const PlanResult r = plan_poet(g, req, *solver);
  ASSERT_TRUE(r.schedule) << r.why;
  const ScheduleReport replay = simulate(g, *r.schedule);
  EXPECT_LE(replay.peak_bytes, req.budget_bytes);
  EXPECT_LE(replay.compute_time_s, req.deadline_s * (1 + 1e-9));
  EXPECT_GE(r.objective_j, g.single_pass_energy_j());
  EXPECT_LE(r.bound_j, r.objective_j);
  // Capuchin limited to recomputation finds 0.556961 J here in milliseconds, 1.21 % over
  // the memory bound; POET contains its moves, so it answers with that or better (5.5 %
  // before it started from its baselines; docs/performance.md).
  PlanRequest remat = req;
  remat.allowed = {.recompute = true, .paging = false};
  const PlanResult capuchin = plan_baseline("capuchin", g, remat);
  ASSERT_TRUE(capuchin.schedule) << capuchin.why;
  EXPECT_LE(r.objective_j, capuchin.objective_j * (1 + 1e-9));
  EXPECT_LT(r.gap, 0.0125);
}

// POET's own greedy start pages 9 tensors here and costs 6.7 % over one pass; Capuchin limited
// to recomputation costs 2.07 %. Started from Capuchin's schedule the greedy search keeps
// that (or better), so POET's incumbent is the better of the two from the first second.
TEST(PoetGraph, TheGreedySearchStartedFromABaselineKeepsItsAdvantage) {
  const TrainingGraph g = poet_m4_graph();
  PlanRequest req;
  req.objective = Objective::kPoet;
  req.budget_bytes = 737719;
  req.deadline_s = 1.5 * g.single_pass_time_s();
  req.allowed = {.recompute = true, .paging = false};
  const PlanResult capuchin = plan_baseline("capuchin", g, req);
  ASSERT_TRUE(capuchin.schedule) << capuchin.why;
  const auto own = greedy_stage_plan(g, req.budget_bytes, req.deadline_s, {}, 0);
  const auto seeded = greedy_stage_plan(g, req.budget_bytes, req.deadline_s, {}, 0, Objective::kPoet, 0,
                                        std::numeric_limits<double>::infinity(), {*capuchin.schedule});
  ASSERT_TRUE(own && seeded);
  EXPECT_GT(evaluate_stage_plan(g, *own).energy_j, capuchin.objective_j * 1.02);
  EXPECT_LE(evaluate_stage_plan(g, *seeded).energy_j, capuchin.objective_j * (1 + 1e-9));
  EXPECT_EQ(check_stage_plan(g, *seeded), "");
}

/// tests/data/graphs/bert_tiny_pi4_chained.steps: one step per line ("c 3", "o 2", "i 2",
/// "f 2"), '#' comments.
Schedule read_steps(const std::filesystem::path& path) {
  std::ifstream in(path);
  Schedule s;
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    char kind = 0;
    int node = -1;
    fields >> kind >> node;
    const StepKind k = kind == 'c' ? StepKind::kCompute
                       : kind == 'o' ? StepKind::kPageOut
                       : kind == 'i' ? StepKind::kPageIn
                                     : StepKind::kFree;
    s.steps.push_back({k, node});
  }
  return s;
}

// A schedule for BERT-tiny on the Pi 4 at 50 % written by hand, not by a planner: six
// page-outs back to back on the channel, five cheap recomputations. The simulator replays
// it within the budget at +2.88 % over one pass (the planner's plan is +3.36 %, its bound
// +2.50 %: docs/performance.md, seventh increment), and the memory bound for replayed
// schedules (+2.48 %) stays below it.
TEST(BertTinyPi4, AHandWrittenScheduleWithChainedPageOutsReplaysAt2_88PercentAboveTheBound) {
  const auto dir = std::filesystem::path(ERGON_TEST_DATA_DIR) / "graphs";
  const TrainingGraph g = read_graph_json(dir / "bert_tiny_pi4.json");
  const uint64_t budget = g.store_all_peak_bytes() / 2;
  ASSERT_EQ(budget, 1376256U);
  const ScheduleReport sim = simulate(g, read_steps(dir / "bert_tiny_pi4_chained.steps"), budget);
  ASSERT_TRUE(sim.valid) << sim.error;
  EXPECT_EQ(sim.page_outs, 6);
  EXPECT_EQ(sim.recomputes, 5);
  EXPECT_NEAR(sim.total_energy_j / g.single_pass_energy_j() - 1, 0.0288, 0.0001);
  const double bound_j = memory_lower_bound_j(g, budget, Objective::kTotal, {}, false);
  EXPECT_NEAR(bound_j / g.single_pass_energy_j() - 1, 0.0248, 0.0001);
  EXPECT_LE(bound_j, sim.total_energy_j);
}

// The MLP on the TX2's profile writes a 4 KiB tensor out in 2.44 ms, four forward layers'
// time, so the tensors a backward stage lacks cannot all have been paged out behind the
// forward pass: their page-outs queue on one channel. The bound charges that queue. Cut to
// two hidden layers, where exhaustive search gives the optimum (+16.88 % over one pass at
// the smallest budget), it comes to +16.07 % (+15.80 % before a page-in that can only run late
// was charged its whole time); charging each page-out alone gave +14.30 %.
// On the whole MLP at 50 % it is +20.08 % (it was +15.91 %), against a plan of +23.33 %.
TEST(MlpTx2, TheBoundChargesPageOutsThatQueueOnTheOneChannel) {
  const auto dir = std::filesystem::path(ERGON_TEST_DATA_DIR) / "graphs";
  const TrainingGraph cut = read_graph_json(dir / "mlp2_tx2.json");
  const uint64_t budget = cut.min_working_set_bytes();
  ASSERT_EQ(budget, 12288U);
  const double one_pass_j = cut.single_pass_energy_j();
  const double truth_j = testing::BruteForce(cut, budget, std::numeric_limits<double>::infinity(),
                                             Objective::kTotal).min_energy();
  EXPECT_NEAR(truth_j / one_pass_j - 1, 0.1688, 0.0001);
  const double bound_j = memory_lower_bound_j(cut, budget, Objective::kTotal);
  EXPECT_LE(bound_j, truth_j);
  EXPECT_NEAR(bound_j / one_pass_j - 1, 0.1607, 0.0001);

  const TrainingGraph mlp = read_graph_json(dir / "mlp_tx2.json");
  const double whole_j = memory_lower_bound_j(mlp, mlp.store_all_peak_bytes() / 2, Objective::kTotal);
  EXPECT_NEAR(whole_j / mlp.single_pass_energy_j() - 1, 0.2008, 0.0001);
}

// Under poet the same MLP at half of store-all: the memory bound is 3.7 % below the plan,
// one moment at a time. The whole graph searched at once (under 64 nodes, a fraction of a
// second) proves the plan optimal, and the planner says so instead of a 3.7 % gap.
TEST(MlpTx2, IsProvenOptimalUnderPoetByTheWholeGraphBound) {
  const TrainingGraph mlp = read_graph_json(std::filesystem::path(ERGON_TEST_DATA_DIR) / "graphs" / "mlp_tx2.json");
  auto solver = make_cbc_solver();
  PlanRequest req;
  req.objective = Objective::kPoet;
  req.budget_bytes = mlp.store_all_peak_bytes() / 2;
  req.deadline_s = std::numeric_limits<double>::infinity();
  req.time_limit_s = 10;
  req.relative_gap = 1e-3;
  const PlanResult r = plan_poet(mlp, req, *solver);
  ASSERT_TRUE(r.schedule) << r.why;
  EXPECT_EQ(r.status, ModelStatus::kOptimal);
  EXPECT_LE(r.gap, 1e-9);
  EXPECT_LT(memory_lower_bound_j(mlp, req.budget_bytes, Objective::kPoet), 0.97 * r.objective_j);
}

// The stem and layer1 of ResNet-18 CIFAR on the Pi 4 (35 nodes) at 45 % of store-all under
// poet. The greedy search, its kicks and CBC given 455 s all end at 1.05364 J, paging
// layer1.0.conv1 in twice; the optimum holds it and recomputes the add's gradient instead
// (1.04058 J). The whole graph searched at once ends on that plan (447,000 states), run again
// for longer where the greedy plan is not proven: the answer is the optimum, proven, where it
// was a 1.7 % gap after 10 s.
TEST(ResnetStemLayer1, AtFortyFivePercentIsTheWholeGraphSearchsProvenOptimum) {
  const TrainingGraph g =
      read_graph_json(std::filesystem::path(ERGON_TEST_DATA_DIR) / "graphs" / "resnet18_cifar_pi4_stem_layer1.json");
  auto solver = make_cbc_solver();
  PlanRequest req;
  req.objective = Objective::kPoet;
  req.budget_bytes = g.store_all_peak_bytes() * 45 / 100;
  req.deadline_s = std::numeric_limits<double>::infinity();
  // Its answer comes in about 3 s; a slow machine still gets the whole search a quarter.
  req.time_limit_s = 30;
  req.relative_gap = 1e-3;
  req.threads = 2;
  const PlanResult r = plan_poet(g, req, *solver);
  ASSERT_TRUE(r.schedule) << r.why;
  EXPECT_EQ(r.status, ModelStatus::kOptimal);
  EXPECT_LE(r.gap, 1e-9);
  EXPECT_NEAR(r.objective_j, 1.040581, 1e-6);
  const ScheduleReport sim = simulate(g, *r.schedule, req.budget_bytes);
  ASSERT_TRUE(sim.valid) << sim.error;
  EXPECT_NEAR(sim.energy_j, r.objective_j, 1e-9 * r.objective_j);
}

}  // namespace
}  // namespace ergon::planner
