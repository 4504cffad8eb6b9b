#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "planner/graph.h"
#include "planner/schedule.h"

namespace ergon::runtime {

/// What one training iteration computed and did.
struct ExecutionResult {
  float loss = 0;
  /// Each op's parameter gradients (weights, then bias or batch-norm shift), empty for ops
  /// without parameters. Index: forward op.
  std::vector<std::vector<float>> parameter_grads;
  uint64_t computes = 0;
  uint64_t recomputes = 0;
  uint64_t paged_out_bytes = 0;
  uint64_t paged_in_bytes = 0;
  uint64_t peak_bytes = 0;  ///< activation memory held at once (floats x 4)
};

/// Executes a training schedule on real tensors, step by step as the schedule says: each
/// compute runs the node's kernel (forward, the loss, or backward) on the outputs it reads,
/// which must be in memory; frees drop an output; page-outs write it to a file under
/// `scratch` and page-ins read it back. Inputs, labels and parameters are fixed by `seed`,
/// so two schedules of the same graph compute the same iteration: recomputation and paging
/// must not change the gradients. Supports the zoo's convolutional models (conv2d without
/// groups, batchnorm, relu, add, maxpool with window = stride, global avgpool, linear, the
/// cross-entropy loss); anything else is an InputError naming the op. A schedule that reads
/// what is not in memory is a DeviceError naming the step.
/// `parameters` (as initial_parameters() lays them out) replaces the seeded ones.
ExecutionResult execute(const planner::ForwardGraph& forward, const planner::TrainingGraph& graph,
                        const planner::Schedule& schedule, const std::filesystem::path& scratch,
                        uint32_t seed = 1,
                        const std::vector<std::vector<float>>* parameters = nullptr);

/// The parameters execute() uses for `seed`: per forward op, weights then bias (or batch
/// norm's scale then shift), empty for ops without parameters.
std::vector<std::vector<float>> initial_parameters(const planner::ForwardGraph& forward,
                                                   const planner::TrainingGraph& graph,
                                                   uint32_t seed = 1);

}  // namespace ergon::runtime
