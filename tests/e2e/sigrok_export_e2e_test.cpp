// A recorded run exported as a sigrok session file, read back by Debian's own sigrok-cli
// (libsigrok's reader, not ours): its channels and rate, and a dump of its samples against the
// database's.
#include "app/sigrok_export.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>

#include "app/record.h"
#include "common/error.h"
#include "costdb/costs.h"
#include "costdb/database.h"
#include "devices/board_profile.h"
#include "devices/sim_server.h"

namespace ergon::app {
namespace {

namespace fs = std::filesystem;

std::string run_command(const std::string& command) {
  std::string text;
  FILE* pipe = ::popen((command + " 2>/dev/null").c_str(), "r");
  if (!pipe) return text;
  char buffer[65536];
  while (std::size_t n = std::fread(buffer, 1, sizeof buffer, pipe)) text.append(buffer, n);
  ::pclose(pipe);
  return text;
}

TEST(SigrokExport, SigrokCliReadsBackTheRunsChannelsRateAndSamples) {
  const fs::path dir = fs::temp_directory_path() / ("ergon-sigrok-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto sim = devices::SimServer::open_pty(*devices::find_board("pi4"), devices::SimServerOptions{.speed = 0, .seed = 21});
  sim->start();
  RecordRequest req;
  req.ports = {sim->link_name()};
  req.db_path = dir / "run.db";
  std::atomic<int> interrupts{0};
  const auto outcomes = record_boards(req, {}, interrupts);
  ASSERT_EQ(outcomes[0].state, devices::SessionState::kCompleted) << outcomes[0].error;
  const int64_t run = *outcomes[0].run_id;

  auto db = costdb::Database::open(req.db_path);
  const auto written = export_sigrok(db, run, dir / "run.sr");
  EXPECT_EQ(written.samplerate_hz, 940U);  // the simulated INA219's 1.064 ms conversions
  ASSERT_EQ(written.analog_channels, (std::vector<std::string>{"5V_W", "5V_A", "5V_V"}));

  const std::string show = run_command("sigrok-cli -i '" + (dir / "run.sr").string() + "' --show");
  ASSERT_NE(show.find("Samplerate: 940"), std::string::npos) << "is sigrok-cli installed? " << show;
  for (const char* line : {"- busy: logic", "- op7: logic", "- 5V_W: analog", "- 5V_A: analog", "- 5V_V: analog"})
    EXPECT_NE(show.find(line), std::string::npos) << line;
  EXPECT_NE(show.find("Analog sample count: " + std::to_string(written.samples)), std::string::npos) << show;

  // sigrok-cli prints a .sr file's analog values with two decimals, in volts whatever they are:
  // compare that many with the database's samples, held on the file's grid.
  const auto data = costdb::load_run_data(db, run);
  const double period_ticks = static_cast<double>(data.tick_hz) / static_cast<double>(written.samplerate_hz);
  std::istringstream dump(run_command("sigrok-cli -i '" + (dir / "run.sr").string() + "' -O analog"));
  std::size_t i = 0, k = 0, compared = 0;
  for (std::string line; std::getline(dump, line);) {
    if (line.rfind("5V_W: ", 0) != 0) continue;
    const double printed = std::stod(line.substr(6));
    const auto t = data.samples.front().t_ticks + static_cast<uint64_t>(std::llround(static_cast<double>(i) * period_ticks));
    while (k + 1 < data.samples.size() && data.samples[k + 1].t_ticks <= t) ++k;
    ASSERT_NEAR(printed, data.samples[k].power_uw * 1e-6, 0.0051) << "sample " << i << ": " << line;
    ++i;
    ++compared;
  }
  EXPECT_EQ(compared, written.samples);

  // The busy channel is high for as long as the run's op windows (not its idle ones) lasted.
  const std::string bits = run_command("sigrok-cli -i '" + (dir / "run.sr").string() + "' -O bits:width=0");
  uint64_t busy = 0;
  std::istringstream lines(bits);
  for (std::string line; std::getline(lines, line);)
    if (line.rfind("busy:", 0) == 0) busy += static_cast<uint64_t>(std::count(line.begin(), line.end(), '1'));
  double busy_ticks = 0;
  for (const auto& s : data.spans)
    if (s.phase != profiler::Phase::kIdle) busy_ticks += static_cast<double>(s.end_ticks - s.begin_ticks);
  EXPECT_NEAR(static_cast<double>(busy), busy_ticks / period_ticks, 0.01 * busy_ticks / period_ticks + 2.0 * static_cast<double>(data.spans.size()));
  fs::remove_all(dir);
}

// The whole round trip through the real binaries: libsigrok's demo driver recorded into a
// database (ergon probe read), exported (ergon export --sigrok), read back by sigrok-cli.
TEST(SigrokExport, ADemoDriverRecordingRoundTripsThroughSigrokCli) {
  const fs::path dir = fs::temp_directory_path() / ("ergon-sigrok-demo-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string ergon = std::string(ERGON_BINARY_DIR) + "/cli/ergon";
  const std::string db = (dir / "demo.db").string();
  const std::string read = run_command("'" + ergon + "' probe read --probe sigrok:demo,voltage=A0,current=A1,rate=1000,rail=DEMO "
                                       "--duration 0.5 --db '" + db + "'");
  ASSERT_NE(read.find("sigrok at demo:"), std::string::npos) << read;
  const std::string sr = (dir / "demo.sr").string();
  const std::string exported = run_command("'" + ergon + "' export --db '" + db + "' --run 1 --sigrok '" + sr + "'");
  ASSERT_NE(exported.find("analog DEMO_W DEMO_A DEMO_V"), std::string::npos) << exported;
  const std::string show = run_command("sigrok-cli -i '" + sr + "' --show");
  EXPECT_NE(show.find("Samplerate: 1000"), std::string::npos) << show;
  EXPECT_NE(show.find("- DEMO_V: analog"), std::string::npos) << show;
  // The demo's square wave on A0 comes back as +-10 V.
  std::istringstream dump(run_command("sigrok-cli -i '" + sr + "' -O analog"));
  int volts = 0;
  for (std::string line; std::getline(dump, line);) {
    if (line.rfind("DEMO_V: ", 0) != 0) continue;
    EXPECT_NEAR(std::abs(std::stod(line.substr(8))), 10.0, 0.006) << line;
    ++volts;
  }
  EXPECT_GT(volts, 300);
  fs::remove_all(dir);
}

TEST(SigrokExport, ARunWithoutSamplesIsRefusedInOneLine) {
  const fs::path dir = fs::temp_directory_path() / ("ergon-sigrok-empty-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  auto db = costdb::Database::open(dir / "empty.db");
  EXPECT_THROW(export_sigrok(db, 7, dir / "x.sr"), InputError);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ergon::app
