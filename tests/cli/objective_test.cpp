// Slow suite: the beyond-POET objective on the Pi 4 profile (issue #10). POET's objective
// leaves idle power and the timing of transfers out, so it cannot tell a schedule whose
// page-ins stall the computes from one that hides them; the total objective can.
// (tests/planner/poet_test.cpp has a case where the two objectives strictly disagree.)

#include <gtest/gtest.h>

#include "cli/plan_cmd.h"
#include "planner/schedule.h"

namespace ergon::cli {
namespace {

PlanOutcome plan_mlp_on_pi4(const std::string& objective) {
  PlanArgs a;
  a.model = "mlp";
  a.board = "pi4";
  a.budget = "50%";
  a.objective = objective;
  a.gap = 0.01;
  a.time_limit_s = 20;
  return app::plan(a);
}

TEST(TotalObjective, OnThePi4ItHidesEveryTransferAndNeverSpendsMoreThanPoetsSchedule) {
  const PlanOutcome poet = plan_mlp_on_pi4("poet");
  const PlanOutcome total = plan_mlp_on_pi4("total");
  ASSERT_TRUE(poet.sim && total.sim) << poet.result.why << total.result.why;
  // Measured by the simulator's timed replay, idle power over the makespan included. POET's
  // objective is indifferent to where the transfers go, so which of its equally rated
  // schedules it returns is the solver's choice (docs/results.md has one run's figures);
  // the total objective's never stalls here and is never dearer.
  EXPECT_LE(total.sim->total_energy_j, poet.sim->total_energy_j * (1 + 1e-9));
  EXPECT_DOUBLE_EQ(total.sim->makespan_s, total.sim->compute_time_s);
  EXPECT_LE(total.sim->makespan_s, poet.sim->makespan_s);
  // The budget covers the fixed bytes too, and the activations fit what is left.
  EXPECT_EQ(total.request.budget_bytes,
            total.graph.fixed_bytes + total.graph.store_all_peak_bytes() / 2);
  EXPECT_LE(total.sim->peak_bytes + total.graph.fixed_bytes, total.request.budget_bytes);
}

TEST(TotalObjective, ABudgetBelowTheFixedBytesSaysSo) {
  PlanArgs a;
  a.model = "mlp";
  a.board = "pi4";
  a.budget = "10MiB";  // the MLP's parameters, gradients and optimizer state take more
  a.objective = "total";
  const PlanOutcome o = app::plan(a);
  EXPECT_FALSE(o.sim);
  EXPECT_EQ(o.result.status, planner::ModelStatus::kInfeasible);
  EXPECT_NE(o.result.why.find("of parameters, gradients and optimizer state"), std::string::npos)
      << o.result.why;
}

}  // namespace
}  // namespace ergon::cli
