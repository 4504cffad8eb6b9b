#include "cli/validate_cmd.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <iostream>
#include <nlohmann/json.hpp>
#include <ostream>
#include <sstream>

#include "cli/attribute_cmd.h"
#include "cli/pareto_cmd.h"
#include "cli/record.h"
#include "app/step_plans.h"
#include "common/error.h"
#include "costdb/plans.h"
#include "agent/agent.h"
#include "devices/power_control.h"
#include "devices/board_profile.h"
#include "devices/power_control.h"
#include "devices/sim_server.h"
#include "planner/schedule.h"
#include "planner/zoo.h"

namespace ergon::cli {
namespace {

ExecutedIteration executed_from(const devices::protocol::ExecutionReport& r) {
  return {.loss = std::bit_cast<float>(r.loss_bits),
          .computes = r.computes,
          .recomputes = r.recomputes,
          .paged_out_bytes = r.paged_out_bytes,
          .paged_in_bytes = r.paged_in_bytes,
          .peak_bytes = r.peak_bytes,
          .gradient_digest = r.gradient_digest};
}

void require_zoo_model(const std::string& model, const std::string& otherwise) {
  const auto& zoo = planner::zoo_models();
  if (std::none_of(zoo.begin(), zoo.end(), [&](const planner::ZooEntry& z) { return z.name == model; }))
    throw InputError("--execute runs a zoo model's tensors; '" + (model.empty() ? otherwise : model) +
                     "' is not one (see ergon models)");
}

}  // namespace

ValidateOutcome validate(const ValidateArgs& args, std::ostream& progress) {
  ValidateOutcome o;
  if (args.execute && !args.plan_id) require_zoo_model(args.plan.model, args.plan.onnx_file);
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
    graph_args.power_mode = row->power_mode;
    if (row->board_name == "measured") graph_args.db = args.db;
    o.graph = app::load_graph(graph_args, &o.cost_source);
    if (app::graph_digest(o.graph) != row->graph_digest)
      throw InputError("plan " + std::to_string(row->id) + " was made for a graph this ergon "
                       "cannot rebuild from '" + row->model + "' on " + row->board_kind +
                       " (other costs or batch size); plan it again with ergon validate --model");
    if (args.execute) require_zoo_model(row->model, row->model);
    o.schedule = planner::decode_schedule(row->schedule);
    o.plan_id = row->id;
    o.description = fmt::format("plan {}: {} on {} at {} bytes ({})", row->id, row->model,
                                row->board_kind, row->budget_bytes, row->status);
  } else {
    PlanArgs plan_args = args.plan;
    plan_args.db = args.db;
    const PlanOutcome planned = app::plan(plan_args);
    if (!planned.result.schedule) throw InputError("nothing to validate: " + planned.result.why);
    o.graph = planned.graph;
    o.schedule = *planned.result.schedule;
    o.cost_source = planned.cost_source;
    o.description = fmt::format("{} at {} ({})", planned.graph.name, args.plan.budget,
                                planner::to_string(planned.result.status));
    const bool measured = planned.costs == app::CostSource::kMeasured;
    const std::string model = args.plan.model.empty() ? planned.graph.name : args.plan.model;
    row = app::to_plan_row(planned.graph, model, args.plan.board, measured ? "measured" : "profile",
                      app::graph_digest(planned.graph), planned.request, planned.result,
                      {planned.switch_time_s, planned.switch_energy_j});
    row->power_mode = planned.power_mode;
  }
  const auto& g = o.graph;
  const std::string board_name = row->board_kind;
  // The mode the plan's costs are of: the board runs the schedule in it. Per-phase plans
  // start in the forward pass's mode and switch where the backward phase begins.
  std::string run_mode = row->power_mode;
  std::optional<std::string> backward_mode;
  if (const auto phases = app::split_phases(run_mode)) {
    if (args.execute && args.port.empty())
      throw InputError("a per-phase plan (" + run_mode + ") executed on real tensors needs a board that switches "
                       "modes (--port); without one, drop --execute to time its steps on a simulated board");
    run_mode = phases->first;
    backward_mode = phases->second;
  }
  for (const auto& node : g.nodes)
    if (node.flops == 0 && node.bytes_touched == 0 && node.time_s > 0)
      throw InputError("the graph carries no FLOP or byte counts (a graph JSON file?): a board "
                       "cannot execute it; validate a --model or --onnx graph");
  const devices::ProfilePlan steps = app::schedule_plan(g, o.schedule);
  if (steps.ops.size() > 0xFFFF)
    throw InputError("the schedule has " + std::to_string(steps.ops.size()) +
                     " steps; a run carries at most 65535");
  o.steps = static_cast<int>(steps.ops.size());
  const planner::ScheduleReport replay = planner::simulate(g, o.schedule);
  o.predicted_energy_j = replay.energy_j;  // every step's cost, as the board runs them in turn
  o.predicted_time_s = replay.compute_time_s + replay.paging_time_s;

