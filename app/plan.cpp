#include "app/plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>

#include "app/board_costs.h"
#include "app/quantities.h"
#include "common/error.h"
#include "costdb/cost_model.h"
#include "costdb/costs.h"
#include "costdb/database.h"
#include "devices/board_profile.h"
#include "planner/graph_json.h"
#include "planner/milp.h"
#include "planner/onnx_import.h"
#include "planner/planners.h"
#include "planner/schedule.h"
#include "planner/zoo.h"

namespace ergon::app {
uint64_t parse_budget(const std::string& text, uint64_t store_all_bytes) {
  return Budget::parse(text).bytes(store_all_bytes);
}

double parse_deadline(const std::string& text, double single_pass_s) {
  return Deadline::parse(text).seconds(single_pass_s);
}

planner::Objective parse_objective(const std::string& text) {
  if (text == "poet") return planner::Objective::kPoet;
  // time: total's model (overlapped paging, stalls) at a constant 1 W, so its energy in joules
  // is the iteration's makespan in seconds (time_objective_graph).
  if (text == "total" || text == "time") return planner::Objective::kTotal;
  throw InputError("objective '" + text + "' is unknown (known: total, poet, time)");
}

std::vector<std::string> fill_defaults(PlanArgs& args, const std::string& db_path) {
  std::vector<std::string> chosen;
  std::vector<costdb::MeasuredBoard> boards;
  if (!db_path.empty() && costdb::database_exists(db_path)) {
    try {
      auto db = costdb::Database::open_read_only(db_path);
      boards = costdb::measured_boards(db);
    } catch (const Error&) {
      // An older or foreign file: nothing to choose from here; loading the costs says why.
    }
  }
  if (args.board.empty()) {
    if (boards.size() > 1) {
      std::vector<std::string> kinds;
      for (const auto& b : boards) kinds.push_back(b.kind);
      throw InputError(fmt::format("{} holds costs of boards {}: choose one with --board", db_path,
                                   fmt::join(kinds, ", ")));
    }
    args.board = boards.empty() ? "pi4" : boards.front().kind;
    if (!boards.empty()) chosen.push_back("board: " + args.board + " (the only board with costs in " + db_path + ")");
  }
  if (args.objective.empty()) {
    const auto it = std::find_if(boards.begin(), boards.end(),
                                 [&](const costdb::MeasuredBoard& b) { return b.kind == args.board; });
    const bool times_only = it != boards.end() && !it->has_energy;
    if (times_only && !devices::find_board(args.board)) {
      args.objective = "time";
      chosen.push_back("objective: time (" + args.board + "'s costs in " + db_path +
                       " are times only, and ergon has no power model of it)");
    } else {
      args.objective = "total";
    }
  }
  return chosen;
}

bool time_objective(const PlanArgs& args) { return args.objective == "time"; }

costdb::TimedIn timed_in(const PlanArgs& args) {
  if (args.costs == "profile") return costdb::TimedIn::kProfile;
  if (args.costs == "iteration") return costdb::TimedIn::kIteration;
  throw InputError("--costs " + args.costs + ": profile or iteration");
}

planner::TrainingGraph time_objective_graph(planner::TrainingGraph graph) {
  for (auto& n : graph.nodes) {
    n.energy_j = n.time_s;
    n.pagein_energy_j = n.pagein_time_s;
    n.pageout_energy_j = n.pageout_time_s;
  }
  for (auto& c : graph.late_costs) c.energy_j = c.time_s;
  graph.idle_power_w = 1;
  graph.energy_rel_sigma.reset();
  return graph;
}

GapChoice choose_gap(const PlanArgs& args, const planner::TrainingGraph& graph) {
  if (args.gap) return {*args.gap, "as asked (--gap)"};
  if (graph.energy_rel_sigma) {
    const double sigma = *graph.energy_rel_sigma;
    return {std::clamp(sigma, kMinDefaultGap, kMaxDefaultGap),
            fmt::format("the measured costs' 1-sigma uncertainty in one pass's energy ({:.2g} %{}); --gap overrides",
                        100 * sigma,
                        sigma < kMinDefaultGap   ? ", raised to the 0.1 % floor"
                        : sigma > kMaxDefaultGap ? ", capped at 5 %"
                                                 : "")};
  }
  return {kProfileGap, "the default for published profiles and costs without a measured energy uncertainty "
                       "(known to about 1 %); --gap overrides"};
}

planner::PlanRequest make_request(const PlanArgs& args, const planner::TrainingGraph& graph) {
  planner::PlanRequest req;
  req.objective = parse_objective(args.objective);
  // A percentage is of store-all's activations; under total the fixed bytes come on top, so
  // "50%" means the same activation room under either objective.
  const bool percent = Budget::parse(args.budget).percent();
  const uint64_t fixed_bytes = req.objective == planner::Objective::kTotal ? graph.fixed_bytes : 0;
  req.budget_bytes = parse_budget(args.budget, graph.store_all_peak_bytes()) +
                     (percent ? fixed_bytes : 0);
  req.deadline_s = parse_deadline(args.deadline, graph.single_pass_time_s());
  req.time_limit_s = args.time_limit_s;
  req.relative_gap = choose_gap(args, graph).gap;
  req.threads = args.threads;
  return req;
}

std::optional<std::pair<std::string, std::string>> split_phases(const std::string& power_mode) {
  const auto slash = power_mode.find('/');
  if (slash == std::string::npos) return std::nullopt;
  std::pair<std::string, std::string> out{power_mode.substr(0, slash), power_mode.substr(slash + 1)};
  if (out.first.empty() || out.second.empty() || out.second.find('/') != std::string::npos)
    throw InputError("per-phase power modes are FORWARD/BACKWARD (MAXQ/MAXN), not '" + power_mode + "'");
  return out;
}

double mode_switch_s(const PlanArgs& args) {
  if (!args.db.empty() && costdb::database_exists(args.db)) {
    auto db = costdb::Database::open_read_only(args.db);
    if (const auto measured = costdb::measured_mode_switch_s(db, args.board)) return *measured;
  }
  const auto board = devices::find_board(args.board);
  return board ? board->mode_switch_s : 0;
}

ModeSwitches mode_switches(const PlanArgs& args, const planner::TrainingGraph& graph) {
  const auto phases = split_phases(args.power_mode);
  if (!phases || phases->first == phases->second) return {};
  const auto board = devices::find_board(args.board);
  const double idle_w = graph.idle_power_w > 0 ? graph.idle_power_w : (board ? board->idle_w : 0);
  const double time_s = 2 * mode_switch_s(args);
  return {time_s, time_s * idle_w};
}

BoardCosts board_costs(const PlanArgs& args) {
  // A board without a published profile (a Linux host: ergon-agent without --board) is
  // planned on its measured costs only.
  const auto known = devices::find_board(args.board);
  if (!known && args.db.empty())
    throw InputError("board '" + args.board + "' has no published profile (known: " + devices::board_names() +
                     "): plan it on its measured costs with --db");
  const std::optional<devices::BoardProfile> board =
      known ? std::optional(devices::board_in_mode(*known, args.power_mode)) : std::nullopt;
  std::optional<app::MeasuredCostModel> measured;
  // A descriptor's figures are whatever its author wrote (estimates until characterized):
  // say which file they came from.
  const std::string profile =
      !board ? std::string()
      : board->kind == devices::BoardKind::kDescribed
          ? fmt::format("the figures of {}'s descriptor {} ({})", args.board, board->origin, board->power_mode)
          : fmt::format("the published profile of {} ({})", args.board, board->power_mode);
  std::string source = "costs: " + profile;
  auto fall_back = [&](const std::string& why) {
    if (timed_in(args) == costdb::TimedIn::kIteration)
      throw InputError(why + "; --costs iteration plans on measured costs only");
    if (!board) throw InputError(why + "; board '" + args.board + "' has no published profile to fall back on");
    source = "warning: " + why + "; using " + profile;
  };
  if (!args.db.empty()) {
    std::optional<costdb::Database> db;
    try {
      db.emplace(costdb::Database::open_read_only(args.db));
    } catch (const Error& e) {
      fall_back(e.what());
    }
    if (db) {
      // Costs measured in several modes cannot stand in for one another: choosing is the
      // user's call, not a reason to fall back.
      const auto modes = costdb::measured_power_modes(*db, args.board);
      if (args.power_mode.empty() && modes.size() > 1)
        throw InputError(fmt::format("{} has costs measured in power modes {} in {}: choose one "
                                     "with --power-mode",
                                     args.board, fmt::join(modes, ", "), args.db));
      std::optional<costdb::MeasuredCosts> costs;
      try {
        const std::optional<std::string> mode =
            args.power_mode.empty() ? std::nullopt : std::optional<std::string>(args.power_mode);
        costs.emplace(costdb::MeasuredCosts::from_database(*db, args.board, mode, timed_in(args)));
      } catch (const Error& e) {
        fall_back(e.what());
      }
      if (costs && timed_in(args) == costdb::TimedIn::kIteration && costs->iteration_shapes() == 0)
        throw InputError("--costs iteration: no executed store-all iteration of board " + args.board + " in " +
                         args.db + " (run ergon validate --execute --budget 100% first)");
      if (costs) {
        const std::string where = fmt::format(
            "measured on {}{} ({} op shapes from {} run(s) in {}{}; elsewhere a fit with cross-validated error "
            "{:.1f} % in time",
            args.board, costs->power_mode().empty() ? "" : " in mode " + costs->power_mode(), costs->measured_ops(),
            costs->runs(), args.db,
            timed_in(args) == costdb::TimedIn::kIteration
                ? fmt::format(", {} of them timed inside executed iterations{}: {}", costs->iteration_shapes(),
                              costs->has_energy() ? ", at the profile's power for their shape" : "",
                              costs->iteration_paging_shapes() > 0
                                  ? fmt::format("compute by store-all's, {} transfer sizes by page-all's",
                                                costs->iteration_paging_shapes())
                                  : std::string("compute by store-all's; paging from the profile (no executed page-all "
                                                "schedule: ergon validate --execute --planner page-all)"))
                : std::string(),
            100 * costs->compute_time_fit().cv_median);
        if (costs->has_energy()) {
          source = fmt::format("costs: {}, {:.1f} % in energy (median))", where, 100 * costs->compute_power().cv_median);
          measured.emplace(std::move(*costs));
        } else if (time_objective(args)) {
          source = "costs: " + where + "); times only (no power samples), and the objective is time";
          measured.emplace(std::move(*costs));
        } else if (board) {  // the profile already in the power mode planned
          const BoardPowerModel power{*board};
          source = "costs: " + where + "); times only (recorded without a power probe)\nenergy: measured times x " +
                   power.origin();
          measured.emplace(std::move(*costs), power);
        } else {
          throw InputError("the costs of board '" + args.board + "' in " + args.db +
                           " are times only (recorded without a power probe) and ergon has no power model of it: "
                           "plan with --objective time, or record it with a power probe");
        }
      }
    }
  }
  BoardCosts out;
  out.source = std::move(source);
  out.kind = measured ? CostSource::kMeasured : args.db.empty() ? CostSource::kProfile : CostSource::kProfileFallback;
  if (measured) {
    auto m = std::make_unique<MeasuredCostModel>(std::move(*measured));
    out.measured = m.get();
    out.model = std::move(m);
  } else {
    out.model = std::make_unique<BoardProfileCosts>(*board);
  }
  return out;
}

planner::TrainingGraph load_graph(const PlanArgs& args, std::string* cost_source, CostSource* source_kind) {
  const int sources = static_cast<int>(!args.model.empty()) +
                      static_cast<int>(!args.graph_file.empty()) +
                      static_cast<int>(!args.onnx_file.empty());
  if (sources != 1)
    throw InputError("give exactly one of --model NAME (see ergon models), --onnx FILE or --graph FILE");
  if (const auto phases = split_phases(args.power_mode)) {
    if (!args.graph_file.empty())
      throw InputError("a graph file carries one mode's costs: per-phase modes (" + args.power_mode +
                       ") need --model or --onnx");
    PlanArgs a = args;
    std::string forward_source, backward_source;
    CostSource forward_kind = CostSource::kProfile, backward_kind = CostSource::kProfile;
    a.power_mode = phases->first;
    const auto forward = load_graph(a, &forward_source, &forward_kind);
    a.power_mode = phases->second;
    const auto backward = load_graph(a, &backward_source, &backward_kind);
    if (source_kind)
      *source_kind = backward_kind == CostSource::kProfileFallback ? backward_kind : forward_kind;
    if (cost_source)
      *cost_source = "forward pass in " + phases->first + ": " + forward_source + "\nbackward pass in " +
                     phases->second + ": " + backward_source;
    return planner::per_phase_graph(forward, backward);
  }
  if (!args.graph_file.empty()) {
    auto graph = planner::read_graph_json(args.graph_file);
    if (source_kind) *source_kind = CostSource::kGraphFile;
    if (cost_source)
      *cost_source = "costs: as given in " + args.graph_file + "\n" + args.graph_file + ": " + graph.import_note;
    return graph;
  }
  BoardCosts costs = board_costs(args);
  const auto forward = args.model.empty()
                           ? planner::import_onnx(args.onnx_file, args.batch, args.onnx_inputs)
                           : planner::zoo_model(args.model, args.batch);
  auto graph = planner::build_training_graph(forward, *costs.model);
  if (costs.measured && costs.measured->costs().has_energy())
    graph.energy_rel_sigma = costs.measured->energy_rel_sigma(graph);
  std::string source = std::move(costs.source);
  if (time_objective(args)) graph = time_objective_graph(std::move(graph));
  graph.name = fmt::format("{} batch {} on {}", args.model.empty() ? args.onnx_file : args.model,
                           args.batch, args.board);
  if (!forward.import_note.empty()) source += "\n" + args.onnx_file + ": " + forward.import_note;
  if (cost_source) *cost_source = source;
  if (source_kind) *source_kind = costs.kind;
  return graph;
}

namespace {

PlanOutcome plan_every_mode(const PlanArgs& args, const PlanProgress& progress) {
  const auto start = std::chrono::steady_clock::now();
  const auto board = devices::board_named(args.board);
  std::vector<std::string> modes;
  if (!args.db.empty() && costdb::database_exists(args.db)) {
    auto db = costdb::Database::open_read_only(args.db);
    modes = costdb::measured_power_modes(db, args.board);
  }
  if (modes.empty())
    for (const auto& m : board.power_modes) modes.emplace_back(m.name);
  if (modes.empty()) throw InputError("board " + args.board + " has no power modes to choose from");
  // One deadline for all: "1.3x" is of one pass in the board's default mode.
  PlanArgs a = args;
  std::string reference = std::string(board.power_mode);
  if (std::find(modes.begin(), modes.end(), reference) == modes.end()) reference = modes.front();
  a.power_mode = reference;
  const double reference_pass_s = load_graph(a).single_pass_time_s();
  const double deadline_s = parse_deadline(args.deadline, reference_pass_s);
  a.deadline = std::isfinite(deadline_s) ? fmt::format("{:.9g}s", deadline_s) : "none";
  // Per-phase pairs when the board switches cheaply: two switches under 5 % of a pass.
  std::vector<std::string> candidates = modes;
  std::string per_phase_note;
  if (modes.size() > 1 && args.graph_file.empty()) {
    const double switch_s = mode_switch_s(args);
    const double pass_s = reference_pass_s;
    if (2 * switch_s <= 0.05 * pass_s) {
      for (const auto& f : modes)
        for (const auto& b : modes)
          if (f != b) candidates.push_back(f + "/" + b);
    } else {
      per_phase_note = fmt::format(
          "per-phase modes not tried: switching takes {:.3g} s each way, over 5 % of a {:.3g} s pass", switch_s,
          pass_s);
    }
  }
  // No schedule costs less than one pass over its graph (plus the mode switches): planning
  // the cheapest passes first, a candidate whose pass alone costs no less than the best plan
  // so far cannot win and is not solved.
  std::vector<double> floor_j(candidates.size());
  for (std::size_t k = 0; k < candidates.size(); ++k) {
    a.power_mode = candidates[k];
    const planner::TrainingGraph g = load_graph(a);
    floor_j[k] = g.single_pass_energy_j() + mode_switches(a, g).energy_j;
  }
  std::vector<std::size_t> order(candidates.size());
  for (std::size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) { return floor_j[x] < floor_j[y]; });

