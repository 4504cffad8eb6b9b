// ergon dashboard: the desktop view (gui/).

#include "cli/options.h"
#include "cli/commands.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <thread>

#include "common/error.h"
#include "gui/dashboard.h"

namespace ergon::cli {
void add_dashboard_command(CLI::App& app, Commands& commands, int argc, char** argv) {
  static gui::DashboardOptions dashboard_args;
  static std::string screenshots;
  static int64_t dashboard_run = 0;
  auto* dashboard_cmd = app.add_subcommand(
      "dashboard", "the desktop view: Pareto fronts, schedules side by side, power traces (live), costs");
  dashboard_cmd->add_option("--db", dashboard_args.db, kDbHelp)->capture_default_str();
  dashboard_cmd->add_option("--run", dashboard_run, "the run whose power trace to show first (default: the latest)");
  dashboard_cmd->add_flag("--live", dashboard_args.live, "follow the latest run as it records");
  dashboard_cmd->add_option("--screenshots", screenshots,
                            "render every view to PNGs in this folder, without a display, and exit");
  commands.add(dashboard_cmd, [argc, argv] {
    if (dashboard_run > 0) dashboard_args.run = dashboard_run;
    if (!costdb::database_exists(dashboard_args.db))
      throw InputError("no database " + dashboard_args.db.string() + " (ergon demo makes one)");
    if (!screenshots.empty()) {
      for (const auto& f : gui::render_dashboard(dashboard_args, screenshots)) std::cout << f.string() << "\n";
      return 0;
    }
    return gui::run_dashboard(argc, argv, dashboard_args);
  });
}

}  // namespace ergon::cli
