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

/// A profile plan of the model's own shapes: every distinct (FLOPs, bytes) of its forward and
/// backward nodes, three windows each, paging of its smallest, median and largest activation
/// both ways, an idle window first and idle gaps between, in an order shuffled by `seed`.
/// With it, ergon plan --db finds every node of the model measured.
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