  std::optional<PlanOutcome> best;
  std::optional<double> best_j;
  std::size_t best_k = 0;
  double best_limit_s = 0;  // the time limit the chosen mode was planned with
  std::vector<PlanOutcome::ModeTried> tried(candidates.size());
  auto elapsed_s = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  for (std::size_t n = 0; n < order.size(); ++n) {
    const std::size_t k = order[n];
    const std::string& mode = candidates[k];
    if (best_j && floor_j[k] >= *best_j) {
      tried[k] = {mode, std::nullopt, std::nullopt,
                  fmt::format("not planned: one pass alone costs {:.6g} J, no less than {:.6g} J in {}", floor_j[k],
                              *best_j, best->power_mode),
                  /*skipped=*/true};
      continue;
    }
    if (progress.on_mode) progress.on_mode(mode, n + 1, candidates.size());
    a.power_mode = mode;
    // The limit is the whole command's: each mode left gets an equal share of what remains.
    const double left_s = args.time_limit_s - elapsed_s();
    a.time_limit_s = std::max(0.5, left_s / static_cast<double>(order.size() - n));
    PlanOutcome o = plan(a, progress);
    PlanOutcome::ModeTried t{mode, std::nullopt, std::nullopt, o.result.why};
    if (o.sim) {
      t.energy_j = planner::objective_energy_j(*o.sim, o.request.objective) + o.switch_energy_j;
      t.time_s = planner::deadline_time_s(*o.sim, o.request.objective) + o.switch_time_s;
      if (!best_j || *t.energy_j < *best_j) {
        best_j = t.energy_j;
        best = std::move(o);
        best_k = k;
        best_limit_s = a.time_limit_s;
      }
    }
    tried[k] = std::move(t);
  }
  // The modes not planned (one pass in them alone cost more than the plan chosen) leave their
  // shares of the limit unused: the chosen mode is planned again with all of the time left,
  // where that is well more than it had and its plan is not proven, and the cheaper plan
  // stands. ResNet-18 CIFAR at 30 % of a Pi 4 with 6 s: full speed, the first of nine, got
  // 0.67 s (a 5.6 % gap) and the eight others were then skipped.
  const double left_s = args.time_limit_s - elapsed_s();
  if (best && best->result.status == planner::ModelStatus::kFeasible && left_s >= 1.0 && left_s > 2 * best_limit_s) {
    if (progress.on_mode_again) progress.on_mode_again(best->power_mode, left_s);
    a.power_mode = best->power_mode;
    a.time_limit_s = left_s;
    PlanOutcome o = plan(a, progress);
    if (o.sim) {
      const double energy_j = planner::objective_energy_j(*o.sim, o.request.objective) + o.switch_energy_j;
      if (energy_j < *best_j) {
        tried[best_k].energy_j = energy_j;
        tried[best_k].time_s = planner::deadline_time_s(*o.sim, o.request.objective) + o.switch_time_s;
        best_j = energy_j;
        best = std::move(o);
      }
    }
    best->again_s = left_s;
  }
  if (!best) {
    std::string why;
    for (const auto& t : tried) why += "\n  " + t.mode + ": " + t.why;
    throw InputError("no power mode of " + args.board + " has a schedule:" + why);
  }
  best->modes = std::move(tried);
  best->per_phase_note = std::move(per_phase_note);
  return std::move(*best);
}

}  // namespace

