#include "cli/plan_cmd.h"

#include <gtest/gtest.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "app/quantities.h"
#include "cli/options.h"
#include "common/error.h"

namespace ergon::cli {
namespace {

TEST(PlanArguments, BudgetTakesBytesUnitsAndPercentOfStoreAll) {
  EXPECT_EQ(app::parse_budget("3000000", 0), 3000000U);
  EXPECT_EQ(app::parse_budget("2MiB", 0), 2U << 20);
  EXPECT_EQ(app::parse_budget("1.5MB", 0), 1500000U);
  EXPECT_EQ(app::parse_budget("50%", 1000), 500U);
  EXPECT_THROW(app::parse_budget("lots", 0), InputError);
  EXPECT_THROW(app::parse_budget("0", 0), InputError);
}

TEST(PlanArguments, DeadlineTakesAFactorOfOnePassOrSeconds) {
  EXPECT_DOUBLE_EQ(app::parse_deadline("1.5x", 2.0), 3.0);
  EXPECT_DOUBLE_EQ(app::parse_deadline("0.2s", 2.0), 0.2);
  EXPECT_DOUBLE_EQ(app::parse_deadline("250ms", 2.0), 0.25);
  EXPECT_TRUE(std::isinf(app::parse_deadline("none", 2.0)));
  EXPECT_THROW(app::parse_deadline("soon", 2.0), InputError);
}

nlohmann::json plan_json(const PlanArgs& args) {
  std::ostringstream out;
  EXPECT_EQ(run_plan(args, PlanOutput{.json = true}, out), 0);
  return nlohmann::json::parse(out.str());
}

PlanArgs mlp_at(const std::string& budget) {
  PlanArgs a;
  a.model = "mlp";
  a.board = "nrf52840";
  a.budget = budget;
  a.gap = 0.01;
  a.time_limit_s = 5;  // checkmate on the MLP does not close its gap quickly; the test needs no proof
  return a;
}

TEST(PlanCommand, CheckmateRecomputesAndNeverPages) {
  auto args = mlp_at("60%");
  args.planner = "checkmate";
  const auto j = plan_json(args);
  EXPECT_EQ(j["planner"], "checkmate");
  EXPECT_EQ(j["page_outs"], 0);
  EXPECT_GT(j["recomputes"].get<int>(), 0);
  EXPECT_LE(j["peak_bytes"].get<uint64_t>(), j["budget_bytes"].get<uint64_t>());
}

TEST(PlanCommand, PagingOnlyPagesAndNeverRecomputes) {
  auto args = mlp_at("60%");
  args.planner = "paging";
  const auto j = plan_json(args);
  EXPECT_EQ(j["recomputes"], 0);
  EXPECT_GT(j["page_outs"].get<int>(), 0);
}

TEST(PlanCommand, PoetIsNeverWorseThanEitherRestriction) {
  const double poet = plan_json(mlp_at("60%"))["energy_j"];
  for (const char* restricted : {"checkmate", "paging"}) {
    auto args = mlp_at("60%");
    args.planner = restricted;
    const auto j = plan_json(args);
    // POET proves itself within 1 %; the restricted plans only have to be valid.
    EXPECT_LE(poet, j["energy_j"].get<double>() * 1.01) << restricted;
  }
}

// The MLP on the Pi 4 with room for three of its 4 KiB activations: pofo's schedule, replayed,
// is cheaper than any the stage model's search finds, so it stands. Its gap is against the
// bound for replayed schedules; the note once also quoted the search's own gap against the
// stage model's bound (2.72 % beside a result of 6.57 %), and now names only the search's
// energy.
TEST(PlanCommand, ABaselineThatStandsIsToldWithOneGapOnly) {
  PlanArgs a;
  a.model = "mlp";
  a.board = "pi4";
  a.budget = "72757368";
  a.time_limit_s = 2;
  const auto j = plan_json(a);
  ASSERT_TRUE(j.contains("note")) << j.dump();
  const std::string note = j["note"];
  EXPECT_NE(note.find("baseline's schedule stands"), std::string::npos) << note;
  EXPECT_NE(note.find("the search's best plan"), std::string::npos) << note;
  EXPECT_EQ(note.find("gap"), std::string::npos) << note;
  EXPECT_GT(j["gap"].get<double>(), 0.0);
}

TEST(SolverOptions, NotANumberInfinityAndAbsurdThreadCountsAreRefusedAtTheCommandLine) {
  // --gap nan planned on (every comparison with NaN is false), and --threads 100000 went to CBC.
  for (const std::vector<std::string>& argv : std::vector<std::vector<std::string>>{
           {"--gap", "nan"}, {"--time-limit", "inf"}, {"--time-limit", "nan"}, {"--threads", "100000"}, {"--threads", "0"}}) {
    CLI::App cmd;
    app::PlanArgs args;
    add_solver(cmd, args);
    std::vector<std::string> reversed(argv.rbegin(), argv.rend());  // CLI11 parses from the back
    EXPECT_THROW(cmd.parse(reversed), CLI::ValidationError) << argv[0] << " " << argv[1];
  }
  CLI::App cmd;
  app::PlanArgs args;
  add_solver(cmd, args);
  std::vector<std::string> fine = {"4", "--threads", "0", "--gap"};
  cmd.parse(fine);
  EXPECT_EQ(args.threads, 4);
  EXPECT_EQ(args.gap, 0.0);
}

TEST(PlanArguments, ABudgetPastWhat64BitsCountIsRefusedNotWrapped) {
  // 2^64 bytes became a budget of 0 B ("below the 69.38 MiB any schedule needs").
  EXPECT_THROW(app::Budget::parse("18446744073709551616"), InputError);
  EXPECT_EQ(app::Budget::parse("999999999999%").bytes(1ULL << 40), std::numeric_limits<uint64_t>::max());
}

TEST(PlanCommand, UnknownPlannerNamesTheKnownOnes) {
  auto args = mlp_at("60%");
  args.planner = "magic";
  std::ostringstream out;
  try {
    run_plan(args, PlanOutput{}, out);
    FAIL() << "an unknown planner was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("checkmate"), std::string::npos) << e.what();
  }
}

}  // namespace
TEST(PlanCommand, AutoPowerModeKeepsTheLeastEnergyAndRefusesModesTooSlowForTheDeadline) {
  PlanArgs args;
  args.model = "mlp";
  args.board = "pi4";
  args.budget = "100%";  // the modes are under test, not the planner: store-all's memory
  args.gap = 0.01;
  args.time_limit_s = 5;
  args.power_mode = "auto";
  const PlanOutcome free = app::plan(args);
  // 1500MHz, 1000MHz, 600MHz, then the six forward/backward pairs (cpufreq switches fast).
  ASSERT_EQ(free.modes.size(), 9U);
  EXPECT_EQ(free.modes[3].mode, "1500MHz/1000MHz");
  // Each mode is planned, or skipped because one pass in it alone costs more than the plan
  // chosen; the chosen one is the least energy of those planned.
  std::optional<double> least;
  std::string least_mode;
  int skipped = 0;
  for (const auto& m : free.modes) {
    if (!m.energy_j) {
      EXPECT_TRUE(m.why.starts_with("not planned: one pass alone costs")) << m.mode << ": " << m.why;
      ++skipped;
      continue;
    }
    if (!least || *m.energy_j < *least) least = m.energy_j, least_mode = m.mode;
  }
  EXPECT_EQ(free.power_mode, least_mode);
  EXPECT_GT(skipped, 0) << "one core busy: full speed is cheapest, and its pass rules out the others";
  EXPECT_EQ(free.again_s, 0) << "store-all fits: the plan is proven, and not planned again";
  // A deadline a little above one pass at full speed: the full-speed mode.
  args.deadline = "1.2x";
  EXPECT_EQ(app::plan(args).power_mode, "1500MHz");
  // A deadline no mode meets is an error naming each mode's reason.
  args.deadline = "0.5x";
  try {
    (void)app::plan(args);
    FAIL() << "expected an InputError";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("600MHz"), std::string::npos) << e.what();
  }
}

