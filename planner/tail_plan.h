#pragma once

#include <chrono>
#include <optional>

#include "planner/graph.h"
#include "planner/schedule.h"
#include "planner/stage_plan.h"

namespace ergon::planner {

/// The last stages of `plan` planned again exactly: from what `plan` holds in RAM and on
/// storage as a stage of the backward pass starts, the cheapest way through the stages
/// after it, found by a best-first search over what is resident (A*), and put in place of
/// `plan`'s own. The tail of a backward pass is where a tight budget costs most: the
/// largest activations and their gradients are needed there together, and a local search
/// that changes one bridge at a time pages the same tensor in twice where holding it, and
/// recomputing something else, costs less (resnet18-cifar at 30 % of the Pi 4: 0.7 % of
/// the plan's energy).
///
/// The search models a stage as POET's model does: page-ins before its computes, then its
/// computes in node order, each with its inputs resident and `budget` bytes at most, a
/// tensor dropped where that makes room. It charges compute and transfer energy, and a
/// page-out once per tensor, at its first page-in. The tail starts 8 stages from the end
/// and moves 4 stages earlier each time while time is left, the search finishes within its
/// state limit, and the stages hold at most 63 tensors. It follows a recomputation's inputs
/// two levels up the graph, then, while time is left, searches the same tails again
/// following every level that fits. Each result is measured as
/// `objective` measures plans (evaluate_stage_plan), the deadline and `budget` included, and
/// kept only where it is cheaper.
///
/// nullopt where no tail was cheaper in time. Never dearer than `plan`, always a valid plan.
std::optional<StagePlan> replan_tail(const TrainingGraph& graph, const StagePlan& plan, MemoryBudget budget,
                                     double deadline_s, AllowedMoves allowed, Objective objective,
                                     std::chrono::steady_clock::time_point stop_at);

/// A lower bound on the energy of any stage plan of a small graph (under 64 nodes) within
/// `budget_bytes`: the tail search over every stage from nothing resident, relaxed so that
/// it can only undercharge. Every way of making room is tried, a page-out is charged once,
/// at its tensor's first page-in, and under kTotal a transfer costs its energy above idle
/// alone (a stage lasts at least its computes, so a recomputation's time at idle power
/// counts in full; whether a stage hides a transfer is not asked). Where the search ends
/// this is the optimum of that relaxation; stopped at `stop_at` or `max_states`, the least
/// estimated total of what it left open. The deadline and a stash budget are left out.
/// On the MLP on the TX2 at half of store-all under poet it is the plan's energy: the plan is
/// optimal, which the memory bound (3.7 % below) cannot show.
/// nullopt for larger graphs, where a way of making room had to be left out, or where no
/// schedule exists.
std::optional<double> whole_graph_bound_j(const TrainingGraph& graph, uint64_t budget_bytes, AllowedMoves allowed,
                                          Objective objective, std::chrono::steady_clock::time_point stop_at,
                                          std::size_t max_states);

/// whole_graph_bound_j()'s search, with the plan it ends on.
struct WholeGraphSearch {
  double bound_j = 0;
  bool ended = false;  ///< bound_j is the relaxation's optimum: a longer search finds no more
  /// Where the search ended: its cheapest way through, as a stage plan that check_stage_plan()
  /// accepts and that the stage model and the simulator take within the budget. Under kPoet
  /// it costs bound_j; under kTotal the stage model charges it the transfer time the
  /// relaxation leaves out. Neither the deadline nor a stash budget is checked. nullopt where
  /// the search stopped first, or where its way does not hold as a plan.
  std::optional<StagePlan> plan;
};
std::optional<WholeGraphSearch> whole_graph_search(const TrainingGraph& graph, uint64_t budget_bytes,
                                                   AllowedMoves allowed, Objective objective,
                                                   std::chrono::steady_clock::time_point stop_at,
                                                   std::size_t max_states);

}  // namespace ergon::planner
