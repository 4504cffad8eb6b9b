#include <gtest/gtest.h>

#include <algorithm>

#include <cmath>
#include <filesystem>
#include <initializer_list>
#include <limits>
#include <vector>

#include "brute_force.h"
#include "planner/bounds.h"
#include "planner/graph.h"
#include "planner/graph_json.h"
#include "planner/milp.h"
#include "planner/poet.h"
#include "planner/schedule.h"
#include "planner/stage_plan.h"
#include "planner/zoo.h"
#include "tests/support/test_graphs.h"

namespace ergon::planner {
namespace {

using testing::BruteForce;
using testing::CostsWithIdle;
using testing::LinearCosts;
using testing::random_forward;

PlanRequest request(uint64_t budget, double deadline_s) {
  PlanRequest r;
  r.budget_bytes = budget;
  r.deadline_s = deadline_s;
  r.time_limit_s = 60;
  return r;
}

// The MILP's claims must survive the independent simulator.
void expect_claims_hold(const TrainingGraph& g, const PlanResult& r, const PlanRequest& req) {
  ASSERT_TRUE(r.schedule) << r.why;
  const ScheduleReport sim = simulate(g, *r.schedule, req.budget_bytes);
  ASSERT_TRUE(sim.valid) << sim.error;
  EXPECT_NEAR(sim.energy_j, r.objective_j, 1e-6 * r.objective_j);
  EXPECT_LE(sim.peak_bytes, req.budget_bytes);
  EXPECT_LE(sim.peak_bytes, r.claimed_peak_bytes + 1);
  EXPECT_LE(sim.compute_time_s, req.deadline_s * (1 + 1e-6));
  EXPECT_GE(r.objective_j, g.single_pass_energy_j() * (1 - 1e-9));
}

TEST(PoetMilp, UnlimitedBudgetGivesStoreAll) {
  const auto g = build_training_graph(random_forward(4, 1, true), LinearCosts());
  auto solver = make_cbc_solver();
  const auto req = request(1ULL << 40, 1e9);
  const auto r = plan_poet(g, req, *solver);
  ASSERT_EQ(r.status, ModelStatus::kOptimal) << r.why;
  EXPECT_NEAR(r.objective_j, g.single_pass_energy_j(), 1e-9 * r.objective_j);
  expect_claims_hold(g, r, req);
  EXPECT_EQ(simulate(g, *r.schedule).recomputes, 0);
}

// The stash budget is a row of the MILP, not only a rule of the greedy search: whatever finds
// the plan (greedy, contained models, branch and bound), the schedule keeps it. (Without the
// row, branch and bound finds a plan over the stash budget on one of these graphs.)
TEST(PoetMilp, KeepsWhatItStashesForTheBackwardPassWithinTheStashBudget) {
  auto solver = make_cbc_solver();
  int binding = 0;
  for (uint32_t seed = 1; seed <= 12; ++seed) {
    const auto g = build_training_graph(random_forward(5, seed, true), LinearCosts());
    PlanRequest req = request(g.store_all_peak_bytes() * 3 / 4, 1e9);
    if (req.budget_bytes < g.min_working_set_bytes()) continue;
    const PlanResult unlimited = plan_poet(g, req, *solver);
    if (!unlimited.schedule) continue;
    const uint64_t stash_bytes = simulate(g, *unlimited.schedule).stash_bytes;
    req.stash_budget_bytes = stash_bytes * 2 / 3;
    const PlanResult r = plan_poet(g, req, *solver);
    if (!r.schedule) continue;  // nothing keeps that little
    SCOPED_TRACE("seed " + std::to_string(seed));
    expect_claims_hold(g, r, req);
    EXPECT_LE(simulate(g, *r.schedule).stash_bytes, req.stash_budget_bytes);
    EXPECT_GE(r.objective_j, unlimited.objective_j * (1 - req.relative_gap));
    binding += r.objective_j > unlimited.objective_j * (1 + 1e-9) ? 1 : 0;
  }
  EXPECT_GT(binding, 0) << "no stash budget changed a plan: the test proves nothing";
}

class AgainstBruteForce : public ::testing::TestWithParam<uint32_t> {};

/// Plans g at `steps` + 1 budgets from its smallest working set to store-all's peak, each
/// with each deadline factor, and checks POET's optimum against exhaustive search. Returns
/// how many had a schedule and, in `most_extra`, the largest optimum over one pass - 1.
int expect_optimal_against_brute_force(const TrainingGraph& g, int steps, std::initializer_list<double> factors,
                                       double* most_extra = nullptr) {
  auto solver = make_cbc_solver();
  const uint64_t lo = g.min_working_set_bytes();
  const uint64_t hi = g.store_all_peak_bytes();
  int solved = 0;
  for (int step = 0; step <= steps; ++step) {
    const uint64_t budget = lo + (hi - lo) * static_cast<uint64_t>(step) / static_cast<uint64_t>(steps);
    for (double deadline_factor : factors) {
      const double deadline = g.single_pass_time_s() * deadline_factor;
      const double truth = BruteForce(g, budget, deadline).min_energy();
      const auto req = request(budget, deadline);
      const auto r = plan_poet(g, req, *solver);
      SCOPED_TRACE("budget " + std::to_string(budget) + " deadline x" + std::to_string(deadline_factor));
      if (std::isinf(truth)) {
        EXPECT_EQ(r.status, ModelStatus::kInfeasible);
        continue;
      }
      EXPECT_EQ(r.status, ModelStatus::kOptimal) << r.why;
      if (r.status != ModelStatus::kOptimal) continue;
      EXPECT_NEAR(r.objective_j, truth, 1e-6 * truth);
      expect_claims_hold(g, r, req);
      if (most_extra) *most_extra = std::max(*most_extra, truth / g.single_pass_energy_j() - 1);
      ++solved;
    }
  }
  return solved;
}

TEST_P(AgainstBruteForce, OptimalEnergyMatchesExhaustiveSearchAtEveryBudget) {
  // 3 forward ops -> 7 training nodes; random sizes, costs and residual edges.
  const uint32_t seed = GetParam();
  const auto g = build_training_graph(random_forward(3, seed, seed % 2 == 0), LinearCosts());
  ASSERT_EQ(g.size(), 7);
  double most_extra = 0;  // the tightest case must cost more than one pass, or nothing is tested
  EXPECT_GE(expect_optimal_against_brute_force(g, 4, {1e9, 1.5}, &most_extra), 5);
  EXPECT_GT(most_extra, 1e-3);
}

INSTANTIATE_TEST_SUITE_P(RandomGraphs, AgainstBruteForce, ::testing::Values(1U, 2U, 3U, 4U, 5U, 7U, 8U));

/// The graph with its backward phase in a mode `speed` times as fast drawing `power` times
/// the power: the loss and backward nodes cost that, and so does recomputing a forward node.
TrainingGraph with_backward_mode(TrainingGraph g, double speed, double power) {
  g.late_costs.clear();
  for (auto& node : g.nodes) {
    const NodeCost late{node.time_s / speed, node.energy_j * power / speed};
    g.late_costs.push_back(late);
    if (node.phase != NodePhase::kForward) {
      node.time_s = late.time_s;
      node.energy_j = late.energy_j;
    }
  }
  g.validate();
  return g;
}

// Per-phase power modes: recomputations in the backward pass cost the backward mode's
// energy. With a backward mode that makes computing much cheaper the optimum recomputes
// where one mode would page; the MILP, the exhaustive search and the simulator agree.
TEST_P(AgainstBruteForce, PerPhaseModesChargeRecomputationsAtTheBackwardModesCost) {
  const uint32_t seed = GetParam();
  const auto g = with_backward_mode(build_training_graph(random_forward(3, seed, seed % 2 == 0), LinearCosts()),
                                    0.5, 0.2);
  EXPECT_GE(expect_optimal_against_brute_force(g, 3, {1e9, 1.3}), 4);
}

TEST(PerPhaseModes, TheSimulatorChargesComputesAfterTheForwardPassAtTheBackwardModesCost) {
  const auto one = build_training_graph(random_forward(3, 1, false), LinearCosts());
  const auto g = with_backward_mode(one, 0.5, 0.2);
  // Forward 0 1 2, loss 3, recompute 0 and 1 during the backward pass, backward 4 5 6.
  Schedule s;
  for (int k : {0, 1, 2, 3}) s.steps.push_back({StepKind::kCompute, k});
  s.steps.push_back({StepKind::kFree, 0});
  s.steps.push_back({StepKind::kFree, 1});
  for (int k : {0, 1}) s.steps.push_back({StepKind::kCompute, k});
  for (int k : {4, 5, 6}) s.steps.push_back({StepKind::kCompute, k});
  const ScheduleReport r = simulate(g, s);
  ASSERT_TRUE(r.valid) << r.error;
  EXPECT_EQ(r.recomputes, 2);
  double expected_j = 0;
  for (int k = 0; k < 3; ++k) expected_j += one.nodes[k].energy_j;        // forward, its own mode
  for (int k = 3; k < 7; ++k) expected_j += one.nodes[k].energy_j * 0.4;  // loss and backward
  for (int k : {0, 1}) expected_j += one.nodes[k].energy_j * 0.4;         // recomputed late
  EXPECT_NEAR(r.energy_j, expected_j, 1e-12 * expected_j);
  EXPECT_NEAR(g.single_pass_energy_j(), expected_j - 0.4 * (one.nodes[0].energy_j + one.nodes[1].energy_j),
              1e-12 * expected_j);
}

// Under the total objective a schedule's claims are upper bounds on what the simulator's
// timed replay measures: it may overlap a stage's transfers with the next stage's computes.
void expect_total_claims_hold(const TrainingGraph& g, const PlanResult& r, const PlanRequest& req) {
  ASSERT_TRUE(r.schedule) << r.why;
  const uint64_t activations = activation_budget_bytes(g, req);
  const ScheduleReport sim = simulate(g, *r.schedule, activations);
  ASSERT_TRUE(sim.valid) << sim.error;
  EXPECT_LE(sim.total_energy_j, r.objective_j * (1 + 1e-9));
  EXPECT_GE(sim.total_energy_j, g.single_pass_energy_j() * (1 - 1e-9));
  EXPECT_LE(sim.peak_bytes, activations);
  EXPECT_LE(sim.peak_bytes, r.claimed_peak_bytes);
  EXPECT_LE(sim.makespan_s, req.deadline_s * (1 + 1e-9));
}

class TotalAgainstBruteForce : public ::testing::TestWithParam<uint32_t> {};

TEST_P(TotalAgainstBruteForce, OptimalTotalEnergyMatchesExhaustiveSearchAtEveryBudget) {
  const uint32_t seed = GetParam();
  const auto g = build_training_graph(random_forward(3, seed, seed % 2 == 0), CostsWithIdle());
  ASSERT_EQ(g.size(), 7);
  ASSERT_GT(g.fixed_bytes, 0U);
  auto solver = make_cbc_solver();
  const uint64_t lo = g.min_working_set_bytes();
  const uint64_t hi = g.store_all_peak_bytes();
  int solved = 0;
  for (int step = 0; step <= 4; ++step) {
    const uint64_t activations = lo + (hi - lo) * static_cast<uint64_t>(step) / 4;
    for (double deadline_factor : {1e9, 1.05, 1.003}) {
      const double deadline = g.single_pass_time_s() * deadline_factor;
      const double truth =
          BruteForce(g, activations, deadline, Objective::kTotal).min_energy();
      auto req = request(g.fixed_bytes + activations, deadline);
      req.objective = Objective::kTotal;
      const auto r = plan_poet(g, req, *solver);
      SCOPED_TRACE("activations " + std::to_string(activations) + " deadline x" +
                   std::to_string(deadline_factor));
      if (std::isinf(truth)) {
        EXPECT_EQ(r.status, ModelStatus::kInfeasible) << r.objective_j;
        continue;
      }
      ASSERT_EQ(r.status, ModelStatus::kOptimal) << r.why;
      EXPECT_NEAR(r.objective_j, truth, 1e-6 * truth);
      expect_total_claims_hold(g, r, req);
      ++solved;
    }
  }
  EXPECT_GE(solved, 5);
}

INSTANTIATE_TEST_SUITE_P(RandomGraphs, TotalAgainstBruteForce,
                         ::testing::Values(1U, 2U, 3U, 4U, 5U, 7U, 8U));

TEST(PoetMilp, EnergyRisesAsTheBudgetFalls) {
  const auto g = build_training_graph(random_forward(6, 7, true), LinearCosts());
  auto solver = make_cbc_solver();
  const uint64_t lo = g.min_working_set_bytes();
  const uint64_t hi = g.store_all_peak_bytes();
  double previous = 0;
  for (int step = 4; step >= 0; --step) {
    const uint64_t budget = lo + (hi - lo) * static_cast<uint64_t>(step) / 4;
    const auto req = request(budget, 1e9);
    const auto r = plan_poet(g, req, *solver);
    ASSERT_EQ(r.status, ModelStatus::kOptimal) << r.why;
    expect_claims_hold(g, r, req);
    EXPECT_GE(r.objective_j, previous * (1 - 1e-9)) << "budget " << budget;
    previous = r.objective_j;
  }
  EXPECT_GT(previous, g.single_pass_energy_j() * 1.001) << "tightest budget costs nothing extra";
}

TEST(PoetMilp, BudgetBelowTheLargestWorkingSetIsRefusedWithTheSmallestThatCouldWork) {
  const auto g = build_training_graph(random_forward(4, 3, false), LinearCosts());
  auto solver = make_cbc_solver();
  const auto r = plan_poet(g, request(g.min_working_set_bytes() - 1, 1e9), *solver);
  EXPECT_EQ(r.status, ModelStatus::kInfeasible);
  EXPECT_NE(r.why.find("any schedule needs"), std::string::npos) << r.why;
  EXPECT_FALSE(r.schedule);
}

TEST(PoetMilp, DeadlineShorterThanOnePassIsRefused) {
  const auto g = build_training_graph(random_forward(4, 3, false), LinearCosts());
  auto solver = make_cbc_solver();
  const auto r = plan_poet(g, request(1ULL << 40, g.single_pass_time_s() * 0.9), *solver);
  EXPECT_EQ(r.status, ModelStatus::kInfeasible);
  EXPECT_NE(r.why.find("shorter than one pass"), std::string::npos) << r.why;
}

TEST(PoetMilp, StoreAllIsReturnedWithoutASolverWhenItFits) {
  const auto g = build_training_graph(random_forward(5, 3, true), LinearCosts());
  auto solver = make_cbc_solver();
  const auto r = plan_poet(g, request(g.store_all_peak_bytes(), 1e9), *solver);
  ASSERT_EQ(r.status, ModelStatus::kOptimal) << r.why;
  EXPECT_EQ(r.variables, 0) << "no model should be built when store-all fits";
  EXPECT_DOUBLE_EQ(r.gap, 0);
  EXPECT_EQ(simulate(g, *r.schedule).recomputes, 0);
}

TEST(PoetMilp, ReportsTheModelSize) {
  // A graph and budget where the memory bound does not prove the greedy plan optimal, so a
  // model is built: 64 nodes or more, which the whole-graph search does not take (on 4 ops
  // it proves the plan optimal).
  const auto g = build_training_graph(random_forward(32, 8, false), LinearCosts());
  ASSERT_GE(g.size(), 64);
  auto solver = make_cbc_solver();
  const uint64_t lo = g.min_working_set_bytes();
  const uint64_t budget = lo + (g.store_all_peak_bytes() - lo) / 4;
  PlanRequest req = request(budget, 1e9);
  req.time_limit_s = 4;  // the model's size is known once it is built
  const auto r = plan_poet(g, req, *solver);
  EXPECT_GT(r.variables, r.integers);  // U is continuous
  EXPECT_GT(r.integers, 0);
  EXPECT_GT(r.rows, 0);
  EXPECT_GT(r.nonzeros, static_cast<std::size_t>(r.rows));
}

}  // namespace
}  // namespace ergon::planner