  o.predicted_peak_bytes = replay.peak_bytes;

  const std::string model = args.plan_id ? row->model : args.plan.model;
  const int batch = args.plan_id ? 1 : args.plan.batch;

  // Run: a board on a port; without one, a simulated board behind a real pseudo-terminal,
  // or (to execute on real tensors) ergon-agent's code in this process.
  auto run_schedule = [&](const planner::Schedule& schedule, const devices::ProfilePlan& plan_steps) {
    std::unique_ptr<devices::SimServer> sim;
    RecordRequest rec;
    rec.db_path = args.db;
    rec.options.plan = plan_steps;
    rec.options.mode = devices::protocol::StartMode::kSchedule;
    rec.options.expected_board = devices::find_board(board_name);
    if (backward_mode)  // where this schedule's backward phase begins
      rec.options.phase_modes = devices::RecordOptions::PhaseSwitch{*backward_mode, app::backward_phase_entry(g, schedule)};
    if (args.execute) {
      rec.options.mode = devices::protocol::StartMode::kExecute;
      devices::ExecuteRequest e{.model = model, .batch = static_cast<uint16_t>(batch), .seed = 1, .steps = {}};
      for (const planner::Step& st : schedule.steps)
        e.steps.emplace_back(static_cast<uint8_t>(st.kind), static_cast<uint32_t>(st.node));
      rec.options.execute = std::move(e);
    }
    std::unique_ptr<agent::AgentThread> agent;
    if (!args.port.empty()) {
      rec.ports = {args.port};
      rec.options.power_mode = run_mode;  // switched first when the board is in another
    } else if (args.execute) {
      // ergon-agent's code on this machine, serving one pseudo-terminal, with a simulated
      // INA219: what executes schedules on real tensors when no board is given.
      agent::AgentOptions local;
      local.link = "pty";
      local.probe = "sim:ina219";
      agent = std::make_unique<agent::AgentThread>(local);
      rec.ports = {agent->link()};
    } else {
      const auto board = devices::board_named(board_name);
      sim = devices::SimServer::open_pty(
          board, devices::SimServerOptions{.speed = 0, .seed = 1, .power_mode = run_mode});
      sim->start();
      rec.ports = {sim->link_name()};
    }
    std::atomic<int> interrupts{0};
    std::ostringstream record_log;
    auto outcomes = record_boards(rec, record_log, interrupts);
    if (sim) sim->stop();
    if (outcomes.empty() || !outcomes[0].run_id)
      throw DeviceError("the board did not run the schedule: " +
                        (outcomes.empty() ? std::string("no outcome") : outcomes[0].error));
    if (args.execute && !outcomes[0].stats.execution)
      throw DeviceError("the board did not execute the schedule (" + outcomes[0].error +
                        "); an ergon-agent of protocol v3 executes schedules, a simulated board cannot");
    if (backward_mode) {
      // PhaseModes is not acknowledged: the board's log of the switch is the proof it ran per
      // phase (a lost frame would have run it all in the forward pass's mode).
      auto db = costdb::Database::open_read_only(args.db);
      const auto events = costdb::list_events(db, *outcomes[0].run_id);
      const std::string needle = devices::phase_switch_line(rec.options.phase_modes->switch_at, *backward_mode);
      if (std::none_of(events.begin(), events.end(),
                       [&](const costdb::RunEvent& e) { return e.text.find(needle) != std::string::npos; }))
        throw DeviceError("run " + std::to_string(*outcomes[0].run_id) + " did not switch to " + *backward_mode +
                          " for the backward phase (no such line in its events: ergon runs --events " +
                          std::to_string(*outcomes[0].run_id) + "); its figures are not of the per-phase plan");
    }
    return outcomes[0];
  };
  const auto outcome = run_schedule(o.schedule, steps);
  if (outcome.state != devices::SessionState::kCompleted)
    progress << "warning: the run ended " << outcome.error << "; validating what arrived\n";
  o.run_id = *outcome.run_id;
  if (args.execute) {
    o.executed = executed_from(*outcome.stats.execution);
    progress << "executing the store-all schedule for reference gradients\n";
    const planner::Schedule all = planner::store_all_schedule(g);
    const auto reference = run_schedule(all, app::schedule_plan(g, all));
    o.reference = executed_from(*reference.stats.execution);
    o.reference_run_id = *reference.run_id;
  }

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
    if (o.executed) {
      auto iteration = [](const ExecutedIteration& e) {
        return nlohmann::json{{"loss", e.loss},
                              {"computes", e.computes},
                              {"recomputes", e.recomputes},
                              {"paged_out_bytes", e.paged_out_bytes},
                              {"paged_in_bytes", e.paged_in_bytes},
                              {"peak_bytes", e.peak_bytes},
                              {"gradient_digest", fmt::format("{:016x}", e.gradient_digest)}};
      };
      j["executed"] = iteration(*o.executed);
      j["store_all"] = iteration(*o.reference);
      j["store_all_run_id"] = o.reference_run_id;
      j["predicted_peak_bytes"] = o.predicted_peak_bytes;
      j["gradients_match"] = o.gradients_match();
    }
    out << j.dump(2) << "\n";
    return o.executed && !o.gradients_match() ? 1 : 0;
  }
  out << fmt::format("{}, {} steps executed one by one on {}\n", o.description, o.steps,
                     !args.port.empty() ? args.port
                     : args.execute     ? "this machine (ergon-agent, real tensors)"
                                        : "a simulated board");
  out << o.cost_source << "\n";
  out << fmt::format("            predicted     measured    error\n");
  out << fmt::format("  energy  {:>10.6g} J {:>10.6g} J  {:>+6.2f} %\n", o.predicted_energy_j,
                     o.measured_energy_j, pct(o.measured_energy_j, o.predicted_energy_j));
  out << fmt::format("  time    {:>10.6g} s {:>10.6g} s  {:>+6.2f} %\n", o.predicted_time_s,
                     o.measured_time_s, pct(o.measured_time_s, o.predicted_time_s));
  out << fmt::format("  {} of {} steps attributed; plan {} and run {} stored with the validation in {}\n",
                     o.steps_attributed, o.steps, o.plan_id, o.run_id, args.db);
  if (o.executed) {
    const ExecutedIteration& e = *o.executed;
    const ExecutedIteration& r = *o.reference;
    if (args.port.empty())
      out << "executed on this machine (ergon-agent in process): its times and energies are this "
             "machine's, not the board's\n";
    out << fmt::format("  executed on real tensors: {} computes, {} recomputations, {} paged out, {} paged in\n",
                       e.computes, e.recomputes, planner::human_bytes(e.paged_out_bytes),
                       planner::human_bytes(e.paged_in_bytes));
    out << fmt::format("  activation memory held: {} (planned {}; store-all {})\n",
                       planner::human_bytes(e.peak_bytes), planner::human_bytes(o.predicted_peak_bytes),
                       planner::human_bytes(r.peak_bytes));
    out << fmt::format("  loss {:.6f}, gradients {:016x}; store-all (run {}): loss {:.6f}, gradients {:016x}\n",
                       e.loss, e.gradient_digest, o.reference_run_id, r.loss, r.gradient_digest);
    out << (o.gradients_match() ? "  gradients identical to store-all: recomputation and paging did not change the math\n"
                                : "  GRADIENTS DIFFER from store-all\n");
    return o.gradients_match() ? 0 : 1;
  }
  return 0;
}

}  // namespace ergon::cli
