#include "devices/profile_plan.h"

#include <algorithm>
#include <random>

namespace ergon::devices {

using profiler::Phase;

bool is_microcontroller(const BoardProfile& board) { return board.ram_bytes < (1U << 20); }

void shuffle_between_idle(ProfilePlan& plan, uint32_t seed, uint32_t idle_id, uint32_t idle_us,
                          uint16_t warmup_reps) {
  std::mt19937 rng(seed);
  std::shuffle(plan.ops.begin(), plan.ops.end(), rng);
  plan.ops.insert(plan.ops.begin(), PlannedOp{.op_id = idle_id,
                                              .shape = profiler::idle(idle_us),
                                              .phase = Phase::kIdle,
                                              .windows = 1});
  for (auto& op : plan.ops) {
    if (op.phase == Phase::kIdle) continue;
    op.idle_after_us = idle_us / 4;
    op.warmup_reps = warmup_reps;
  }
}

ProfilePlan default_profile_plan(const BoardProfile& board, uint32_t seed) {
  ProfilePlan plan;
  std::vector<profiler::OpShape> layers;
  std::vector<uint32_t> page_sizes;
  uint32_t idle_us = 0;
  if (is_microcontroller(board)) {
    // Shapes that fit with their gradients in 32 KB (MKR1000) and leave room on 256 KB.
    const bool tiny = board.ram_bytes <= 32 * 1024;
    const uint32_t hw = tiny ? 8 : 16;
    layers = {
        profiler::conv2d(1, 3, 8, hw, hw, 3, Phase::kForward),
        profiler::conv2d(1, 8, 8, hw / 2, hw / 2, 3, Phase::kForward),
        profiler::linear(1, tiny ? 128 : 512, 10, Phase::kForward),
        profiler::relu(8 * hw * hw, Phase::kForward),
        profiler::max_pool(1, 8, hw, hw, 2, Phase::kForward),
    };
    page_sizes = {512, 2048, tiny ? 4096U : 16384U};
    idle_us = 100'000;
  } else {
    layers = {
        profiler::conv2d(8, 16, 32, 32, 32, 3, Phase::kForward),
        profiler::conv2d(8, 64, 64, 16, 16, 3, Phase::kForward),
        profiler::linear(32, 1024, 1000, Phase::kForward),
        profiler::relu(8 * 64 * 32 * 32, Phase::kForward),
        profiler::max_pool(8, 64, 32, 32, 2, Phase::kForward),
        profiler::add(8 * 64 * 32 * 32, Phase::kForward),
        // Small enough (32 KiB, ~25 us) that the invocation overhead is most of it: without
        // such an op the roofline fit cannot tell the overhead from the memory-bound ops'
        // working-set slowdown, and sets it to 0.
        profiler::relu(4096, Phase::kForward),
    };
    page_sizes = {64 << 10, 1 << 20, 8 << 20};
    idle_us = 200'000;
  }

  uint32_t next_id = 1;
  for (const auto& fwd : layers) {
    PlannedOp f{.op_id = next_id++, .shape = fwd, .phase = Phase::kForward};
    plan.ops.push_back(f);
    // The backward shape of the same layer: same dims, the backward FLOP and byte counts.
    profiler::OpShape bwd = fwd;
    const auto& d = fwd.dims;
    switch (fwd.kind) {
      case profiler::OpKind::kConv2d:
        bwd = profiler::conv2d(d[0], d[1], d[2], d[3], d[4], d[5], Phase::kBackward);
        break;
      case profiler::OpKind::kLinear:
        bwd = profiler::linear(d[0], d[1], d[2], Phase::kBackward);
        break;
      case profiler::OpKind::kRelu: bwd = profiler::relu(d[0], Phase::kBackward); break;
      case profiler::OpKind::kMaxPool:
        bwd = profiler::max_pool(d[0], d[1], d[2], d[3], d[4], Phase::kBackward);
        break;
      case profiler::OpKind::kAdd: bwd = profiler::add(d[0], Phase::kBackward); break;
      default: break;
    }
    plan.ops.push_back({.op_id = next_id++, .shape = bwd, .phase = Phase::kBackward});
  }
  for (uint32_t bytes : page_sizes) {
    plan.ops.push_back({.op_id = next_id++, .shape = profiler::paging(bytes),
                        .phase = Phase::kPageOut});
    plan.ops.push_back({.op_id = next_id++, .shape = profiler::paging(bytes),
                        .phase = Phase::kPageIn});
  }

  // Each window follows an idle gap, so one untimed run first takes the cold-start cost.
  shuffle_between_idle(plan, seed, next_id, idle_us, 1);
  return plan;
}

ProfilePlan link_test_plan(const BoardProfile& board, uint32_t seed) {
  ProfilePlan plan;
  // Three sizes a decade or more apart, so the fit of time against bytes separates the fixed
  // cost of a transfer (a round trip) from its rate. A microcontroller's UART or USB-CDC link
  // moves tens of kB/s: its largest transfer stays well under a second.
  const bool micro = is_microcontroller(board);
  const std::vector<uint32_t> sizes = micro ? std::vector<uint32_t>{256, 2048, 8192}
                                            : std::vector<uint32_t>{4096, 64 << 10, 1 << 20};
  const uint32_t idle_us = micro ? 100'000 : 200'000;
  uint32_t next_id = 1;
  for (uint32_t bytes : sizes)
    for (const Phase phase : {Phase::kLinkSend, Phase::kLinkReceive})
      plan.ops.push_back({.op_id = next_id++, .shape = profiler::transfer(bytes), .phase = phase});
  shuffle_between_idle(plan, seed, next_id, idle_us, 0);  // a transfer has no cold start to absorb
  return plan;
}

protocol::PlanOp to_wire(const PlannedOp& op) {
  protocol::PlanOp w;
  w.op_id = op.op_id;
  w.kind = static_cast<uint8_t>(op.shape.kind);
  w.phase = static_cast<uint8_t>(op.phase);
  w.dim_count = op.shape.dim_count;
  std::copy(op.shape.dims.begin(), op.shape.dims.end(), w.dims);
  w.flops = op.shape.flops;
  w.bytes_in = op.shape.bytes_in;
  w.bytes_out = op.shape.bytes_out;
  w.windows = op.windows;
  w.idle_after_us = op.idle_after_us;
  w.warmup_reps = op.warmup_reps;
  w.copies = op.copies;
  return w;
}

bool from_wire(const protocol::PlanOp& wire, PlannedOp& out) {
  const auto kind = profiler::op_kind_from_code(wire.kind);
  const auto phase = profiler::phase_from_code(wire.phase);
  if (!kind || !phase || wire.dim_count > profiler::kMaxDims) return false;
  out.op_id = wire.op_id;
  out.shape.kind = *kind;
  out.shape.dim_count = wire.dim_count;
  std::copy(wire.dims, wire.dims + profiler::kMaxDims, out.shape.dims.begin());
  out.shape.flops = wire.flops;
  out.shape.bytes_in = wire.bytes_in;
  out.shape.bytes_out = wire.bytes_out;
  out.phase = *phase;
  out.windows = wire.windows;
  out.idle_after_us = wire.idle_after_us;
  out.warmup_reps = wire.warmup_reps;
  out.copies = wire.copies;
  return true;
}

}  // namespace ergon::devices
