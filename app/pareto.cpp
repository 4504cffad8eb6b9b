#include "app/pareto.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "common/clock.h"
#include "common/error.h"
#include "costdb/cost_model.h"
#include "devices/board_profile.h"
#include "planner/graph_json.h"
#include "planner/planners.h"
#include "planner/schedule.h"

namespace ergon::app {
namespace {

std::vector<std::string> split_names(const std::string& text) {
  std::vector<std::string> names;
  std::stringstream in(text);
  for (std::string name; std::getline(in, name, ',');) {
    if (name.empty()) continue;
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  if (names.empty()) throw InputError("--planners is empty (e.g. poet,checkmate,paging)");
  for (const auto& name : names) {
    const auto& known = planner::planner_names();
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      throw InputError("unknown planner '" + name + "' (known: " + list + ")");
    }
  }
  return names;
}

/// Budgets in the objective's terms: under total, fixed bytes on top of the activations'.
std::vector<uint64_t> budget_grid(const planner::TrainingGraph& graph, int count,
                                  planner::Objective objective) {
  if (count < 1) throw InputError("--budgets must be at least 1");
  const uint64_t fixed = objective == planner::Objective::kTotal ? graph.fixed_bytes : 0;
  const uint64_t lo = graph.min_working_set_bytes() + fixed;
  const uint64_t hi = std::max(graph.store_all_peak_bytes() + fixed, lo);
  std::vector<uint64_t> grid;
  for (int k = 0; k < count; ++k) {
    const double f = count == 1 ? 1.0 : static_cast<double>(k) / (count - 1);
    grid.push_back(lo + static_cast<uint64_t>(std::llround(f * static_cast<double>(hi - lo))));
  }
  grid.erase(std::unique(grid.begin(), grid.end()), grid.end());
  return grid;
}

struct Task {
  std::string planner;
  uint64_t budget_bytes = 0;
};


/// A front is one planner's in one power mode: "poet", or "poet@MAXQ".

void mark_fronts(std::vector<ParetoPoint>& points) {
  std::map<std::string, double> best;  // lowest energy so far per series, budgets ascending
  std::stable_sort(points.begin(), points.end(), [](const auto& a, const auto& b) {
    return std::pair(series_name(a.plan), a.plan.budget_bytes) < std::pair(series_name(b.plan), b.plan.budget_bytes);
  });
  for (auto& p : points) {
    if (!p.plan.energy_j) continue;
    const std::string series = series_name(p.plan);
    auto it = best.find(series);
    if (it == best.end() || *p.plan.energy_j < it->second * (1 - 1e-12)) {
      p.on_front = true;
      best[series] = *p.plan.energy_j;
    }
  }
}

/// --power-mode all or MODE,MODE: each mode's sweep, against one deadline in seconds (a
/// factor is of one pass in the board's default mode). Empty when there is one mode or none.
std::vector<std::string> sweep_modes_of(const PlanArgs& plan) {
  if (plan.power_mode != "all" && plan.power_mode.find(',') == std::string::npos) return {};
  const auto board = devices::board_named(plan.board);
  std::vector<std::string> modes;
  if (plan.power_mode == "all") {
    for (const auto& m : board.power_modes) modes.emplace_back(m.name);
  } else {
    std::stringstream ss(plan.power_mode);
    for (std::string m; std::getline(ss, m, ',');) modes.push_back(m);
  }
  return modes;
}

}  // namespace

std::string series_name(const costdb::PlanRow& r) {
  return r.power_mode.empty() ? r.planner : r.planner + "@" + r.power_mode;
}

costdb::PlanRow to_plan_row(const planner::TrainingGraph& graph, const std::string& model,
                       const std::string& board, costdb::PlanCostSource costs,
                       const std::string& digest,
                       const planner::PlanRequest& req, const planner::PlanResult& r,
                       const ModeSwitches& switches) {
  costdb::PlanRow row;
  row.model = model;
  row.board_kind = board;
  row.cost_source = costs;
  row.graph_digest = digest;
  row.budget_bytes = req.budget_bytes;
  if (std::isfinite(req.deadline_s)) row.deadline_s = req.deadline_s;
  row.planner = r.planner;
  row.objective = planner::to_string(req.objective);
  row.status = planner::to_string(r.status);
  row.solve_time_s = r.solve_time_s;
  row.created_at_ns = wall_time_ns();
  if (!r.schedule) return row;
  const auto sim =
      planner::simulate(graph, *r.schedule, planner::activation_budget_bytes(graph, req));
  if (!sim.valid)  // a planner bug, never a user error
    throw Error("internal error: " + r.planner + "'s schedule fails the simulator: " + sim.error);
  row.objective_j = r.objective_j;
  row.bound_j = r.bound_j;
  row.gap = r.gap;
  row.energy_j = planner::objective_energy_j(sim, req.objective) + switches.energy_j;
  row.time_s = planner::deadline_time_s(sim, req.objective) + switches.time_s;
  row.paging_time_s = sim.paging_time_s;
  row.peak_bytes = sim.peak_bytes;
  row.schedule = planner::encode_schedule(*r.schedule, graph.size());
  return row;
}

PlanArgs graph_args_of(const costdb::PlanRow& row, const std::string& db) {
  PlanArgs args;
  args.model = row.model;
  args.board = row.board_kind;
  args.power_mode = row.power_mode;
  if (row.objective == "time") args.objective = "time";  // its graph is the time objective's
  if (row.cost_source == costdb::PlanCostSource::kMeasured) {
    args.db = db;
    if (row.costs_from_iterations) args.costs = "iteration";
  }
  return args;
}

std::string graph_digest(const planner::TrainingGraph& graph) {
  const std::string text = planner::to_graph_json(graph);
  uint64_t h = 14695981039346656037ULL;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ULL;
  }
  return fmt::format("{:016x}", h);
}

