#pragma once

// Where each step of a schedule finds its tensors in a cache: for every tensor a step reads
// or writes, how many bytes of other tensors were touched since it was last touched (its LRU
// stack distance). The cost model turns these into each step's cached fraction
// (costdb::MeasuredCosts::CacheCurve) and so into its time.

#include <cstdint>
#include <vector>

#include "planner/graph.h"
#include "planner/schedule.h"

namespace ergon::planner {

/// A tensor one step touches.
struct TouchedTensor {
  uint64_t bytes = 0;
  /// Bytes of other tensors touched since this one was last touched; kNeverTouched when it
  /// was not touched in the iteration before or this one so far.
  double distance_bytes = 0;
};
inline constexpr double kNeverTouched = 1e18;

/// Per entry of the schedule (its computes, page-ins and page-outs in order; frees make no
/// entry), the tensors it touches, as a training loop runs the schedule iteration after
/// iteration: distances are of the second iteration, so a tensor last touched near the end of
/// the iteration before is near. A forward op touches its inputs, its weights and its
/// output; the loss the logits and their gradient; a backward op its weights and their
/// gradient, its output's gradient, what it saved (inputs and/or output) and its inputs'
/// gradients; a transfer the tensor it moves. Needs the graph's forward graph (zoo models):
/// empty without one.
std::vector<std::vector<TouchedTensor>> reuse_distances(const TrainingGraph& graph, const Schedule& schedule);

}  // namespace ergon::planner
