// POET's moves contain every paging-only schedule: on the same graph, budget and deadline, its
// answer is never dearer than the paging-only planner's. The issue that asked for this found
// POET above paging at 6 of 8 budgets of this very sweep.

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <limits>
#include <map>
#include <string>

#include "app/pareto.h"
#include "costdb/database.h"
#include "costdb/plans.h"

namespace ergon::app {
namespace {

TEST(ParetoFront, PoetIsNeverDearerThanPagingOnlyAtAnyBudgetOfTheMlpSweepOnAPi4) {
  const auto dir = std::filesystem::temp_directory_path() / ("ergon-front-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  ParetoArgs args;
  args.plan.model = "mlp";
  args.plan.board = "pi4";
  args.plan.time_limit_s = 5;
  args.planners = "poet,paging";
  args.budgets = 8;
  args.jobs = 2;
  args.db = (dir / "front.db").string();
  const auto points = pareto_sweep(args);
  std::map<uint64_t, std::map<std::string, double>> energy_j;
  for (const auto& p : points)
    if (p.plan.energy_j) energy_j[p.plan.budget_bytes][p.plan.planner] = *p.plan.energy_j;
  ASSERT_EQ(energy_j.size(), 8U);
  double smaller_budget_j = std::numeric_limits<double>::infinity();
  for (const auto& [budget, by_planner] : energy_j) {
    ASSERT_TRUE(by_planner.contains("paging") && by_planner.contains("poet")) << budget;
    EXPECT_LE(by_planner.at("poet"), by_planner.at("paging") * (1 + 1e-9)) << "budget " << budget << " B";
    // More memory never costs more: a schedule that fits a smaller budget fits this one.
    EXPECT_LE(by_planner.at("poet"), smaller_budget_j * (1 + 1e-9)) << "budget " << budget << " B";
    smaller_budget_j = by_planner.at("poet");
  }
  // What the sweep returned is what it stored.
  auto db = costdb::Database::open_read_only(args.db);
  for (const auto& p : points) {
    const auto stored = costdb::find_plan_by_id(db, p.plan.id);
    ASSERT_TRUE(stored);
    EXPECT_EQ(stored->energy_j, p.plan.energy_j);
    EXPECT_EQ(stored->schedule, p.plan.schedule);
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ergon::app
