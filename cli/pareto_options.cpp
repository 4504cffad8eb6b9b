// ergon pareto: its options and run.

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
#include "cli/pareto_cmd.h"

namespace ergon::cli {
void add_pareto_command(CLI::App& app, Commands& commands) {
  static ParetoArgs pareto;
  static ParetoOutput pareto_output;
  pareto.plan.gap = 0.01;  // a sweep wants many points quickly
  auto* pareto_cmd = app.add_subcommand(
      "pareto", "sweep memory budgets for several planners; store every plan; print the fronts");
  {
    auto* c = pareto_cmd;
    add_graph_source(*c, pareto.plan);
    add_board_and_mode(*c, pareto.plan,
                       "the board's power mode (see ergon plan --help); all, or MODE,MODE: a front "
                       "per planner and mode, against one deadline in seconds");
    c->add_option("--planners", pareto.planners,
                  "comma-separated: poet, checkmate, paging, store-all, chen, capuchin, "
                  "rotor, pofo")
        ->capture_default_str();
    c->add_option("--budgets", pareto.budgets,
                  "budget points from the largest working set to store-all's peak")
        ->capture_default_str()
        ->check(CLI::Range(1, 1000));
    add_deadline(*c, pareto.plan);
    add_solver(*c, pareto.plan, /*planner=*/false);
    c->add_option("--jobs", pareto.jobs, "plans solved at once (default: one per core)")
        ->check(CLI::NonNegativeNumber);
    c->add_option("--db", pareto.db, "database that stores every plan (a rerun resumes)")
        ->capture_default_str();
    c->add_flag("--fresh", pareto.fresh, "solve again even what the database holds");
    c->add_flag("--measured", pareto.measured,
                "cost the graph with the board's measurements in --db (ergon attribute) "
                "instead of its published profile");
    c->add_option("--csv", pareto_output.csv, "write every point as CSV");
    c->add_option("--json", pareto_output.json, "write every point as JSON");
  }
  commands.add(pareto_cmd, [] {
    for (const std::string& line : app::fill_defaults(pareto.plan, pareto.measured ? pareto.db : ""))
      std::cerr << line << "\n";
    return run_pareto(pareto, pareto_output, std::cout);
  });
}

}  // namespace ergon::cli
