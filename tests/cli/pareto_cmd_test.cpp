#include "cli/pareto_cmd.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <optional>
#include <set>

#include <unistd.h>

#include <filesystem>
#include <map>
#include <sstream>

#include "cli/plan_cmd.h"
#include "common/error.h"
#include "devices/board_profile.h"

namespace ergon::cli {
namespace {

class ParetoTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("ergon-pareto-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  ParetoArgs mlp_sweep() const {
    ParetoArgs a;
    a.plan.model = "mlp";
    a.plan.board = "nrf52840";
    a.plan.gap = 0.01;
    a.plan.time_limit_s = 5;
    // POET's objective: paging alone works down to the largest working set, the grid's
    // lowest point (under total, a page-in holds its memory while it runs).
    a.plan.objective = "poet";
    a.planners = "poet,paging";
    a.budgets = 4;
    a.jobs = 2;
    a.db = (dir_ / "sweep.db").string();
    return a;
  }

  std::filesystem::path dir_;
};

TEST_F(ParetoTest, EveryPlannerGetsEveryBudgetAndEveryPlanIsStored) {
  const auto points = app::pareto_sweep(mlp_sweep());
  ASSERT_EQ(points.size(), 8U);
  std::map<uint64_t, std::map<std::string, double>> energy;
  for (const auto& p : points) {
    ASSERT_TRUE(p.plan.energy_j) << p.plan.planner << " at " << p.plan.budget_bytes;
    EXPECT_LE(*p.plan.peak_bytes, p.plan.budget_bytes);
    EXPECT_FALSE(p.plan.schedule.empty());
    EXPECT_GT(p.plan.id, 0);
    EXPECT_FALSE(p.reused);
    energy[p.plan.budget_bytes][p.plan.planner] = *p.plan.energy_j;
  }
  // POET may page and recompute: never worse than paging alone (both within 1 %).
  for (const auto& [budget, by_planner] : energy)
    EXPECT_LE(by_planner.at("poet"), by_planner.at("paging") * 1.01) << budget;
  auto db = costdb::Database::open(mlp_sweep().db);
  EXPECT_EQ(costdb::list_plans(db).size(), 8U);
}

TEST_F(ParetoTest, ARerunReusesTheStoredPlansInsteadOfSolvingAgain) {
  app::pareto_sweep(mlp_sweep());
  std::ostringstream progress;
  const auto again = app::pareto_sweep(mlp_sweep(), [&](const std::string& l) { progress << l << "\n"; });
  ASSERT_EQ(again.size(), 8U);
  for (const auto& p : again) EXPECT_TRUE(p.reused);
  EXPECT_NE(progress.str().find("8 stored already, 0 to solve"), std::string::npos)
      << progress.str();
  auto fresh = mlp_sweep();
  fresh.fresh = true;
  fresh.planners = "paging";
  for (const auto& p : app::pareto_sweep(fresh)) EXPECT_FALSE(p.reused);
}

TEST_F(ParetoTest, FrontPointsGetCheaperAsTheBudgetGrows) {
  const auto points = app::pareto_sweep(mlp_sweep());
  std::map<std::string, double> last;
  int on_front = 0;
  for (const auto& p : points) {  // by planner, then budget
    if (!p.on_front) continue;
    ++on_front;
    if (last.count(p.plan.planner)) {
      EXPECT_LT(*p.plan.energy_j, last[p.plan.planner]);
    }
    last[p.plan.planner] = *p.plan.energy_j;
  }
  EXPECT_GE(on_front, 4);
}

TEST_F(ParetoTest, TotalObjectivePlansAreStoredApartWithFixedBytesInTheirBudgets) {
  app::pareto_sweep(mlp_sweep());
  auto total = mlp_sweep();
  total.plan.objective = "total";
  total.planners = "poet,store-all";
  const auto points = app::pareto_sweep(total);
  ASSERT_EQ(points.size(), 8U);
  const auto graph = app::load_graph(total.plan);
  for (const auto& p : points) {
    EXPECT_FALSE(p.reused) << "a POET-objective plan was taken for a total one";
    EXPECT_EQ(p.plan.objective, "total");
    EXPECT_GE(p.plan.budget_bytes, graph.fixed_bytes + graph.min_working_set_bytes());
    if (p.plan.peak_bytes) {
      EXPECT_LE(*p.plan.peak_bytes + graph.fixed_bytes, p.plan.budget_bytes);
    }
  }
  // Store-all fits only the top of the grid (store-all's peak plus fixed bytes).
  EXPECT_TRUE(points.back().plan.energy_j);
  EXPECT_FALSE(points[4].plan.energy_j);
}

TEST_F(ParetoTest, UnknownPlannerIsRefusedBeforeAnythingIsSolved) {
  auto args = mlp_sweep();
  args.planners = "poet,magic";
  EXPECT_THROW(app::pareto_sweep(args), InputError);
  EXPECT_FALSE(std::filesystem::exists(args.db));
}

TEST(GraphDigest, ChangesWithTheCostsAndNotWithoutThem) {
  PlanArgs a;
  a.model = "mlp";
  a.board = "pi4";
  const auto pi4 = app::graph_digest(app::load_graph(a));
  EXPECT_EQ(pi4, app::graph_digest(app::load_graph(a)));
  a.board = "tx2";
  EXPECT_NE(pi4, app::graph_digest(app::load_graph(a)));
}

}  // namespace
TEST_F(ParetoTest, ProgressCountsEveryStoredPlanAndACanceledSweepStartsNoSolve) {
  ParetoArgs args = mlp_sweep();
  std::vector<std::size_t> seen;
  std::size_t total = 0;
  args.on_point = [&](std::size_t done, std::size_t all) {
    seen.push_back(done);
    total = all;
  };
  ParetoArgs canceled = args;
  canceled.db = (dir_ / "canceled.db").string();
  std::atomic<bool> cancel{true};
  canceled.cancel = &cancel;
  EXPECT_TRUE(app::pareto_sweep(canceled).empty()) << "canceled before the first solve";
  EXPECT_TRUE(seen.empty());
  {
    auto db = costdb::Database::open_read_only(canceled.db);
    EXPECT_TRUE(costdb::list_plans(db).empty());
  }
  const auto points = app::pareto_sweep(args);
  EXPECT_EQ(points.size(), 8U);
  EXPECT_EQ(total, 8U);
  EXPECT_EQ(seen, (std::vector<std::size_t>{1, 2, 3, 4, 5, 6, 7, 8}));
}

