// The `ergon` command: parses options and wires the modules together. No domain logic here.

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <memory>
#include <thread>

#include "app/quantities.h"
#include "cli/attribute_cmd.h"
#include "cli/options.h"
#include "cli/pareto_cmd.h"
#include "cli/plan_cmd.h"
#include "cli/validate_cmd.h"
#include "app/board_costs.h"
#include "cli/boards_cmd.h"
#include "cli/report_cmd.h"
#include "cli/sweep_cmd.h"
#include "cli/power_mode_cmd.h"
#include "gui/dashboard.h"
#include "cli/probe_cmd.h"
#include "cli/record.h"
#include "cli/step_plans.h"
#include "common/error.h"
#include "costdb/database.h"
#include "devices/board_profile.h"
#include "devices/sim_server.h"
#include "planner/graph_json.h"
#include "planner/zoo.h"

namespace ergon::cli {
namespace {


std::string format_time(int64_t wall_ns) {
  const std::time_t t = static_cast<std::time_t>(wall_ns / 1'000'000'000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S", &tm);
  return buf;
}

/// Prints the database's runs, or only those in `only` when it is not empty.
void print_runs(costdb::Database& db, std::ostream& out, const std::vector<int64_t>& only = {}) {
  auto runs = costdb::list_runs(db);
  if (!only.empty()) {
    std::erase_if(runs, [&](const costdb::RunSummary& r) {
      return std::find(only.begin(), only.end(), r.id) == only.end();
    });
  }
  if (runs.empty()) {
    out << "no runs in " << db.path().string() << "\n";
    return;
  }
  out << fmt::format("{:>4}  {:<12} {:<14} {:<13} {:<13} {:<20} {:>8} {:>7} {:>5} {:>6} {:>5}  {}\n",
                     "run", "board", "name", "mode", "status", "started (UTC)", "samples",
                     "spans", "sync", "lost", "crc", "source");
  for (const auto& r : runs) {
    const std::string source =
        r.power_run_id ? fmt::format("{} (power from run {})", r.source, *r.power_run_id) : r.source;
    out << fmt::format("{:>4}  {:<12} {:<14} {:<13} {:<13} {:<20} {:>8} {:>7} {:>5} {:>6} {:>5}  {}\n",
                       r.id, r.board_kind, r.board_name, r.power_mode.empty() ? "-" : r.power_mode,
                       costdb::to_string(r.status),
                       format_time(r.started_at_ns), r.samples, r.spans, r.sync_points,
                       r.counters.frames_lost, r.counters.crc_errors, source);
  }
}

int report_outcomes(const std::vector<BoardOutcome>& outcomes, std::ostream& out) {
  int failures = 0;
  for (const auto& o : outcomes) {
    const std::string run = o.run_id ? fmt::format("run {}", *o.run_id) : "no run";
    out << fmt::format("{}: {} ({}): {} spans, {} samples, {} sync points, {} frames lost, "
                       "{} CRC errors\n",
                       o.port, devices::to_string(o.state), run, o.stats.spans, o.stats.samples,
                       o.stats.sync_points, o.stats.decoder.frames_lost,
                       o.stats.decoder.crc_errors);
    if (o.state == devices::SessionState::kFailed ||
        o.state == devices::SessionState::kDisconnected) {
      std::cerr << "ergon: " << o.error << "\n";
      ++failures;
    }
  }
  return failures == 0 ? 0 : 1;
}

struct SimArgs {
  std::string board = "pi4";
  bool pty = false;
  int tcp_port = -1;
  double speed = 1.0;
  double corrupt = 0.0;
  double disconnect_after_s = 0.0;
  uint64_t seed = 1;
  std::string truth;
  bool logger = false;
  std::string power_mode;
};

int run_sim(const SimArgs& a) {
  const auto board = devices::board_named(a.board);
  devices::SimServerOptions opt{.speed = a.speed,
                                .corrupt_probability = a.corrupt,
                                .disconnect_after_s = a.disconnect_after_s,
                                .seed = a.seed,
                                .truth_csv = a.truth,
                                .logger = a.logger,
                                .power_mode = a.power_mode};
  std::unique_ptr<devices::SimServer> server =
      a.tcp_port >= 0
          ? devices::SimServer::listen_tcp(board, opt, static_cast<uint16_t>(a.tcp_port))
          : devices::SimServer::open_pty(board, opt);
  std::cout << server->link_name() << std::endl;
  if (a.logger) std::cout << server->logger_link_name() << std::endl;
  std::cerr << fmt::format("simulating {} ({}) on {}{}; Ctrl-C to stop\n", board.name,
                           board.description, server->link_name(),
                           a.logger ? ", measured by a power logger on " +
                                          server->logger_link_name() + " (its own clock)"
                                    : std::string());
  auto& interrupts = install_interrupt_counter();
  server->start();
  while (interrupts.load() == 0) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  server->stop();
  return 0;
}

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
    boards = devices::board_profiles();
  } else {
    for (const auto& name : a.boards) boards.push_back(devices::board_named(name));
  }
  std::cout << fmt::format("ergon demo: {} simulated boards on pseudo-terminals -> {}\n",
                           boards.size(), a.db);
  std::vector<std::unique_ptr<devices::SimServer>> sims;
  RecordRequest request;
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
  const auto outcomes = record_boards(request, std::cout, install_interrupt_counter());
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

