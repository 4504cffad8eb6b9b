#include "cli/sweep_cmd.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace ergon::cli {
namespace {

namespace fs = std::filesystem;

TEST(SweepCommand, PrintsEveryModeAgainstTheFirstAndTheSameAsJson) {
  const fs::path dir = fs::temp_directory_path() / ("ergon-sweep-cmd-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  app::SweepRequest args;
  args.board = "pi4";
  args.modes = "1500MHz,600MHz";
  args.sim = true;
  args.db = (dir / "lab.db").string();
  std::ostringstream table;
  ASSERT_EQ(run_sweep(args, /*json=*/false, table), 0);
  EXPECT_NE(table.str().find("against 1500MHz"), std::string::npos) << table.str();
  EXPECT_NE(table.str().find("600MHz"), std::string::npos) << table.str();
  EXPECT_NE(table.str().find("--power-mode MODE"), std::string::npos) << table.str();
  std::ostringstream json;
  ASSERT_EQ(run_sweep(args, /*json=*/true, json), 0);
  const auto modes = nlohmann::json::parse(json.str());
  ASSERT_EQ(modes.size(), 2U);
  EXPECT_EQ(modes[1]["mode"], "600MHz");
  EXPECT_GT(modes[1]["time_s"].get<double>(), modes[0]["time_s"].get<double>());
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ergon::cli
