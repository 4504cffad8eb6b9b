#include "cli/sweep_cmd.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <sstream>

#include "common/error.h"
#include "costdb/costs.h"
#include "costdb/database.h"

namespace ergon::cli {
namespace {

namespace fs = std::filesystem;

TEST(Sweep, EachModeIsRecordedAndItsCostsKeptApart) {
  const fs::path dir = fs::temp_directory_path() / ("ergon-sweep-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  SweepArgs args;
  args.board = "tx2";
  args.sim = true;
  args.db = (dir / "lab.db").string();
  std::ostringstream progress;
  const auto modes = sweep_modes(args, progress);
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
  std::ostringstream out;
  EXPECT_EQ(run_sweep(args, out), 0);  // a second sweep adds runs; the table prints
  EXPECT_NE(out.str().find("MAXQ"), std::string::npos);
  fs::remove_all(dir);
}

TEST(Sweep, UnknownModesAndSeveralModesOnARealBoardAreRefused) {
  SweepArgs args;
  args.board = "pi4";
  args.sim = true;
  args.modes = "1500MHz,turbo";
  std::ostringstream progress;
  EXPECT_THROW(sweep_modes(args, progress), InputError);
  args.sim = false;
  args.port = "/dev/ttyACM0";
  args.modes = "all";
  try {
    sweep_modes(args, progress);
    FAIL();
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("nvpmodel"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace ergon::cli
