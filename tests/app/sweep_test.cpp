#include "app/sweep.h"

#include "app/plan.h"

#include <gtest/gtest.h>

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <sstream>

#include "common/error.h"
#include "costdb/costs.h"
#include "costdb/database.h"

namespace ergon::app {
namespace {

namespace fs = std::filesystem;

TEST(Sweep, EachModeIsRecordedAndItsCostsKeptApart) {
  const fs::path dir = fs::temp_directory_path() / ("ergon-sweep-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  app::SweepRequest args;
  args.board = "tx2";
  args.sim = true;
  args.db = (dir / "lab.db").string();
  int runs_started = 0;
  auto progress = [&](const std::string&, std::size_t, std::size_t) { ++runs_started; };
  const auto modes = sweep_modes(args, progress);
  EXPECT_EQ(runs_started, 3) << "one progress call as each mode starts";
  ASSERT_EQ(modes.size(), 3U);
  EXPECT_EQ(modes[0].mode, "MAXN");
  // Capped modes run the plan slower; on this CPU-bound plan the board's idle power makes
  // them dearer too, so only full speed is on the front.
  EXPECT_LT(modes[0].time_s, modes[1].time_s);
  EXPECT_LT(modes[1].time_s, modes[2].time_s);
  EXPECT_TRUE(modes[0].on_front);
  for (const auto& m : modes) {
    EXPECT_GT(m.energy_j, 0);
    EXPECT_FALSE(m.by_kind.empty());
  }
  auto db = costdb::Database::open_read_only(args.db);
  EXPECT_EQ(costdb::measured_power_modes(db, "tx2").size(), 3U);
  // One board, switched through the protocol: none for its default mode, nvpmodel's time after.
  EXPECT_FALSE(modes[0].switch_s);
  ASSERT_TRUE(modes[2].switch_s);
  EXPECT_DOUBLE_EQ(*modes[2].switch_s, 0.2);
  EXPECT_DOUBLE_EQ(costdb::measured_mode_switch_s(db, "tx2").value_or(0), 0.2);
  fs::remove_all(dir);
}

TEST(Sweep, UnknownModesAreRefusedBeforeAnythingRuns) {
  app::SweepRequest args;
  args.board = "pi4";
  args.sim = true;
  args.modes = "1500MHz,turbo";
  int runs_started = 0;
  auto progress = [&](const std::string&, std::size_t, std::size_t) { ++runs_started; };
  try {
    sweep_modes(args, progress);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "board pi4 has no power mode 'turbo' (it has 1500MHz, 1000MHz, 600MHz)");
  }
  EXPECT_EQ(runs_started, 0);
  args.board = "mkr1000";
  args.modes = "all";
  try {
    sweep_modes(args, progress);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_EQ(std::string(e.what()), "mkr1000 has one power mode (48MHz): nothing to sweep; ergon record measures it");
  }
}

// The must-show of power modes: with all four cores busy, dynamic power outweighs the TX2's
// idle power, a capped mode saves energy for some time, and planning on the sweep's measured
// costs picks it when the deadline allows and not when it does not.
TEST(Sweep, OnBusyCoresACappedModeSavesEnergyAndAutoPicksItWhenTheDeadlineAllows) {
  const fs::path dir = fs::temp_directory_path() / ("ergon-sweep-cores-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  app::SweepRequest args;
  args.board = "tx2";
  args.sim = true;
  args.threads = 4;
  args.db = (dir / "lab.db").string();
  int runs_started = 0;
  auto progress = [&](const std::string&, std::size_t, std::size_t) { ++runs_started; };
  const auto modes = sweep_modes(args, progress);
  ASSERT_EQ(modes.size(), 3U);
  EXPECT_LT(modes[2].energy_j, modes[0].energy_j) << "MAXQ spends less energy than MAXN";
  EXPECT_GT(modes[2].time_s, modes[0].time_s) << "and takes longer";
  EXPECT_LT(modes[2].time_s, 1.5 * modes[0].time_s) << "but boundedly so";
  EXPECT_TRUE(modes[2].on_front);

  PlanArgs plan_args;
  plan_args.model = "resnet18-cifar";
  plan_args.board = "tx2";
  plan_args.budget = "100%";
  plan_args.db = args.db;
  plan_args.power_mode = "auto";
  plan_args.deadline = "none";
  EXPECT_EQ(app::plan(plan_args).power_mode, "MAXQ");
  plan_args.deadline = "1.2x";
  const PlanOutcome tight = app::plan(plan_args);
  EXPECT_EQ(tight.power_mode, "MAXN") << "the capped modes miss a deadline of 1.2 passes at full speed";
  EXPECT_FALSE(tight.modes[2].energy_j);
  EXPECT_NE(tight.modes[2].why.find("deadline"), std::string::npos) << tight.modes[2].why;
  EXPECT_EQ(tight.modes.size(), 3U) << "nvpmodel switches too slowly to change modes within an iteration";
  EXPECT_NE(tight.per_phase_note.find("switching takes 0.2 s each way"), std::string::npos) << tight.per_phase_note;
  fs::remove_all(dir);
}

// Per-phase modes: a Pi 4 switches cpufreq in 355 us, so --power-mode auto also tries the
// forward pass in one mode and the backward pass in another. With a deadline between the
// capped mode's time and full speed's, a mixed pair meets it for less energy than full speed.
TEST(Sweep, WhereTheBoardSwitchesCheaplyAutoMixesModesPerPhaseToMeetADeadlineForLessEnergy) {
  const fs::path dir = fs::temp_directory_path() / ("ergon-sweep-phases-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  app::SweepRequest args;
  args.board = "pi4";
  args.sim = true;
  args.threads = 4;
  args.db = (dir / "lab.db").string();
  int runs_started = 0;
  auto progress = [&](const std::string&, std::size_t, std::size_t) { ++runs_started; };
  sweep_modes(args, progress);

  PlanArgs plan_args;
  plan_args.model = "resnet18-cifar";
  plan_args.board = "pi4";
  plan_args.budget = "100%";
  plan_args.db = args.db;
  plan_args.power_mode = "auto";
  const PlanOutcome free = app::plan(plan_args);
  EXPECT_EQ(free.modes.size(), 9U) << "3 modes and 6 pairs";
  EXPECT_TRUE(free.per_phase_note.empty());
  EXPECT_EQ(free.power_mode, "1000MHz") << "without a deadline the capped mode throughout is cheapest";
  // Each candidate alone: energy and time per iteration, switches included.
  std::map<std::string, std::pair<double, double>> figures;
  for (const char* mode : {"1500MHz", "1000MHz", "1500MHz/1000MHz"}) {
    PlanArgs one = plan_args;
    one.power_mode = mode;
    const PlanOutcome o = app::plan(one);
    ASSERT_TRUE(o.sim) << mode << ": " << o.result.why;
    figures[mode] = {planner::objective_energy_j(*o.sim, o.request.objective) + o.switch_energy_j,
                     planner::deadline_time_s(*o.sim, o.request.objective) + o.switch_time_s};
  }
  const auto fast = figures.at("1500MHz"), capped = figures.at("1000MHz"), mixed = figures.at("1500MHz/1000MHz");
  ASSERT_LT(capped.first, fast.first);
  ASSERT_LT(fast.second, mixed.second);
  ASSERT_LT(mixed.second, capped.second);
  EXPECT_LT(mixed.first, fast.first) << "the backward pass capped saves energy too";

  // Between the mixed pair's time and the capped mode's: the capped mode misses it.
  plan_args.deadline = fmt::format("{:.9g}s", (mixed.second + capped.second) / 2);
  const PlanOutcome tight = app::plan(plan_args);
  EXPECT_EQ(tight.power_mode, "1500MHz/1000MHz");
  EXPECT_NEAR(tight.switch_time_s, 2 * 355e-6, 1e-9);
  EXPECT_GT(tight.switch_energy_j, 0);
  for (const auto& m : tight.modes) {
    if (m.mode == "1000MHz") {
      EXPECT_FALSE(m.energy_j) << "the capped mode throughout misses the deadline";
    }
  }
  // The chosen schedule replays within the deadline, switches included.
  ASSERT_TRUE(tight.sim);
  EXPECT_LE(planner::deadline_time_s(*tight.sim, tight.request.objective) + tight.switch_time_s,
            (mixed.second + capped.second) / 2 * (1 + 1e-9));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ergon::app
