// The host-built firmware recorded end to end: its own code behind a real pseudo-terminal,
// the real recorder and a real SQLite file, as the simulated boards are in tests/e2e.

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "app/attribute.h"
#include "app/characterize.h"
#include "app/record.h"
#include "costdb/costs.h"
#include "costdb/cost_model.h"
#include "costdb/database.h"
#include "devices/board_profile.h"
#include "devices/cortexm/host/firmware_host.h"
#include "devices/profile_plan.h"

namespace ergon {
namespace {

namespace fs = std::filesystem;

class FirmwareEndToEnd : public ::testing::TestWithParam<const char*> {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ergon-firmware-e2e-" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    options_.board = GetParam();
    options_.scratch = dir_;
    options_.on_listening = [this](const std::string& l) {
      std::lock_guard lock(m_);
      link_ = l;
    };
    thread_ = std::thread([this] { devices::cortexm::run_firmware_host(options_, stop_); });
    for (int i = 0; i < 300 && link().empty(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  void TearDown() override {
    stop_ = true;
    thread_.join();
    fs::remove_all(dir_);
  }
  std::string link() {
    std::lock_guard lock(m_);
    return link_;
  }
  fs::path dir_;
  devices::cortexm::FirmwareHostOptions options_;
  std::atomic<bool> stop_{false};
  std::mutex m_;
  std::string link_;
  std::thread thread_;
};

TEST_P(FirmwareEndToEnd, RecordStoresTheBoardsDefaultPlanAndAttributionFindsItsPower) {
  const auto board = *devices::find_board(GetParam());
  ASSERT_FALSE(link().empty());
  app::RecordRequest req;
  req.ports = {link()};
  req.db_path = dir_ / "lab.db";
  std::atomic<int> interrupts{0};
  const auto outcomes = app::record_boards(req, {}, interrupts);
  ASSERT_EQ(outcomes.size(), 1U);
  ASSERT_EQ(outcomes[0].state, devices::SessionState::kCompleted) << outcomes[0].error;
  const auto& stats = outcomes[0].stats;
  EXPECT_EQ(stats.decoder.crc_errors, 0U);
  EXPECT_EQ(stats.decoder.frames_lost, 0U);
  ASSERT_TRUE(stats.device_done);
  EXPECT_EQ(stats.spans, stats.device_done->spans_sent) << "every span the firmware sent arrived";
  EXPECT_EQ(stats.samples, stats.device_done->samples_sent);
  uint32_t windows = 0;
  for (const auto& op : devices::default_profile_plan(board, 1).ops) windows += op.windows;
  EXPECT_EQ(stats.spans, windows);

  auto db = costdb::Database::open(req.db_path);
  const auto a = app::attribute_run(db, *outcomes[0].run_id);
  EXPECT_TRUE(a.attribution.clock.fitted) << a.attribution.clock.note;
  // The simulated supply draws the board's idle power, plus its compute power while a
  // kernel runs: attribution recovers both from the INA219's samples.
  EXPECT_NEAR(a.attribution.idle_power_w, board.idle_w, 0.1 * board.idle_w);
  int computes = 0, covered = 0;
  for (const auto& w : a.attribution.windows) covered += w.covered ? 1 : 0;
  for (const auto& w : a.attribution.windows) {
    const bool compute = w.span.phase == profiler::Phase::kForward || w.span.phase == profiler::Phase::kBackward;
    if (!w.covered || !compute || w.time_s < 0.02) continue;
    ++computes;
    EXPECT_NEAR(w.gross_energy_j / w.time_s, board.idle_w + board.compute_w,
                0.15 * (board.idle_w + board.compute_w));
  }
  EXPECT_GT(computes, 0) << covered << " of " << a.attribution.windows.size() << " windows covered by samples";
}

// The firmware measures its link like the agent and the simulator do (protocol v6): every
// transfer of the link test completes, and attribution fits both directions.
TEST_P(FirmwareEndToEnd, TheFirmwaresLinkTestGivesLinkCostsBothWays) {
  ASSERT_FALSE(link().empty());
  app::RecordRequest req;
  req.ports = {link()};
  req.db_path = dir_ / "lab.db";
  req.options.link_test = true;
  req.options.link = "pty";
  std::atomic<int> interrupts{0};
  const auto outcomes = app::record_boards(req, {}, interrupts);
  ASSERT_EQ(outcomes.size(), 1U);
  ASSERT_EQ(outcomes[0].state, devices::SessionState::kCompleted) << outcomes[0].error;
  EXPECT_GT(outcomes[0].stats.link_bytes_received, 0U) << "it sent";
  EXPECT_GT(outcomes[0].stats.link_bytes_sent, 0U) << "and it pulled";
  auto db = costdb::Database::open(req.db_path);
  const auto a = app::attribute_run(db, *outcomes[0].run_id);
  EXPECT_EQ(a.link_rows, 6);
  const auto fits = costdb::list_link_costs(db, std::string(GetParam()));
  ASSERT_EQ(fits.size(), 2U);
  // The host's firmware paces its link as a full-speed USB CDC line (1 MB/s each way): the
  // fit finds a rate no faster than that line (a pty alone moves tens of MB/s, and then the
  // scheduler's jitter, not the bytes, decides the fit), and slower only by what a loaded
  // host adds (0.3 MB/s receiving beside three busy loops and a disk writer).
  for (const auto& f : fits) {
    EXPECT_EQ(f.link, "pty");
    EXPECT_GT(f.bandwidth_bytes_per_s, 0.1e6) << f.direction;
    EXPECT_LT(f.bandwidth_bytes_per_s, 1.1e6) << f.direction;
  }
}

// A microcontroller runs at one fixed clock: asked for it, it records; asked for another, the
// session fails with the firmware's reason before anything is recorded.
TEST_P(FirmwareEndToEnd, TheFirmwareAcceptsOnlyItsOwnClockAsAPowerMode) {
  const auto board = *devices::find_board(GetParam());
  ASSERT_FALSE(link().empty());
  app::RecordRequest req;
  req.ports = {link()};
  req.db_path = dir_ / "lab.db";
  req.options.plan = devices::ProfilePlan{};
  req.options.plan->min_window_us = 1000;
  req.options.plan->ops.push_back({.op_id = 1, .shape = profiler::linear(1, 16, 8, profiler::Phase::kForward),
                                   .phase = profiler::Phase::kForward, .windows = 1});
  std::atomic<int> interrupts{0};
  req.options.power_mode = "16MHz";
  const auto refused = app::record_boards(req, {}, interrupts);
  ASSERT_EQ(refused.size(), 1U);
  EXPECT_EQ(refused[0].state, devices::SessionState::kFailed);
  EXPECT_NE(refused[0].error.find("cannot switch to power mode 16MHz: the firmware runs at one fixed clock"),
            std::string::npos)
      << refused[0].error;
  EXPECT_FALSE(refused[0].run_id);
  req.options.power_mode = std::string(board.power_mode);
  const auto same = app::record_boards(req, {}, interrupts);
  ASSERT_EQ(same[0].state, devices::SessionState::kCompleted) << same[0].error;
  EXPECT_FALSE(same[0].mode_switch_s) << "already in its mode: nothing to switch";
  // Switching within a run is refused at its Start, and the next run is not affected.
  req.options.phase_modes = devices::RecordOptions::PhaseSwitch{"16MHz", 0};
  const auto phased = app::record_boards(req, {}, interrupts);
  EXPECT_EQ(phased[0].state, devices::SessionState::kFailed);
  req.options.phase_modes.reset();
  EXPECT_EQ(app::record_boards(req, {}, interrupts)[0].state, devices::SessionState::kCompleted);
}

// ergon characterize's grid for a microcontroller runs on the firmware's own code: every shape
// fits its arena and has a kernel (the firmware refuses a whole plan otherwise), and the fit
// sees every kind at its three sizes both ways.
TEST_P(FirmwareEndToEnd, CharacterizationsGridRunsWholeOnTheFirmwareAndIsFitted) {
  ASSERT_FALSE(link().empty());
  app::CharacterizeRequest request;
  request.port = link();
  request.db_path = dir_ / "card.db";
  request.board = *devices::find_board(GetParam());
  std::atomic<int> interrupts{0};
  const auto result = app::characterize(request, {}, interrupts);
  ASSERT_EQ(result.modes.size(), 1U);
  const auto& m = result.modes.front();
  std::set<std::string> kinds;
  int compute = 0, paging = 0;
  for (const auto& s : m.shapes) {
    kinds.insert(s.kind);
    (s.kind == "paging" ? paging : compute) += 1;
  }
  EXPECT_EQ(kinds, (std::set<std::string>{"add", "conv2d", "linear", "maxpool", "paging", "relu"}));
  EXPECT_EQ(compute, 30);
  EXPECT_EQ(paging, 10);
  EXPECT_GT(m.flops_per_s, 0);
  EXPECT_GT(m.pagein_bytes_per_s, 0);
  EXPECT_TRUE(m.has_energy);
}

INSTANTIATE_TEST_SUITE_P(Boards, FirmwareEndToEnd, ::testing::Values("nrf52840", "mkr1000"));

}  // namespace
}  // namespace ergon
