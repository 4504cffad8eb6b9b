#include "app/board_costs.h"

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

}  // namespace ergon::app
