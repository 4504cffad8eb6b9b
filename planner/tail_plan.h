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
/// state limit, and the stages hold at most 63 tensors. Each result is measured as
/// `objective` measures plans (evaluate_stage_plan), the deadline and `budget` included, and
/// kept only where it is cheaper.
///
/// nullopt where no tail was cheaper in time. Never dearer than `plan`, always a valid plan.
std::optional<StagePlan> replan_tail(const TrainingGraph& graph, const StagePlan& plan, MemoryBudget budget,
                                     double deadline_s, AllowedMoves allowed, Objective objective,
                                     std::chrono::steady_clock::time_point stop_at);

}  // namespace ergon::planner
