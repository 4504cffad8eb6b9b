// ergon attribute and ergon costs: their options and runs.

#include "cli/commands.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <thread>

#include "cli/options.h"
#include "cli/attribute_cmd.h"
#include "devices/board_profile.h"

namespace ergon::cli {
void add_attribute_commands(CLI::App& app, Commands& commands) {
  static std::string attribute_db = "ergon.db";
  static std::vector<int64_t> attribute_runs;
  static bool attribute_json = false;
  auto* attribute_cmd = app.add_subcommand(
      "attribute", "turn recorded spans and power samples into per-op time and energy costs");
  attribute_cmd->add_option("--db", attribute_db, kDbHelp)->capture_default_str();
  attribute_cmd->add_option("--run", attribute_runs, "run id(s) (see ergon runs; default: all)");
  attribute_cmd->add_flag("--json", attribute_json, "print what was found as JSON");

  static CostsArgs costs;
  auto* costs_cmd = app.add_subcommand("costs", "print the attributed per-op costs");
  costs_cmd->add_option("--db", costs.db, kDbHelp)->capture_default_str();
  costs_cmd->add_option("--board", costs.board, "only this board kind: " + devices::board_names())
      ->transform(board_name_or_file());
  costs_cmd->add_option("--run", costs.run, "only this run");
  costs_cmd->add_option("--power-mode", costs.power_mode, "only runs in this power mode");
  costs_cmd->add_flag("--json", costs.json, "print as JSON");
  costs_cmd->add_option("--csv", costs.csv, "write CSV to this file (- for stdout)");
  costs_cmd->add_flag("--fit", costs.fit,
                      "print the board's fitted cost model (time and energy against FLOPs and "
                      "bytes) with its cross-validated error");
  costs_cmd->add_flag("--links", costs.links,
                      "print the boards' link costs instead (from ergon record --link-test): rate, one-way "
                      "latency and energy per byte above idle, per link kind and direction");
  commands.add(attribute_cmd, [] { return run_attribute(attribute_db, attribute_runs, attribute_json, std::cout); });
  commands.add(costs_cmd, [] { return run_costs(costs, std::cout); });
}

}  // namespace ergon::cli
