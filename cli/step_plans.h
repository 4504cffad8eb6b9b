#pragma once

// Plans a board runs that come from the planner's graphs: a model's own layer shapes to
// profile, and a training schedule to execute step by step.

#include <cstdint>
#include <string>

#include "devices/profile_plan.h"
#include "planner/graph.h"
#include "planner/schedule.h"

namespace ergon::cli {

/// The op kind a board runs a node as; kinds the wire has no code for run as generic work
/// (linear): a board needs only the node's FLOPs and bytes to execute it.
profiler::OpKind op_kind_of(const std::string& op);

/// A profile plan of the model's own shapes: every distinct (FLOPs, bytes) of its forward and
/// backward nodes, three windows each, paging of its smallest, median and largest activation
/// both ways, an idle window first and idle gaps between, in an order shuffled by `seed`.
/// With it, ergon plan --db finds every node of the model measured.
devices::ProfilePlan model_profile_plan(const planner::TrainingGraph& graph, uint32_t seed);

/// One entry per compute and transfer of `schedule`, in order, each run once (op ids are step
/// numbers: a node recomputed twice is two entries), for a schedule-mode run.
devices::ProfilePlan schedule_plan(const planner::TrainingGraph& graph,
                                   const planner::Schedule& schedule);

}  // namespace ergon::cli
