#include "app/board_costs.h"

#include <cmath>

namespace ergon::app {
namespace {

planner::NodeCost to_cost(const devices::OpTruth& t) { return {t.time_s, t.time_s * t.power_w}; }

}  // namespace

planner::NodeCost BoardProfileCosts::compute(const std::string& /*op*/, uint64_t flops,
                                             uint64_t bytes) const {
  return to_cost(devices::compute_truth(board_, flops, bytes));
}

planner::NodeCost BoardProfileCosts::page_in(uint64_t bytes) const {
  return to_cost(devices::paging_truth(board_, bytes, profiler::Phase::kPageIn));
}

planner::NodeCost BoardProfileCosts::page_out(uint64_t bytes) const {
  return to_cost(devices::paging_truth(board_, bytes, profiler::Phase::kPageOut));
}

double MeasuredCostModel::energy_rel_sigma(const planner::TrainingGraph& graph) const {
  double variance = 0, shared_j = 0, energy_j = 0;
  for (const auto& node : graph.nodes) {
    if (node.flops == 0 && node.bytes_touched == 0) continue;
    const auto c = costs_.compute(node.flops, node.bytes_touched);
    energy_j += c.energy_j;
    if (c.measured) {
      variance += c.energy_sigma_j * c.energy_sigma_j;
    } else {
      shared_j += c.energy_sigma_j;
    }
  }
  return energy_j > 0 ? (std::sqrt(variance) + shared_j) / energy_j : 0;
}

}  // namespace ergon::app
