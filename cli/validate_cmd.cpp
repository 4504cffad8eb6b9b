#include "cli/validate_cmd.h"

#include <fmt/format.h>

#include <atomic>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

#include "cli/attribute_cmd.h"
#include "cli/pareto_cmd.h"
#include "cli/record.h"
#include "cli/step_plans.h"
#include "common/error.h"
#include "costdb/plans.h"
#include "devices/board_profile.h"
#include "devices/sim_server.h"
#include "planner/schedule.h"

namespace ergon::cli {

ValidateOutcome validate(const ValidateArgs& args, std::ostream& progress) {
  ValidateOutcome o;
  std::optional<costdb::PlanRow> row;
  if (args.plan_id) {
    // A stored plan: rebuild the graph it was made for and check it is the same one.
    auto db = costdb::Database::open_read_only(args.db);
    row = costdb::find_plan_by_id(db, *args.plan_id);
    if (!row) throw InputError("no plan " + std::to_string(*args.plan_id) + " in " + args.db);
    if (row->schedule.empty())
      throw InputError("plan " + std::to_string(row->id) + " has no schedule (" + row->status + ")");
    PlanArgs graph_args;
    graph_args.model = row->model;
    graph_args.board = row->board_kind;
    if (row->board_name == "measured") graph_args.db = args.db;
    o.graph = load_graph(graph_args, &o.cost_source);
    if (graph_digest(o.graph) != row->graph_digest)
      throw InputError("plan " + std::to_string(row->id) + " was made for a graph this ergon "
                       "cannot rebuild from '" + row->model + "' on " + row->board_kind +
                       " (other costs or batch size); plan it again with ergon validate --model");
    o.schedule = planner::decode_schedule(row->schedule);
    o.plan_id = row->id;
    o.description = fmt::format("plan {}: {} on {} at {} bytes ({})", row->id, row->model,
                                row->board_kind, row->budget_bytes, row->status);
  } else {
    PlanArgs plan_args = args.plan;
    plan_args.db = args.db;
    const PlanOutcome planned = plan(plan_args, false);
    if (!planned.result.schedule) throw InputError("nothing to validate: " + planned.result.why);
    o.graph = planned.graph;
    o.schedule = *planned.result.schedule;
    o.cost_source = planned.cost_source;
    o.description = fmt::format("{} at {} ({})", planned.graph.name, args.plan.budget,
                                planner::to_string(planned.result.status));
    const bool measured = planned.cost_source.starts_with("costs: measured");
    const std::string model = args.plan.model.empty() ? planned.graph.name : args.plan.model;
    row = to_plan_row(planned.graph, model, args.plan.board, measured ? "measured" : "profile",
                      graph_digest(planned.graph), planned.request, planned.result);
  }
  const auto& g = o.graph;
  const std::string board_name = row->board_kind;
  for (const auto& node : g.nodes)
    if (node.flops == 0 && node.bytes_touched == 0 && node.time_s > 0)
      throw InputError("the graph carries no FLOP or byte counts (a graph JSON file?): a board "
                       "cannot execute it; validate a --model or --onnx graph");
  const devices::ProfilePlan steps = schedule_plan(g, o.schedule);
  if (steps.ops.size() > 0xFFFF)
    throw InputError("the schedule has " + std::to_string(steps.ops.size()) +
                     " steps; a run carries at most 65535");
  o.steps = static_cast<int>(steps.ops.size());
  const planner::ScheduleReport replay = planner::simulate(g, o.schedule);
  o.predicted_energy_j = replay.energy_j;  // every step's cost, as the board runs them in turn
  o.predicted_time_s = replay.compute_time_s + replay.paging_time_s;

  // Execute: a board on a port, or a simulated one behind a real pseudo-terminal.
  std::unique_ptr<devices::SimServer> sim;
  RecordRequest rec;
  rec.db_path = args.db;
  rec.options.plan = steps;
  rec.options.mode = devices::protocol::StartMode::kSchedule;
  rec.options.expected_board = devices::find_board(board_name);
  if (args.port.empty()) {
    const auto board = devices::find_board(board_name);
    if (!board) throw InputError("unknown board '" + board_name + "'");
    sim = devices::SimServer::open_pty(
        *board, devices::SimServerOptions{.speed = 0, .seed = 1,
                                          .power_mode = args.plan.power_mode});
    sim->start();
    rec.ports = {sim->link_name()};
  } else {
    rec.ports = {args.port};
  }
  std::atomic<int> interrupts{0};
  std::ostringstream record_log;
  const auto outcomes = record_boards(rec, record_log, interrupts);
  if (sim) sim->stop();
  if (outcomes.empty() || !outcomes[0].run_id)
    throw DeviceError("the board did not run the schedule: " +
                      (outcomes.empty() ? std::string("no outcome") : outcomes[0].error));
  if (outcomes[0].state != devices::SessionState::kCompleted)
    progress << "warning: the run ended " << outcomes[0].error << "; validating what arrived\n";
  o.run_id = *outcomes[0].run_id;

  auto db = costdb::Database::open(args.db);
  const AttributedRun attributed = attribute_run(db, o.run_id);
  for (const auto& w : attributed.attribution.windows) {
    if (!w.covered) continue;
    ++o.steps_attributed;
    o.measured_energy_j += w.gross_energy_j;
    o.measured_time_s += w.time_s;
  }
  if (o.plan_id == 0) o.plan_id = costdb::add_plan(db, *row);
  costdb::ValidationRow v;
  v.plan_id = o.plan_id;
  v.run_id = o.run_id;
  v.predicted_energy_j = o.predicted_energy_j;
  v.measured_energy_j = o.measured_energy_j;
  v.predicted_time_s = o.predicted_time_s;
  v.measured_time_s = o.measured_time_s;
  v.predicted_peak_bytes = replay.peak_bytes;
  costdb::add_validation(db, v);
  db.commit_batch();
  return o;
}

int run_validate(const ValidateArgs& args, std::ostream& out) {
  const ValidateOutcome o = validate(args, std::cerr);
  auto pct = [](double measured, double predicted) {
    return predicted > 0 ? 100 * (measured / predicted - 1) : 0.0;
  };
  if (args.json) {
    nlohmann::json j;
    j["plan_id"] = o.plan_id;
    j["run_id"] = o.run_id;
    j["costs"] = o.cost_source;
    j["steps"] = o.steps;
    j["steps_attributed"] = o.steps_attributed;
    j["predicted"] = {{"energy_j", o.predicted_energy_j}, {"time_s", o.predicted_time_s}};
    j["measured"] = {{"energy_j", o.measured_energy_j}, {"time_s", o.measured_time_s}};
    j["energy_error_pct"] = pct(o.measured_energy_j, o.predicted_energy_j);
    j["time_error_pct"] = pct(o.measured_time_s, o.predicted_time_s);
    out << j.dump(2) << "\n";
    return 0;
  }
  out << fmt::format("{}, {} steps executed one by one on {}\n", o.description, o.steps,
                     args.port.empty() ? "a simulated board" : args.port);
  out << o.cost_source << "\n";
  out << fmt::format("            predicted     measured    error\n");
  out << fmt::format("  energy  {:>10.6g} J {:>10.6g} J  {:>+6.2f} %\n", o.predicted_energy_j,
                     o.measured_energy_j, pct(o.measured_energy_j, o.predicted_energy_j));
  out << fmt::format("  time    {:>10.6g} s {:>10.6g} s  {:>+6.2f} %\n", o.predicted_time_s,
                     o.measured_time_s, pct(o.measured_time_s, o.predicted_time_s));
  out << fmt::format("  {} of {} steps attributed; plan {} and run {} stored with the validation in {}\n",
                     o.steps_attributed, o.steps, o.plan_id, o.run_id, args.db);
  return 0;
}

}  // namespace ergon::cli
