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
#include "common/error.h"
#include "costdb/plans.h"
#include "devices/board_profile.h"
#include "devices/sim_server.h"

namespace ergon::cli {
namespace {

/// The op kind a board runs a node as; kinds the wire has no code for run as generic work
/// (the board only needs FLOPs and bytes to execute them).
profiler::OpKind kind_of(const std::string& op) {
  if (op == "conv2d") return profiler::OpKind::kConv2d;
  if (op == "relu") return profiler::OpKind::kRelu;
  if (op == "maxpool") return profiler::OpKind::kMaxPool;
  if (op == "add") return profiler::OpKind::kAdd;
  return profiler::OpKind::kLinear;
}

/// One plan entry per compute and transfer of the schedule, in order; op ids are step
/// numbers (a node recomputed twice is two entries).
devices::ProfilePlan schedule_plan(const planner::TrainingGraph& g, const planner::Schedule& s) {
  devices::ProfilePlan plan;
  plan.min_window_us = 0;  // each step once, however short
  std::vector<char> computed(g.nodes.size(), 0);
  for (const planner::Step& step : s.steps) {
    if (step.kind == planner::StepKind::kFree) continue;
    const auto& node = g.nodes[static_cast<std::size_t>(step.node)];
    devices::PlannedOp op;
    op.op_id = static_cast<uint32_t>(plan.ops.size());
    op.windows = 1;
    op.idle_after_us = 0;
    if (step.kind == planner::StepKind::kCompute) {
      op.shape.kind = kind_of(node.op);
      op.shape.flops = node.flops;
      op.shape.bytes_in = node.bytes_touched;
      char& seen = computed[static_cast<std::size_t>(step.node)];
      op.phase = seen != 0 ? profiler::Phase::kRecompute
                 : node.phase == planner::NodePhase::kForward ? profiler::Phase::kForward
                                                               : profiler::Phase::kBackward;
      seen = 1;
    } else {
      op.shape = profiler::paging(static_cast<uint32_t>(node.output_bytes));
      op.phase = step.kind == planner::StepKind::kPageIn ? profiler::Phase::kPageIn
                                                          : profiler::Phase::kPageOut;
    }
    plan.ops.push_back(op);
  }
  return plan;
}

}  // namespace

ValidateOutcome validate(const ValidateArgs& args, std::ostream& progress) {
  ValidateOutcome o;
  PlanArgs plan_args = args.plan;
  plan_args.db = args.db;
  o.planned = plan(plan_args, false);
  const auto& g = o.planned.graph;
  const auto& r = o.planned.result;
  if (!r.schedule) throw InputError("nothing to validate: " + r.why);
  for (const auto& node : g.nodes)
    if (node.flops == 0 && node.bytes_touched == 0 && node.time_s > 0)
      throw InputError("the graph carries no FLOP or byte counts (a graph JSON file?): a board "
                       "cannot execute it; validate a --model or --onnx graph");
  const devices::ProfilePlan steps = schedule_plan(g, *r.schedule);
  if (steps.ops.size() > 0xFFFF)
    throw InputError("the schedule has " + std::to_string(steps.ops.size()) +
                     " steps; a run carries at most 65535");
  o.steps = static_cast<int>(steps.ops.size());
  for (const auto& step : r.schedule->steps) {
    const auto& node = g.nodes[static_cast<std::size_t>(step.node)];
    switch (step.kind) {
      case planner::StepKind::kCompute:
        o.predicted_energy_j += node.energy_j;
        o.predicted_time_s += node.time_s;
        break;
      case planner::StepKind::kPageIn:
        o.predicted_energy_j += node.pagein_energy_j;
        o.predicted_time_s += node.pagein_time_s;
        break;
      case planner::StepKind::kPageOut:
        o.predicted_energy_j += node.pageout_energy_j;
        o.predicted_time_s += node.pageout_time_s;
        break;
      case planner::StepKind::kFree: break;
    }
  }

  // Execute: a board on a port, or a simulated one behind a real pseudo-terminal.
  std::unique_ptr<devices::SimServer> sim;
  RecordRequest rec;
  rec.db_path = args.db;
  rec.options.plan = steps;
  rec.options.mode = devices::protocol::StartMode::kSchedule;
  rec.options.expected_board = devices::find_board(args.plan.board);
  if (args.port.empty()) {
    const auto board = devices::find_board(args.plan.board);
    if (!board) throw InputError("unknown board '" + args.plan.board + "'");
    sim = devices::SimServer::open_pty(*board, devices::SimServerOptions{.speed = 0, .seed = 1});
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
  const std::string model = args.plan.model.empty() ? g.name : args.plan.model;
  const bool measured = o.planned.cost_source.starts_with("costs: measured");
  costdb::PlanRow row = to_plan_row(g, model, args.plan.board, measured ? "measured" : "profile",
                                    graph_digest(g), o.planned.request, r);
  o.plan_id = costdb::add_plan(db, row);
  costdb::ValidationRow v;
  v.plan_id = o.plan_id;
  v.run_id = o.run_id;
  v.predicted_energy_j = o.predicted_energy_j;
  v.measured_energy_j = o.measured_energy_j;
  v.predicted_time_s = o.predicted_time_s;
  v.measured_time_s = o.measured_time_s;
  if (o.planned.sim) v.predicted_peak_bytes = o.planned.sim->peak_bytes;
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
    j["costs"] = o.planned.cost_source;
    j["steps"] = o.steps;
    j["steps_attributed"] = o.steps_attributed;
    j["predicted"] = {{"energy_j", o.predicted_energy_j}, {"time_s", o.predicted_time_s}};
    j["measured"] = {{"energy_j", o.measured_energy_j}, {"time_s", o.measured_time_s}};
    j["energy_error_pct"] = pct(o.measured_energy_j, o.predicted_energy_j);
    j["time_error_pct"] = pct(o.measured_time_s, o.predicted_time_s);
    out << j.dump(2) << "\n";
    return 0;
  }
  out << fmt::format("{} at {} ({}), {} steps executed one by one on {}\n", o.planned.graph.name,
                     args.plan.budget, planner::to_string(o.planned.result.status), o.steps,
                     args.port.empty() ? "a simulated " + args.plan.board : args.port);
  out << o.planned.cost_source << "\n";
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