  std::cout << fmt::format("\nvalidating the 50% plan: its schedule runs step by step on a simulated {}\n",
                           plan_board);
  ValidateArgs v;
  v.plan.model = a.plan_model;
  v.plan.board = plan_board;
  v.plan.budget = "50%";
  v.plan.gap = 0.01;
  v.plan.time_limit_s = a.plan_time_limit_s;
  v.db = a.db;
  run_validate(v, std::cout);
  std::cout << fmt::format(
      "\nnext: ergon runs --db {0}   ergon costs --db {0} --board pi4   "
      "ergon validate --db {0} --model resnet18-cifar --board pi4 --budget 50%\n"
      "      ergon dashboard --db {0}   ergon report --db {0} --run 1 --pue 1.2\n",
      a.db);
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ergon: measure and plan the energy of neural-network training on small boards"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "ergon 0.1.0");

  DemoArgs demo;
  auto* demo_cmd = app.add_subcommand(
      "demo", "simulate every board on a pseudo-terminal and record it into a database");
  demo_cmd->add_option("--db", demo.db, "database file")->capture_default_str();
  demo_cmd->add_option("--board", demo.boards, "boards to simulate (default: all)");
  demo_cmd->add_option("--speed", demo.speed, "simulated seconds per wall second")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  demo_cmd->add_option("--plan-model", demo.plan_model, "zoo model to plan after recording")
      ->capture_default_str();
  demo_cmd->add_option("--plan-time-limit", demo.plan_time_limit_s, "seconds per plan")
      ->capture_default_str();

  SimArgs sim;
  auto* sim_cmd = app.add_subcommand(
      "sim", "run a simulated board on a pseudo-terminal or TCP port (prints its path)");
  sim_cmd->add_option("--board", sim.board, "board: " + devices::board_names())
      ->capture_default_str();
  auto* pty_flag = sim_cmd->add_flag("--pty", sim.pty, "serve on a pseudo-terminal (default)");
  sim_cmd->add_option("--tcp", sim.tcp_port, "serve on 127.0.0.1:PORT (0: any free port)")
      ->excludes(pty_flag)
      ->check(CLI::Range(0, 65535));
  sim_cmd->add_option("--speed", sim.speed, "simulated seconds per wall second; 0 = unpaced")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  sim_cmd->add_option("--corrupt", sim.corrupt, "probability of a bit flip per byte sent")
      ->check(CLI::Range(0.0, 1.0));
  sim_cmd->add_option("--disconnect-after", sim.disconnect_after_s,
                      "drop the link this many seconds after the run starts");
  sim_cmd->add_option("--seed", sim.seed, "random seed")->capture_default_str();
  sim_cmd->add_option("--truth", sim.truth, "write the true energy of every span to this CSV");
  sim_cmd->add_flag("--logger", sim.logger,
                    "measure the board with a power logger on a second pty, on its own clock, "
                    "instead of its own monitor (prints the logger's path on a second line)")
      ->excludes("--tcp");
  sim_cmd->add_option("--power-mode", sim.power_mode,
                      "run in this power mode (default: the board's first): tx2 MAXN, "
                      "MAXP_CORE_ARM, MAXQ; pi4 1500MHz, 1000MHz, 600MHz");