PlanOutcome plan(const PlanArgs& args, const PlanProgress& progress) {
  if (args.power_mode == "auto") return plan_every_mode(args, progress);
  if (!(args.time_limit_s > 0)) throw InputError("--time-limit must be positive");
  const auto start = std::chrono::steady_clock::now();
  parse_objective(args.objective);  // a typo fails before the graph is built
  PlanOutcome o;
  o.graph = load_graph(args, &o.cost_source, &o.costs);
  o.time_objective = time_objective(args);
  const auto& graph = o.graph;
  auto& req = o.request;
  req = make_request(args, graph);
  o.gap = choose_gap(args, graph);
  // The limit is the command's: what building the graph took is not the planner's.
  const double built_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  req.time_limit_s = std::max(0.5, args.time_limit_s - built_s);
  req.progress = progress.on_solve;
  // Per-phase modes: two switches an iteration (into the backward pass's mode and back).
  const ModeSwitches switches = mode_switches(args, graph);
  o.switch_time_s = switches.time_s;
  o.switch_energy_j = switches.energy_j;
  if (std::isfinite(req.deadline_s)) req.deadline_s = std::max(0.0, req.deadline_s - switches.time_s);
  auto solver = planner::make_cbc_solver();
  o.result = planner::run_planner(args.planner, graph, req, *solver);
  if (!o.result.schedule && o.switch_time_s > 0 && std::isfinite(req.deadline_s))
    o.result.why = fmt::format("{:.3g} s of the deadline go to switching modes twice; {}", o.switch_time_s,
                               o.result.why);

  o.power_mode = args.power_mode;
  o.store_all = planner::simulate(graph, planner::store_all_schedule(graph));
  if (o.result.schedule) {
    o.sim = planner::simulate(graph, *o.result.schedule,
                              planner::activation_budget_bytes(graph, req));
    if (!o.sim->valid)  // a planner bug, never a user error
      throw Error("internal error: the planned schedule fails the simulator: " + o.sim->error);
    o.encoded = planner::encode_schedule(*o.result.schedule, graph.size());
  }
  return o;
}

}  // namespace ergon::app
