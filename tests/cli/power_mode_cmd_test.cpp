#include "cli/power_mode_cmd.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/error.h"

namespace ergon::cli {
namespace {

namespace fs = std::filesystem;

TEST(PowerModeCommand, ListsTheMachinesControlsAndSetsAModeOrSaysWhatItWould) {
  const fs::path sys = fs::temp_directory_path() / ("ergon-pm-" + std::to_string(::getpid()));
  const fs::path d = sys / "devices/system/cpu/cpu0/cpufreq";
  fs::create_directories(d);
  std::ofstream(d / "scaling_available_frequencies") << "600000 1500000\n";
  std::ofstream(d / "scaling_max_freq") << "1500000\n";
  PowerModeArgs args;
  args.sysfs = sys;
  std::ostringstream list;
  EXPECT_EQ(run_power_mode(args, list), 0);
  EXPECT_NE(list.str().find("cpufreq   now 1500MHz"), std::string::npos) << list.str();
  EXPECT_NE(list.str().find("nvpmodel"), std::string::npos) << "absent kinds say why";
  args.set = "600MHz";
  args.dry_run = true;
  std::ostringstream dry;
  EXPECT_EQ(run_power_mode(args, dry), 0);
  EXPECT_NE(dry.str().find("would run: echo 600000 > "), std::string::npos) << dry.str();
  args.dry_run = false;
  std::ostringstream set;
  EXPECT_EQ(run_power_mode(args, set), 0);
  EXPECT_NE(set.str().find("cpufreq now 600MHz"), std::string::npos) << set.str();
  args.set = "900MHz";
  EXPECT_THROW(run_power_mode(args, set), InputError);
  fs::remove_all(sys);
}

}  // namespace
}  // namespace ergon::cli
