#include "planner/graph.h"

#include <cstdio>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>

#include "common/error.h"

namespace ergon::planner {

uint64_t ForwardGraph::param_bytes() const {
  uint64_t total = 0;
  for (const auto& op : ops) total += op.param_bytes;
  return total;
}

uint64_t ForwardGraph::forward_flops() const {
  uint64_t total = 0;
  for (const auto& op : ops) total += op.forward_flops;
  return total;
}

std::vector<std::vector<int>> TrainingGraph::inputs() const {
  std::vector<std::vector<int>> in(nodes.size());
  for (const auto& [from, to] : edges) in[to].push_back(from);
  for (auto& v : in) std::sort(v.begin(), v.end());
  return in;
}

std::vector<std::vector<int>> TrainingGraph::users() const {
  std::vector<std::vector<int>> out(nodes.size());
  for (const auto& [from, to] : edges) out[from].push_back(to);
  for (auto& v : out) std::sort(v.begin(), v.end());
  return out;
}

int TrainingGraph::backward_phase_start() const {
  for (int k = 0; k < size(); ++k)
    if (nodes[k].phase != NodePhase::kForward) return k;
  return size();
}

double TrainingGraph::single_pass_time_s() const {
  double t = 0;
  for (const auto& n : nodes) t += n.time_s;
  return t;
}

double TrainingGraph::single_pass_energy_j() const {
  double e = 0;
  for (const auto& n : nodes) e += n.energy_j;
  return e;
}

uint64_t TrainingGraph::min_working_set_bytes(int* node) const {
  const auto in = inputs();
  uint64_t best = 0;
  int best_node = 0;
  for (int k = 0; k < size(); ++k) {
    uint64_t ws = nodes[k].output_bytes;
    for (int i : in[k]) ws += nodes[i].output_bytes;
    if (ws > best) {
      best = ws;
      best_node = k;
    }
  }
  if (node != nullptr) *node = best_node;
  return best;
}

uint64_t TrainingGraph::store_all_peak_bytes() const {
  const auto out = users();
  std::vector<int> last_use(nodes.size());
  for (int i = 0; i < size(); ++i) last_use[i] = out[i].empty() ? i : out[i].back();
  uint64_t resident = 0;
  uint64_t peak = 0;
  for (int k = 0; k < size(); ++k) {
    resident += nodes[k].output_bytes;
    peak = std::max(peak, resident);
    // Free every tensor whose last consumer was k (and k itself if nobody needs it).
    for (int i = 0; i <= k; ++i)
      if (last_use[i] == k) resident -= nodes[i].output_bytes;
  }
  return peak;
}

void TrainingGraph::validate() const {
  if (nodes.empty()) throw InputError("graph '" + name + "' has no nodes");
  if (!std::isfinite(idle_power_w) || idle_power_w < 0)
    throw InputError("graph '" + name + "' has a negative or invalid idle power");
  for (int k = 0; k < size(); ++k) {
    const auto& n = nodes[k];
    const std::string where = "node " + std::to_string(k) + " (" + n.name + ")";
    if (n.id != k)
      throw InputError(where + " has id " + std::to_string(n.id) +
                       ": ids must be 0, 1, 2, ... in topological order");
    for (double v : {n.time_s, n.energy_j, n.pagein_time_s, n.pagein_energy_j, n.pageout_time_s,
                     n.pageout_energy_j}) {
      if (!std::isfinite(v) || v < 0) throw InputError(where + " has a negative or invalid cost");
    }
    // Energies include idle power for their duration; a little rounding is forgiven.
    auto below_idle = [&](double energy_j, double time_s) {
      const double idle_j = idle_power_w * time_s;
      return energy_j < idle_j - 1e-9 * idle_j - 1e-15;
    };
    if (below_idle(n.energy_j, n.time_s) || below_idle(n.pagein_energy_j, n.pagein_time_s) ||
        below_idle(n.pageout_energy_j, n.pageout_time_s))
      throw InputError(where + " costs less energy than idle power over the same time");
  }
  if (!late_costs.empty()) {
    if (late_costs.size() != nodes.size())
      throw InputError("graph '" + name + "' has late costs for " + std::to_string(late_costs.size()) +
                       " nodes, not " + std::to_string(nodes.size()));
    for (const NodeCost& c : late_costs)
      if (!std::isfinite(c.time_s) || c.time_s < 0 || !std::isfinite(c.energy_j) || c.energy_j < 0)
        throw InputError("graph '" + name + "' has a negative or invalid late cost");
  }
  std::set<std::pair<int, int>> seen;
  for (const auto& [from, to] : edges) {
    const std::string e = "edge [" + std::to_string(from) + ", " + std::to_string(to) + "]";
    if (from < 0 || to < 0 || from >= size() || to >= size())
      throw InputError(e + " names a node that does not exist");
    if (from >= to)
      throw InputError(e + " goes backwards: ids must be topologically ordered (a cycle, or "
                           "nodes out of order)");
    if (!seen.insert({from, to}).second) throw InputError(e + " appears twice");
  }
}

TrainingGraph per_phase_graph(const TrainingGraph& forward_mode, const TrainingGraph& backward_mode) {
  if (forward_mode.size() != backward_mode.size() || forward_mode.edges != backward_mode.edges)
    throw InputError("per-phase modes need the same graph in both modes ('" + forward_mode.name + "' and '" +
                     backward_mode.name + "' differ)");
  TrainingGraph g = forward_mode;
  g.late_costs.clear();
  for (int k = 0; k < g.size(); ++k) {
    const TrainingNode& late = backward_mode.nodes[k];
    if (late.phase != g.nodes[k].phase || late.output_bytes != g.nodes[k].output_bytes)
      throw InputError("per-phase modes need the same graph in both modes (node " + std::to_string(k) + " differs)");
    g.late_costs.push_back({late.time_s, late.energy_j});
    if (backward_mode.energy_rel_sigma)
      g.energy_rel_sigma = std::max(g.energy_rel_sigma.value_or(0), *backward_mode.energy_rel_sigma);
    if (g.nodes[k].phase != NodePhase::kForward) {
      g.nodes[k].time_s = late.time_s;
      g.nodes[k].energy_j = late.energy_j;
    }
  }
  return g;
}

void apply_costs(TrainingNode& node, const CostModel& costs) {
  const NodeCost c = costs.compute(node.op, node.phase, node.flops, node.bytes_touched);
  node.time_s = c.time_s;
  node.energy_j = c.energy_j;
  const NodeCost in = costs.page_in(node.output_bytes);
  const NodeCost out = costs.page_out(node.output_bytes);
  node.pagein_time_s = in.time_s;
  node.pagein_energy_j = in.energy_j;
  node.pageout_time_s = out.time_s;
  node.pageout_energy_j = out.energy_j;
}

TrainingGraph build_training_graph(const ForwardGraph& forward, const CostModel& costs,
                                   int optimizer_copies) {
  const int n = static_cast<int>(forward.ops.size());
  if (n == 0) throw InputError("model '" + forward.name + "' has no ops");
  TrainingGraph g;
  g.name = forward.name;
  g.fixed_bytes = forward.param_bytes() * static_cast<uint64_t>(2 + optimizer_copies);
  g.idle_power_w = costs.idle_power_w();

  auto input_bytes = [&](int i) {
    uint64_t b = 0;
    for (int in : forward.ops[i].inputs) b += in == kGraphInput ? forward.input_bytes : forward.ops[in].output_bytes;
    return b;
  };
  auto add_node = [&](std::string name, const std::string& op, NodePhase phase, uint64_t flops,
                      uint64_t bytes_touched, uint64_t out_bytes) {
    TrainingNode node;
    node.id = g.size();
    node.name = std::move(name);
    node.op = op;
    node.phase = phase;
    node.output_bytes = out_bytes;
    node.flops = flops;
    node.bytes_touched = bytes_touched;
    apply_costs(node, costs);
    g.nodes.push_back(std::move(node));
    return g.size() - 1;
  };

  // Forward nodes: ids 0..n-1.
  std::vector<std::vector<int>> consumers(n);
  for (int i = 0; i < n; ++i) {
    const auto& op = forward.ops[i];
    add_node(op.name, op.op, NodePhase::kForward, op.forward_flops,
             input_bytes(i) + op.output_bytes + op.param_bytes, op.output_bytes);
    for (int in : op.inputs) {
      if (in == kGraphInput) continue;
      if (in < 0 || in >= i)
        throw InputError("op " + op.name + " reads op " + std::to_string(in) +
                         ", which does not come before it");
      g.edges.emplace_back(in, i);
      consumers[in].push_back(i);
    }
  }
  // The loss: reads the logits, produces their gradient.
  const uint64_t logits = forward.ops[n - 1].output_bytes;
  const int loss = add_node("loss", "cross_entropy", NodePhase::kLoss, 5 * (logits / 4),
                            2 * logits, logits);
  g.edges.emplace_back(n - 1, loss);

  // Backward nodes in reverse order; bwd[i] is the node computing op i's input gradients.
  std::vector<int> bwd(n, -1);
  for (int i = n - 1; i >= 0; --i) {
    const auto& op = forward.ops[i];
    bool reads_data_only = true;
    for (int in : op.inputs) reads_data_only = reads_data_only && in == kGraphInput;
    // The gradient w.r.t. the data batch is never needed: the first op's backward node only
    // produces parameter gradients (kept in the fixed bytes).
    const uint64_t grad_out = reads_data_only ? 0 : input_bytes(i);
    const int b = add_node(op.name + ".backward", op.op, NodePhase::kBackward,
                           op.backward_flops,
                           op.output_bytes + input_bytes(i) + grad_out + op.param_bytes, grad_out);
    bwd[i] = b;
    if (i == n - 1) g.edges.emplace_back(loss, b);
    for (int c : consumers[i]) g.edges.emplace_back(bwd[c], b);
    if (op.backward_needs_inputs)
      for (int in : op.inputs)
        if (in != kGraphInput) g.edges.emplace_back(in, b);
    if (op.backward_needs_output) g.edges.emplace_back(i, b);
  }
  std::sort(g.edges.begin(), g.edges.end());
  g.edges.erase(std::unique(g.edges.begin(), g.edges.end()), g.edges.end());
  g.validate();
  if (!forward.input_shape.empty()) g.forward = std::make_shared<const ForwardGraph>(forward);
  return g;
}


}  // namespace ergon::planner
