#include "cli/step_plans.h"

#include <algorithm>
#include <map>
#include <random>
#include <tuple>

namespace ergon::cli {

profiler::OpKind op_kind_of(const std::string& op) {
  if (op == "conv2d") return profiler::OpKind::kConv2d;
  if (op == "relu") return profiler::OpKind::kRelu;
  if (op == "maxpool") return profiler::OpKind::kMaxPool;
  if (op == "add") return profiler::OpKind::kAdd;
  return profiler::OpKind::kLinear;
}

devices::ProfilePlan schedule_plan(const planner::TrainingGraph& g, const planner::Schedule& s) {
  devices::ProfilePlan plan;
  plan.min_window_us = 0;  // each step once, however short
  std::vector<char> computed(g.nodes.size(), 0);
  for (const planner::Step& step : s.steps) {
    if (step.kind == planner::StepKind::kFree) continue;
    const auto& node = g.nodes[static_cast<std::size_t>(step.node)];
    devices::PlannedOp op;
    op.op_id = static_cast<uint32_t>(plan.ops.size());
    op.windows = 1;
    op.idle_after_us = 0;
    if (step.kind == planner::StepKind::kCompute) {
      op.shape.kind = op_kind_of(node.op);
      op.shape.flops = node.flops;
      op.shape.bytes_in = node.bytes_touched;
      char& seen = computed[static_cast<std::size_t>(step.node)];
      op.phase = seen != 0 ? profiler::Phase::kRecompute
                 : node.phase == planner::NodePhase::kForward ? profiler::Phase::kForward
                                                               : profiler::Phase::kBackward;
      seen = 1;
    } else {
      op.shape = profiler::paging(static_cast<uint32_t>(node.output_bytes));
      op.phase = step.kind == planner::StepKind::kPageIn ? profiler::Phase::kPageIn
                                                          : profiler::Phase::kPageOut;
    }
    plan.ops.push_back(op);
  }
  // In a training loop the first step follows the previous iteration, not an idle board: one
  // untimed run of it takes the cold start. The steps after it run back to back.
  if (!plan.ops.empty()) plan.ops.front().warmup_reps = 1;
  return plan;
}

devices::ProfilePlan model_profile_plan(const planner::TrainingGraph& g, uint32_t seed) {
  devices::ProfilePlan plan;
  constexpr uint32_t kIdleUs = 200'000;
  std::map<std::tuple<int, uint64_t, uint64_t>, const planner::TrainingNode*> shapes;
  std::vector<uint64_t> sizes;
  for (const auto& node : g.nodes) {
    if (node.output_bytes > 0) sizes.push_back(node.output_bytes);
    if (node.flops == 0 && node.bytes_touched == 0) continue;
    const int phase = node.phase == planner::NodePhase::kForward ? 0 : 1;
    shapes.try_emplace({phase, node.flops, node.bytes_touched}, &node);
  }
  std::vector<devices::PlannedOp> ops;
  for (const auto& [key, node] : shapes) {
    devices::PlannedOp op;
    op.shape.kind = op_kind_of(node->op);
    op.shape.flops = node->flops;
    op.shape.bytes_in = node->bytes_touched;
    op.phase = std::get<0>(key) == 0 ? profiler::Phase::kForward : profiler::Phase::kBackward;
    op.idle_after_us = kIdleUs / 4;
    op.warmup_reps = 1;  // each window follows an idle gap: one untimed run absorbs the cold start
    ops.push_back(op);
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  // Three sizes at least, so that latency and bandwidth can be fitted and cross-validated:
  // the model's smallest, median and largest activation, then multiples of the largest.
  std::vector<uint64_t> page_sizes;
  if (!sizes.empty()) page_sizes = {sizes.front(), sizes[sizes.size() / 2], sizes.back()};
  page_sizes.erase(std::unique(page_sizes.begin(), page_sizes.end()), page_sizes.end());
  for (uint64_t factor = 2; !page_sizes.empty() && page_sizes.size() < 3; factor *= 2)
    page_sizes.push_back(sizes.back() * factor);
  for (uint64_t bytes : page_sizes) {
    for (profiler::Phase phase : {profiler::Phase::kPageOut, profiler::Phase::kPageIn}) {
      devices::PlannedOp op;
      op.shape = profiler::paging(static_cast<uint32_t>(std::min<uint64_t>(bytes, UINT32_MAX)));
      op.phase = phase;
      op.idle_after_us = kIdleUs / 4;
      op.warmup_reps = 1;
      ops.push_back(op);
    }
  }
  std::mt19937 rng(seed);
  std::shuffle(ops.begin(), ops.end(), rng);
  // An idle window first gives the run its idle power.
  plan.ops.push_back({.op_id = 0, .shape = profiler::idle(kIdleUs), .phase = profiler::Phase::kIdle,
                      .windows = 1});
  uint32_t next_id = 1;
  for (auto& op : ops) {
    op.op_id = next_id++;
    plan.ops.push_back(op);
  }
  return plan;
}

}  // namespace ergon::cli
