#include "cli/probe_cmd.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <sstream>

#include "common/error.h"
#include "costdb/database.h"

namespace ergon::cli {
namespace {

namespace fs = std::filesystem;

TEST(ProbeRead, ASimulatedChipIsSampledNearItsRateAndStoredAsARun) {
  // In a folder of its own: the read-only check below leaves the file's -wal and -shm beside it.
  std::string folder = (fs::temp_directory_path() / "ergon-probe-XXXXXX").string();
  ASSERT_NE(::mkdtemp(folder.data()), nullptr);
  const fs::path db = fs::path(folder) / "probe.db";
  ProbeReadArgs args;
  args.probe = "sim:ina219,current=0.75,bus=5";
  args.duration = "500ms";
  args.db = db.string();
  std::ostringstream out;
  std::atomic<int> interrupts{0};
  ASSERT_EQ(run_probe_read(args, out, interrupts), 0);
  EXPECT_NE(out.str().find("ina219 at sim-i2c@0x40"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("mean 3.7"), std::string::npos) << out.str();
  EXPECT_NE(out.str().find("0 overflows"), std::string::npos) << out.str();
  auto d = costdb::Database::open_read_only(db);
  const auto runs = costdb::list_runs(d);
  ASSERT_EQ(runs.size(), 1U);
  EXPECT_EQ(runs[0].board_kind, "probe");
  EXPECT_EQ(runs[0].status, costdb::RunStatus::kCompleted);
  // Real time on a busy machine: at least a third of the chip's ~940 samples a second.
  EXPECT_GT(runs[0].samples, 150U);
  std::error_code ec;
  fs::remove_all(folder, ec);
}

TEST(ProbeRead, ABadRateOrAMissingBusIsOneClearError) {
  ProbeReadArgs args;
  args.probe = "sim:ina219";
  args.rate = "fast";
  std::ostringstream out;
  std::atomic<int> interrupts{0};
  EXPECT_THROW(run_probe_read(args, out, interrupts), InputError);
  args.rate = "max";
  args.duration = "10 parsecs";
  EXPECT_THROW(run_probe_read(args, out, interrupts), InputError);
  args.duration = "1s";
  args.probe = "ina219:/dev/i2c-97@0x40";
  EXPECT_THROW(run_probe_read(args, out, interrupts), DeviceError);
}

TEST(ProbeList, NamesTheSimulatedChipsAndSaysWhyNoBusIsThere) {
  std::ostringstream out;
  ASSERT_EQ(run_probe_list(out), 0);
  EXPECT_NE(out.str().find("sim:ina219"), std::string::npos);
  EXPECT_NE(out.str().find("i2c"), std::string::npos);
}

}  // namespace
}  // namespace ergon::cli
