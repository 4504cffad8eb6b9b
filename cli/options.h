#pragma once

// Option groups that several commands share, each defined once: a command adds the groups it
// takes and so checks and describes them the same way as every other command.

#include "app/plan.h"

namespace CLI {
class App;
class Validator;
}

namespace ergon::cli {

/// What every --db takes.
inline constexpr const char* kDbHelp =
    "cost database: an SQLite file, or a PostgreSQL database (postgresql://user@host/db or "
    "service=NAME; docs/lab.md)";

/// --model, --onnx, --onnx-input, --batch (positive); --graph too unless `graph_file` is false.
void add_graph_source(CLI::App& cmd, app::PlanArgs& args, bool graph_file = true);
/// Checks a --board value: a descriptor file (a path, or NAME.json) is loaded, and the value
/// becomes its board's name; a name passes as it is (the command says when it is unknown).
/// An InputError for a file that does not load propagates as the command's one-line error.
CLI::Validator board_name_or_file();
/// --board and --power-mode (`power_mode_help` says what the command does with a mode).
void add_board_and_mode(CLI::App& cmd, app::PlanArgs& args, const std::string& power_mode_help);
/// --budget and --deadline.
void add_budget_and_deadline(CLI::App& cmd, app::PlanArgs& args);
/// --deadline alone (a sweep chooses its own budgets).
void add_deadline(CLI::App& cmd, app::PlanArgs& args);
/// --planner (unless `planner` is false), --objective, --time-limit (positive), --gap
/// (non-negative), --threads (positive).
void add_solver(CLI::App& cmd, app::PlanArgs& args, bool planner = true);

}  // namespace ergon::cli
