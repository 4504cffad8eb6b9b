// Slow suite: POET on a real zoo model at several budgets; every schedule must hold up in the
// simulator, and energy must not fall as the budget does.

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <limits>

#include "planner/graph.h"
#include "planner/milp.h"
#include "planner/planners.h"
#include "planner/poet.h"
#include "planner/schedule.h"
#include "planner/zoo.h"
#include "tests/support/test_graphs.h"

namespace ergon::planner {
namespace {

TEST(PoetOnTheZoo, MlpSchedulesPassTheSimulatorAtFallingBudgets) {
  const auto g = build_training_graph(zoo_model("mlp", 1), testing::LinearCosts());
  auto solver = make_cbc_solver();
  double previous_bound = 0;
  for (int percent : {100, 75, 50}) {
    PlanRequest req;
    req.budget_bytes = g.store_all_peak_bytes() * static_cast<uint64_t>(percent) / 100;
    req.deadline_s = std::numeric_limits<double>::infinity();
    req.relative_gap = 0.01;
    req.time_limit_s = 60;
    req.threads = 2;
    const auto r = plan_poet(g, req, *solver);
    SCOPED_TRACE(std::to_string(percent) + "% of store-all");
    ASSERT_TRUE(r.schedule) << r.why;
    const auto sim = simulate(g, *r.schedule, req.budget_bytes);
    ASSERT_TRUE(sim.valid) << sim.error;
    EXPECT_NEAR(sim.energy_j, r.objective_j, 1e-6 * r.objective_j);
    EXPECT_LE(sim.peak_bytes, req.budget_bytes);
    EXPECT_GE(r.objective_j, r.bound_j * (1 - 1e-9));
    // Optima within 1 %: a smaller budget can never have a lower optimum than the previous
    // (larger) budget's proven bound.
    EXPECT_GE(r.objective_j, previous_bound * (1 - 1e-9));
    previous_bound = r.bound_j;
    if (percent == 100) {
      EXPECT_EQ(sim.recomputes + sim.page_outs, 0);
    }
  }
}

TEST(PoetOnTheZoo, ResNet18CifarIsWithinOnePercentOfOptimalAtHalfMemory) {
  // Issue #3's target graph: ~135 training nodes, ~66 000 binaries in POET's model.
  const auto g = build_training_graph(zoo_model("resnet18-cifar", 1), testing::LinearCosts());
  auto solver = make_cbc_solver();
  for (int percent : {75, 50}) {
    PlanRequest req;
    req.budget_bytes = g.store_all_peak_bytes() * static_cast<uint64_t>(percent) / 100;
    req.deadline_s = std::numeric_limits<double>::infinity();
    req.relative_gap = 0.01;
    req.time_limit_s = 60;
    req.threads = 2;
    const auto r = plan_poet(g, req, *solver);
    SCOPED_TRACE(std::to_string(percent) + "% of store-all");
    ASSERT_TRUE(r.schedule) << r.why;
    EXPECT_EQ(r.status, ModelStatus::kOptimal) << "gap " << r.gap;
    EXPECT_LE(r.gap, 0.01);
    const auto sim = simulate(g, *r.schedule, req.budget_bytes);
    ASSERT_TRUE(sim.valid) << sim.error;
    EXPECT_NEAR(sim.energy_j, r.objective_j, 1e-6 * r.objective_j);
    EXPECT_LE(sim.peak_bytes, r.claimed_peak_bytes);
  }
}

// Issue #10's targets: the greedy plan against the memory bound (or the MILP when that is
// not enough) proves each of these within 1 % at half of store-all (VGG-16 at 70 %: half is
// below its largest working set).
TEST(PoetOnTheZoo, LargeModelsAreProvenWithinOnePercentAtHalfMemory) {
  auto solver = make_cbc_solver();
  for (const auto& [model, percent] : std::vector<std::pair<std::string, uint64_t>>{
           {"mobilenetv2-cifar", 50}, {"bert-base", 50}, {"vgg16-cifar", 70}}) {
    const auto g = build_training_graph(zoo_model(model, 1), testing::LinearCosts());
    PlanRequest req;
    req.budget_bytes = g.store_all_peak_bytes() * percent / 100;
    req.deadline_s = std::numeric_limits<double>::infinity();
    req.relative_gap = 0.01;
    req.time_limit_s = 60;
    req.threads = 2;
    const auto r = plan_poet(g, req, *solver);
    SCOPED_TRACE(model);
    ASSERT_TRUE(r.schedule) << r.why;
    EXPECT_EQ(r.status, ModelStatus::kOptimal) << "gap " << r.gap;
    EXPECT_GT(r.bound_j, g.single_pass_energy_j());  // the memory bound, not one pass
    const auto sim = simulate(g, *r.schedule, req.budget_bytes);
    ASSERT_TRUE(sim.valid) << sim.error;
    EXPECT_NEAR(sim.energy_j, r.objective_j, 1e-6 * r.objective_j);
  }
}

TEST(PoetOnTheZoo, EveryZooModelGetsAScheduleWhoseClaimsHoldInTheSimulator) {
  auto solver = make_cbc_solver();
  for (const auto& entry : zoo_models()) {
    const std::string& model = entry.name;
    const auto g = build_training_graph(zoo_model(model, 1), testing::LinearCosts());
    for (uint64_t percent : {80, 60}) {
      PlanRequest req;
      req.budget_bytes =
          std::max(g.store_all_peak_bytes() * percent / 100, g.min_working_set_bytes());
      req.deadline_s = g.single_pass_time_s() * 1.5;
      req.relative_gap = 0.01;
      req.time_limit_s = 8;  // a bounded run: the claims must hold whatever the gap
      req.threads = 2;
      const auto r = plan_poet(g, req, *solver);
      SCOPED_TRACE(model + " at " + std::to_string(percent) + "%");
      ASSERT_TRUE(r.schedule) << r.why;
      const auto sim = simulate(g, *r.schedule, req.budget_bytes);
      ASSERT_TRUE(sim.valid) << sim.error;
      EXPECT_NEAR(sim.energy_j, r.objective_j, 1e-6 * r.objective_j);
      EXPECT_LE(sim.peak_bytes, r.claimed_peak_bytes);
      EXPECT_LE(r.claimed_peak_bytes, req.budget_bytes);
      EXPECT_LE(sim.compute_time_s, req.deadline_s * (1 + 1e-9));
      EXPECT_GE(r.objective_j, r.bound_j * (1 - 1e-9));
      EXPECT_GE(r.bound_j, g.single_pass_energy_j() * (1 - 1e-9));
    }
  }
}

TEST(PoetOnTheZoo, RematOnlyAndPagingOnlySchedulesHoldUpOnEveryModelUnderTheTotalObjective) {
  auto solver = make_cbc_solver();
  for (const auto& entry : zoo_models()) {
    const auto g = build_training_graph(zoo_model(entry.name, 1), testing::CostsWithIdle());
    for (uint64_t percent : {80, 60}) {
      for (const char* planner : {"checkmate", "paging"}) {
        PlanRequest req;
        req.objective = Objective::kTotal;
        req.budget_bytes =
            g.fixed_bytes +
            std::max(g.store_all_peak_bytes() * percent / 100, g.min_working_set_bytes());
        req.deadline_s = g.single_pass_time_s() * 1.5;
        req.relative_gap = 0.01;
        req.time_limit_s = 3;
        req.threads = 2;
        const auto r = run_planner(planner, g, req, *solver);
        SCOPED_TRACE(entry.name + " at " + std::to_string(percent) + "%: " + planner);
        if (!r.schedule) {  // a bounded run may find nothing; it must say so
          EXPECT_FALSE(r.why.empty());
          continue;
        }
        const auto sim = simulate(g, *r.schedule, activation_budget_bytes(g, req));
        ASSERT_TRUE(sim.valid) << sim.error;
        EXPECT_LE(sim.total_energy_j, r.objective_j * (1 + 1e-9));
        EXPECT_LE(sim.makespan_s, req.deadline_s * (1 + 1e-9));
        EXPECT_LE(sim.peak_bytes, r.claimed_peak_bytes);
        EXPECT_EQ(sim.recomputes == 0 || std::string(planner) == "checkmate", true);
        EXPECT_EQ(sim.page_outs == 0 || std::string(planner) == "paging", true);
      }
    }
  }
}

TEST(PoetOnTheZoo, WithoutAScheduleTheAnswerSaysFromWhichBudgetOneIsFound) {
  // Recomputation alone cannot get ResNet-18 CIFAR near its largest working set quickly.
  const auto g = build_training_graph(zoo_model("resnet18-cifar", 1), testing::LinearCosts());
  PlanRequest req;
  req.budget_bytes = g.min_working_set_bytes();
  req.deadline_s = std::numeric_limits<double>::infinity();
  req.time_limit_s = 3;
  req.allowed.paging = false;
  auto solver = make_cbc_solver();
  const auto r = plan_poet(g, req, *solver);
  if (r.schedule) {  // CBC found one after all: then it must hold
    const auto sim = simulate(g, *r.schedule, req.budget_bytes);
    EXPECT_TRUE(sim.valid) << sim.error;
    return;
  }
  EXPECT_NE(r.why.find("the greedy heuristic finds schedules from"), std::string::npos) << r.why;
}

TEST(PoetWarmStart, ASolverOutOfTimeStillReturnsAValidScheduleWithAnHonestGap) {
  const auto g = build_training_graph(zoo_model("resnet18-cifar", 1), testing::LinearCosts());
  PlanRequest req;
  req.budget_bytes = g.store_all_peak_bytes() * 3 / 4;
  req.deadline_s = 1e9;
  req.time_limit_s = 1;  // far too little for CBC on 135 nodes
  auto solver = make_cbc_solver();
  const auto r = plan_poet(g, req, *solver);
  ASSERT_TRUE(r.schedule) << r.why;
  EXPECT_EQ(r.status, ModelStatus::kFeasible);
  const auto sim = simulate(g, *r.schedule, req.budget_bytes);
  ASSERT_TRUE(sim.valid) << sim.error;
  EXPECT_NEAR(sim.energy_j, r.objective_j, 1e-6 * r.objective_j);
  EXPECT_GE(r.bound_j, g.single_pass_energy_j() * (1 - 1e-9));
  EXPECT_LE(r.bound_j, r.objective_j);
  EXPECT_GT(r.gap, 0);
}

// CLP checks its limit only between iterations; on a large model its load and one
// factorization alone ran seconds past it, and `ergon plan --time-limit` with them. The LP
// relaxation of resnet50's model at 30 % (800 000 columns, 1.3 million rows) cannot finish in
// 0.5 s: it must come back (by force if need be) at once, with no bound claimed.
TEST(PoetLpRelaxation, ComesBackByItsTimeLimitWithoutABoundWhenTheLpIsTooLargeToFinish) {
  const auto g = build_training_graph(zoo_model("resnet50", 1), testing::LinearCosts());
  PlanRequest req;
  req.activations_only = true;
  req.budget_bytes = g.store_all_peak_bytes() * 3 / 10;
  req.deadline_s = std::numeric_limits<double>::infinity();
  const MilpModel m = build_poet_model(g, req).model;
  auto solver = make_cbc_solver();
  const auto before = std::chrono::steady_clock::now();
  const RelaxationResult lp = solver->solve_relaxation(m, 0.5);
  const double took_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - before).count();
  EXPECT_FALSE(lp.optimal);
  EXPECT_FALSE(lp.infeasible);
  EXPECT_NE(lp.message.find("did not finish"), std::string::npos) << lp.message;
  EXPECT_LT(took_s, 1.5);  // the limit and the grace, with room for a loaded machine
}

// The forked LP relaxation still proves what it finishes: on a model small enough to solve,
// its optimum lies between one pass (1 in the model's units: energies are scaled by one
// pass's) and the greedy plan's objective.
TEST(PoetLpRelaxation, AFinishedRelaxationLiesBetweenOnePassAndTheGreedyPlan) {
  const auto g = build_training_graph(zoo_model("mlp", 1), testing::LinearCosts());
  PlanRequest req;
  req.activations_only = true;
  req.budget_bytes = g.store_all_peak_bytes() / 2;
  req.deadline_s = std::numeric_limits<double>::infinity();
  const auto info = build_poet_model(g, req);
  ASSERT_TRUE(info.warm_start);
  auto solver = make_cbc_solver();
  const RelaxationResult lp = solver->solve_relaxation(info.model, 30);
  ASSERT_TRUE(lp.optimal) << lp.message;
  EXPECT_GE(lp.objective, 1 - 1e-6);
  EXPECT_LE(lp.objective, info.model.objective_value(*info.warm_start) + 1e-9);
}

}  // namespace
}  // namespace ergon::planner
