// ergon report: its options and run.

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

#include "cli/report_cmd.h"

namespace ergon::cli {
void add_report_command(CLI::App& app, Commands& commands) {
  static app::ReportRequest report_args;
  static bool report_json = false;
  static int64_t report_run = 0, report_plan = 0;
  static double report_grid = -1;
  auto* report_cmd = app.add_subcommand(
      "report", "an energy statement for a run or a plan: energy, time, power, idle share, PUE, emissions");
  report_cmd->add_option("--db", report_args.db, kDbHelp)->capture_default_str();
  report_cmd->add_option("--run", report_run, "a recorded run (its measured power)");
  report_cmd->add_option("--plan", report_plan, "a stored plan (its predicted energy per iteration)");
  report_cmd->add_option("--iterations", report_args.iterations, "iterations of a plan to account for")
      ->capture_default_str();
  report_cmd->add_option("--pue", report_args.pue, "the data centre's power usage effectiveness")
      ->capture_default_str();
  report_cmd->add_option("--pue-profile", report_args.pue_profile,
                         "CSV of period,pue[,gco2_per_kwh] rows: what-ifs for other hours or months");
  report_cmd->add_option("--grid-gco2-per-kwh", report_grid, "the grid's carbon intensity");
  report_cmd->add_flag("--json", report_json, "print JSON instead of Markdown");
  commands.add(report_cmd, [] {
    if (report_run > 0) report_args.run = report_run;
    if (report_plan > 0) report_args.plan = report_plan;
    if (report_grid >= 0) report_args.grid_gco2_per_kwh = report_grid;
    return run_report(report_args, report_json, std::cout);
  });
}

}  // namespace ergon::cli
