#include "cli/options.h"

#include <cmath>

#include <CLI/CLI.hpp>

#include "common/error.h"
#include "devices/board_profile.h"

namespace ergon::cli {
namespace {

/// A number above 0 (or at least 0), said in one short line when it is not.
CLI::Validator number_at_least(bool zero_allowed) {
  return CLI::Validator(
      [zero_allowed](std::string& text) -> std::string {
        double value = 0;
        try {
          std::size_t used = 0;
          value = std::stod(text, &used);
          if (used != text.size()) return "'" + text + "' is not a number";
        } catch (const std::exception&) {
          return "'" + text + "' is not a number";
        }
        if (!std::isfinite(value)) return "'" + text + "' is not a finite number";
        if (zero_allowed ? value < 0 : value <= 0)
          return "must be " + std::string(zero_allowed ? "0 or more" : "above 0") + ", not " + text;
        return {};
      },
      zero_allowed ? "NONNEGATIVE" : "POSITIVE");
}

}  // namespace

CLI::Validator board_name_or_file() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        // A descriptor file becomes its board's name: the rest of the command (and the
        // database) knows boards by name, and the file's board stays known by it.
        if (!devices::is_board_file(text)) return {};
        try {
          text = devices::board_named(text).name;
        } catch (const InputError& e) {
          return e.what();
        }
        return {};
      },
      "NAME|FILE");
}

void add_graph_source(CLI::App& cmd, app::PlanArgs& args, bool graph_file) {
  cmd.add_option("--model", args.model, "zoo model (see ergon models)");
  cmd.add_option("--onnx", args.onnx_file, "forward graph from an ONNX file (PyTorch export)");
  cmd.add_option("--onnx-input", args.onnx_inputs,
                 "the ONNX file's data input, where its weights are graph inputs the importer "
                 "cannot tell from data (repeat for several)");
  if (graph_file)
    cmd.add_option("--graph", args.graph_file, "training graph JSON (ergon.training-graph/1)");
  cmd.add_option("--batch", args.batch, "batch size of a zoo or ONNX model")
      ->capture_default_str()
      ->check(number_at_least(false));
}

void add_board_and_mode(CLI::App& cmd, app::PlanArgs& args, const std::string& power_mode_help) {
  args.board.clear();  // the command fills it (app::fill_defaults)
  cmd.add_option("--board", args.board,
                 "board whose costs to use: " + devices::board_names() +
                     ", or a descriptor file (default: the only board with costs in --db, else pi4)")
      ->transform(board_name_or_file());
  cmd.add_option("--power-mode", args.power_mode, power_mode_help);
  cmd.add_option("--costs", args.costs,
                 "with --db: profile (ergon record's windows), or iteration: shapes that the store-all schedule "
                 "timed inside training iterations (ergon validate --execute --port --budget 100% first) take "
                 "those times, at the profile's power; the rest, paging included, the profile's")
      ->check(CLI::IsMember({"profile", "iteration"}))
      ->capture_default_str();
}

void add_deadline(CLI::App& cmd, app::PlanArgs& args) {
  cmd.add_option("--deadline", args.deadline,
                 "iteration time (makespan; compute only under poet): factor of one pass (1.3x), "
                 "seconds (0.2s) or none")
      ->capture_default_str();
}

void add_budget_and_deadline(CLI::App& cmd, app::PlanArgs& args) {
  cmd.add_option("--budget", args.budget,
                 "memory, fixed bytes included (activations only under poet): bytes (3000000), "
                 "units (2MiB, 1.5MB), or % of store-all's activations (fixed bytes added)")
      ->capture_default_str();
  add_deadline(cmd, args);
}

void add_solver(CLI::App& cmd, app::PlanArgs& args, bool planner) {
  if (planner)
    cmd.add_option("--planner", args.planner,
                   "poet (recompute and page), checkmate (recompute only), paging (page only), "
                   "store-all, chen (sqrt(n) checkpoints), capuchin (swap/recompute heuristic), "
                   "rotor (chain DP, recompute only), pofo (rotor with paging), page-all (vDNN's offload-all; "
                   "executed, the paging calibration of --costs iteration)")
        ->capture_default_str();
  args.objective.clear();  // the command fills it (app::fill_defaults)
  cmd.add_option("--objective", args.objective,
                 "total: transfers overlap compute and stall beyond the storage bandwidth, idle "
                 "power over the makespan, fixed bytes in the budget; poet: POET's MILP (ICML "
                 "2022) as published; time: the least iteration time under total's model, energy "
                 "not planned (default: total, or time for a board whose costs in --db are times "
                 "only and that has no published power profile)");
  cmd.add_option("--time-limit", args.time_limit_s, "solver time limit, seconds")
      ->capture_default_str()
      ->check(number_at_least(false));
  cmd.add_option("--gap", args.gap,
                 "relative optimality gap to prove (default: 0.001 on published profiles; on measured costs their "
                 "1-sigma uncertainty in one pass's energy, within 0.001 to 0.05)")
      ->check(number_at_least(true));
  cmd.add_option("--threads", args.threads,
                 "solver threads: CBC's; with 2 or more the greedy search runs its two searches at once")
      ->capture_default_str()
      ->check(CLI::Range(1, 1024));
}

}  // namespace ergon::cli
