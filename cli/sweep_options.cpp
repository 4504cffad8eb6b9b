// ergon sweep: its options and run.

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
#include "cli/sweep_cmd.h"
#include "devices/board_profile.h"

namespace ergon::cli {
void add_sweep_command(CLI::App& app, Commands& commands) {
  static app::SweepRequest sweep_args;
  static bool sweep_json = false;
  auto* sweep_cmd = app.add_subcommand(
      "sweep", "record the board's profile plan in each power mode and print the energy/time curve");
  sweep_cmd->add_option("--board", sweep_args.board, "board: " + devices::board_names() + ", or a descriptor file")
      ->capture_default_str()
      ->transform(board_name_or_file());
  sweep_cmd->add_option("--modes", sweep_args.modes, "all, or a comma-separated list of the board's modes")
      ->capture_default_str();
  sweep_cmd->add_flag("--sim", sweep_args.sim, "a simulated board in this process, set to each mode in turn");
  sweep_cmd->add_option("--port", sweep_args.port, "a real board (ergon-agent, protocol v4): switched to each mode in turn");
  sweep_cmd->add_option("--threads", sweep_args.threads, "--sim: cores its kernels run on (all busy cores draw dynamic power)")
      ->capture_default_str();
  sweep_cmd->add_option("--db", sweep_args.db, kDbHelp)->capture_default_str();
  sweep_cmd->add_flag("--json", sweep_json, "print JSON");
  commands.add(sweep_cmd, [] { return run_sweep(sweep_args, sweep_json, std::cout); });
}

}  // namespace ergon::cli
