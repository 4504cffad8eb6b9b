#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <vector>

#include "planner/graph.h"
#include "planner/schedule.h"

namespace ergon::runtime {

/// What one training iteration computed and did.
struct ExecutionResult {
  float loss = 0;
  /// Each op's parameter gradients (weights, then bias, or a norm's scale then shift), empty
  /// for ops without parameters. Index: forward op.
  std::vector<std::vector<float>> parameter_grads;
  uint64_t computes = 0;
  uint64_t recomputes = 0;
  uint64_t paged_out_bytes = 0;
  uint64_t paged_in_bytes = 0;
  uint64_t peak_bytes = 0;  ///< activation memory held at once (floats x 4)
};

/// One training iteration of a zoo model on real tensors, run step by step as a schedule
/// says: each compute runs the node's kernel (forward, the loss, or backward) on the outputs
/// it reads, which must be in memory; a free drops an output; a page-out writes it to a file
/// under `scratch` and syncs it to storage, a page-in drops the file from the page cache and
/// reads it back. Inputs, labels and parameters are fixed by `seed` (or given), so two
/// schedules of the same graph compute the same iteration: recomputation and paging must
/// not change the gradients.
///
/// Runs every op the zoo's models use except tied weights (GPT-2's lm_head): conv2d (dense
/// or depthwise, padding kernel / 2), linear (all tokens or the first), batchnorm, layernorm,
/// relu, relu6, gelu, tanh, add, maxpool (window = stride), global avgpool, embedding,
/// attention, and the cross-entropy loss. Anything else is an InputError naming the op, at
/// construction. A step that reads what is not in memory is a DeviceError naming the step.
class TrainingIteration {
 public:
  TrainingIteration(const planner::ForwardGraph& forward, const planner::TrainingGraph& graph,
                    std::filesystem::path scratch, uint32_t seed = 1);
  ~TrainingIteration();
  TrainingIteration(const TrainingIteration&) = delete;
  TrainingIteration& operator=(const TrainingIteration&) = delete;

  /// The parameters in use: per forward op, weights then bias (or a norm's scale then shift).
  [[nodiscard]] const std::vector<std::vector<float>>& parameters() const;
  /// Replaces them (same layout); InputError on a size mismatch.
  void set_parameters(const std::vector<std::vector<float>>& parameters);

  void run(const planner::Step& step);

  /// A pipeline stage (planner::build_stage_graph) runs on tensors from its neighbours:
  /// set_input replaces the seeded data with the previous stage's activation (and keeps the
  /// gradient of it, input_gradient(), to send back); set_output_gradient gives the next
  /// stage's gradient of this stage's output, which the "receive gradient" node takes in the
  /// loss's place; output() is the activation to send on (the last op's output, which must be
  /// in memory). InputError on a size mismatch.
  void set_input(std::vector<float> input);
  void set_output_gradient(std::vector<float> gradient);
  [[nodiscard]] std::vector<float> output() const;
  /// The gradient of the input given to set_input, summed over the ops that read it in op
  /// order (as a whole model sums an activation's gradient over its consumers).
  [[nodiscard]] std::vector<float> input_gradient() const;
  /// The loss, the gradients and the counts so far; removes the paged files.
  ExecutionResult finish();
  /// Starts the iteration over on the same parameters and data, as a training loop's next
  /// iteration does (without an optimizer step, it computes the same gradients): nothing in
  /// memory or paged, counts at zero. The process's allocations are warm by then: where the
  /// first iteration faulted pages in and grew the heap, the second reuses them (a
  /// TrainingIteration keeps the process's freed memory from going back to the kernel).
  void next_iteration();

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

/// Runs every step of `schedule` (see TrainingIteration). `parameters` replaces the seeded ones.
ExecutionResult execute(const planner::ForwardGraph& forward, const planner::TrainingGraph& graph,
                        const planner::Schedule& schedule, const std::filesystem::path& scratch,
                        uint32_t seed = 1,
                        const std::vector<std::vector<float>>* parameters = nullptr);

/// The parameters execute() uses for `seed`.
std::vector<std::vector<float>> initial_parameters(const planner::ForwardGraph& forward,
                                                   const planner::TrainingGraph& graph,
                                                   uint32_t seed = 1);

/// The training graph of a forward graph for execution: its structure only (costs zero).
planner::TrainingGraph structure_of(const planner::ForwardGraph& forward);

/// A pipeline stage's training graph as planner::build_stage_graph builds it (the same nodes
/// in the same order), without costs: what a board executing ops [first, end) runs.
planner::TrainingGraph stage_structure_of(const planner::ForwardGraph& forward, int first, int end);

/// FNV-1a (64 bits) over every gradient's bytes, in order: equal for two runs exactly when
/// their gradients are, bit for bit (what ExecutionReport carries).
uint64_t gradient_digest(const std::vector<std::vector<float>>& grads, uint64_t seed = 0xcbf29ce484222325ULL);

}  // namespace ergon::runtime