namespace ergon::planner {
namespace {

TEST(PoetWarmStart, TheAnswerIsNeverWorseThanTheGreedyWarmStart) {
  auto solver = make_cbc_solver();
  int compared = 0;
  for (uint32_t seed = 1; seed <= 4; ++seed) {
    const auto g = build_training_graph(random_forward(8, seed, true), CostsWithIdle());
    const uint64_t lo = g.min_working_set_bytes();
    const uint64_t hi = g.store_all_peak_bytes();
    for (Objective objective : {Objective::kPoet, Objective::kTotal}) {
      for (uint64_t activations : {lo, lo + (hi - lo) / 8, lo + (hi - lo) / 4}) {
        auto req = request(activations, std::numeric_limits<double>::infinity());
        req.objective = objective;
        req.activations_only = true;
        req.time_limit_s = 1;  // short: the solver is stopped, the warm start must still hold
        // The greedy pass without local search: plan_poet's own greedy starts from it.
        const auto warm = greedy_stage_plan(g, activations, req.deadline_s, {}, 0, objective);
        if (!warm) continue;
        const double warm_j = evaluate_stage_plan(g, *warm, objective).energy_j;
        const auto r = plan_poet(g, req, *solver);
        SCOPED_TRACE("seed " + std::to_string(seed) + " " + to_string(objective));
        ASSERT_TRUE(r.schedule) << r.why;
        EXPECT_LE(r.objective_j, warm_j * (1 + 1e-12));
        ++compared;
      }
    }
  }
  EXPECT_GE(compared, 12);
}

TEST(PoetWarmStart, EveryWarmStartSatisfiesEveryRowOfTheModel) {
  int below_store_all = 0;
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    const auto g = build_training_graph(testing::random_forward(6, seed, seed % 2 == 1),
                                        testing::LinearCosts());
    const uint64_t lo = g.min_working_set_bytes();
    const uint64_t hi = g.store_all_peak_bytes();
    for (int step = 0; step <= 4; ++step) {
      const auto info = build_poet_model(g, request(lo + (hi - lo) * step / 4, 1e9));
      if (!info.warm_start) continue;
      EXPECT_LT(info.model.max_violation(*info.warm_start), 1e-9) << "seed " << seed;
      if (step < 4) ++below_store_all;
    }
  }
  EXPECT_GT(below_store_all, 10) << "the greedy heuristic rarely found a start below store-all";
}

}  // namespace
}  // namespace ergon::planner

