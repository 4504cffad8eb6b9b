// ergon record: boards into the cost database.

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
#include "app/board_costs.h"
#include "app/quantities.h"
#include "app/step_plans.h"
#include "cli/record_status.h"
#include "common/error.h"
#include "devices/board_profile.h"
#include "devices/link_profile.h"
#include "planner/zoo.h"

namespace ergon::cli {
int report_outcomes(const std::vector<app::BoardOutcome>& outcomes, std::ostream& out) {
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


void add_record_command(CLI::App& app, Commands& commands) {
  static app::RecordRequest rec;
  static std::string rec_board;
  static std::string rec_db = "ergon.db";
  static std::string rec_duration_text;
  static int rec_loops = -1;
  auto* rec_cmd = app.add_subcommand("record", "record boards into the cost database");
  rec_cmd->add_option("--port", rec.ports, "serial device, pty path or tcp:HOST:PORT (repeatable)")
      ->required();
  rec_cmd->add_option("--board", rec_board,
                      "expected board (" + devices::board_names() +
                          ", or a descriptor file); the board's Hello wins")
      ->transform(board_name_or_file());
  rec_cmd->add_option("--db", rec_db, kDbHelp)->capture_default_str();
  rec_cmd->add_option("--duration", rec_duration_text,
                      "stop after this long: 60, 60s, 500ms, 2m (loops the plan)");
  rec_cmd->add_option("--loops", rec_loops, "passes over the profile plan (default 1; 0 = "
                                            "until --duration or Ctrl-C)")
      ->check(CLI::NonNegativeNumber);
  rec_cmd->add_option("--baud", rec.baud, "serial baud rate")->capture_default_str();
  rec_cmd->add_option("--logger", rec.logger_port,
                      "a power logger on the board's supply (its own link and clock): recorded "
                      "with the board and used by ergon attribute for the board's run");
  rec_cmd->add_option("--host-probe", rec.host_probe,
                      "a power monitor this host reads on the board's supply (ppk2:/dev/ttyACM1,vdd=3000, "
                      "sigrok:DRIVER@CONN,...): recorded as a power logger's run on the host's clock, linked to "
                      "the board's run")
      ->excludes("--logger");
  rec_cmd->add_option("--seed", rec.options.seed, "shuffles the plan order")->capture_default_str();
  rec_cmd->add_option("--power-mode", rec.options.power_mode,
                      "switch the board to this power mode first (MAXQ, 600MHz); the run fails if it cannot");
  static std::string rec_model;
  static int rec_batch = 1;
  rec_cmd->add_option("--model", rec_model,
                      "profile this zoo model's own layer shapes (see ergon models) instead of "
                      "the board's default plan, so that planning it finds every node measured");
  rec_cmd->add_option("--batch", rec_batch, "batch size of --model")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  rec_cmd->add_flag("--link-test", rec.options.link_test,
                    "measure the board's link instead of its ops: transfers of three sizes each way "
                    "(protocol v6), stored under --link-kind; ergon attribute fits them into link costs "
                    "that ergon pipeline --db uses");
  rec_cmd->add_option("--link-kind", rec.options.link,
                      "what the link is, for --link-test: " + devices::link_names() +
                          ", or a name of your own (default: ethernet for tcp: ports, else the board's: "
                          "ethernet for pi4 and tx2, uart-1m for a microcontroller)");
  commands.add(rec_cmd, [] {
    if (!rec_board.empty()) rec.options.expected_board = devices::board_named(rec_board);
    if (!rec.options.link.empty() && !rec.options.link_test)
      throw InputError("--link-kind names the link of a --link-test; add --link-test");
    if (rec.options.link_test) {
      if (!rec_model.empty()) throw InputError("--link-test measures the link, not a model: drop --model");
      if (rec.options.link.empty())
        std::cerr << "link: not named (--link-kind): stored as ethernet for a tcp: port, else the board's "
                     "default (ethernet for pi4 and tx2, uart-1m for a microcontroller)\n";
    }
    if (!rec_model.empty()) {
      // Shapes only: the costs the graph is built with do not matter here.
      const auto shapes_board = rec.options.expected_board.value_or(devices::board_named("pi4"));
      const auto graph = planner::build_training_graph(planner::zoo_model(rec_model, rec_batch),
                                                       app::BoardProfileCosts(shapes_board));
      rec.options.plan = app::model_profile_plan(graph, rec.options.seed);
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
    const auto outcomes = record_with_status(rec, std::cout, install_interrupt_counter());
    return report_outcomes(outcomes, std::cout);
  });
}

}  // namespace ergon::cli
