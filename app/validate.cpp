#include "app/validate.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <memory>

#include "agent/agent.h"
#include "app/attribute.h"
#include "app/pareto.h"
#include "app/record.h"
#include "app/step_plans.h"
#include "common/error.h"
#include "common/stats.h"
#include "costdb/cost_model.h"
#include "costdb/plans.h"
#include "devices/board_profile.h"
#include "devices/power_control.h"
#include "devices/sim_server.h"
#include "planner/reuse.h"
#include "planner/schedule.h"
#include "planner/zoo.h"

namespace ergon::app {
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

/// A stored plan: rebuilds the graph it was made for, checks it is the same one, and fills
/// the outcome's graph, schedule and description.
costdb::PlanRow stored_plan(const ValidateRequest& args, ValidateOutcome& o) {
  auto db = costdb::Database::open_read_only(args.db);
  auto row = costdb::find_plan_by_id(db, *args.plan_id);
  if (!row) throw InputError("no plan " + std::to_string(*args.plan_id) + " in " + args.db);
  if (row->schedule.empty())
    throw InputError("plan " + std::to_string(row->id) + " has no schedule (" + row->status + ")");
  o.graph = load_graph(graph_args_of(*row, args.db), &o.cost_source);
  if (graph_digest(o.graph) != row->graph_digest)
    throw InputError("plan " + std::to_string(row->id) + " was made for a graph this ergon "
                     "cannot rebuild from '" + row->model + "' on " + row->board_kind +
                     " (other costs or batch size); plan it again with ergon validate --model");
  if (args.execute) require_zoo_model(row->model, row->model);
  o.schedule = planner::decode_schedule(row->schedule);
  o.plan_id = row->id;
  o.description = fmt::format("plan {}: {} on {} at {} bytes ({})", row->id, row->model,
                              row->board_kind, row->budget_bytes, row->status);
  return *row;
}

/// Plans the request and fills the outcome's graph, schedule and description; the plan row
/// is stored with the validation.
costdb::PlanRow new_plan(const ValidateRequest& args, ValidateOutcome& o) {
  PlanArgs plan_args = args.plan;
  plan_args.db = args.db;
  const PlanOutcome planned = plan(plan_args);
  if (!planned.result.schedule) throw InputError("nothing to validate: " + planned.result.why);
  o.graph = planned.graph;
  o.schedule = *planned.result.schedule;
  o.cost_source = planned.cost_source;
  o.description = fmt::format("{} at {} ({})", planned.graph.name, args.plan.budget,
                              planner::to_string(planned.result.status));
  const auto costs = planned.costs == CostSource::kMeasured ? costdb::PlanCostSource::kMeasured
                                                            : costdb::PlanCostSource::kProfile;
  const std::string model = args.plan.model.empty() ? planned.graph.name : args.plan.model;
  costdb::PlanRow row = to_plan_row(planned.graph, model, args.plan.board, costs, graph_digest(planned.graph),
                                    planned.request, planned.result,
                                    {planned.switch_time_s, planned.switch_energy_j});
  row.power_mode = planned.power_mode;
  row.costs_from_iterations =
      costs == costdb::PlanCostSource::kMeasured && timed_in(args.plan) == costdb::TimedIn::kIteration;
  if (planned.time_objective) {  // its "energies" are seconds: stored as a time plan, no energy
    row.objective = "time";
    row.objective_j.reset();
    row.bound_j.reset();
    row.energy_j.reset();
  }
  return row;
}

/// Each entry of schedule_plan(graph, schedule): the time the graph predicts for it (the
/// backward phase's costs from where it begins, for per-phase plans).
std::vector<ValidateOutcome::StepTime> step_times(const planner::TrainingGraph& g, const planner::Schedule& schedule) {
  const uint32_t late_from = backward_phase_entry(g, schedule);
  std::vector<ValidateOutcome::StepTime> out;
  std::vector<char> computed(static_cast<std::size_t>(g.size()), 0);
  for (const planner::Step& st : schedule.steps) {
    if (st.kind == planner::StepKind::kFree) continue;
    const auto& node = g.nodes[static_cast<std::size_t>(st.node)];
    const bool late = out.size() >= late_from;
    const double s = st.kind == planner::StepKind::kCompute  ? g.compute_cost(st.node, late).time_s
                     : st.kind == planner::StepKind::kPageIn ? node.pagein_time_s
                                                             : node.pageout_time_s;
    const bool again = st.kind == planner::StepKind::kCompute && computed[static_cast<std::size_t>(st.node)] != 0;
    if (st.kind == planner::StepKind::kCompute) computed[static_cast<std::size_t>(st.node)] = 1;
    out.push_back({.kind = st.kind, .node = node.name, .recompute = again, .predicted_s = s, .measured_s = std::nullopt});
  }
  return out;
}

/// Predicts each compute step's time again with the board's cache curve where its costs
/// have one, and the iteration's time and energy with them (ValidateOutcome::CacheModel).
void apply_cache_model(const ValidateRequest& args, const costdb::PlanRow& row, ValidateOutcome& o) {
  if (row.cost_source != costdb::PlanCostSource::kMeasured || split_phases(row.power_mode)) return;
  std::optional<costdb::MeasuredCosts> costs;
  try {
    auto db = costdb::Database::open_read_only(args.db);
    costs.emplace(costdb::MeasuredCosts::from_database(
        db, row.board_kind, row.power_mode.empty() ? std::nullopt : std::optional<std::string>(row.power_mode),
        row.costs_from_iterations ? costdb::TimedIn::kIteration : costdb::TimedIn::kProfile));
  } catch (const Error&) {
    return;  // the plan's costs came from there a moment ago; nothing to refine without them
  }
  const auto curve = costs->cache();
  if (!curve) return;
  const auto touched = planner::reuse_distances(o.graph, o.schedule);
  if (touched.size() != o.step_times.size()) return;
  ValidateOutcome::CacheModel m;
  m.time_s = o.predicted_time_s;
  m.energy_j = o.predicted_energy_j;
  std::size_t e = 0;
  for (const planner::Step& st : o.schedule.steps) {
    if (st.kind == planner::StepKind::kFree) continue;
    const std::size_t entry = e++;
    if (st.kind != planner::StepKind::kCompute) continue;
    const auto& node = o.graph.nodes[static_cast<std::size_t>(st.node)];
    double bytes = 0, hit_bytes = 0;
    for (const planner::TouchedTensor& t : touched[entry]) {
      bytes += static_cast<double>(t.bytes);
      hit_bytes += static_cast<double>(t.bytes) * curve->hit(t.distance_bytes, static_cast<double>(t.bytes));
    }
    if (bytes <= 0) continue;
    const double hit = hit_bytes / bytes;
    const auto phase = node.phase == planner::NodePhase::kForward ? profiler::Phase::kForward : profiler::Phase::kBackward;
    const auto time_s = costs->time_at_hit(*curve, phase, node.flops, node.bytes_touched, hit);
    if (!time_s) continue;
    auto& step = o.step_times[entry];
    m.time_s += *time_s - step.predicted_s;
    if (m.energy_j && node.time_s > 0) *m.energy_j += (*time_s - step.predicted_s) * node.energy_j / node.time_s;
    step.cached_predicted_s = *time_s;
    step.cached_fraction = hit;
    ++m.steps;
  }
  if (m.steps == 0) return;
  m.description = fmt::format(
      "cache: {} compute steps timed at the share of their tensors still cached, from {} ops measured warm and "
      "from memory and the board's cache curve (effective {:.1f} MiB, steepness {:g}, from {} ladder entries of {}, "
      "rms error {:.1f} %)",
      m.steps, costs->warm_ops(), curve->effective_bytes / (1 << 20), curve->steepness, curve->points, curve->shape,
      100 * curve->rms_rel_error);
  o.cache_model = std::move(m);
}

/// Where and how the board runs a schedule.
struct RunTarget {
  const ValidateRequest& args;
  const planner::TrainingGraph& graph;
  std::string board;
  std::string model;
  int batch = 1;
  std::string mode;                          ///< the mode the plan's costs are of
  std::optional<std::string> backward_mode;  ///< per-phase plans: the backward pass's mode
};

/// A per-phase run proves it switched by the board's log of the switch (PhaseModes is not
/// acknowledged: a lost frame would have run it all in the forward pass's mode).
void require_phase_switch(const std::string& db_path, int64_t run_id, const devices::RecordOptions& options,
                          const std::string& backward_mode) {
  auto db = costdb::Database::open_read_only(db_path);
  const auto events = costdb::list_events(db, run_id);
  const std::string needle = devices::phase_switch_line(options.phase_modes->switch_at, backward_mode);
  if (std::none_of(events.begin(), events.end(),
                   [&](const costdb::RunEvent& e) { return e.text.find(needle) != std::string::npos; }))
    throw DeviceError("run " + std::to_string(run_id) + " did not switch to " + backward_mode +
                      " for the backward phase (no such line in its events: ergon runs --events " +
                      std::to_string(run_id) + "); its figures are not of the per-phase plan");
}

/// Runs a schedule: on a board on a port; without one, on a simulated board behind a real
/// pseudo-terminal or (to execute on real tensors) ergon-agent's code in this process.
BoardOutcome run_schedule(const RunTarget& t, const planner::Schedule& schedule,
                          const devices::ProfilePlan& plan_steps, int iterations = 1,
                          std::optional<devices::TruthLedger>* simulated_truth = nullptr) {
  const ValidateRequest& args = t.args;
  std::unique_ptr<devices::SimServer> sim;
  RecordRequest rec;
  rec.db_path = args.db;
  rec.options.plan = plan_steps;
  rec.options.mode = devices::protocol::StartMode::kSchedule;
  rec.options.loops = static_cast<uint16_t>(iterations);
  rec.options.expected_board = devices::find_board(t.board);
  if (t.backward_mode)  // where this schedule's backward phase begins
    rec.options.phase_modes = devices::RecordOptions::PhaseSwitch{*t.backward_mode, backward_phase_entry(t.graph, schedule)};
  if (args.execute) {
    rec.options.mode = devices::protocol::StartMode::kExecute;
    devices::ExecuteRequest e{.model = t.model, .batch = static_cast<uint16_t>(t.batch), .seed = 1, .steps = {}};
    for (const planner::Step& st : schedule.steps)
      e.steps.emplace_back(static_cast<uint8_t>(st.kind), static_cast<uint32_t>(st.node));
    rec.options.execute = std::move(e);
  }
  std::unique_ptr<agent::AgentThread> agent;
  if (!args.port.empty()) {
    rec.ports = {args.port};
    rec.options.power_mode = t.mode;  // switched first when the board is in another
  } else if (args.execute) {
    // ergon-agent's code on this machine, serving one pseudo-terminal, with a simulated
    // INA219: what executes schedules on real tensors when no board is given.
    agent::AgentOptions local;
    local.link = "pty";
    local.probe = "sim:ina219";
    if (devices::find_board(t.board)) local.board = t.board;  // it stands for the plan's board
    agent = std::make_unique<agent::AgentThread>(local);
    rec.ports = {agent->link()};
  } else {
    sim = devices::SimServer::open_pty(devices::board_named(t.board),
                                       devices::SimServerOptions{.speed = 0, .seed = 1, .power_mode = t.mode});
    sim->start();
    rec.ports = {sim->link_name()};
  }
  std::atomic<int> interrupts{0};
  auto outcomes = record_boards(rec, {}, interrupts);
  if (sim) {
    sim->stop();
    if (simulated_truth && !sim->board().runs().empty())
      *simulated_truth = sim->board().runs().back().truth.per_iteration(static_cast<uint32_t>(iterations));
  }
  if (outcomes.empty() || !outcomes[0].run_id)
    throw DeviceError("the board did not run the schedule: " +
                      (outcomes.empty() ? std::string("no outcome") : outcomes[0].error));
  if (args.execute && !outcomes[0].stats.execution)
    throw DeviceError("the board did not execute the schedule (" + outcomes[0].error +
                      "); an ergon-agent of protocol v3 executes schedules, a simulated board cannot");
  if (t.backward_mode) require_phase_switch(args.db, *outcomes[0].run_id, rec.options, *t.backward_mode);
  return outcomes[0];
}

/// A board on a port that is not the kind the plan was made for would compare one board's
/// predictions with another's measurements: refused, naming the kind that answered.
void require_board(const std::string& db_path, int64_t run_id, const std::string& port, const std::string& board) {
  auto db = costdb::Database::open_read_only(db_path);
  const auto run = costdb::find_run(db, run_id);
  if (!run || run->board_kind == board) return;
  throw InputError("the board on " + (port.empty() ? std::string("this machine") : port) + " is a " +
                   run->board_kind + " (" + run->board_name + "), the plan is for " + board +
                   ": validate with --board " + run->board_kind + " (its run " + std::to_string(run_id) +
                   " is kept)");
}

/// A run of a schedule split into its iterations. Windows come in time order, the plan's
/// entries rising within an iteration: an entry no later than the one before starts the next
/// iteration (a span lost on the link leaves a hole in its own iteration, not a shift in every
/// later one).
struct RunIterations {
  std::vector<std::vector<double>> step_s;  ///< per entry, its time in each iteration it arrived in
  std::vector<int> covered;                 ///< per entry, iterations whose samples all arrived
  std::vector<double> times_s;              ///< each complete iteration's time, in the order run
  std::vector<double> energies_j;           ///< the complete iterations whose every step was covered
  bool energy_complete = true;              ///< every complete iteration's every step covered
  double first_time_s = 0;                  ///< the first iteration's steps that arrived, summed
};

RunIterations split_iterations(const AttributedRun& attributed, std::size_t n, int iterations) {
  RunIterations r;
  r.step_s.resize(n);
  r.covered.assign(n, 0);
  struct Pass {
    std::size_t steps = 0, covered = 0;
    double time_s = 0, energy_j = 0;
  };
  std::vector<Pass> passes(static_cast<std::size_t>(iterations));
  std::size_t k = 0;
  std::optional<uint32_t> previous;
  for (const auto& w : attributed.attribution.windows) {
    if (w.span.phase == profiler::Phase::kIdle || w.span.op_id >= n) continue;
    if (previous && w.span.op_id <= *previous) ++k;
    previous = w.span.op_id;
    r.step_s[w.span.op_id].push_back(w.time_s);
    if (k >= passes.size()) continue;
    Pass& pass = passes[k];
    ++pass.steps;
    pass.time_s += w.time_s;
    if (!w.covered) continue;
    ++r.covered[w.span.op_id];
    ++pass.covered;
    pass.energy_j += w.gross_energy_j;
  }
  for (const Pass& pass : passes) {
    if (pass.steps != n || n == 0) continue;
    r.times_s.push_back(pass.time_s);
    if (pass.covered == n) r.energies_j.push_back(pass.energy_j);
    else r.energy_complete = false;
  }
  if (!passes.empty()) r.first_time_s = passes.front().time_s;
  return r;
}

/// Attributes the run, sums its covered steps as measured, and stores plan (when new), run
/// and validation together.
void store_validation(const ValidateRequest& args, const costdb::PlanRow& row, uint64_t predicted_peak_bytes,
                      ValidateOutcome& o) {
  auto db = costdb::Database::open(args.db);
  const auto n = static_cast<std::size_t>(o.steps);
  const RunIterations run = split_iterations(attribute_run(db, o.run_id), n, o.iterations);
  for (std::size_t e = 0; e < n; ++e) {
    if (run.step_s[e].empty()) continue;
    ++o.steps_timed;
    o.step_times[e].measured_s = median(run.step_s[e]);
    if (run.covered[e] == static_cast<int>(run.step_s[e].size())) ++o.steps_attributed;
  }
  o.iteration_times_s = run.times_s;
  o.iteration_energies_j = run.energies_j;
  if (!o.iteration_times_s.empty()) o.measured_time_s = median(o.iteration_times_s);
  else o.measured_time_s = run.first_time_s;  // what arrived of an incomplete run
  if (run.energy_complete && !o.iteration_energies_j.empty()) o.measured_energy_j = median(o.iteration_energies_j);
  std::vector<double> errors;
  for (const auto& st : o.step_times)
    if (st.measured_s && st.predicted_s > 0) errors.push_back(std::abs(*st.measured_s / st.predicted_s - 1));
  o.step_error_median = median(errors);
  o.step_error_p95 = quantile(errors, 0.95);
  if (o.plan_id == 0) o.plan_id = costdb::add_plan(db, row);
  costdb::ValidationRow v;
  v.plan_id = o.plan_id;
  v.run_id = o.run_id;
  v.predicted_energy_j = o.predicted_energy_j;
  v.measured_energy_j = o.measured_energy_j;
  v.predicted_time_s = o.predicted_time_s;
  v.measured_time_s = o.measured_time_s;
  v.predicted_peak_bytes = predicted_peak_bytes;
  costdb::add_validation(db, v);
  db.commit_batch();
}

}  // namespace

