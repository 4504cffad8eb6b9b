#pragma once

#include <string>

#include "planner/graph.h"
#include "planner/poet.h"

namespace ergon::planner {

/// memory_slots = kRotorAutoSlots: as many slots as keep the DP near 0.2 s and 160 MB on its
/// chain (at least 500, rotor's own default; at most 100 000), so short chains are planned
/// exactly wherever the sizes' common unit allows.
inline constexpr int kRotorAutoSlots = 0;

/// Rotor-style dynamic program (Beaumont, Eyraud-Dubois, Herrmann, Joly, Shilova 2019,
/// "Optimal checkpointing for heterogeneous chains") for recomputation only, minimizing
/// energy (each node's energy_j is its cost) instead of time.
///
/// Applies to autograd's graph of a chain: forward node k reads only k - 1 (node 0 reads
/// nothing), then the loss reading the last forward node, then the backward nodes in reverse,
/// the backward node of op i reading op i + 1's gradient (or the loss's output) and any of
/// a[i-1] and a[i] (op i's input and output). Any other graph gets
/// ModelStatus::kNoSolutionFound and a `why` naming the first node that breaks the shape.
///
/// Sub-problems, each a table over memory: Grad(s, t, K, T) starts with a[s-1] (the
/// checkpoint), op t's incoming gradient and, when T, a[t] resident, runs the backward nodes
/// of ops t..s and leaves op s's gradient (and a[s-1] too when K, for op s - 1's backward);
/// Turn(s, K) is the same before the loss exists (t is the last op). Each either runs op s's
/// backward alone, or sweeps forward from a[s-1] (freeing each activation once the next
/// exists) and then: to a[t], computing a[t] for op t's backward (and the loss, for Turn);
/// or to a checkpoint a[s'-1], solving s'..t with it and then s..s'-1, holding a[s-1] across
/// only if s..s'-1 reads it. Every tensor is freed right after its last use, and memory is
/// counted as the simulator and the POET model count it (after each compute allocates its
/// output, before its frees), so the DP's peak is the simulator's.
///
/// Like rotor, the DP is over persistent schedules: a checkpoint a[s-1] stays resident until
/// the sub-chain s..t it serves has run op s's backward (unless nothing after its last sweep
/// reads it). The remat-only POET MILP has no such rule and is sometimes cheaper: it can
/// keep a[s-1] only for the sweeps of s'..t, drop it when op s'..t's backward steps need the
/// room, and rebuild a[s-1] for op s's backward from an earlier checkpoint (or from the data).
/// On random chains of 3 to 7 ops (16 seeds, every KiB of budget), rotor equals the MILP's
/// optimum at 1270 of 1371 budgets, and wherever it is dearer the MILP's schedule drops a
/// checkpoint that way (the tests check both). Allowing it here would cost a third index
/// (which checkpoint serves which backward range): O(n^4) time and O(n^3) memory per slot.
///
/// Memory is counted in slots. When every output size is a multiple of one unit and the budget
/// holds at most `memory_slots` units, that unit is the slot and the DP is exact. Otherwise a
/// slot is ceil(budget / memory_slots) bytes and sizes are rounded up, so the schedule always
/// fits; `bound_j` then comes from a second DP that rounds sizes down (a relaxation). The
/// status is kOptimal when the schedule is optimal among persistent recompute-only schedules
/// (bound_j = objective_j), else kFeasible.
///
/// Only recomputes: request.allowed is not consulted. Ignores the deadline while optimizing;
/// a schedule over it is kNoSolutionFound. kInfeasible names the least budget rotor's
/// schedules need. Time O(n^3 * slots), memory O(n^2 * slots) for n forward ops.
PlanResult plan_rotor(const TrainingGraph& graph, const PlanRequest& request,
                      int memory_slots = kRotorAutoSlots);

/// The offloading extension in the spirit of POFO (Beaumont, Eyraud-Dubois, Shilova 2021,
/// "Efficient combination of rematerialization and offloading"), on the same chains and DP:
/// where rotor holds a checkpoint a[s-1] across the sub-chain s'..t because s..s'-1 will
/// need it, pofo may instead page it out right after the sweep's first step reads it and page
/// it back in before s..s'-1, paying its page-out and page-in energy for the memory. Paging
/// time is outside the deadline, as in POET. Its schedules include rotor's, so its energy
/// never exceeds rotor's at the same slots; kOptimal means optimal among those schedules
/// (each held checkpoint either held or paged out and back once). Pages only when
/// request.allowed.paging (otherwise it is rotor under another name).
PlanResult plan_pofo(const TrainingGraph& graph, const PlanRequest& request,
                     int memory_slots = kRotorAutoSlots);

/// Empty when plan_rotor can plan `graph`; otherwise why not (one line).
std::string rotor_chain_refusal(const TrainingGraph& graph);

}  // namespace ergon::planner
