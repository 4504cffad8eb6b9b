#include "app/step_plans.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <map>
#include <random>
#include <tuple>

namespace ergon::app {

namespace {

using profiler::OpKind;
using Dims = std::vector<uint64_t>;

uint64_t elements(const Dims& shape) {
  uint64_t n = 1;
  for (uint64_t d : shape) n *= d;
  return n;
}

/// A matrix product (rows x k) (k x k) of about `flops` (forward: 2 rows k^2; backward twice
/// that), for nodes whose own kernel a board cannot run.
profiler::OpShape by_work(uint64_t flops, bool backward) {
  const uint64_t per_mac = backward ? 4 : 2;
  uint64_t k = 256;
  uint64_t rows = flops / (per_mac * k * k);
  if (rows == 0) {
    k = std::max<uint64_t>(1, static_cast<uint64_t>(std::sqrt(static_cast<double>(flops) / static_cast<double>(per_mac))));
    rows = 1;
  }
  return profiler::linear(static_cast<uint32_t>(std::min<uint64_t>(rows, UINT32_MAX)), static_cast<uint32_t>(k),
                          static_cast<uint32_t>(k), backward ? profiler::Phase::kBackward : profiler::Phase::kForward);
}

/// The kernel and dims of a forward op (and of its backward node), or nullopt.
std::optional<std::pair<OpKind, Dims>> kernel_of(const planner::ForwardGraph& f, int i) {
  const planner::ForwardOp& op = f.ops[static_cast<std::size_t>(i)];
  auto input = [&](std::size_t k) -> const Dims& {
    const int in = op.inputs.at(k);
    return in == planner::kGraphInput ? f.input_shape : f.ops[static_cast<std::size_t>(in)].shape;
  };
  const Dims& out = op.shape;
  if (out.empty() || op.inputs.empty()) return std::nullopt;
  const Dims& in = input(0);
  const std::string& k = op.op;
  if (k == "conv2d" && in.size() == 4 && op.padding == op.kernel / 2 && op.kernel < 256 && op.stride < 256) {
    const bool depthwise = op.groups != 1;
    if (depthwise && !(op.groups == in[1] && out[1] == in[1])) return std::nullopt;
    return std::pair{OpKind::kConv2d, Dims{in[0], in[1], out[1], in[2], in[3],
                                           profiler::conv_window(static_cast<uint32_t>(op.kernel),
                                                                 static_cast<uint32_t>(op.stride), depthwise)}};
  }
  if (k == "linear" && !op.tied_weights) {
    const uint64_t rows = op.first_token_only ? in[0] : elements(in) / in.back();
    return std::pair{OpKind::kLinear, Dims{rows, in.back(), out.back()}};
  }
  if (k == "batchnorm" && in.size() >= 2) return std::pair{OpKind::kBatchNorm, Dims{in[0], in[1], elements(in) / in[0] / in[1]}};
  if (k == "layernorm") return std::pair{OpKind::kLayerNorm, Dims{elements(in) / in.back(), in.back()}};
  if (k == "relu") return std::pair{OpKind::kRelu, Dims{elements(out)}};
  if (k == "relu6") return std::pair{OpKind::kRelu6, Dims{elements(out)}};
  if (k == "gelu") return std::pair{OpKind::kGelu, Dims{elements(out)}};
  if (k == "tanh") return std::pair{OpKind::kTanh, Dims{elements(out)}};
  if (k == "add") return std::pair{OpKind::kAdd, Dims{elements(out)}};
  if (k == "maxpool" && in.size() == 4 && op.kernel == op.stride && op.padding == 0)
    return std::pair{OpKind::kMaxPool, Dims{in[0], in[1], in[2], in[3], op.kernel}};
  if (k == "avgpool" && in.size() == 4) return std::pair{OpKind::kAvgPool, Dims{in[0], in[1], in[2] * in[3]}};
  if (k == "embedding" && in.size() == 2 && !op.table_rows.empty() && op.table_rows.size() <= 3) {
    Dims d{in[0], in[1], out.back(), 0, 0, 0};
    for (std::size_t t = 0; t < op.table_rows.size(); ++t) d[3 + t] = op.table_rows[t];
    return std::pair{OpKind::kEmbedding, d};
  }
  if (k == "attention_scores" && in.size() == 3)
    return std::pair{OpKind::kAttentionScores, Dims{in[0], in[1], in.back() / 3, op.heads, op.causal ? 1U : 0U}};
  if (k == "attention_context" && in.size() == 4 && op.inputs.size() == 2) {
    const Dims& qkv = input(1);
    return std::pair{OpKind::kAttentionContext, Dims{qkv[0], qkv[1], qkv.back() / 3, in[1]}};
  }
  return std::nullopt;
}

}  // namespace

profiler::OpShape node_shape(const planner::TrainingGraph& g, int id) {
  const planner::TrainingNode& node = g.nodes.at(static_cast<std::size_t>(id));
  const bool backward = node.phase == planner::NodePhase::kBackward;
  std::optional<std::pair<OpKind, Dims>> kernel;
  if (g.forward) {
    const int n = static_cast<int>(g.forward->ops.size());
    if (id < n) {
      kernel = kernel_of(*g.forward, id);
    } else if (id == n) {
      const Dims& logits = g.forward->ops.back().shape;
      kernel = std::pair{OpKind::kCrossEntropy, Dims{elements(logits) / logits.back(), logits.back()}};
    } else if (id <= 2 * n) {
      kernel = kernel_of(*g.forward, 2 * n - id);
    }
  }
  if (kernel && std::any_of(kernel->second.begin(), kernel->second.end(), [](uint64_t d) { return d > UINT32_MAX; }))
    kernel.reset();
  profiler::OpShape shape = kernel ? profiler::OpShape{} : by_work(node.flops, backward);
  if (kernel) {
    shape.kind = kernel->first;
    for (uint64_t d : kernel->second) shape.dims[shape.dim_count++] = static_cast<uint32_t>(d);
  }
  // The planner's counts, whatever runs: costs measured for this shape are looked up by them.
  shape.flops = node.flops;
  shape.bytes_in = node.bytes_touched;
  shape.bytes_out = 0;
  return shape;
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
      op.shape = node_shape(g, step.node);
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

uint32_t backward_phase_entry(const planner::TrainingGraph& g, const planner::Schedule& s) {
  std::size_t forward_left = 0;
  for (const auto& node : g.nodes) forward_left += node.phase == planner::NodePhase::kForward ? 1 : 0;
  std::vector<char> computed(g.nodes.size(), 0);
  uint32_t entry = 0;
  for (const planner::Step& step : s.steps) {
    if (forward_left == 0) return entry;
    if (step.kind == planner::StepKind::kFree) continue;
    ++entry;
    const auto k = static_cast<std::size_t>(step.node);
    if (step.kind == planner::StepKind::kCompute && computed[k] == 0) {
      computed[k] = 1;
      if (g.nodes[k].phase == planner::NodePhase::kForward) --forward_left;
    }
  }
  return entry;
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
    op.shape = node_shape(g, node->id);
    op.phase = std::get<0>(key) == 0 ? profiler::Phase::kForward : profiler::Phase::kBackward;
    op.idle_after_us = kIdleUs / 4;
    op.warmup_reps = 1;  // each window follows an idle gap: one untimed run absorbs the cold start
    ops.push_back(op);
    // The same shape warm: with the cache ladder below, what a step whose operands are still
    // in cache takes (a board without caches to speak of times it alike).
    op.copies = 1;
    ops.push_back(op);
  }
  // The cache ladder: one memory-bound op of 192 KiB with its tensors cycled through k
  // copies, from memory to warm, so the host can fit how much of an op's data the board's
  // caches keep after k - 1 copies were touched (costdb::MeasuredCosts::CacheCurve).
  for (const uint16_t copies : kCacheLadder) {
    devices::PlannedOp op;
    op.shape = profiler::add(kCacheLadderElements, profiler::Phase::kForward);
    op.phase = profiler::Phase::kForward;
    op.idle_after_us = kIdleUs / 4;
    op.warmup_reps = 1;
    op.copies = copies;
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

}  // namespace ergon::app
