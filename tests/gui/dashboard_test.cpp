// Every view of the dashboard rendered offscreen from a database made by the simulator:
// the PNGs stay under the build tree (build/tests/gui/screenshots) for people to look at.

#include <gtest/gtest.h>

#include <cmath>
#include <unistd.h>

#include <QColor>
#include <QImage>
#include <filesystem>
#include <memory>
#include <set>
#include <sstream>

#include "app/validate.h"
#include "costdb/database.h"
#include "devices/board_profile.h"
#include "devices/sim_server.h"
#include "gui/dashboard.h"
#include "probes/power.h"

namespace ergon {
namespace {

namespace fs = std::filesystem;

TEST(Dashboard, RendersEveryViewOfASimulatorDatabaseToAPicture) {
  const fs::path dir = fs::temp_directory_path() / ("ergon-dashboard-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  // Two plans of the MLP at half memory (POET and Checkmate), each run on a simulated Pi 4.
  for (const char* planner : {"poet", "checkmate"}) {
    app::ValidateRequest args;
    args.plan.model = "mlp";
    args.plan.board = "pi4";
    args.plan.budget = "50%";
    args.plan.planner = planner;
    args.plan.gap = 0.01;
    args.plan.time_limit_s = 5;
    args.db = (dir / "lab.db").string();
    (void)app::validate(args);
  }
  {
    // A newcomer's first look: budgets as % of store-all's activations on round ticks, and the
    // power trace's rail by the board's name for it.
    gui::DashboardWindow window({.db = dir / "lab.db"});
    const auto [title, range] = window.pareto_x_axis();
    EXPECT_EQ(title, "activation memory budget (% of store-all's activations)");
    EXPECT_LE(range.first, 50);
    EXPECT_GE(range.second, 50);
    EXPECT_EQ(std::fmod(range.first, 1.0), 0.0) << range.first;
    EXPECT_EQ(std::fmod(range.second, 1.0), 0.0) << range.second;
    EXPECT_EQ(window.power_rails(), (std::vector<std::string>{"5V"}));
  }
  const fs::path shots = fs::path(ERGON_BINARY_DIR) / "tests" / "gui" / "screenshots";
  const auto files = gui::render_dashboard({.db = dir / "lab.db"}, shots, 1400, 900);
  ASSERT_EQ(files.size(), 6U);  // pareto, schedules, power, costs, pipeline, record
  for (const auto& f : files) {
    SCOPED_TRACE(f.string());
    QImage image(QString::fromStdString(f.string()));
    ASSERT_FALSE(image.isNull());
    EXPECT_EQ(image.width(), 1400);
    // A drawn view, not a blank window: many colours.
    std::set<QRgb> colours;
    for (int yy = 0; yy < image.height(); yy += 7)
      for (int xx = 0; xx < image.width(); xx += 7) colours.insert(image.pixel(xx, yy));
    EXPECT_GT(colours.size(), 20U);
  }
  fs::remove_all(dir);
}

TEST(Dashboard, ThePipelineTabShowsEveryBoardsAndLinksTasksOfTheDefaultPlan) {
  const fs::path dir = fs::temp_directory_path() / ("ergon-dashboard-pipe-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  {
    auto db = costdb::Database::open(dir / "empty.db");
  }
  gui::DashboardWindow window({.db = dir / "empty.db"});
  // resnet18-cifar on two Pi 4s, four micro-batches: 2 boards x 8 tasks + 1 link x 8 transfers.
  EXPECT_EQ(window.pipeline_bars(), 24U);
  fs::remove_all(dir);
}

probes::PowerSample sample_at(uint64_t ticks, uint32_t power_uw) {
  probes::PowerSample s;
  s.rail = 0;
  s.t_ticks = ticks;
  s.bus_uv = 5'000'000;
  s.current_ua = power_uw / 5;
  s.power_uw = power_uw;
  return s;
}

// Live: the Power tab follows a run as it is recorded (the recorder commits four times a
// second; the dashboard polls once a second), and moves to a newer run when one starts.
TEST(Dashboard, TheLivePowerViewFollowsARunAsItRecordsAndMovesToTheNextOne) {
  const fs::path dir = fs::temp_directory_path() / ("ergon-dashboard-live-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  auto db = costdb::Database::open(dir / "lab.db");
  costdb::BoardInfo board;
  board.name = "pi4-sim";
  board.kind = "pi4";
  board.tick_hz = 1'000'000;
  board.rails = {{0, "5V"}};
  auto first = std::make_unique<costdb::RunWriter>(db, board, "live-test", 1);
  std::vector<probes::PowerSample> batch;
  uint64_t tick = 0;
  auto record = [&](costdb::RunWriter& run, int samples) {
    batch.clear();
    for (int i = 0; i < samples; ++i, tick += 1000) batch.push_back(sample_at(tick, 3'000'000));
    run.add_samples(batch);
    db.commit_batch();
  };
  record(*first, 100);

  gui::DashboardWindow window({.db = dir / "lab.db", .run = std::nullopt, .live = true}, 800, 600);
  EXPECT_EQ(window.power().samples, 100U);
  // Polls, then loads off the UI thread: wait for it (a slow machine gets 10 s).
  auto wait_for = [&](const auto& done) {
    for (int i = 0; i < 100 && !done(); ++i) window.run_events_for(0.1);
  };
  record(*first, 150);
  wait_for([&] { return window.power().samples != 100U; });
  EXPECT_EQ(window.power().samples, 250U) << "the samples committed since are drawn";
  EXPECT_NEAR(window.power().duration_s, 0.249, 1e-9);
  const int64_t first_run = window.power().run_id;

  auto second = std::make_unique<costdb::RunWriter>(db, board, "live-test", 2);
  record(*second, 40);
  wait_for([&] { return window.power().run_id != first_run && window.power().samples != 250U; });
  EXPECT_NE(window.power().run_id, first_run) << "a new run is followed";
  EXPECT_EQ(window.power().samples, 40U);
  first.reset();
  second.reset();
  fs::remove_all(dir);
}

// The Record tab as a lab technician uses it: a simulated Pi 4 on a pty, Start, the counters
// and trace while it records, then the costs attributed from the run (the same app/ calls as
// ergon record and ergon attribute). Its picture is docs/images/dashboard-record.png.
TEST(Dashboard, TheRecordTabRecordsABoardAttributesItAndShowsItsCosts) {
  const fs::path dir = fs::temp_directory_path() / ("ergon-dashboard-record-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  (void)costdb::Database::open(dir / "lab.db");
  auto sim = devices::SimServer::open_pty(*devices::find_board("pi4"), devices::SimServerOptions{.speed = 4, .seed = 9});
  sim->start();
  gui::DashboardWindow window({.db = dir / "lab.db"});
  const auto result = window.record(sim->link_name(), "", "", 120);
  ASSERT_TRUE(result.run_id) << result.outcome;
  EXPECT_EQ(result.outcome.rfind("completed, run 1: ", 0), 0U) << result.outcome;
  EXPECT_GT(result.counters.samples, 1000U);
  EXPECT_GT(result.counters.samples_per_s, 100);
  EXPECT_EQ(result.counters.frames_lost, 0U);
  EXPECT_EQ(result.counters.crc_errors, 0U);
  EXPECT_GE(result.costs, 14U);  // the Pi 4's profile plan: 7 layers forward and backward
  EXPECT_EQ(result.trace_samples, result.counters.samples);
  EXPECT_EQ(result.rails, (std::vector<std::string>{"5V"}));
  EXPECT_EQ(window.power().run_id, *result.run_id) << "the Power tab shows the new run too";
  const fs::path shots = fs::path(ERGON_BINARY_DIR) / "tests" / "gui" / "screenshots" / "record";
  const auto files = window.render(shots);
  EXPECT_TRUE(fs::exists(shots / "record.png"));
  sim->stop();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ergon
