#pragma once

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "planner/graph.h"
#include "planner/schedule.h"

namespace ergon::planner::testing {

/// Seven budgets evenly spaced from the least working set to store-all: the sweep the tests
/// and benches against the exhaustive optimum run each graph at.
inline std::vector<uint64_t> seven_budgets(const TrainingGraph& g) {
  const uint64_t lo = g.min_working_set_bytes();
  const uint64_t hi = g.store_all_peak_bytes();
  std::vector<uint64_t> budgets;
  for (int step = 0; step <= 6; ++step) budgets.push_back(lo + (hi - lo) * static_cast<uint64_t>(step) / 6);
  return budgets;
}

/// Costs proportional to work: 1 GFLOP/s at 2 W while computing, paging at 10 MB/s and
/// 0.5 W plus 1 ms latency. Simple enough to check by hand.
class LinearCosts final : public CostModel {
 public:
  NodeCost compute(const std::string&, NodePhase, uint64_t flops, uint64_t bytes) const override {
    const double t = 1e-6 + static_cast<double>(flops) * 1e-9 + static_cast<double>(bytes) * 1e-11;
    return {t, 2.0 * t};
  }
  NodeCost page_in(uint64_t bytes) const override {
    const double t = 1e-3 + static_cast<double>(bytes) / 10e6;
    return {t, 0.5 * t};
  }
  NodeCost page_out(uint64_t bytes) const override { return page_in(bytes); }
};

/// LinearCosts on a board that draws 1 W idle: computing at 3 W, paging at 1.5 W (idle
/// included), so idle power is a third of compute energy and two thirds of paging energy.
class CostsWithIdle final : public CostModel {
 public:
  NodeCost compute(const std::string& op, NodePhase phase, uint64_t flops, uint64_t bytes) const override {
    const NodeCost c = LinearCosts().compute(op, phase, flops, bytes);
    return {c.time_s, 3.0 * c.time_s};
  }
  NodeCost page_in(uint64_t bytes) const override {
    const NodeCost c = LinearCosts().page_in(bytes);
    return {c.time_s, 1.5 * c.time_s};
  }
  NodeCost page_out(uint64_t bytes) const override { return page_in(bytes); }
  double idle_power_w() const override { return 1.0; }
};

/// `forward` costed for `objective` as the tests against the exhaustive optimum cost it:
/// LinearCosts under poet (no idle power to plan), CostsWithIdle under total.
inline TrainingGraph costed_for(const ForwardGraph& forward, Objective objective) {
  return objective == Objective::kPoet ? build_training_graph(forward, LinearCosts())
                                       : build_training_graph(forward, CostsWithIdle());
}

/// A hand-built graph's node on a board that idles at 1 W, computes at 3 W and pages at
/// 1.5 W (as CostsWithIdle), each transfer taking the time given.
inline TrainingNode node_with_idle(int id, std::string name, double time_s, uint64_t output_bytes,
                                   double pageout_time_s, double pagein_time_s) {
  TrainingNode n;
  n.id = id;
  n.name = std::move(name);
  n.op = "linear";
  n.time_s = time_s;
  n.energy_j = 3 * time_s;
  n.output_bytes = output_bytes;
  n.pageout_time_s = pageout_time_s;
  n.pagein_time_s = pagein_time_s;
  n.pageout_energy_j = 1.5 * pageout_time_s;
  n.pagein_energy_j = 1.5 * pagein_time_s;
  return n;
}

/// A random chain-ish forward graph of `ops` ops with heterogeneous sizes and costs; with
/// `skips`, some ops also read the op two back (a residual).
inline ForwardGraph random_forward(int ops, uint32_t seed, bool skips) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<uint64_t> bytes(1, 8);
  std::uniform_int_distribution<uint64_t> flops(1, 50);
  std::bernoulli_distribution skip(0.5);
  ForwardGraph g;
  g.name = "random" + std::to_string(seed);
  g.input_bytes = 4096;
  for (int i = 0; i < ops; ++i) {
    ForwardOp op;
    op.name = "op" + std::to_string(i);
    op.op = "linear";
    op.inputs = {i == 0 ? kGraphInput : i - 1};
    if (skips && i >= 2 && skip(rng)) op.inputs.push_back(i - 2);
    op.forward_flops = flops(rng) * 1'000'000;
    op.backward_flops = 2 * op.forward_flops;
    op.output_bytes = bytes(rng) * 1024;
    op.param_bytes = 4096;
    g.ops.push_back(op);
  }
  return g;
}

/// A random graph whose ops save what real ones do: some their inputs (linear), some their
/// output (relu, softmax), some nothing (add, slice); an op may read any of the last three.
/// Outputs then die in the forward pass while ops after them live on, as in a transformer,
/// where the slices of one projection are kept and the projection itself is not.
inline ForwardGraph random_forward_mixed_saves(int ops, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<uint64_t> bytes(1, 8);
  std::uniform_int_distribution<uint64_t> flops(1, 50);
  std::uniform_int_distribution<int> saves(0, 2);
  std::uniform_int_distribution<int> back(1, 3);
  ForwardGraph g;
  g.name = "mixed" + std::to_string(seed);
  g.input_bytes = 4096;
  for (int i = 0; i < ops; ++i) {
    ForwardOp op;
    op.name = "op" + std::to_string(i);
    op.inputs = {i == 0 ? kGraphInput : std::max(0, i - back(rng))};
    const int kind = saves(rng);
    op.op = kind == 0 ? "linear" : kind == 1 ? "relu" : "add";
    op.backward_needs_inputs = kind == 0;
    op.backward_needs_output = kind == 1;
    // What saves nothing is cheap, as element-wise ops are; a linear costs up to 50 times more.
    op.forward_flops = (kind == 0 ? flops(rng) * 10 : 1 + flops(rng) % 3) * 100'000;
    op.backward_flops = 2 * op.forward_flops;
    op.output_bytes = bytes(rng) * 1024;
    op.param_bytes = kind == 0 ? 4096 : 0;
    g.ops.push_back(op);
  }
  return g;
}

}  // namespace ergon::planner::testing
