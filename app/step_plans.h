#pragma once

// Plans a board runs that come from the planner's graphs: a model's own layer shapes to
// profile, and a training schedule to execute step by step.

#include <cstdint>
#include <string>

#include "devices/profile_plan.h"
#include "planner/graph.h"
#include "planner/schedule.h"

namespace ergon::app {

/// What a board runs for node `node` of `graph`, carrying the node's FLOPs and bytes: the
/// node's own kernel at its real shape when the graph knows its forward graph's tensor shapes
/// (zoo models); otherwise (ONNX and JSON graphs, or an op the kernels do not cover) a
/// matrix product of about the node's FLOPs, so the board still does the node's work.
profiler::OpShape node_shape(const planner::TrainingGraph& graph, int node);

/// The cache ladder of model_profile_plan: an add of this many elements (192 KiB in all),
/// timed with its tensors cycled through each of these many copies (0: the default rotation,
/// from memory), from 0 to 63.75 MiB touched between two runs on one copy.
inline constexpr uint32_t kCacheLadderElements = 16384;
inline constexpr uint16_t kCacheLadder[] = {0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64, 96, 128, 192, 256, 341};

/// A profile plan of the model's own shapes: every distinct (FLOPs, bytes) of its forward and
/// backward nodes, three windows each, each also warm (PlannedOp::copies 1), the cache
/// ladder, paging of its smallest, median and largest activation both ways, an idle window
/// first and idle gaps between, in an order shuffled by `seed`. With it, ergon plan --db
/// finds every node of the model measured, and ergon validate can say what the board's
/// caches make of each step.
devices::ProfilePlan model_profile_plan(const planner::TrainingGraph& graph, uint32_t seed);

/// One entry per compute and transfer of `schedule`, in order, each run once (op ids are step
/// numbers: a node recomputed twice is two entries), for a schedule-mode run.
devices::ProfilePlan schedule_plan(const planner::TrainingGraph& graph,
                                   const planner::Schedule& schedule);

/// The first entry of schedule_plan(graph, schedule) in the backward phase: the entry after
/// the one that computes the last forward node not yet computed (where the simulator starts
/// charging per-phase modes' backward costs). The entry count when there is none.
uint32_t backward_phase_entry(const planner::TrainingGraph& graph, const planner::Schedule& schedule);

}  // namespace ergon::app
