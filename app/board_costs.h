#pragma once

#include "costdb/cost_model.h"
#include "devices/board_profile.h"
#include "planner/graph.h"

namespace ergon::app {

/// Planner costs from a board's published profile (the simulator's model): the fallback
/// when the cost database has no measurements of the board. Energy is total board power x
/// time, as POET's profiles measure it.
class BoardProfileCosts final : public planner::CostModel {
 public:
  explicit BoardProfileCosts(devices::BoardProfile board) : board_(std::move(board)) {}

  [[nodiscard]] planner::NodeCost compute(const std::string& op, uint64_t flops,
                                          uint64_t bytes) const override;
  [[nodiscard]] planner::NodeCost page_in(uint64_t bytes) const override;
  [[nodiscard]] planner::NodeCost page_out(uint64_t bytes) const override;
  [[nodiscard]] double idle_power_w() const override { return board_.idle_w; }

 private:
  devices::BoardProfile board_;
};

/// Planner costs measured on the board (ergon record + ergon attribute): exact where the
/// shape was measured, the board's fitted regression elsewhere.
class MeasuredCostModel final : public planner::CostModel {
 public:
  explicit MeasuredCostModel(costdb::MeasuredCosts costs) : costs_(std::move(costs)) {}

  [[nodiscard]] planner::NodeCost compute(const std::string& /*op*/, uint64_t flops,
                                          uint64_t bytes) const override {
    const auto c = costs_.compute(flops, bytes);
    return {c.time_s, c.energy_j};
  }
  [[nodiscard]] planner::NodeCost page_in(uint64_t bytes) const override {
    const auto c = costs_.page_in(bytes);
    return {c.time_s, c.energy_j};
  }
  [[nodiscard]] planner::NodeCost page_out(uint64_t bytes) const override {
    const auto c = costs_.page_out(bytes);
    return {c.time_s, c.energy_j};
  }
  [[nodiscard]] double idle_power_w() const override { return costs_.idle_power_w(); }
  [[nodiscard]] const costdb::MeasuredCosts& costs() const { return costs_; }
  /// The 1 sigma relative uncertainty of one pass's energy over `graph` (built on these
  /// costs): measured shapes' spreads add in quadrature, the fit's error adds linearly (every
  /// shape it serves shares it).
  [[nodiscard]] double energy_rel_sigma(const planner::TrainingGraph& graph) const;

 private:
  costdb::MeasuredCosts costs_;
};

}  // namespace ergon::app
