// POET's own ResNet-18 CIFAR on its Cortex-M4 profile (github.com/ShishirPatil/poet at
// 6e63098, exported by docs/research/poet_repo.md's script; tests/data/graphs/README.md): a
// graph Ergon did not build, read and planned as POET's README asks.

#include <gtest/gtest.h>

#include <filesystem>

#include "planner/graph_json.h"
#include "planner/milp.h"
#include "planner/poet.h"
#include "planner/schedule.h"

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
  EXPECT_LT(r.gap, 0.10) << "5.5 % in 5 s and in 60 s today (docs/performance.md)";
}

}  // namespace
}  // namespace ergon::planner
