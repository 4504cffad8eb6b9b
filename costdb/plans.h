#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "costdb/database.h"

namespace ergon::costdb {

/// Whose costs a plan was made on.
enum class PlanCostSource {
  kProfile,   ///< the board's published profile
  kMeasured,  ///< the board's attributed measurements in the database
};
/// "profile" or "measured", as the plans table stores it.
std::string_view to_string(PlanCostSource source);

/// One planner's answer to one request, as the `plans` table keeps it. The planner library
/// is not a dependency: callers fill plain fields.
struct PlanRow {
  int64_t id = 0;              ///< set by add_plan
  std::string model;           ///< what was planned, e.g. "resnet18-cifar batch 1"
  std::string board_kind;      ///< whose costs: "pi4", ...
  PlanCostSource cost_source = PlanCostSource::kProfile;
  /// kMeasured costs with executed iterations' step times standing for their shapes
  /// (`--costs iteration`; the plans table's costs_timed_in 'iteration').
  bool costs_from_iterations = false;
  std::string graph_digest;    ///< identifies graph and costs; plans are reused only for equal ones
  uint64_t budget_bytes = 0;
  std::optional<double> deadline_s;  ///< none: no deadline
  std::string planner;         ///< "poet", "checkmate", "chen", ...
  std::string objective = "poet";
  std::string status;          ///< "optimal", "feasible", "infeasible", ...
  std::optional<double> objective_j, bound_j, gap;
  /// The simulator's replay of the schedule (absent without one).
  std::optional<double> energy_j, time_s, paging_time_s;
  std::optional<uint64_t> peak_bytes;
  double solve_time_s = 0;
  std::vector<uint8_t> schedule;  ///< the encoded schedule ("ES" v1), empty without one
  int64_t created_at_ns = 0;
  std::string power_mode;  ///< the board's power mode whose costs were planned on; empty: default
};

/// Stores a plan in the current batch (the board row is created if missing); returns its id.
int64_t add_plan(Database& db, const PlanRow& plan);

/// Replaces a stored plan's answer (status, objective, bound, gap, the simulator's replay and
/// the schedule) by id, in the current batch: a sweep adopting a better schedule found at a
/// smaller budget. DatabaseError when there is no such plan.
void update_plan_answer(Database& db, const PlanRow& plan);

/// The stored plan for the same graph digest, planner, objective, budget and deadline (the
/// latest if several), for resuming a sweep.
std::optional<PlanRow> find_plan(Database& db, const std::string& graph_digest,
                                 const std::string& planner, const std::string& objective,
                                 uint64_t budget_bytes, std::optional<double> deadline_s);

/// A plan executed on a board (or the simulator), predicted against measured.
struct ValidationRow {
  int64_t plan_id = 0;
  int64_t run_id = 0;
  std::optional<double> predicted_energy_j, measured_energy_j;
  std::optional<double> predicted_time_s, measured_time_s;
  std::optional<uint64_t> predicted_peak_bytes, measured_peak_bytes;
};

/// Stores a validation in the current batch; returns its id.
int64_t add_validation(Database& db, const ValidationRow& v);

/// Every stored validation, oldest first.
std::vector<ValidationRow> list_validations(Database& db);

/// The runs that validations of `planner`'s plans executed (e.g. "page-all", the paging
/// calibration of costdb::TimedIn::kIteration).
std::vector<int64_t> runs_validating_planner(Database& db, const std::string& planner);

/// The plan with this id; nullopt when there is none.
std::optional<PlanRow> find_plan_by_id(Database& db, int64_t plan_id);

/// Every stored plan of a graph digest (all plans when empty), by planner then budget.
std::vector<PlanRow> list_plans(Database& db, const std::string& graph_digest = {});

}  // namespace ergon::costdb
