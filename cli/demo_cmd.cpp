// ergon demo: every board simulated, recorded, attributed, planned and validated.

#include "cli/commands.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <thread>

#include "app/pareto.h"
#include "cli/options.h"
#include "cli/attribute_cmd.h"
#include "cli/plan_cmd.h"
#include "cli/record_status.h"
#include "cli/validate_cmd.h"
#include "costdb/database.h"
#include "devices/board_profile.h"
#include "devices/sim_server.h"

namespace ergon::cli {
namespace {

struct DemoArgs {
  std::string db = "ergon-demo.db";
  std::vector<std::string> boards;
  double speed = 8.0;
  std::string plan_model = "mlp";
  double plan_time_limit_s = 10;
};

int run_demo(const DemoArgs& a) {
  std::vector<devices::BoardProfile> boards;
  if (a.boards.empty()) {
    boards = devices::builtin_boards();
  } else {
    for (const auto& name : a.boards) boards.push_back(devices::board_named(name));
  }
  std::cout << fmt::format("ergon demo: {} simulated boards on pseudo-terminals -> {}\n",
                           boards.size(), a.db);
  std::vector<std::unique_ptr<devices::SimServer>> sims;
  app::RecordRequest request;
  request.db_path = a.db;
  uint64_t seed = 1;
  for (const auto& board : boards) {
    sims.push_back(devices::SimServer::open_pty(
        board, devices::SimServerOptions{.speed = a.speed, .seed = seed++}));
    sims.back()->start();
    std::cout << fmt::format("  {:<9} {} on {}\n", board.name, board.description,
                             sims.back()->link_name());
    request.ports.push_back(sims.back()->link_name());
  }
  std::cout << "recording the default profile plan of each board...\n";
  const auto outcomes = record_with_status(request, std::cout, install_interrupt_counter());
  for (auto& sim : sims) sim->stop();

  std::cout << "\n";
  const int rc = report_outcomes(outcomes, std::cout);
  std::cout << "\n";
  std::vector<int64_t> run_ids;
  for (const auto& o : outcomes)
    if (o.run_id) run_ids.push_back(*o.run_id);
  {
    auto db = costdb::Database::open_read_only(a.db);
    print_runs(db, std::cout, run_ids);
  }
  if (!run_ids.empty()) {
    std::cout << "\nattributing energy to every op (ergon attribute):\n";
    run_attribute(a.db, run_ids, false, std::cout);
  }

  // Plan a small model on one recorded board with POET's MILP, at shrinking memory budgets.
  // Costs come from the board's profile until attribution feeds the cost database (#4).
  const std::string plan_board = std::any_of(boards.begin(), boards.end(),
                                             [](const auto& b) { return b.name == "pi4"; })
                                     ? "pi4"
                                     : std::string(boards.front().name);
  std::cout << fmt::format(
      "\nplanning {} on {} with the POET MILP on the measured costs, idle power and overlapped "
      "paging included (energy vs store-all):\n",
      a.plan_model, plan_board);
  std::cout << fmt::format("  {:>7} {:>12} {:>10} {:>10} {:>8} {:>8}  {}\n", "budget", "energy",
                           "vs store", "peak", "recomp", "paged", "solver");
  std::string cost_source;
  for (const char* budget : {"100%", "75%", "50%"}) {
    PlanArgs args;
    args.model = a.plan_model;
    args.board = plan_board;
    args.budget = budget;
    args.gap = 0.01;
    args.time_limit_s = a.plan_time_limit_s;
    args.db = a.db;  // the costs just measured and attributed
    const PlanOutcome o = app::plan(args);
    cost_source = o.cost_source;
    if (!o.sim) {
      std::cout << fmt::format("  {:>7} no schedule: {}\n", budget, o.result.why);
      continue;
    }
    std::cout << fmt::format("  {:>7} {:>10.4g} J {:>+9.2f}% {:>7.1f} KiB {:>8} {:>8}  {} in {:.1f} s, gap {:.2g}%\n",
                             budget, o.sim->total_energy_j,
                             100 * (o.sim->total_energy_j / o.store_all.total_energy_j - 1),
                             static_cast<double>(o.sim->peak_bytes) / 1024, o.sim->recomputes,
                             o.sim->page_outs, planner::to_string(o.result.status),
                             o.result.solve_time_s, 100 * o.result.gap);
  }
  std::cout << "  " << cost_source << "\n";

  // A front to look at: a small sweep stored in the database (the dashboard's Pareto tab).
  {
    app::ParetoArgs sweep;
    sweep.plan.model = a.plan_model;
    sweep.plan.board = plan_board;
    sweep.plan.gap = 0.01;
    sweep.plan.time_limit_s = a.plan_time_limit_s;
    sweep.planners = "poet,paging,chen";
    sweep.budgets = 6;
    sweep.measured = true;
    sweep.db = a.db;
    const auto points = app::pareto_sweep(sweep);
    int on_front = 0;
    for (const auto& p : points) on_front += p.on_front ? 1 : 0;
    std::cout << fmt::format(
        "\nsweeping {} budgets x poet, paging, chen on the measured costs: {} plans stored, {} on their planners' "
        "fronts (ergon dashboard --db {} shows them)\n",
        sweep.budgets, points.size(), on_front, a.db);
  }

  std::cout << fmt::format("\nvalidating the 50% plan: its schedule runs step by step on a simulated {}\n",
                           plan_board);
  app::ValidateRequest v;
  v.plan.model = a.plan_model;
  v.plan.board = plan_board;
  v.plan.budget = "50%";
  v.plan.gap = 0.01;
  v.plan.time_limit_s = a.plan_time_limit_s;
  v.db = a.db;
  run_validate(v, /*json=*/false, std::cout);  // on a simulated board: it says what its error is made of
  std::cout << fmt::format(
      "\nnext: ergon runs --db {0}   ergon costs --db {0} --board {1}   "
      "ergon validate --db {0} --model resnet18-cifar --board {1} --budget 50%\n"
      "      ergon dashboard --db {0}   ergon report --db {0} --run 1 --pue 1.2\n",
      a.db, plan_board);
  return rc;
}

}  // namespace

void add_demo_command(CLI::App& app, Commands& commands) {
  static DemoArgs demo;
  auto* demo_cmd = app.add_subcommand(
      "demo", "simulate every board on a pseudo-terminal and record it into a database");
  demo_cmd->add_option("--db", demo.db, kDbHelp)->capture_default_str();
  demo_cmd->add_option("--board", demo.boards, "boards to simulate, by name or descriptor file (default: the built-in four)")
      ->transform(board_name_or_file());
  demo_cmd->add_option("--speed", demo.speed, "simulated seconds per wall second")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  demo_cmd->add_option("--plan-model", demo.plan_model, "zoo model to plan after recording")
      ->capture_default_str();
  demo_cmd->add_option("--plan-time-limit", demo.plan_time_limit_s, "seconds per plan")
      ->capture_default_str();
  commands.add(demo_cmd, [] { return run_demo(demo); });
}

}  // namespace ergon::cli