  RecordRequest rec;
  std::string rec_board;
  std::string rec_db = "ergon.db";
  std::string rec_duration_text;
  int rec_loops = -1;
  auto* rec_cmd = app.add_subcommand("record", "record boards into the cost database");
  rec_cmd->add_option("--port", rec.ports, "serial device, pty path or tcp:HOST:PORT (repeatable)")
      ->required();
  rec_cmd->add_option("--board", rec_board,
                      "expected board (" + devices::board_names() + "); the board's Hello wins");
  rec_cmd->add_option("--db", rec_db, "database file")->capture_default_str();
  rec_cmd->add_option("--duration", rec_duration_text,
                      "stop after this long: 60, 60s, 500ms, 2m (loops the plan)");
  rec_cmd->add_option("--loops", rec_loops, "passes over the profile plan (default 1; 0 = "
                                            "until --duration or Ctrl-C)")
      ->check(CLI::NonNegativeNumber);
  rec_cmd->add_option("--baud", rec.baud, "serial baud rate")->capture_default_str();
  rec_cmd->add_option("--logger", rec.logger_port,
                      "a power logger on the board's supply (its own link and clock): recorded "
                      "with the board and used by ergon attribute for the board's run");
  rec_cmd->add_option("--seed", rec.options.seed, "shuffles the plan order")->capture_default_str();
  rec_cmd->add_option("--power-mode", rec.options.power_mode,
                      "switch the board to this power mode first (MAXQ, 600MHz); the run fails if it cannot");
  std::string rec_model;
  int rec_batch = 1;
  rec_cmd->add_option("--model", rec_model,
                      "profile this zoo model's own layer shapes (see ergon models) instead of "
                      "the board's default plan, so that planning it finds every node measured");
  rec_cmd->add_option("--batch", rec_batch, "batch size of --model")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);

  std::string runs_db = "ergon.db";
  auto* runs_cmd = app.add_subcommand("runs", "list the recorded runs");
  runs_cmd->add_option("--db", runs_db, "database file")->capture_default_str();
  int64_t runs_events = 0;
  runs_cmd->add_option("--events", runs_events, "print this run's event log (warnings, power-mode switches, board logs)");

  std::string export_db = "ergon.db";
  int64_t export_run = 0;
  std::string export_dir;
  std::string upgrade_db = "ergon.db";
  auto* upgrade_cmd = app.add_subcommand("upgrade", "migrate a database made by an older ergon to this one's schema");
  upgrade_cmd->add_option("--db", upgrade_db, "database file")->required()->check(CLI::ExistingFile);

  auto* export_cmd = app.add_subcommand("export", "write a run's raw data as CSV files");
  export_cmd->add_option("--db", export_db, "database file")->capture_default_str();
  export_cmd->add_option("--run", export_run, "run id (see ergon runs)")->required();
  export_cmd->add_option("--csv", export_dir, "output folder")->required();

  std::string attribute_db = "ergon.db";
  std::vector<int64_t> attribute_runs;
  bool attribute_json = false;
  auto* attribute_cmd = app.add_subcommand(
      "attribute", "turn recorded spans and power samples into per-op time and energy costs");
  attribute_cmd->add_option("--db", attribute_db, "database file")->capture_default_str();
  attribute_cmd->add_option("--run", attribute_runs, "run id(s) (see ergon runs; default: all)");
  attribute_cmd->add_flag("--json", attribute_json, "print what was found as JSON");

