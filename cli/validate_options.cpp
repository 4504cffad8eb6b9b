// ergon validate: its options and run.

#include "cli/commands.h"

#include <CLI/CLI.hpp>

#include <iostream>

#include "cli/options.h"
#include "cli/validate_cmd.h"

namespace ergon::cli {
void add_validate_command(CLI::App& app, Commands& commands) {
  static app::ValidateRequest validate_args;
  static bool validate_json = false;
  auto* validate_cmd = app.add_subcommand(
      "validate", "plan, run the schedule on a board (default: a simulated one), and compare "
                  "predicted with measured energy and time");
  {
    auto* c = validate_cmd;
    add_graph_source(*c, validate_args.plan, /*graph_file=*/false);
    add_board_and_mode(*c, validate_args.plan,
                       "the board's power mode: costs of that mode, and the simulator runs in it "
                       "(FWD/BWD: per phase, the board switching where the backward pass begins)");
    add_budget_and_deadline(*c, validate_args.plan);
    add_solver(*c, validate_args.plan);
    c->add_option("--db", validate_args.db,
                  "measured costs come from here; plan, run and validation are stored here")
        ->capture_default_str();
    c->add_option("--port", validate_args.port, "a board running the agent (default: simulator)");
    c->add_option("--plan", validate_args.plan_id,
                  "validate this stored plan (an id from ergon pareto or an earlier validate)");
    c->add_flag("--execute", validate_args.execute,
                "run the schedule on real tensors of the zoo model (ergon-agent; without --port, "
                "in this process), then store-all, and check the gradients are identical");
    c->add_option("--iterations", validate_args.iterations,
                  "timed iterations, compared by their median (default: 5 on a board or with --execute, "
                  "1 on the simulated board; a per-phase plan runs 1)")
        ->check(CLI::Range(1, 1000));
    c->add_flag("--json", validate_json, "print the result as JSON");
  }
  commands.add(validate_cmd, [] {
    if (!validate_args.plan_id)
      for (const std::string& line : app::fill_defaults(validate_args.plan, validate_args.db))
        std::cerr << line << "\n";
    return run_validate(validate_args, validate_json, std::cout);
  });
}

}  // namespace ergon::cli