ValidateOutcome validate(const ValidateRequest& args, const ValidateProgress& progress) {
  auto phase = [&](ValidatePhase p) {
    if (progress) progress(p);
  };
  phase(ValidatePhase::kPlanning);
  ValidateOutcome o;
  if (args.execute && !args.plan_id) require_zoo_model(args.plan.model, args.plan.onnx_file);
  const costdb::PlanRow row = args.plan_id ? stored_plan(args, o) : new_plan(args, o);
  const auto& g = o.graph;
  o.board = row.board_kind;
  RunTarget target{.args = args,
                   .graph = g,
                   .board = row.board_kind,
                   .model = args.plan_id ? row.model : args.plan.model,
                   .batch = args.plan_id ? 1 : args.plan.batch,
                   .mode = row.power_mode,
                   .backward_mode = std::nullopt};
  // The board runs the schedule in the mode the plan's costs are of. Per-phase plans start in
  // the forward pass's mode and switch where the backward phase begins.
  if (const auto phases = split_phases(target.mode)) {
    if (args.execute && args.port.empty())
      throw InputError("a per-phase plan (" + target.mode + ") executed on real tensors needs a board that switches "
                       "modes (--port); without one, drop --execute to time its steps on a simulated board");
    target.mode = phases->first;
    target.backward_mode = phases->second;
  }
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
  // Every step's cost, as the board runs them in turn. A plan made for time carries none.
  if (row.objective != "time") o.predicted_energy_j = replay.energy_j;
  o.step_times = step_times(g, o.schedule);
  o.predicted_time_s = replay.compute_time_s + replay.paging_time_s;
  o.predicted_peak_bytes = replay.peak_bytes;
  apply_cache_model(args, row, o);
  // Real kernels vary from one iteration to the next by more than a cost model's error (a
  // shared machine's caches, clock and disk): several, compared by their median.
  o.iterations = args.iterations.value_or(!args.port.empty() || args.execute ? 5 : 1);
  if (o.iterations < 1 || o.iterations > 1000)
    throw InputError("--iterations " + std::to_string(o.iterations) + ": between 1 and 1000");
  if (target.backward_mode && o.iterations > 1) {
    if (args.iterations)
      throw InputError("a per-phase plan (" + row.power_mode + ") runs one iteration: the board switches modes "
                       "once, where the backward phase begins; drop --iterations");
    o.iterations = 1;
  }

  phase(ValidatePhase::kRunning);
  const BoardOutcome outcome = run_schedule(target, o.schedule, steps, o.iterations, &o.simulated_truth);
  require_board(args.db, *outcome.run_id, args.port, target.board);
  if (outcome.state != devices::SessionState::kCompleted) o.run_incomplete = outcome.error;
  o.run_id = *outcome.run_id;
  if (args.execute) {
    o.executed = executed_from(*outcome.stats.execution);
    phase(ValidatePhase::kReference);
    // Store-all again, timed as the schedule was and right after it: the machine's speed
    // now against the costs', which a validation's error contains and a cost model cannot.
    const planner::Schedule all = planner::store_all_schedule(g);
    const devices::ProfilePlan all_steps = schedule_plan(g, all);
    const BoardOutcome reference = run_schedule(target, all, all_steps, o.iterations);
    o.reference = executed_from(*reference.stats.execution);
    o.reference_run_id = *reference.run_id;
    const planner::ScheduleReport all_replay = planner::simulate(g, all);
    // Read, not attributed into costs: a reference is not a validation, and its steps must not
    // become what the next plan is costed on.
    auto db = costdb::Database::open_read_only(args.db);
    const RunIterations ref = split_iterations(attribution_of(db, o.reference_run_id), all_steps.ops.size(), o.iterations);
    if (!ref.times_s.empty())
      o.reference_time = ValidateOutcome::ReferenceTime{.predicted_s = all_replay.compute_time_s + all_replay.paging_time_s,
                                                         .measured_s = median(ref.times_s)};
  }
  phase(ValidatePhase::kAttributing);
  store_validation(args, row, replay.peak_bytes, o);
  return o;
}

}  // namespace ergon::app