namespace ergon::planner {
namespace {

/// A solver that finds the LP bound unavailable and crashes in branch and bound, as CBC
/// once did (signal 11) in a child process.
class CrashingSolver : public MilpSolver {
 public:
  [[nodiscard]] std::string name() const override { return "crashing"; }
  SolveResult solve(const MilpModel&, const SolveOptions&) override {
    ++solves;
    SolveResult r;
    r.call = CallStatus::kError;
    r.message = "cbc crashed (signal 11)";
    return r;
  }
  RelaxationResult solve_relaxation(const MilpModel&, double) override {
    return {.message = "not solved"};
  }
  int solves = 0;
};

TEST(PoetMilp, ProgressNamesEachPhaseInOrderWithTheBestPlanAndBoundKnown) {
  // 32 ops, 65 nodes: past what the whole-graph bound holds, so neither bound proves the
  // greedy plan and every phase runs.
  const auto g = build_training_graph(random_forward(32, 8, false), LinearCosts());
  const uint64_t lo = g.min_working_set_bytes();
  PlanRequest req = request(lo + (g.store_all_peak_bytes() - lo) / 4, std::numeric_limits<double>::infinity());
  req.relative_gap = 1e-9;  // the greedy plan alone does not prove this: every phase runs
  req.time_limit_s = 2;
  std::vector<SolveProgress> seen;
  req.progress = [&](const SolveProgress& p) { seen.push_back(p); };
  auto solver = make_cbc_solver();
  const auto r = plan_poet(g, req, *solver);
  ASSERT_TRUE(r.schedule);
  ASSERT_GE(seen.size(), 4U);
  EXPECT_EQ(seen[0].phase, "memory bound and baselines");
  EXPECT_FALSE(seen[0].incumbent);
  EXPECT_EQ(seen[1].phase, "greedy search");
  ASSERT_TRUE(seen[1].bound);
  const auto lp = std::find_if(seen.begin(), seen.end(),
                               [](const SolveProgress& p) { return p.phase == "LP relaxation"; });
  ASSERT_NE(lp, seen.end());
  ASSERT_TRUE(lp->incumbent && lp->bound);
  EXPECT_LE(*lp->bound, *lp->incumbent);
  for (std::size_t k = 1; k < seen.size(); ++k) {
    EXPECT_FALSE(seen[k].phase.empty());
    EXPECT_GE(seen[k].elapsed_s, seen[k - 1].elapsed_s);
  }
}

// On a terminal the best plan moves on while the greedy search runs, not only between phases.
TEST(PoetMilp, ProgressShowsTheGreedySearchsCheaperPlansAsItFindsThem) {
  const TrainingGraph g =
      read_graph_json(std::filesystem::path(ERGON_TEST_DATA_DIR) / "graphs" / "resnet18_cifar_pi4.json");
  PlanRequest req = request(g.store_all_peak_bytes() * 30 / 100, std::numeric_limits<double>::infinity());
  req.objective = Objective::kTotal;
  req.activations_only = true;
  req.time_limit_s = 3;
  req.threads = 2;
  std::vector<SolveProgress> greedy;
  req.progress = [&](const SolveProgress& p) {
    if (p.phase == "greedy search") greedy.push_back(p);
  };
  auto solver = make_cbc_solver();
  const auto r = plan_poet(g, req, *solver);
  ASSERT_TRUE(r.schedule);
  ASSERT_GE(greedy.size(), 3U) << "the phase's start, then the search's cheaper plans";
  for (const SolveProgress& p : greedy) ASSERT_TRUE(p.incumbent && p.bound);
  for (std::size_t k = 1; k < greedy.size(); ++k) {
    EXPECT_LE(*greedy[k].incumbent, *greedy[k - 1].incumbent);
    EXPECT_GE(greedy[k].elapsed_s, greedy[k - 1].elapsed_s);
    EXPECT_LE(*greedy[k].bound, *greedy[k].incumbent);
  }
  EXPECT_LT(*greedy.back().incumbent, *greedy[1].incumbent);
  EXPECT_LE(r.objective_j, *greedy.back().incumbent * (1 + 1e-9));
}

TEST(PoetMilp, ASolverCrashKeepsTheGreedyScheduleAndSaysSo) {
  // A graph and budget where no bound proves the greedy plan optimal, so the solver is
  // called (65 nodes: past what the whole-graph bound holds).
  const auto g = build_training_graph(random_forward(32, 8, false), LinearCosts());
  const uint64_t lo = g.min_working_set_bytes();
  PlanRequest req = request(lo + (g.store_all_peak_bytes() - lo) / 4,
                            std::numeric_limits<double>::infinity());
  req.relative_gap = 1e-9;
  req.time_limit_s = 5;
  CrashingSolver solver;
  const auto r = plan_poet(g, req, solver);
  // The contained models whose own bound leaves room (one or both), then POET's.
  EXPECT_GE(solver.solves, 2);
  EXPECT_LE(solver.solves, 3);
  EXPECT_EQ(r.call, CallStatus::kOk);
  EXPECT_EQ(r.status, ModelStatus::kFeasible);
  EXPECT_NE(r.note.find("cbc crashed (signal 11)"), std::string::npos) << r.note;
  expect_claims_hold(g, r, req);
  EXPECT_GT(r.gap, 0);
}

}  // namespace
}  // namespace ergon::planner
namespace ergon::planner {
namespace {

TEST(TotalObjective, PagesWherePoetsObjectiveRecomputesBecauseTheTransferHidesBehindCompute) {
  // Found by search: at this budget both optima are strict (proven, one thread: repeatable).
  const auto g = build_training_graph(random_forward(4, 9, false), CostsWithIdle());
  const uint64_t lo = g.min_working_set_bytes();
  PlanRequest poet = request(lo + (g.store_all_peak_bytes() - lo) / 2, 1e9);
  poet.threads = 1;
  PlanRequest total = poet;
  total.objective = Objective::kTotal;
  total.activations_only = true;
  auto solver = make_cbc_solver();
  const auto rp = plan_poet(g, poet, *solver);
  const auto rt = plan_poet(g, total, *solver);
  ASSERT_EQ(rp.status, ModelStatus::kOptimal) << rp.why;
  ASSERT_EQ(rt.status, ModelStatus::kOptimal) << rt.why;
  const auto sp = simulate(g, *rp.schedule);
  const auto st = simulate(g, *rt.schedule);
  EXPECT_GT(sp.recomputes, 0);
  EXPECT_EQ(sp.page_outs, 0);
  EXPECT_EQ(st.recomputes, 0);
  EXPECT_GT(st.page_outs, 0);
  // Each is strictly better by its own measure.
  EXPECT_LT(sp.energy_j, st.energy_j);
  EXPECT_LT(st.total_energy_j, sp.total_energy_j);
  EXPECT_DOUBLE_EQ(st.makespan_s, st.compute_time_s) << "the transfers hide behind compute";
}

}  // namespace
}  // namespace ergon::planner
namespace ergon::planner {
namespace {

/// x (10 ms, 50 B) feeds a chain and is read again at the end: x -> 1 -> 2 -> ... -> 8 -> 9,
/// and x -> 9. Nodes 1 to 8 compute 1 ms each; 5, 6 and 7 output 100 B, the others 10 B. At
/// 200 B, x cannot stay through stages 6 and 7. Recomputing it costs 10 ms; paging it out
/// takes 2.5 ms, longer than any one node, and back in 0.5 ms. The board idles at 1 W,
/// computes at 3 W and pages at 1.5 W.
TrainingGraph page_out_longer_than_any_node() {
  TrainingGraph g;
  g.name = "long page-out";
  g.idle_power_w = 1;
  auto node = [](int id, double time_s, uint64_t bytes) {
    return testing::node_with_idle(id, "n" + std::to_string(id), time_s, bytes, 2.5e-3, 0.5e-3);
  };
  g.nodes.push_back(node(0, 10e-3, 50));
  for (int k = 1; k <= 8; ++k) g.nodes.push_back(node(k, 1e-3, k >= 5 && k <= 7 ? 100 : 10));
  g.nodes.push_back(node(9, 1e-3, 10));
  for (int k = 1; k <= 9; ++k) g.edges.emplace_back(k - 1, k);
  g.edges.emplace_back(0, 9);
  g.validate();
  return g;
}

/// Under total, on a graph whose cheapest schedule pages `page_outs` tensors out and back
/// in with no stall, at `best_j`: the greedy search claims exactly that, POET proves it
/// optimal, and the simulator's replay of POET's schedule agrees.
void expect_paging_hidden_everywhere(const TrainingGraph& g, uint64_t budget, double best_j, int page_outs) {
  const auto greedy = greedy_stage_plan(g, budget, 1e9, {}, 1, Objective::kTotal);
  ASSERT_TRUE(greedy);
  const StagePlanCosts claim = evaluate_stage_plan(g, *greedy, Objective::kTotal);
  EXPECT_NEAR(claim.makespan_s, g.single_pass_time_s(), 1e-12);
  EXPECT_NEAR(claim.energy_j, best_j, 1e-12);

  PlanRequest req = request(budget, 1e9);
  req.objective = Objective::kTotal;
  auto solver = make_cbc_solver();
  const PlanResult r = plan_poet(g, req, *solver);
  ASSERT_EQ(r.status, ModelStatus::kOptimal) << r.why;
  EXPECT_NEAR(r.objective_j, best_j, 1e-9);
  const ScheduleReport sim = simulate(g, *r.schedule, budget);
  ASSERT_TRUE(sim.valid) << sim.error;
  EXPECT_EQ(sim.recomputes, 0);
  EXPECT_EQ(sim.page_outs, page_outs);
  EXPECT_NEAR(sim.makespan_s, g.single_pass_time_s(), 1e-12) << "a page-out stalled";
  EXPECT_NEAR(sim.total_energy_j, best_j, 1e-12);
}

// Under total, a page-out longer than any one node's compute still hides: it runs through
// the stages after x's last read, and neither the greedy search nor the MILP pays a stall
// for it. The simulator's replay of the schedule agrees.
TEST(TotalObjective, APageOutLongerThanAnyNodeHidesBehindTheStagesItRunsThrough) {
  const TrainingGraph g = page_out_longer_than_any_node();
  constexpr uint64_t kBudget = 200;
  ASSERT_GT(g.store_all_peak_bytes(), kBudget);
  const double paging_j = (1.5 - 1.0) * (2.5e-3 + 0.5e-3);  // above idle, out and in
  const double best_j = g.single_pass_energy_j() + paging_j;
  expect_paging_hidden_everywhere(g, kBudget, best_j, 1);

  // The bound knows the page-out can hide behind several nodes: it does not claim more.
  EXPECT_LE(memory_lower_bound_j(g, kBudget, Objective::kTotal), best_j * (1 + 1e-12));
}

/// Two tensors, x and y, made one after the other and read only at the end, each taking
/// 2.5 ms to page out, with 5 ms of compute between them and three stages that fit neither:
/// the channel is busy exactly from when x is made until those stages start.
TrainingGraph two_page_outs_back_to_back() {
  TrainingGraph g;
  g.name = "back-to-back page-outs";
  g.idle_power_w = 1;
  auto node = [](int id, uint64_t bytes) {
    return testing::node_with_idle(id, "n" + std::to_string(id), 1e-3, bytes, 2.5e-3, 0.5e-3);
  };
  g.nodes.push_back(node(0, 50));  // x
  g.nodes.push_back(node(1, 50));  // y
  for (int k = 2; k <= 10; ++k) g.nodes.push_back(node(k, k >= 6 && k <= 8 ? 100 : 10));
  g.nodes.push_back(node(11, 10));
  for (int k = 1; k <= 11; ++k) g.edges.emplace_back(k - 1, k);
  g.edges.emplace_back(0, 10);
  g.edges.emplace_back(1, 11);
  g.validate();
  return g;
}

// Under total, page-outs chain: y's starts in the stage where x's ends, after it on the one
// channel, so both hide behind the 5 ms of compute before the stages that fit neither. (A
// rule that kept a stage where a page-out ends free of any other that goes on would stall
// 0.5 ms.) The greedy search, the MILP and the simulator's replay agree.
TEST(TotalObjective, PageOutsChainOneStartingInTheStageWhereTheOneBeforeEnds) {
  const TrainingGraph g = two_page_outs_back_to_back();
  constexpr uint64_t kBudget = 200;
  ASSERT_GT(g.store_all_peak_bytes(), kBudget);
  const double paging_j = 2 * (1.5 - 1.0) * (2.5e-3 + 0.5e-3);  // above idle, x and y out and in
  const double best_j = g.single_pass_energy_j() + paging_j;
  expect_paging_hidden_everywhere(g, kBudget, best_j, 2);
}

}  // namespace
}  // namespace ergon::planner
