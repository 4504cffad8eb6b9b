#pragma once

// The commands of `ergon`: each command's file registers its subcommand, its options and what
// running it does; cli/main.cpp only calls these and runs the one the user chose.

#include <functional>
#include <iosfwd>
#include <utility>
#include <vector>

#include "costdb/database.h"

namespace CLI {
class App;
}

namespace ergon::app {
struct BoardOutcome;
}

namespace ergon::cli {

/// What a chosen command does once its options are parsed; returns the exit code.
using CommandRun = std::function<int()>;

/// The registered commands. Option storage lives as long as the process (a command's
/// registration keeps it in statics, as main's locals did), so a run may read it after parsing.
class Commands {
 public:
  void add(CLI::App* command, CommandRun run) { all_.emplace_back(command, std::move(run)); }
  /// The run of the subcommand the command line chose; nullptr when none was.
  [[nodiscard]] const CommandRun* chosen() const;

 private:
  std::vector<std::pair<CLI::App*, CommandRun>> all_;
};

void add_demo_command(CLI::App& app, Commands& commands);
void add_sim_command(CLI::App& app, Commands& commands);
void add_record_command(CLI::App& app, Commands& commands);
/// runs, upgrade, export.
void add_database_commands(CLI::App& app, Commands& commands);
/// attribute, costs.
void add_attribute_commands(CLI::App& app, Commands& commands);
/// plan, graph export.
void add_plan_commands(CLI::App& app, Commands& commands);
void add_validate_command(CLI::App& app, Commands& commands);
/// `argc` and `argv` become a Slurm task's command line (ergon pareto --slurm).
void add_pareto_command(CLI::App& app, Commands& commands, int argc, char** argv);
void add_models_command(CLI::App& app, Commands& commands);
/// probe list, probe read.
void add_probe_commands(CLI::App& app, Commands& commands);
void add_boards_command(CLI::App& app, Commands& commands);
void add_power_mode_command(CLI::App& app, Commands& commands);
void add_sweep_command(CLI::App& app, Commands& commands);
void add_characterize_command(CLI::App& app, Commands& commands);
void add_pipeline_command(CLI::App& app, Commands& commands);
void add_report_command(CLI::App& app, Commands& commands);
/// `argc` and `argv` go to Qt when the dashboard opens a window.
void add_dashboard_command(CLI::App& app, Commands& commands, int argc, char** argv);

/// The database's runs as a table, or only those in `only` when it is not empty.
void print_runs(costdb::Database& db, std::ostream& out, const std::vector<int64_t>& only = {});
/// One line per recorded board; failures also on stderr. 1 when any board failed.
int report_outcomes(const std::vector<app::BoardOutcome>& outcomes, std::ostream& out);

}  // namespace ergon::cli
