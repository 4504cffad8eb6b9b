#pragma once

#include "devices/board_profile.h"
#include "planner/graph.h"

namespace ergon::cli {

/// Planner costs from a board's published profile (the simulator's model): the fallback
/// until costs come from the cost database (issue #4). Energy is total board power x time,
/// as POET's profiles measure it.
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

}  // namespace ergon::cli
