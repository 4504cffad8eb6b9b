// The `ergon` command: registers every command (each in its own file) and maps errors to exit
// codes. No domain logic here.

#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/commands.h"
#include "common/error.h"

int main(int argc, char** argv) {
  using namespace ergon::cli;  // NOLINT(google-build-using-namespace): the composition root
  CLI::App app{"ergon: measure and plan the energy of neural-network training on small boards"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "ergon 0.1.0");

  Commands commands;
  add_demo_command(app, commands);
  add_sim_command(app, commands);
  add_record_command(app, commands);
  add_database_commands(app, commands);
  add_attribute_commands(app, commands);
  add_plan_commands(app, commands);
  add_validate_command(app, commands);
  add_pareto_command(app, commands, argc, argv);
  add_models_command(app, commands);
  add_probe_commands(app, commands);
  add_boards_command(app, commands);
  add_power_mode_command(app, commands);
  add_sweep_command(app, commands);
  add_characterize_command(app, commands);
  add_pipeline_command(app, commands);
  add_report_command(app, commands);
  add_dashboard_command(app, commands, argc, argv);

  CLI11_PARSE(app, argc, argv);
  try {
    const CommandRun* run = commands.chosen();
    return run != nullptr ? (*run)() : 0;
  } catch (const ergon::Error& e) {
    std::cerr << "ergon: " << e.what() << "\n";
    return 1;
  }
}