TEST_F(ParetoTest, EveryPowerModeGetsItsOwnFrontAgainstOneDeadline) {
  ParetoArgs args = mlp_sweep();
  args.plan.board = "tx2";
  args.plan.power_mode = "all";
  args.plan.deadline = "3x";  // of one pass at MAXN, for every mode
  args.planners = "paging";  // the modes are under test: a quick planner
  args.budgets = 3;
  const auto points = app::pareto_sweep(args);
  ASSERT_EQ(points.size(), 9U);  // 3 modes x 3 budgets
  std::map<std::string, int> per_mode, fronts;
  std::set<std::optional<double>> deadlines;
  for (const auto& p : points) {
    ++per_mode[p.plan.power_mode];
    fronts[p.plan.power_mode] += p.on_front ? 1 : 0;
    deadlines.insert(p.plan.deadline_s);
  }
  EXPECT_EQ(per_mode, (std::map<std::string, int>{{"MAXN", 3}, {"MAXP_CORE_ARM", 3}, {"MAXQ", 3}}));
  for (const auto& [mode, n] : fronts) EXPECT_GE(n, 1) << mode << " has a front of its own";
  EXPECT_EQ(deadlines.size(), 1U) << "one deadline in seconds for every mode";
  auto db = costdb::Database::open_read_only(args.db);
  for (const auto& row : costdb::list_plans(db)) EXPECT_FALSE(row.power_mode.empty());
  std::ostringstream out;
  EXPECT_EQ(run_pareto(args, ParetoOutput{}, out), 0);
  EXPECT_NE(out.str().find("paging@MAXQ"), std::string::npos) << out.str();
}

// A per-phase pair is a series of its own; its plans carry the two mode switches an
// iteration takes, and a rerun finds them again under the user's deadline.
TEST_F(ParetoTest, APerPhasePairIsASeriesWhosePlansIncludeTheModeSwitches) {
  ParetoArgs args = mlp_sweep();
  args.plan.board = "pi4";
  args.plan.power_mode = "1500MHz,1500MHz/600MHz";
  args.plan.deadline = "3x";
  args.planners = "paging";
  args.budgets = 2;
  const auto points = app::pareto_sweep(args);
  ASSERT_EQ(points.size(), 4U);
  const double switches_s = 2 * devices::find_board("pi4")->mode_switch_s;
  for (const auto& p : points) {
    ASSERT_TRUE(p.plan.time_s) << p.plan.status;
    PlanArgs one = args.plan;
    one.planner = "paging";
    one.power_mode = p.plan.power_mode;
    one.budget = std::to_string(p.plan.budget_bytes);
    ASSERT_TRUE(p.plan.deadline_s);
    one.deadline = std::to_string(*p.plan.deadline_s) + "s";
    const PlanOutcome alone = app::plan(one);
    ASSERT_TRUE(alone.sim);
    const double switches = p.plan.power_mode == "1500MHz" ? 0 : switches_s;
    EXPECT_NEAR(*p.plan.time_s, planner::deadline_time_s(*alone.sim, alone.request.objective) + switches, 1e-9)
        << p.plan.power_mode;
  }
  EXPECT_TRUE(std::all_of(points.begin(), points.end(), [](const ParetoPoint& p) { return !p.reused; }));
  const auto again = app::pareto_sweep(args);
  EXPECT_TRUE(std::all_of(again.begin(), again.end(), [](const ParetoPoint& p) { return p.reused; }))
      << "stored under the deadline the user gave";
}

}  // namespace ergon::cli
