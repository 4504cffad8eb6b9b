// ergon plan and ergon graph export: one graph source, one set of options.

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
#include "cli/plan_cmd.h"
#include "common/error.h"
#include "planner/graph_json.h"

namespace ergon::cli {
void add_plan_commands(CLI::App& app, Commands& commands) {
  static PlanArgs plan;
  const std::string plan_mode_help =
      "the board's power mode (costs differ by mode): measured costs of runs in that mode, or "
      "the profile scaled to it (see ergon sim --help); FWD/BWD (1500MHz/1000MHz): the forward "
      "pass in one mode, the backward pass in another, two switches per iteration; auto: plan in "
      "every mode (and per-phase pair, where switching is cheap) and keep the least energy that "
      "meets the deadline";
  auto add_graph_options = [&](CLI::App* cmd) {
    add_graph_source(*cmd, plan);
    add_board_and_mode(*cmd, plan, plan_mode_help);
    cmd->add_option("--db", plan.db,
                    "take the board's measured costs from this database (ergon attribute); "
                    "default: its published profile");
  };
  auto* plan_cmd = app.add_subcommand(
      "plan", "find the minimum-energy schedule under a memory budget and a deadline");
  add_graph_options(plan_cmd);
  add_budget_and_deadline(*plan_cmd, plan);
  add_solver(*plan_cmd, plan);
  static PlanOutput plan_output;
  plan_cmd->add_flag("--json", plan_output.json, "print the result as JSON");
  plan_cmd->add_option("--out", plan_output.out, "write the encoded schedule (what a board receives)");
  commands.add(plan_cmd, [] {
    for (const std::string& line : app::fill_defaults(plan, plan.db)) std::cerr << line << "\n";
    return run_plan(plan, plan_output, std::cout);
  });

  auto* graph_cmd = app.add_subcommand("graph", "training graphs");
  graph_cmd->require_subcommand(1);
  static std::string graph_out;
  auto* graph_export = graph_cmd->add_subcommand(
      "export", "write a zoo model's training graph as JSON (ergon.training-graph/1)");
  add_graph_options(graph_export);
  graph_export->add_option("--out", graph_out, "output file (- for stdout)")->required();
  commands.add(graph_export, [] {
    for (const std::string& line : app::fill_defaults(plan, plan.db)) std::cerr << line << "\n";
    if (app::split_phases(plan.power_mode))
      throw InputError("a graph file carries one power mode's costs; export each mode (--power-mode MODE)");
    const auto graph = app::load_graph(plan);
    if (graph_out == "-") {
      std::cout << planner::to_graph_json(graph);
    } else {
      planner::write_graph_json(graph, graph_out);
      std::cerr << fmt::format("wrote {} ({} nodes, {} edges)\n", graph_out, graph.size(),
                               graph.edges.size());
    }
    return 0;
  });
}

}  // namespace ergon::cli
