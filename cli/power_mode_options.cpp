// ergon power-mode: its options and run.

#include "cli/commands.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <thread>

#include "cli/power_mode_cmd.h"

namespace ergon::cli {
void add_power_mode_command(CLI::App& app, Commands& commands) {
  static PowerModeArgs power_mode_args;
  auto* power_mode_cmd = app.add_subcommand(
      "power-mode", "this machine's power modes (cpufreq, Jetson nvpmodel, GPU power limits): list or set");
  power_mode_cmd->add_option("--set", power_mode_args.set, "the mode to set: 600MHz, MAXQ, 150W");
  power_mode_cmd->add_option("--kind", power_mode_args.kind, "cpufreq, nvpmodel or nvml (when several have it)");
  power_mode_cmd->add_flag("--dry-run", power_mode_args.dry_run, "print what setting it takes, change nothing");
  power_mode_cmd->add_option("--sysfs", power_mode_args.sysfs, "where sysfs is mounted")->capture_default_str();
  commands.add(power_mode_cmd, [] { return run_power_mode(power_mode_args, std::cout); });
}

}  // namespace ergon::cli
