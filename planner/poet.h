#pragma once

#include <functional>
#include <optional>
#include <string>

#include "planner/graph.h"
#include "planner/milp.h"
#include "planner/schedule.h"
#include "planner/stage_plan.h"

namespace ergon::planner {

/// What the user asks of a planner.
struct PlanRequest {
  Objective objective = Objective::kPoet;
  /// kPoet: activation memory (fixed bytes not counted); kTotal: all memory, fixed bytes too,
  /// unless `activations_only`.
  uint64_t budget_bytes = 0;
  /// Set by for_activations(): budget_bytes is activation memory whatever the objective.
  bool activations_only = false;
  /// The most memory, counted as budget_bytes is, that the plan may still hold once the
  /// forward pass is over (what it keeps for the backward pass, ScheduleReport::stash_bytes).
  /// A pipeline stage sets it: each micro-batch in flight holds its own stash. No limit by
  /// default.
  uint64_t stash_budget_bytes = std::numeric_limits<uint64_t>::max();
  /// kPoet: compute time of the iteration (paging time not counted); kTotal: its makespan.
  double deadline_s = 0;
  double time_limit_s = 10;  ///< bounds the whole call, solver included
  double relative_gap = 1e-6;
  int threads = 1;
  /// POET may recompute and page; turning one off gives the Checkmate-style remat-only MILP
  /// or a paging-only one, on the same model.
  AllowedMoves allowed;
  /// POET answers with a contained baseline's schedule where it is cheaper than its own
  /// plan (it is never worse than a schedule its moves contain). False where the caller
  /// weighs schedules by more than the objective, as a pipeline stage weighs its stash: the
  /// baselines then only seed the search, and stand only where it finds nothing.
  bool baseline_may_answer = true;
  /// Hears each phase as it starts and the best plan and bound as they improve. The greedy
  /// search calls it from its second thread too (threads >= 2), never two calls at once.
  std::function<void(const SolveProgress&)> progress;
  std::vector<std::pair<std::string, std::string>> solver_parameters;
};

struct PlanResult {
  std::string planner;
  CallStatus call = CallStatus::kOk;
  ModelStatus status = ModelStatus::kNoSolutionFound;
  /// Why there is no schedule (infeasible budget or deadline, with the smallest that works
  /// when it is known), or why the call failed. Empty when a schedule was found.
  std::string why;
  /// What the user should know about a schedule that was found (e.g. the solver failed and
  /// a heuristic's plan stands). Empty when there is nothing to say.
  std::string note;
  std::optional<Schedule> schedule;
  double objective_j = 0;  ///< the planner's own claim, in the request's objective
  double bound_j = 0;      ///< proven lower bound on the objective
  double gap = 0;
  double solve_time_s = 0;
  /// The planner's claimed peak activation memory, fixed bytes not included (an upper bound
  /// on what the simulator measures).
  uint64_t claimed_peak_bytes = 0;
  int variables = 0;
  int integers = 0;
  int rows = 0;
  std::size_t nonzeros = 0;
};

/// POET's MILP (Patil et al., ICML 2022), exactly as DESIGN.md states it, on top of
/// Checkmate's rematerialization model: T = n stages, stage t ends with node t computed;
/// binaries R (compute), S_RAM / S_SSD (resident at stage start), M_in / M_out (paging);
/// continuous Free (per stage and edge, including each node's self-edge as in Checkmate,
/// bounded by each factor of its product) and U (memory after each node of a stage).
/// Variables that must be zero are not created. Minimizes compute + paging energy subject to
/// memory <= budget and compute time <= deadline. The memory bound (planner/bounds.h) often
/// proves the greedy stage plan within the gap, and then no model is built. Otherwise the
/// paging-only and recomputation-only models are solved first (a fifth of the time left
/// each) and the cheapest plan found warm-starts the full model, so the answer is never
/// dearer than theirs. `request.time_limit_s` bounds the whole call.
PlanResult plan_poet(const TrainingGraph& graph, const PlanRequest& request, MilpSolver& solver);

/// The POET model of a request, the warm start plan_poet gives the solver (store-all, when it
/// fits) and the fallback it returns when the solver finds nothing (store-all, else the
/// paging heuristic, else none). For tests and tools.
struct PoetModelInfo {
  MilpModel model;
  std::optional<std::vector<double>> warm_start;
  std::optional<std::vector<double>> fallback;
};
PoetModelInfo build_poet_model(const TrainingGraph& graph, const PlanRequest& request);

/// Checks a request against what any schedule needs before solving: the budget against the
/// largest single-node working set (plus fixed bytes under kTotal), the deadline against one
/// pass. Empty when plausible.
std::string infeasibility_reason(const TrainingGraph& graph, const PlanRequest& request);

/// The memory a request leaves activations: its budget under kPoet; under kTotal what fixed
/// bytes leave of it (0 when they do not fit).
uint64_t activation_budget_bytes(const TrainingGraph& graph, const PlanRequest& request);
/// The request with budget_bytes = activation_budget_bytes(): what planners count against.
PlanRequest for_activations(const TrainingGraph& graph, const PlanRequest& request);

}  // namespace ergon::planner
