#pragma once

#include <cstdint>

#include "planner/graph.h"
#include "planner/schedule.h"
#include "planner/stage_plan.h"

namespace ergon::planner {

/// One pass over `graph`, every node once, as `objective` measures energy: under
/// Objective::kTotal each node's energy above idle plus idle power over its time. The floor
/// every bound here starts from.
double one_pass_j(const TrainingGraph& graph, Objective objective);

/// A lower bound on the energy of any schedule of `graph` within `budget_bytes` of
/// activation memory, as `objective` measures it: one pass, plus, at the stage where memory
/// is shortest, the cheapest way to make up the shortfall.
///
/// Why it holds: when node t is computed, its inputs and output are in memory, and so is
/// every earlier output a later node still needs unless it is re-created afterwards, by
/// recomputing it (its compute cost again) or by paging it back in (a page-out and a
/// page-in). Those are distinct extra actions for distinct tensors, so the outputs missing at
/// that moment cost at least a fractional knapsack over their sizes; the bound is the largest
/// such knapsack over all t. A recomputation also needs its inputs: those no later node
/// needs (dead at t) are kept, which takes their bytes back, or had again, paged or
/// recomputed in turn from their own inputs, up the graph; a dead output that several
/// recomputations could need is charged a share on each, so never twice. On a transformer's
/// attention this is what makes a cheap slice as dear as the projection it comes from. A
/// tensor is freed whole or not at all: where the fractional knapsack frees part of one's
/// least way, the moment takes the lesser of the knapsacks with it freed whole and with it
/// kept, a few tensors deep. A tensor certain to be away at some moment (the other live
/// outputs there are fewer bytes than the shortfall) is re-created once after it whatever
/// else happens: every moment's knapsack adds that cost, and frees the tensor at no cost in
/// the moments of the same window between its reads. Such a tensor, away at a moment before
/// that, is present there again only by one more re-creation: a live output whose next read
/// falls before its certain absence and whose recomputation needs it (through dead outputs)
/// is taken with it as one item, the two away together costing that extra re-creation or the
/// output's page (ResNet-18's stem: its convolution output, and the ReLU output recomputed
/// from it through the batch norm).
/// It takes milliseconds (DenseNet-121: 60 ms under poet) and, unlike the MILP's LP
/// relaxation, does not weaken when recomputation is fractional.
///
/// Under Objective::kTotal the stage model (POET's MILP, the greedy search) lets a page-in
/// overlap only its own stage's computes and a page-out those of the stages it spans, and the
/// bound charges idle power on what the nodes of a transfer's window cannot hide, and on
/// what the page-outs of the outputs missing at a stage, queued on the one storage channel,
/// take beyond the stages before it. A schedule replayed by the simulator overlaps
/// transfers more freely: its bound is `stage_overlap = false`, which charges no transfer
/// time at all.
double memory_lower_bound_j(const TrainingGraph& graph, uint64_t budget_bytes,
                            Objective objective = Objective::kPoet, AllowedMoves allowed = {},
                            bool stage_overlap = true);

}  // namespace ergon::planner
