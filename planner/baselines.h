#pragma once

#include <string>
#include <vector>

#include "planner/graph.h"
#include "planner/poet.h"
#include "planner/schedule.h"

namespace ergon::planner {

// Baseline planners (DESIGN.md, Planner): the same graph, request and simulator as POET, so
// their points sit beside POET's on one Pareto plot. Every returned schedule has passed
// simulate() under request.budget_bytes with deadline_time_s() within request.deadline_s
// (compute time as in POET, or the makespan under Objective::kTotal); `objective_j` (the
// objective's energy) and `claimed_peak_bytes` are what the simulator measured. The heuristics
// themselves plan with POET's costs; only their judging follows the objective. Heuristics bound their energy by one pass over the graph (every node is computed
// at least once), so their status is kOptimal only when they reach that bound.

/// A planner's result for `schedule`, every claim taken from the simulator: kOptimal or
/// kFeasible by the gap to `bound_j` (within request.relative_gap counts as optimal), or
/// kNoSolutionFound with `why` when the simulator rejects the schedule or it misses the
/// deadline.
PlanResult judge_schedule(const std::string& planner, const TrainingGraph& graph,
                          const PlanRequest& request, Schedule schedule, double bound_j);

/// Every node once, each output kept until its last consumer (store_all_schedule()).
/// kInfeasible, naming the peak it needs, when that is over the budget.
PlanResult plan_store_all(const TrainingGraph& graph, const PlanRequest& request);

/// Chen et al. 2016 (sqrt(n) checkpointing) on a DAG: forward nodes in id order are cut into
/// k segments of near-equal node count; across the forward pass only checkpoints stay
/// resident (outputs a forward node of a later segment reads) plus the whole last segment,
/// whose backward comes next. A loss or backward node that reads a dropped forward output
/// first recomputes it from what is resident (within its segment, back to the checkpoints).
/// Every tensor is freed right after its last use. Tries every k from 1 to the number of
/// forward nodes (sqrt(n) is among them) and returns the least energy that fits the budget
/// and the deadline; kInfeasible otherwise, naming the smallest peak any k reaches.
PlanResult plan_chen_sqrt(const TrainingGraph& graph, const PlanRequest& request);

/// A Capuchin-style heuristic (Peng et al., ASPLOS 2020): starting from store-all, while the
/// simulated peak is over the budget, evicts one tensor resident at the peak (not one the
/// peak's step reads) over the gap between its last access before the peak and its next read
/// after it. A swap (page out after the last access, page in as late as still hides the
/// transfer behind compute) is taken when the compute time in the gap hides both transfers,
/// the largest such tensor first; otherwise the tensor recomputed most cheaply per byte freed
/// (with whatever of its inputs is not resident then) is recomputed just before its next
/// read; an unhidden swap is the last resort. Respects request.allowed and the deadline.
/// kNoSolutionFound (which proves nothing) when no eviction is left.
PlanResult plan_capuchin(const TrainingGraph& graph, const PlanRequest& request);

/// vDNN's offload-all policy (Rhu et al., MICRO 2016, "vDNN_all"): every forward output the
/// loss or backward pass reads is paged out after its last forward read and paged in one
/// node before its first later read (prefetched, so that the transfer overlaps that node's
/// compute), except an output read again by the very next node. Nothing is recomputed. The
/// most a paging-only schedule pages: it also serves as the paging calibration that `ergon
/// validate --execute --planner page-all` runs on real tensors (costdb::TimedIn::kIteration).
/// kInfeasible, naming the peak it needs, when that is over the budget or paging is not allowed.
PlanResult plan_page_all(const TrainingGraph& graph, const PlanRequest& request);

/// "store-all", "chen", "capuchin", "rotor", "pofo" (planner/rotor.h) and "page-all".
const std::vector<std::string>& baseline_names();

/// Runs the baseline called `name` on a request in the user's terms (under kTotal the budget
/// includes fixed bytes; the functions above take for_activations() of it). Throws
/// InputError listing the known names for an unknown one.
PlanResult plan_baseline(const std::string& name, const TrainingGraph& graph,
                         const PlanRequest& request);

}  // namespace ergon::planner
