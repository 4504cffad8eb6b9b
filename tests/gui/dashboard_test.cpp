// Every view of the dashboard rendered offscreen from a database made by the simulator:
// the PNGs stay under the build tree (build/tests/gui/screenshots) for people to look at.

#include <gtest/gtest.h>
#include <unistd.h>

#include <QColor>
#include <QImage>
#include <filesystem>
#include <set>
#include <sstream>

#include "cli/validate_cmd.h"
#include "gui/dashboard.h"

namespace ergon {
namespace {

namespace fs = std::filesystem;

TEST(Dashboard, RendersEveryViewOfASimulatorDatabaseToAPicture) {
  const fs::path dir = fs::temp_directory_path() / ("ergon-dashboard-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  // Two plans of the MLP at half memory (POET and Checkmate), each run on a simulated Pi 4.
  for (const char* planner : {"poet", "checkmate"}) {
    cli::ValidateArgs args;
    args.plan.model = "mlp";
    args.plan.board = "pi4";
    args.plan.budget = "50%";
    args.plan.planner = planner;
    args.plan.gap = 0.01;
    args.plan.time_limit_s = 5;
    args.db = (dir / "lab.db").string();
    std::ostringstream progress;
    (void)cli::validate(args, progress);
  }
  const fs::path shots = fs::path(ERGON_BINARY_DIR) / "tests" / "gui" / "screenshots";
  const auto files = gui::render_dashboard({.db = dir / "lab.db"}, shots, 1400, 900);
  ASSERT_EQ(files.size(), 4U);
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

}  // namespace
}  // namespace ergon
