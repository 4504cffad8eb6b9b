#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "bound_checks.h"
#include "brute_force.h"
#include "planner/bounds.h"
#include "planner/graph.h"
#include "planner/graph_json.h"
#include "planner/poet.h"
#include "planner/stage_plan.h"
#include "planner/zoo.h"
#include "tests/support/test_graphs.h"

namespace ergon::planner {
namespace {

using testing::bound_cases_below_exhaustive_optimum;
using testing::BruteForce;
using testing::costed_for;
using testing::CostsWithIdle;
using testing::LinearCosts;
using testing::random_forward;

constexpr double kNoDeadline = std::numeric_limits<double>::infinity();

// Appends an op to `f`: its backward pass costs twice its forward FLOPs; a linear op has 4 KiB
// of parameters.
void add_op(ForwardGraph& f, std::string name, std::string kind, std::vector<int> inputs, uint64_t flops,
            uint64_t kib, bool saves_inputs, bool saves_output) {
  ForwardOp op;
  op.name = std::move(name);
  op.op = std::move(kind);
  op.inputs = std::move(inputs);
  op.forward_flops = flops;
  op.backward_flops = 2 * flops;
  op.output_bytes = kib * 1024;
  op.param_bytes = op.op == "linear" ? 4096 : 0;
  op.backward_needs_inputs = saves_inputs;
  op.backward_needs_output = saves_output;
  f.ops.push_back(op);
}

// A bound above the true optimum would let the planner call a poor schedule optimal.
TEST(MemoryBound, NeverExceedsTheExhaustiveOptimumOnRandomGraphs) {
  EXPECT_GE(bound_cases_below_exhaustive_optimum(24, [](uint32_t seed) { return random_forward(3, seed, seed % 2 == 0); }),
            20);
}

// The same on graphs where outputs die early: a recomputation there needs inputs that nothing
// else keeps, and the bound follows them up the graph.
TEST(MemoryBound, NeverExceedsTheExhaustiveOptimumWhereRecomputationNeedsDeadInputs) {
  EXPECT_GE(bound_cases_below_exhaustive_optimum(
                12, [](uint32_t seed) { return testing::random_forward_mixed_saves(4, seed); }),
            20);
}

// A transformer's attention in small: an expensive projection, a cheap bias add that saves
// nothing for its backward, two cheap slices of it that a matmul keeps for its own. When the
// slices must go, recomputing them needs the add again, and the add the projection: the
// bound charges the projection (or keeping one of them), once for both slices, as the true
// optimum does.
TEST(MemoryBound, ChargesTheProjectionThatRecomputedSlicesNeed) {
  ForwardGraph f;
  f.name = "attention";
  f.input_bytes = 1024;
  add_op(f, "projection", "linear", {kGraphInput}, 40'000'000, 16, true, false);
  add_op(f, "bias", "add", {0}, 100'000, 16, false, false);
  add_op(f, "q", "slice", {1}, 100'000, 8, false, false);
  add_op(f, "k", "slice", {1}, 100'000, 8, false, false);
  add_op(f, "scores", "matmul", {2, 3}, 2'000'000, 2, true, false);
  add_op(f, "out", "linear", {4}, 2'000'000, 24, true, false);
  // Following the add only (the bound before) closed 15 % (poet) and 20 % (total) of the
  // distance from one pass to the optimum over these budgets; following it to the projection
  // closes 62 % and 61 %.
  for (Objective objective : {Objective::kPoet, Objective::kTotal}) {
    const auto g = costed_for(f, objective);
    const uint64_t lo = g.min_working_set_bytes();
    const uint64_t hi = g.store_all_peak_bytes();
    const double one_pass_j = g.single_pass_energy_j();
    double closed = 0;
    int cases = 0;
    for (int step = 0; step < 8; ++step) {
      const uint64_t budget = lo + (hi - lo) * static_cast<uint64_t>(step) / 8;
      const double truth = BruteForce(g, budget, kNoDeadline, objective).min_energy();
      const double bound = memory_lower_bound_j(g, budget, objective);
      SCOPED_TRACE("objective " + to_string(objective) + " budget " + std::to_string(budget));
      EXPECT_LE(bound, truth * (1 + 1e-9));
      ASSERT_GT(truth, one_pass_j * (1 + 1e-9));
      closed += (bound - one_pass_j) / (truth - one_pass_j);
      ++cases;
    }
    EXPECT_GT(closed / cases, 0.5) << to_string(objective);
  }
  // Recomputation only (paging, far cheaper here, out of the way): both slices need the one
  // projection, which the bound charges once between them, as the MILP's optimum pays it.
  auto solver = make_cbc_solver();
  const auto g = build_training_graph(f, LinearCosts());
  const AllowedMoves recompute_only{true, false};
  int binding = 0;
  for (int step : {1, 4, 7}) {
    PlanRequest req;
    req.budget_bytes = g.min_working_set_bytes() +
                       (g.store_all_peak_bytes() - g.min_working_set_bytes()) * static_cast<uint64_t>(step) / 8;
    req.deadline_s = kNoDeadline;
    req.relative_gap = 1e-7;
    req.allowed = recompute_only;
    const PlanResult r = plan_poet(g, req, *solver);
    ASSERT_EQ(r.status, ModelStatus::kOptimal);
    const double bound = memory_lower_bound_j(g, req.budget_bytes, Objective::kPoet, recompute_only);
    SCOPED_TRACE("recompute only, budget " + std::to_string(req.budget_bytes));
    EXPECT_LE(bound, r.objective_j * (1 + 1e-6));
    if (bound > g.single_pass_energy_j() * (1 + 1e-6)) ++binding;
  }
  EXPECT_EQ(binding, 3);
}

// A stem in small: an expensive convolution, a batch norm whose backward reads the
// convolution's output, a ReLU whose backward reads its own output, then a linear layer and a
// ReLU. In the backward pass the convolution's output must be away while the ReLU's gradients
// fill memory, so it is re-created once after. Where the forward pass also needs the first
// ReLU's output away, recomputing it needs the batch norm, which needs the convolution again:
// a second re-creation before the first. The bound charges that pair together, and at the
// tightest budget meets the exhaustive optimum (under POET's objective).
TEST(MemoryBound, ChargesTheConvolutionAgainWhereItAndTheReluItFeedsAreBothAway) {
  ForwardGraph f;
  f.name = "stem";
  f.input_bytes = 1024;
  add_op(f, "conv", "linear", {kGraphInput}, 40'000'000, 4, true, false);
  add_op(f, "bn", "batchnorm", {0}, 100'000, 8, true, false);
  add_op(f, "relu", "relu", {1}, 100'000, 8, false, true);
  add_op(f, "linear", "linear", {2}, 20'000'000, 8, true, false);
  add_op(f, "relu2", "relu", {3}, 100'000, 8, false, true);
  add_op(f, "fc", "linear", {4}, 2'000'000, 1, true, false);
  // Closed before, at the tightest budget: 72 % (poet) and 62 % (total) of the distance from
  // one pass to the optimum.
  testing::for_each_exhaustive_case(
      1, [&](uint32_t) { return f; },
      [](const TrainingGraph& g, uint64_t budget, Objective objective, double truth_j) {
        const double bound = memory_lower_bound_j(g, budget, objective);
        EXPECT_LE(bound, truth_j * (1 + 1e-9));
        if (budget != g.min_working_set_bytes()) return;
        const double one_pass_j = g.single_pass_energy_j();
        const double closed = (bound - one_pass_j) / (truth_j - one_pass_j);
        EXPECT_GT(closed, objective == Objective::kPoet ? 0.999 : 0.7) << to_string(objective);
      });
}

// Larger graphs than exhaustive search reaches: the MILP's proven optimum is the truth, for
// each set of allowed moves (POET, Checkmate-style recompute only, paging only).
TEST(MemoryBound, NeverExceedsTheMilpOptimumForAnySetOfMoves) {
  auto solver = make_cbc_solver();
  int binding = 0;
  for (uint32_t seed = 1; seed <= 6; ++seed) {
    const auto g = build_training_graph(random_forward(5, seed, true), LinearCosts());
    const uint64_t lo = g.min_working_set_bytes();
    const uint64_t hi = g.store_all_peak_bytes();
    for (AllowedMoves allowed : {AllowedMoves{true, true}, AllowedMoves{true, false},
                                 AllowedMoves{false, true}}) {
      for (int step = 1; step <= 3; ++step) {
        PlanRequest req;
        req.budget_bytes = lo + (hi - lo) * static_cast<uint64_t>(step) / 4;
        req.deadline_s = kNoDeadline;
        req.relative_gap = 1e-7;
        req.allowed = allowed;
        const PlanResult r = plan_poet(g, req, *solver);
        if (r.status != ModelStatus::kOptimal) continue;
        const double bound = memory_lower_bound_j(g, req.budget_bytes, Objective::kPoet, allowed);
        SCOPED_TRACE("seed " + std::to_string(seed) + " budget " + std::to_string(req.budget_bytes));
        EXPECT_LE(bound, r.objective_j * (1 + 1e-6));
        if (bound > g.single_pass_energy_j() * (1 + 1e-6)) ++binding;
      }
    }
  }
  EXPECT_GE(binding, 10);
}

TEST(MemoryBound, IsOnePassWhenStoreAllFits) {
  const auto g = build_training_graph(random_forward(6, 3, true), LinearCosts());
  EXPECT_DOUBLE_EQ(memory_lower_bound_j(g, g.store_all_peak_bytes()), g.single_pass_energy_j());
}

// ResNet-18 (ImageNet, batch 1) on the Pi 4's published profile at half of store-all's
// activations, the total objective (tests/data/graphs/resnet18_pi4.json). At the stem's
// backward pass 2.76 MB are short, and the one tensor that can go is the stem
// convolution's output, 3.2 MB: freeing it costs its whole recomputation, not 2.76 / 3.2 of
// it. The fractional knapsack gave +0.99 % over one pass.
// The bound on tests/data/graphs/resnet18_pi4.json at half of store-all's activations, over
// one pass (recorded as a property), after checking it stays below the greedy plan's energy.
double resnet18_pi4_bound_over_one_pass(Objective objective) {
  const auto g = read_graph_json(std::filesystem::path(ERGON_TEST_DATA_DIR) / "graphs" / "resnet18_pi4.json");
  const uint64_t budget = g.store_all_peak_bytes() / 2;
  const double bound_j = memory_lower_bound_j(g, budget, objective);
  const auto plan = greedy_stage_plan(g, budget, 1e9, {}, /*search_time_s=*/0, objective);
  EXPECT_TRUE(plan);
  if (plan) {
    EXPECT_LE(bound_j, evaluate_stage_plan(g, *plan, objective).energy_j);
  }
  const double over = bound_j / g.single_pass_energy_j() - 1;
  ::testing::Test::RecordProperty("bound_vs_one_pass", std::to_string(over));
  return over;
}

// Since a page-in that can only run late is charged its whole time, that charge alone takes
// ResNet-18's bound past 1.1 %, fractional knapsack or not. The zoo's ResNet-50 on the
// nRF52840's profile (tests/data/graphs/resnet50_nrf52840.json) at 40 % of store-all, under
// total, is a case where only freeing a tensor whole lifts the bound: +1.951 % over one pass
// with the fractional knapsack, +2.043 % with it.
TEST(MemoryBound, FreesATensorWholeWhereOnlyPartOfItIsShort) {
  EXPECT_GT(resnet18_pi4_bound_over_one_pass(Objective::kTotal), 0.011);
  const auto g = read_graph_json(std::filesystem::path(ERGON_TEST_DATA_DIR) / "graphs" / "resnet50_nrf52840.json");
  const double bound_j = memory_lower_bound_j(g, g.store_all_peak_bytes() * 40 / 100, Objective::kTotal);
  RecordProperty("resnet50_bound_vs_one_pass", std::to_string(bound_j / g.single_pass_energy_j() - 1));
  EXPECT_GT(bound_j / g.single_pass_energy_j() - 1, 0.0200);
}

// The same ResNet-18 under the total objective. A page-in among a stage's transfers holds
// its tensor all stage, so a tensor away at a moment and read in the next stage, or read
// after a node whose own inputs and output leave no room for it, is paged in late, hidden
// by no compute: its whole time is at idle power, whatever share the bound's lambda gives
// transfers. Charged only beyond what compute could hide, as every other page-in, the bound
// was +1.25 % over one pass.
TEST(MemoryBound, ChargesTheWholeTimeOfAPageInThatCanOnlyRunLate) {
  EXPECT_GT(resnet18_pi4_bound_over_one_pass(Objective::kTotal), 0.019);
}

// The same ResNet-18 under POET's objective. During the stem's backward pass the stem
// convolution's output is the only live output and fewer bytes than it are free: it is
// certainly away there and re-created once after, whatever else the schedule does. That
// re-creation is certain, and at every moment since the forward pass its absence costs
// nothing more, so the moments short of other bytes add theirs to it. Charging the
// re-creation alone, the worst single moment, gave +2.196 % over one pass.
TEST(MemoryBound, AddsWhatOtherMomentsNeedToATensorCertainToBeAway) {
  EXPECT_GT(resnet18_pi4_bound_over_one_pass(Objective::kPoet), 0.0235);
}

TEST(MemoryBound, RisesAsTheBudgetFalls) {
  const auto g = build_training_graph(zoo_model("mlp", 1), LinearCosts());
  double previous = 0;
  for (int percent = 100; percent >= 40; percent -= 10) {
    const double bound = memory_lower_bound_j(g, g.store_all_peak_bytes() * percent / 100);
    EXPECT_GE(bound, previous) << percent << " %";
    previous = bound;
  }
  EXPECT_GT(previous, g.single_pass_energy_j());
}

// Under the total objective a transfer is free only while compute hides it. On these graphs a
// page-in (1 ms and more) outlasts every node (microseconds), so paging stalls: the bound
// charges that stall and closes the whole distance from one pass to the true optimum (brute
// force) on every case. Ignoring transfer time it closed 28 % on average; charging each
// page-in only beyond what compute could hide, 95.5 %: a page-in that can only run late
// (read in the stage after the moment) is hidden by nothing.
TEST(MemoryBound, ChargesTheStallOfTransfersNoComputeHides) {
  double closed = 0;
  int cases = 0;
  for (uint32_t seed = 1; seed <= 24; ++seed) {
    const auto g = build_training_graph(random_forward(3, seed, seed % 2 == 0), CostsWithIdle());
    const double one_pass_j = g.single_pass_energy_j();
    for (const uint64_t budget : testing::seven_budgets(g)) {
      const double truth = BruteForce(g, budget, kNoDeadline, Objective::kTotal).min_energy();
      if (std::isinf(truth) || truth <= one_pass_j * (1 + 1e-9)) continue;
      const double bound = memory_lower_bound_j(g, budget, Objective::kTotal);
      closed += (bound - one_pass_j) / (truth - one_pass_j);
      ++cases;
    }
  }
  ASSERT_GE(cases, 50);
  RecordProperty("mean_share_closed", std::to_string(closed / cases));  // docs/performance.md
  EXPECT_GT(closed / cases, 0.999);
}

}  // namespace
}  // namespace ergon::planner
