#include "app/board_costs.h"

#include <fmt/format.h>

#include <cmath>

namespace ergon::app {
namespace {

planner::NodeCost to_cost(const devices::ProfileCost& t) { return {t.time_s, t.time_s * t.power_w}; }

/// The phase a node's shape is profiled in (app::model_profile_plan): forward nodes forward,
/// the loss and backward nodes backward.
profiler::Phase measured_phase(planner::NodePhase phase) {
  return phase == planner::NodePhase::kForward ? profiler::Phase::kForward : profiler::Phase::kBackward;
}

}  // namespace

planner::NodeCost BoardProfileCosts::compute(const std::string& /*op*/, planner::NodePhase /*phase*/,
                                             uint64_t flops, uint64_t bytes) const {
  return to_cost(devices::profile_compute_cost(board_, flops, bytes));
}

planner::NodeCost BoardProfileCosts::page_in(uint64_t bytes) const {
  return to_cost(devices::profile_paging_cost(board_, bytes, profiler::Phase::kPageIn));
}

planner::NodeCost BoardProfileCosts::page_out(uint64_t bytes) const {
  return to_cost(devices::profile_paging_cost(board_, bytes, profiler::Phase::kPageOut));
}

std::string BoardPowerModel::origin() const {
  return fmt::format("the {} profile's published power{} (idle {:.3g} W, +{:.3g} W a busy core, +{:.3g} W "
                     "paging; not measured)",
                     board.name, board.power_mode.empty() ? "" : " in " + std::string(board.power_mode), board.idle_w,
                     board.compute_w, board.storage_w);
}

planner::NodeCost MeasuredCostModel::compute(const std::string& /*op*/, planner::NodePhase phase, uint64_t flops,
                                             uint64_t bytes) const {
  const auto c = costs_.compute(measured_phase(phase), flops, bytes);
  if (costs_.has_energy() || !power_) return {c.time_s, c.energy_j};
  return {c.time_s, c.time_s * devices::profile_compute_cost(power_->board, flops, bytes).power_w};
}

planner::NodeCost MeasuredCostModel::page_in(uint64_t bytes) const {
  const auto c = costs_.page_in(bytes);
  if (costs_.has_energy() || !power_) return {c.time_s, c.energy_j};
  return {c.time_s, c.time_s * devices::profile_paging_cost(power_->board, bytes, profiler::Phase::kPageIn).power_w};
}

planner::NodeCost MeasuredCostModel::page_out(uint64_t bytes) const {
  const auto c = costs_.page_out(bytes);
  if (costs_.has_energy() || !power_) return {c.time_s, c.energy_j};
  return {c.time_s, c.time_s * devices::profile_paging_cost(power_->board, bytes, profiler::Phase::kPageOut).power_w};
}

double MeasuredCostModel::idle_power_w() const {
  if (costs_.has_energy() || !power_) return costs_.idle_power_w();
  return power_->board.idle_w;
}

double MeasuredCostModel::energy_rel_sigma(const planner::TrainingGraph& graph) const {
  double variance = 0, shared_j = 0, energy_j = 0;
  for (const auto& node : graph.nodes) {
    if (node.flops == 0 && node.bytes_touched == 0) continue;
    const auto c = costs_.compute(measured_phase(node.phase), node.flops, node.bytes_touched);
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
