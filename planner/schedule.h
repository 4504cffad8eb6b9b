#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "planner/graph.h"

namespace ergon::planner {

/// One step of a training iteration. A compute of a node that was computed before is a
/// recomputation.
enum class StepKind : uint8_t { kCompute = 0, kPageOut = 1, kPageIn = 2, kFree = 3 };

struct Step {
  StepKind kind = StepKind::kCompute;
  int node = 0;
  friend bool operator==(const Step&, const Step&) = default;
};

/// What every planner returns: the steps of one training iteration, in order. Page-out copies
/// a resident output to storage (it stays resident until freed); page-in copies it back;
/// free drops it from RAM. Tensors still resident at the end are simply dropped.
struct Schedule {
  std::vector<Step> steps;
};

/// What a plan is charged for, and how its memory and time are counted.
/// kPoet: POET's model (DESIGN.md) exactly: energy is compute + paging energy; the deadline
///   bounds compute time only; a tensor paged in during a stage counts from the next stage.
/// kTotal: transfers overlap compute up to the storage bandwidth and stall beyond it; energy
///   is the energy above idle power plus idle power x makespan; the deadline bounds the
///   makespan; the budget covers fixed bytes too; a tensor being paged out, or paged in
///   alongside a stage's computes, holds its memory while it moves (a page-in may instead
///   wait until the stage's computes are done and take no memory in it).
enum class Objective { kPoet, kTotal };
std::string to_string(Objective objective);

/// What the independent simulator measured by replaying a schedule.
struct ScheduleReport {
  bool valid = false;
  std::string error;             ///< why the schedule was rejected (one line)
  uint64_t peak_bytes = 0;       ///< activation memory (fixed bytes not included)
  double compute_time_s = 0;     ///< every compute, recomputations included
  double paging_time_s = 0;      ///< every page-in and page-out
  double energy_j = 0;           ///< compute + paging energy (POET's measure)
  /// Wall time when a compute unit and a storage channel work at once (see simulate()).
  double makespan_s = 0;
  /// Energy above idle power of every compute and transfer, plus idle power x makespan.
  double total_energy_j = 0;
  /// When the forward pass is over: the end of the compute that completes it (every forward
  /// node computed once). A pipeline stage hands its activation on then.
  double forward_end_s = 0;
  /// Activation memory resident once the forward pass is over and the frees after it are done,
  /// before the next compute or page-in (a recomputation for the backward pass comes after):
  /// what a micro-batch keeps between its forward and backward passes, the stash a pipeline
  /// stage holds for each micro-batch in flight. Paged-out tensors are not in it.
  uint64_t stash_bytes = 0;
  /// The step at which the stash is taken: the micro-batch's forward part is the steps before
  /// it, its backward part the rest (steps.size() when there is no backward part).
  std::size_t stash_step = 0;
  int computes = 0;
  int recomputes = 0;
  int page_ins = 0;
  int page_outs = 0;
};

/// Replays `schedule` on `graph`: rejects it when a compute's input is not resident, a
/// page-in's tensor is not on storage, a page-out's or free's tensor is not resident, a node
/// is never computed, or memory exceeds `budget_bytes` (when given) at any step.
/// Memory is counted after each compute allocates its output, before any free.
///
/// Timing: steps are handed out in order to one compute unit and one storage channel, each
/// working through its steps in order; a compute waits for its inputs (a page-in's end), a
/// page-out for its tensor, a page-in for its page-out. Memory is taken when a step is handed
/// out and a free waits until every earlier step touching its tensor is done, holding back
/// the steps after it, so memory at any instant never exceeds the count in step order.
/// Transfers thus overlap compute up to the storage bandwidth and stall it beyond.
ScheduleReport simulate(const TrainingGraph& graph, const Schedule& schedule,
                        std::optional<uint64_t> budget_bytes = std::nullopt);

/// The schedule that computes every node once in order, keeps each output until its last
/// consumer has run, and frees it then.
Schedule store_all_schedule(const TrainingGraph& graph);

/// Compact binary form a board receives: "ES", version 1, node count and step count as
/// LEB128 varints, then one varint per step: node * 4 + kind.
std::vector<uint8_t> encode_schedule(const Schedule& schedule, int node_count);
/// Throws InputError on a malformed encoding.
Schedule decode_schedule(const std::vector<uint8_t>& bytes, int* node_count = nullptr);

std::string to_string(StepKind kind);

/// The energy an objective minimizes and the time its deadline bounds, from a replay.
inline double objective_energy_j(const ScheduleReport& r, Objective objective) {
  return objective == Objective::kTotal ? r.total_energy_j : r.energy_j;
}
inline double deadline_time_s(const ScheduleReport& r, Objective objective) {
  return objective == Objective::kTotal ? r.makespan_s : r.compute_time_s;
}

}  // namespace ergon::planner