namespace {

/// What every solve of one sweep shares.
struct SweepSetup {
  planner::TrainingGraph graph;
  std::string digest, model, board, objective;
  costdb::PlanCostSource costs = costdb::PlanCostSource::kProfile;
  bool costs_from_iterations = false;  ///< measured costs with --costs iteration
  planner::PlanRequest base;           ///< the deadline less per-phase mode switches
  std::optional<double> deadline_s;    ///< the user's, switches included: what a rerun looks up
  ModeSwitches switches;
};

SweepSetup prepare(const ParetoArgs& args, const std::function<void(const std::string&)>& on_line) {
  SweepSetup s;
  PlanArgs graph_args = args.plan;
  if (args.measured) graph_args.db = args.db;
  std::string cost_source;
  s.graph = load_graph(graph_args, &cost_source);
  if (on_line && args.measured) on_line(cost_source);
  s.costs = args.measured ? costdb::PlanCostSource::kMeasured : costdb::PlanCostSource::kProfile;
  s.costs_from_iterations = args.measured && timed_in(args.plan) == costdb::TimedIn::kIteration;
  s.digest = graph_digest(s.graph);
  s.model = args.plan.model.empty() ? (args.plan.onnx_file.empty() ? s.graph.name : args.plan.onnx_file)
                                    : args.plan.model;
  s.board = args.plan.graph_file.empty() ? args.plan.board : "graph-file";
  s.base = make_request(args.plan, s.graph);
  s.objective = planner::to_string(s.base.objective);
  if (std::isfinite(s.base.deadline_s)) s.deadline_s = s.base.deadline_s;
  // Per-phase modes: the two switches an iteration takes come out of the deadline and go into
  // each plan's time and energy.
  s.switches = mode_switches(graph_args, s.graph);
  if (s.deadline_s) s.base.deadline_s = std::max(0.0, *s.deadline_s - s.switches.time_s);
  return s;
}

std::string point_line(std::size_t stored, std::size_t total, const costdb::PlanRow& row) {
  return fmt::format("[{:>3}/{}] {:<10} budget {:>10} B  {}", stored, total, row.planner, row.budget_bytes,
                     row.energy_j ? fmt::format("{:.6g} J ({}, {:.1f} s)", *row.energy_j, row.status, row.solve_time_s)
                                  : row.status);
}

/// Solves `todo` on `jobs` worker threads; this thread alone writes the database (it is not
/// thread-safe), committing each plan as soon as it is known so that a rerun resumes. On
/// cancel, no new solve starts and the running ones are stored. Throws the first failure.
void solve_and_store(const ParetoArgs& args, const SweepSetup& s, const std::vector<Task>& todo, int jobs,
                     costdb::Database& db, std::vector<ParetoPoint>& points,
                     const std::function<void(const std::string&)>& on_line) {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::optional<costdb::PlanRow>> done(todo.size());
  std::optional<std::string> failure;
  std::atomic<std::size_t> next{0};
  std::atomic<bool> stopping{false};  // storing failed: no new solve starts
  const auto canceled = [&] { return stopping.load() || (args.cancel != nullptr && args.cancel->load()); };
  auto worker = [&] {
    for (std::size_t i = next++; i < todo.size() && !canceled(); i = next++) {
      std::optional<costdb::PlanRow> row;
      std::string error;
      try {
        planner::PlanRequest req = s.base;
        req.budget_bytes = todo[i].budget_bytes;
        req.threads = jobs > 1 ? 1 : args.plan.threads;
        auto solver = planner::make_cbc_solver();
        const auto r = planner::run_planner(todo[i].planner, s.graph, req, *solver);
        row = to_plan_row(s.graph, s.model, s.board, s.costs, s.digest, req, r, s.switches);
        row->power_mode = args.plan.power_mode;
        row->costs_from_iterations = s.costs_from_iterations;
        row->deadline_s = s.deadline_s;
      } catch (const std::exception& e) {
        error = e.what();
      }
      std::lock_guard lock(mu);
      if (row) {
        done[i] = std::move(row);
      } else if (!failure) {
        failure = error;
      }
      cv.notify_one();
      if (failure) return;
    }
  };
  std::vector<std::thread> threads;
  // A failure to store (a database that went away, a role that may not write) ends the sweep
  // with its error once the running solves are joined, never with their threads still running.
  struct JoinOnUnwind {
    std::vector<std::thread>& threads;
    std::atomic<bool>& stopping;
    ~JoinOnUnwind() {
      stopping = true;
      for (auto& t : threads)
        if (t.joinable()) t.join();
    }
  } join_on_unwind{threads, stopping};
  for (int j = 0; j < jobs && !todo.empty(); ++j) threads.emplace_back(worker);

  std::size_t stored = 0;
  std::vector<char> written(todo.size(), 0);
  bool joined = false;
  while (stored < todo.size()) {
    std::unique_lock lock(mu);
    const auto ready = [&] {
      for (std::size_t i = 0; i < todo.size(); ++i)
        if (done[i] && !written[i]) return true;
      return false;
    };
    cv.wait_for(lock, std::chrono::milliseconds(100), [&] { return failure || ready() || canceled(); });
    if (failure) break;
    if (canceled() && !ready()) {
      if (joined) break;  // every solve that started is stored
      lock.unlock();
      for (auto& t : threads) t.join();  // the running solves finish; store them, then stop
      joined = true;
      continue;
    }
    for (std::size_t i = 0; i < todo.size(); ++i) {
      if (!done[i] || written[i]) continue;
      written[i] = 1;
      ++stored;
      costdb::PlanRow row = *done[i];
      lock.unlock();
      row.id = costdb::add_plan(db, row);
      db.commit_batch();
      if (on_line) on_line(point_line(stored, todo.size(), row));
      points.push_back({.plan = std::move(row)});
      if (args.on_point) args.on_point(stored, todo.size());
      lock.lock();
    }
  }
  if (!joined)
    for (auto& t : threads) t.join();
  if (failure) throw Error(*failure);
}

/// The planners whose schedules `planner` may adopt: its own (a schedule within a smaller
/// budget fits a larger one), and for POET those of the models it contains. Heuristic
/// baselines adopt nothing: their answer at a budget is their algorithm's.
bool may_adopt(const std::string& planner, const std::string& donor) {
  if (planner == "poet") return donor == "poet" || donor == "paging" || donor == "checkmate";
  if (planner == "paging" || planner == "checkmate") return donor == planner;
  return false;
}

/// Shares incumbents across the sweep: a plan dearer than one of a planner it may adopt from
/// at the same or a smaller budget (same graph, objective and deadline) takes that schedule,
/// keeping its own bound, and is updated in the database. Each MILP planner's front is then
/// monotone, and POET's never above paging-only's or checkmate's. Returns how many adopted.
int share_incumbents(std::vector<ParetoPoint>& points, double gap, costdb::Database& db) {
  std::vector<ParetoPoint*> by_budget;
  for (auto& p : points) by_budget.push_back(&p);
  std::stable_sort(by_budget.begin(), by_budget.end(),
                   [](const ParetoPoint* a, const ParetoPoint* b) { return a->plan.budget_bytes < b->plan.budget_bytes; });
  int adopted = 0;
  for (ParetoPoint* p : by_budget) {
    costdb::PlanRow& row = p->plan;
    const ParetoPoint* donor = nullptr;
    for (const ParetoPoint* d : by_budget) {
      if (d->plan.budget_bytes > row.budget_bytes) break;
      if (d == p || !d->plan.energy_j || d->plan.schedule.empty() || !may_adopt(row.planner, d->plan.planner)) continue;
      const double best_j = donor ? *donor->plan.energy_j : row.energy_j.value_or(std::numeric_limits<double>::infinity());
      if (*d->plan.energy_j < best_j * (1 - 1e-12)) donor = d;
    }
    if (donor == nullptr) continue;
    const costdb::PlanRow& from = donor->plan;
    row.schedule = from.schedule;
    row.energy_j = from.energy_j;
    row.time_s = from.time_s;
    row.paging_time_s = from.paging_time_s;
    row.peak_bytes = from.peak_bytes;
    row.objective_j = from.objective_j;
    if (row.bound_j && row.objective_j) {
      row.bound_j = std::min(*row.bound_j, *row.objective_j);
      row.gap = (*row.objective_j - *row.bound_j) / std::max(*row.objective_j, 1e-300);
      row.status = *row.gap <= gap ? "optimal" : "feasible";
    } else {
      row.status = "feasible";
    }
    if (row.id > 0) costdb::update_plan_answer(db, row);
    ++adopted;
  }
  if (adopted > 0) db.commit_batch();
  return adopted;
}

}  // namespace

