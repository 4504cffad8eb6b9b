#pragma once

#include <atomic>
#include <functional>
#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "app/plan.h"
#include "costdb/plans.h"

namespace ergon::app {

/// One cell of a sweep: a planner at a budget in a power mode. Cells are numbered in sweep
/// order (modes, then planners, then budgets ascending): a Slurm array task solves one.
struct ParetoCell {
  std::size_t index = 0;
  std::string planner;
  uint64_t budget_bytes = 0;
  std::string power_mode;
};

struct ParetoArgs {
  PlanArgs plan;  ///< what to plan: model / onnx / graph, batch, board and mode; deadline, gap, time limit
  std::string planners = "poet,checkmate,paging";
  int budgets = 10;  ///< points from the largest working set to store-all's peak
  int jobs = 0;      ///< concurrent solves; 0: one per core
  std::string db = "ergon.db";
  bool fresh = false;  ///< re-solve even when the database holds the plan
  bool measured = false;  ///< cost the graph with the board's measurements in `db`
  /// Set to stop early: no new solve starts, the running ones finish and are stored, and the
  /// points so far are returned (the dashboard's cancel button).
  const std::atomic<bool>* cancel = nullptr;
  /// Called after each point is stored, with the points done and the points to do.
  std::function<void(std::size_t done, std::size_t total)> on_point;
  /// A Slurm array task: solve and store this cell alone (nothing shared between cells; the
  /// collecting sweep shares incumbents). InputError when the sweep has no such cell.
  std::optional<std::size_t> cell;
  /// false: solve nothing; return the stored plans (incumbents shared, fronts marked) and put
  /// the cells without one in `missing` (ergon pareto --collect, and counting the cells).
  bool solve = true;
  std::vector<ParetoCell>* missing = nullptr;
};

/// One planner at one budget, as the sweep stored (or found) it.
struct ParetoPoint {
  costdb::PlanRow plan;
  bool reused = false;    ///< found in the database, not solved now
  bool on_front = false;  ///< no point of this planner with a budget <= has lower energy
};

/// Sweeps the budget grid for each planner, `jobs` solves at a time, storing every plan in
/// the database (a rerun reuses what is there). Returns the points by planner, then budget.
/// `on_line` gets a line on what is to be done, then one per finished point.
std::vector<ParetoPoint> pareto_sweep(const ParetoArgs& args,
                                      const std::function<void(const std::string&)>& on_line = {});

/// The series a stored plan belongs to: its planner, with "@mode" when it has a power mode.
std::string series_name(const costdb::PlanRow& r);

/// A plan as the plans table stores it, with the simulator's replay of its schedule.
/// `costs` says whose costs the graph carries. With per-phase modes, `switches`
/// go into its energy and time; its deadline is the request's (pareto_sweep then stores the
/// user's, switches included, which a rerun looks up).
costdb::PlanRow to_plan_row(const planner::TrainingGraph& graph, const std::string& model,
                            const std::string& board, costdb::PlanCostSource costs,
                            const std::string& digest, const planner::PlanRequest& req,
                            const planner::PlanResult& r, const ModeSwitches& switches = {});

/// The arguments that rebuild a stored plan's graph (as it was planned: model, board, power
/// mode, objective, and its costs: the profile's, or the measurements in `db`, timed where
/// the plan's were); graph_digest() then tells whether the rebuilt graph is the same.
PlanArgs graph_args_of(const costdb::PlanRow& row, const std::string& db);

/// A stable digest (FNV-1a 64, hex) of a graph with its costs: plans are reused only for
/// the same one.
std::string graph_digest(const planner::TrainingGraph& graph);

}  // namespace ergon::app
