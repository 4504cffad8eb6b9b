#pragma once

#include <optional>
#include <string>

#include "costdb/cost_model.h"
#include "devices/board_profile.h"
#include "planner/graph.h"

namespace ergon::app {

/// Planner costs from a board's published profile (devices::profile_op_cost: what a simulated
/// board's truth model starts from, without what it adds): the fallback when the cost
/// database has no measurements of the board. Energy is total board power x time, as POET's
/// profiles measure it.
class BoardProfileCosts final : public planner::CostModel {
 public:
  explicit BoardProfileCosts(devices::BoardProfile board) : board_(std::move(board)) {}

  [[nodiscard]] planner::NodeCost compute(const std::string& op, planner::NodePhase phase, uint64_t flops,
                                          uint64_t bytes) const override;
  [[nodiscard]] planner::NodeCost page_in(uint64_t bytes) const override;
  [[nodiscard]] planner::NodeCost page_out(uint64_t bytes) const override;
  [[nodiscard]] double idle_power_w() const override { return board_.idle_w; }

 private:
  devices::BoardProfile board_;
};

/// Where a graph's energies come from when its measured costs are times only (recorded
/// without a power probe): the board's published profile's power while computing, paging and
/// idle, times the measured durations. Never a guess: a board without a profile has none.
struct BoardPowerModel {
  devices::BoardProfile board;
  /// "the pi4 profile's published power (idle 2.2 W, ...)": printed with every plan.
  [[nodiscard]] std::string origin() const;
};

/// Planner costs measured on the board (ergon record + ergon attribute): exact where the
/// shape was measured, the board's fitted regression elsewhere. Costs measured in time only
/// take their energy from `power` (time x the profile's power at that op); without one,
/// their energies are 0 and must not be planned on (load_graph refuses, or plans time).
class MeasuredCostModel final : public planner::CostModel {
 public:
  explicit MeasuredCostModel(costdb::MeasuredCosts costs, std::optional<BoardPowerModel> power = std::nullopt)
      : costs_(std::move(costs)), power_(std::move(power)) {}

  [[nodiscard]] planner::NodeCost compute(const std::string& op, planner::NodePhase phase, uint64_t flops,
                                          uint64_t bytes) const override;
  [[nodiscard]] planner::NodeCost page_in(uint64_t bytes) const override;
  [[nodiscard]] planner::NodeCost page_out(uint64_t bytes) const override;
  [[nodiscard]] double idle_power_w() const override;
  [[nodiscard]] const costdb::MeasuredCosts& costs() const { return costs_; }
  /// The 1 sigma relative uncertainty of one pass's energy over `graph` (built on these
  /// costs): measured shapes' spreads add in quadrature, the fit's error adds linearly (every
  /// shape it serves shares it).
  [[nodiscard]] double energy_rel_sigma(const planner::TrainingGraph& graph) const;

 private:
  costdb::MeasuredCosts costs_;
  std::optional<BoardPowerModel> power_;
};

}  // namespace ergon::app