  CostsArgs costs;
  auto* costs_cmd = app.add_subcommand("costs", "print the attributed per-op costs");
  costs_cmd->add_option("--db", costs.db, "database file")->capture_default_str();
  costs_cmd->add_option("--board", costs.board, "only this board kind: " + devices::board_names());
  costs_cmd->add_option("--run", costs.run, "only this run");
  costs_cmd->add_option("--power-mode", costs.power_mode, "only runs in this power mode");
  costs_cmd->add_flag("--json", costs.json, "print as JSON");
  costs_cmd->add_option("--csv", costs.csv, "write CSV to this file (- for stdout)");
  costs_cmd->add_flag("--fit", costs.fit,
                      "print the board's fitted cost model (time and energy against FLOPs and "
                      "bytes) with its cross-validated error");

  PlanArgs plan;
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
  PlanOutput plan_output;
  plan_cmd->add_flag("--json", plan_output.json, "print the result as JSON");
  plan_cmd->add_option("--out", plan_output.out, "write the encoded schedule (what a board receives)");

  ValidateArgs validate_args;
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
    c->add_flag("--json", validate_args.json, "print the result as JSON");
  }

  auto* graph_cmd = app.add_subcommand("graph", "training graphs");
  graph_cmd->require_subcommand(1);
  std::string graph_out;
  auto* graph_export = graph_cmd->add_subcommand(
      "export", "write a zoo model's training graph as JSON (ergon.training-graph/1)");
  add_graph_options(graph_export);
  graph_export->add_option("--out", graph_out, "output file (- for stdout)")->required();

  ParetoArgs pareto;
  ParetoOutput pareto_output;
  pareto.graph.gap = 0.01;  // a sweep wants many points quickly
  auto* pareto_cmd = app.add_subcommand(
      "pareto", "sweep memory budgets for several planners; store every plan; print the fronts");
  {
    auto* c = pareto_cmd;
    add_graph_source(*c, pareto.graph);
    add_board_and_mode(*c, pareto.graph,
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
    add_deadline(*c, pareto.graph);
    add_solver(*c, pareto.graph, /*planner=*/false);
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

  auto* models_cmd = app.add_subcommand("models", "list the model zoo");

  auto* probe_cmd = app.add_subcommand("probe", "power monitors: list them, read one");
  probe_cmd->require_subcommand(1);
  auto* probe_list = probe_cmd->add_subcommand("list", "the power monitors on this machine, and why others are absent");
  ProbeReadArgs probe_read_args;
  auto* probe_read = probe_cmd->add_subcommand("read", "sample one power monitor with a live line");
  probe_read->add_option("--probe", probe_read_args.probe,
                         "KIND:BUS@ADDRESS,key=value: ina219:/dev/i2c-1@0x40,shunt=0.1,max=3.2 "
                         "(also ina226, ina260; options shunt, max, lsb, range, brng), or "
                         "sim:ina219,current=0.5,bus=5 for a simulated chip")
      ->required();
  probe_read->add_option("--rate", probe_read_args.rate,
                         "samples a second, or max (the chip's fastest setting the driver keeps "
                         "up with); slower rates average more")
      ->capture_default_str();
  probe_read->add_option("--duration", probe_read_args.duration, "10s, 500ms, 2m (Ctrl-C stops early)")
      ->capture_default_str();
  probe_read->add_option("--db", probe_read_args.db, "store the samples as a run in this database");

  BoardsArgs boards_args;
  auto* boards_cmd = app.add_subcommand(
      "boards", "the boards on USB (and boards in bootloaders, Jetsons in recovery, USB-I2C "
                "bridges, USB-serial adapters), each with its tty and what to run next");
  boards_cmd->add_flag("--all", boards_args.all, "every USB device, known or not");
  boards_cmd->add_flag("--json", boards_args.json, "print the list as JSON");
  boards_cmd->add_option("--sysfs", boards_args.sysfs, "where sysfs is mounted")->capture_default_str();

  PowerModeArgs power_mode_args;
  auto* power_mode_cmd = app.add_subcommand(
      "power-mode", "this machine's power modes (cpufreq, Jetson nvpmodel, GPU power limits): list or set");
  power_mode_cmd->add_option("--set", power_mode_args.set, "the mode to set: 600MHz, MAXQ, 150W");
  power_mode_cmd->add_option("--kind", power_mode_args.kind, "cpufreq, nvpmodel or nvml (when several have it)");
  power_mode_cmd->add_flag("--dry-run", power_mode_args.dry_run, "print what setting it takes, change nothing");
  power_mode_cmd->add_option("--sysfs", power_mode_args.sysfs, "where sysfs is mounted")->capture_default_str();

  SweepArgs sweep_args;
  auto* sweep_cmd = app.add_subcommand(
      "sweep", "record the board's profile plan in each power mode and print the energy/time curve");
  sweep_cmd->add_option("--board", sweep_args.board, "board: " + devices::board_names())->capture_default_str();
  sweep_cmd->add_option("--modes", sweep_args.modes, "all, or a comma-separated list of the board's modes")
      ->capture_default_str();
  sweep_cmd->add_flag("--sim", sweep_args.sim, "a simulated board in this process, set to each mode in turn");
  sweep_cmd->add_option("--port", sweep_args.port, "a real board (ergon-agent, protocol v4): switched to each mode in turn");
  sweep_cmd->add_option("--threads", sweep_args.threads, "--sim: cores its kernels run on (all busy cores draw dynamic power)")
      ->capture_default_str();
  sweep_cmd->add_option("--db", sweep_args.db, "database file")->capture_default_str();
  sweep_cmd->add_flag("--json", sweep_args.json, "print JSON");

  ReportArgs report_args;
  int64_t report_run = 0, report_plan = 0;
  double report_grid = -1;
  auto* report_cmd = app.add_subcommand(
      "report", "an energy statement for a run or a plan: energy, time, power, idle share, PUE, emissions");
  report_cmd->add_option("--db", report_args.db, "database file")->capture_default_str();
  report_cmd->add_option("--run", report_run, "a recorded run (its measured power)");
  report_cmd->add_option("--plan", report_plan, "a stored plan (its predicted energy per iteration)");
  report_cmd->add_option("--iterations", report_args.iterations, "iterations of a plan to account for")
      ->capture_default_str();
  report_cmd->add_option("--pue", report_args.pue, "the data centre's power usage effectiveness")
      ->capture_default_str();
  report_cmd->add_option("--pue-profile", report_args.pue_profile,
                         "CSV of period,pue[,gco2_per_kwh] rows: what-ifs for other hours or months");
  report_cmd->add_option("--grid-gco2-per-kwh", report_grid, "the grid's carbon intensity");
  report_cmd->add_flag("--json", report_args.json, "print JSON instead of Markdown");

  gui::DashboardOptions dashboard_args;
  std::string screenshots;
  int64_t dashboard_run = 0;
  auto* dashboard_cmd = app.add_subcommand(
      "dashboard", "the desktop view: Pareto fronts, schedules side by side, power traces (live), costs");
  dashboard_cmd->add_option("--db", dashboard_args.db, "database file")->capture_default_str();
  dashboard_cmd->add_option("--run", dashboard_run, "the run whose power trace to show first (default: the latest)");
  dashboard_cmd->add_flag("--live", dashboard_args.live, "follow the latest run as it records");
  dashboard_cmd->add_option("--screenshots", screenshots,
                            "render every view to PNGs in this folder, without a display, and exit");

  CLI11_PARSE(app, argc, argv);

  try {
    if (*demo_cmd) return run_demo(demo);
    if (*sim_cmd) return run_sim(sim);
    if (*rec_cmd) {
      if (!rec_board.empty()) rec.options.expected_board = devices::board_named(rec_board);
      if (!rec_model.empty()) {
        // Shapes only: the costs the graph is built with do not matter here.
        const auto shapes_board = rec.options.expected_board.value_or(devices::board_named("pi4"));
        const auto graph = planner::build_training_graph(planner::zoo_model(rec_model, rec_batch),
                                                         app::BoardProfileCosts(shapes_board));
        rec.options.plan = model_profile_plan(graph, rec.options.seed);
        std::cerr << fmt::format("profiling {} batch {}: {} plan entries\n", rec_model, rec_batch,
                                 rec.options.plan->ops.size());
      }
      const double rec_duration =
          rec_duration_text.empty() ? 0 : app::Duration::parse(rec_duration_text, "--duration").seconds;
      if (rec_duration > 0) rec.options.duration_s = rec_duration;
      rec.options.loops = static_cast<uint16_t>(rec_loops >= 0 ? rec_loops
                                                : rec_duration > 0 ? 0
                                                                   : 1);
      if (rec.options.loops == 0 && rec_duration <= 0)
        std::cerr << "recording until Ctrl-C\n";
      rec.db_path = rec_db;
      const auto outcomes = record_boards(rec, std::cout, install_interrupt_counter());
      return report_outcomes(outcomes, std::cout);
    }
    if (*plan_cmd) return run_plan(plan, plan_output, std::cout);
    if (*attribute_cmd) return run_attribute(attribute_db, attribute_runs, attribute_json, std::cout);
    if (*costs_cmd) return run_costs(costs, std::cout);
    if (*validate_cmd) return run_validate(validate_args, std::cout);
    if (*pareto_cmd) return run_pareto(pareto, pareto_output, std::cout);
    if (*graph_export) {
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
    }
    if (*probe_list) return run_probe_list(std::cout);
    if (*sweep_cmd) return run_sweep(sweep_args, std::cout);
    if (*power_mode_cmd) return run_power_mode(power_mode_args, std::cout);
    if (*report_cmd) {
      if (report_run > 0) report_args.run = report_run;
      if (report_plan > 0) report_args.plan = report_plan;
      if (report_grid >= 0) report_args.grid_gco2_per_kwh = report_grid;
      return run_report(report_args, std::cout);
    }
    if (*dashboard_cmd) {
      if (dashboard_run > 0) dashboard_args.run = dashboard_run;
      if (!std::filesystem::exists(dashboard_args.db))
        throw InputError("no database " + dashboard_args.db.string() + " (ergon demo makes one)");
      if (!screenshots.empty()) {
        for (const auto& f : gui::render_dashboard(dashboard_args, screenshots)) std::cout << f.string() << "\n";
        return 0;
      }
      return gui::run_dashboard(argc, argv, dashboard_args);
    }
    if (*boards_cmd) {
      const auto usb = devices::libusb_device_source();
      return run_boards(boards_args, *usb, std::cout);
    }
    if (*probe_read) return run_probe_read(probe_read_args, std::cout, install_interrupt_counter());
    if (*models_cmd) {
      for (const auto& m : planner::zoo_models())
        std::cout << fmt::format("{:<18} {}\n", m.name, m.description);
      return 0;
    }
    if (*runs_cmd) {
      auto db = costdb::Database::open_read_only(runs_db);
      if (runs_events > 0) {
        if (!costdb::find_run(db, runs_events))
          throw InputError(fmt::format("no run {} in {}", runs_events, runs_db));
        for (const auto& e : costdb::list_events(db, runs_events))
          std::cout << fmt::format("{:<16} {}\n", e.kind, e.text);
        return 0;
      }
      print_runs(db, std::cout);
      return 0;
    }
    if (*upgrade_cmd) {
      const int before = costdb::Database::file_schema_version(upgrade_db);
      auto db = costdb::Database::open(upgrade_db);
      std::cout << (before == db.schema_version()
                        ? fmt::format("{} is at schema version {} already\n", upgrade_db, before)
                        : fmt::format("{}: schema version {} -> {}\n", upgrade_db, before, db.schema_version()));
      return 0;
    }
    if (*export_cmd) {
      auto db = costdb::Database::open_read_only(export_db);
      costdb::export_run_csv(db, export_run, export_dir);
      std::cout << fmt::format("wrote run {} to {}/ (ops, spans, samples, sync, events .csv)\n",
                               export_run, export_dir);
      return 0;
    }
  } catch (const Error& e) {
    std::cerr << "ergon: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace ergon::cli

int main(int argc, char** argv) { return ergon::cli::main(argc, argv); }
