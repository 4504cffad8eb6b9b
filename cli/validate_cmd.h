#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>

#include "cli/plan_cmd.h"

namespace ergon::cli {

struct ValidateArgs {
  PlanArgs plan;               ///< what to plan (plan.db is set from `db`)
  /// Validate this stored plan (e.g. from ergon pareto) instead of planning: its graph is
  /// rebuilt from its model and board (batch 1) and must match the stored digest.
  std::optional<int64_t> plan_id;
  std::string db = "ergon.db";  ///< measured costs come from here; plan, run and result go here
  std::string port;             ///< a board running the agent; empty: a simulated one on a pty
  bool json = false;
};

/// A plan executed step by step on a board, predicted against measured.
struct ValidateOutcome {
  planner::TrainingGraph graph;
  planner::Schedule schedule;
  std::string cost_source;
  std::string description;  ///< what was planned, for people
  int64_t plan_id = 0;
  int64_t run_id = 0;
  int steps = 0;              ///< computes and transfers executed
  int steps_attributed = 0;   ///< whose power samples arrived
  double predicted_energy_j = 0;  ///< the steps' costs in the planner's graph, executed in order
  double measured_energy_j = 0;   ///< the attributed gross energy of the steps
  double predicted_time_s = 0;
  double measured_time_s = 0;
};

/// Plans (with the board's measured costs when `db` has them), sends the schedule to the
/// board as a schedule-mode run (one entry per compute, page-out and page-in, in order),
/// records and attributes it, and stores the plan, the run and a validations row. The board
/// executes one step at a time, so predicted time and energy are the schedule's sequential
/// sums (POET's accounting). Throws InputError when no schedule exists or the graph carries
/// no FLOP counts (a graph JSON file).
ValidateOutcome validate(const ValidateArgs& args, std::ostream& progress);

/// `ergon validate`: prints predicted against measured (or JSON); returns the exit code.
int run_validate(const ValidateArgs& args, std::ostream& out);

}  // namespace ergon::cli