namespace {

/// The sweep of one power mode (or of none); `next_cell` numbers its cells on from the modes
/// before it.
std::vector<ParetoPoint> sweep_one_mode(const ParetoArgs& args, const std::function<void(const std::string&)>& on_line,
                                        std::size_t& next_cell) {
  const auto names = split_names(args.planners);
  const SweepSetup setup = prepare(args, on_line);
  const auto grid = budget_grid(setup.graph, args.budgets, setup.base.objective);
  auto db = costdb::Database::open(args.db);
  std::vector<ParetoPoint> points;
  std::vector<Task> todo;
  for (const auto& name : names) {
    for (uint64_t budget : grid) {
      const std::size_t index = next_cell++;
      if (args.cell && *args.cell != index) continue;
      std::optional<costdb::PlanRow> found;
      if (!args.fresh || !args.solve) found = costdb::find_plan(db, setup.digest, name, setup.objective, budget, setup.deadline_s);
      if (found) {
        points.push_back({.plan = std::move(*found), .reused = true});
      } else if (!args.solve) {
        if (args.missing) args.missing->push_back({index, name, budget, args.plan.power_mode});
      } else {
        todo.push_back({name, budget});
      }
    }
  }
  if (args.cell && points.empty() && todo.empty()) return points;  // another mode's cell
  const int cores = static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
  const int jobs = std::clamp(args.jobs > 0 ? args.jobs : cores, 1, std::max(1, static_cast<int>(todo.size())));
  if (on_line && args.solve)
    on_line(fmt::format("{}: {} planners x {} budgets; {} stored already, {} to solve, {} at a time, each to a "
                        "{:.3g} % gap or {:.3g} s",
                        setup.graph.name, names.size(), grid.size(), points.size(), todo.size(), jobs,
                        100 * choose_gap(args.plan, setup.graph).gap, args.plan.time_limit_s));
  solve_and_store(args, setup, todo, jobs, db, points, on_line);
  if (args.cell) return points;  // one cell: sharing is the collecting sweep's
  // Points of other modes or deadlines are not in this call: every point here shares graph,
  // objective and deadline.
  const int adopted = share_incumbents(points, choose_gap(args.plan, setup.graph).gap, db);
  if (on_line && adopted > 0)
    on_line(fmt::format("{} plan(s) took a cheaper schedule found at a smaller budget or by a model POET contains",
                        adopted));
  mark_fronts(points);
  return points;
}

}  // namespace

std::vector<ParetoPoint> pareto_sweep(const ParetoArgs& args, const std::function<void(const std::string&)>& on_line) {
  std::size_t cells = 0;
  std::vector<ParetoPoint> all;
  if (const auto modes = sweep_modes_of(args.plan); !modes.empty()) {
    ParetoArgs a = args;
    const auto board = devices::find_board(args.plan.board);
    a.plan.power_mode = std::string(board->power_mode);
    const double deadline_s = parse_deadline(args.plan.deadline, load_graph(a.plan).single_pass_time_s());
    a.plan.deadline = std::isfinite(deadline_s) ? fmt::format("{:.9g}s", deadline_s) : "none";
    for (const auto& mode : modes) {
      a.plan.power_mode = mode;
      auto points = sweep_one_mode(a, on_line, cells);
      all.insert(all.end(), points.begin(), points.end());
    }
    mark_fronts(all);
  } else {
    all = sweep_one_mode(args, on_line, cells);
  }
  if (args.cell && *args.cell >= cells)
    throw InputError(fmt::format("--cell {}: this sweep has cells 0 to {}", *args.cell, cells - 1));
  return all;
}

}  // namespace ergon::app