// The modes skipped because one pass in them alone costs more than the plan chosen leave
// their shares of the limit: the chosen mode gets them. ResNet-18 CIFAR at 30 % of a Pi 4 with
// 6 s: full speed, the first of nine, was planned with 0.67 s (a 5.6 % gap) and the eight
// others were skipped, 5 s unused.
TEST(PlanCommand, AutoPowerModePlansTheChosenModeAgainWithTheTimeTheSkippedModesLeave) {
  PlanArgs args;
  args.model = "resnet18-cifar";
  args.board = "pi4";
  args.budget = "30%";
  args.time_limit_s = 6;
  args.power_mode = "auto";
  const auto start = std::chrono::steady_clock::now();
  const PlanOutcome o = app::plan(args);
  const double wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(o.power_mode, "1500MHz");
  EXPECT_GT(o.again_s, 2.0) << "most of the limit went unused";
  EXPECT_LE(wall_s, args.time_limit_s + 1.0) << "the limit is still the whole command's";
  ASSERT_TRUE(o.sim);
  const auto chosen = std::find_if(o.modes.begin(), o.modes.end(), [&](const auto& m) { return m.mode == o.power_mode; });
  ASSERT_NE(chosen, o.modes.end());
  ASSERT_TRUE(chosen->energy_j);
  EXPECT_DOUBLE_EQ(*chosen->energy_j, planner::objective_energy_j(*o.sim, o.request.objective) + o.switch_energy_j)
      << "the mode's row shows the plan that stands";
}

}  // namespace ergon::cli
