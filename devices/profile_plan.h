#pragma once

#include <cstdint>
#include <vector>

#include "devices/board_profile.h"
#include "devices/protocol/messages.h"
#include "profiler/op.h"

namespace ergon::devices {

/// One entry of a profile plan: measure `shape` in `phase`, `windows` times.
struct PlannedOp {
  uint32_t op_id = 0;
  profiler::OpShape shape;
  profiler::Phase phase = profiler::Phase::kForward;
  uint16_t windows = 3;
  uint32_t idle_after_us = 0;
  /// Untimed runs before each window: the first run after an idle gap is slower (clocks
  /// ramping up, cold caches), and would bias windows of few repetitions.
  uint16_t warmup_reps = 0;
  /// Copies of the op's tensors cycled through, one per run (protocol v8): 0, enough to read
  /// them from memory each run; 1, the same warm tensors; k, k - 1 other copies between two
  /// runs on one. A board without caches to speak of (a simulator, a microcontroller) runs
  /// every entry alike.
  uint16_t copies = 0;
};

struct ProfilePlan {
  std::vector<PlannedOp> ops;
  /// Each window repeats its op until it lasts this long: >= 50 INA219 samples at ~940 Hz.
  uint32_t min_window_us = 60'000;
};

/// A small plan of the layers the model zoo uses, sized to the board's speed and RAM, with
/// forward and backward phases, page-in/page-out of several sizes and idle windows between
/// ops. The order is shuffled with `seed` so slow drifts do not line up with op kinds.
ProfilePlan default_profile_plan(const BoardProfile& board, uint32_t seed);
/// A board under 1 MiB of RAM, running the Cortex-M firmware: its plans use small shapes.
bool is_microcontroller(const BoardProfile& board);
/// Shuffles the plan's entries with `seed`, so slow drifts do not line up with op kinds, and
/// puts an idle window (op `idle_id`) first and an idle gap of a quarter of it after every
/// window: the host gets idle power all along the run, and can track its drift. Each window
/// then starts with `warmup_reps` untimed runs.
void shuffle_between_idle(ProfilePlan& plan, uint32_t seed, uint32_t idle_id, uint32_t idle_us,
                          uint16_t warmup_reps);

/// A plan that measures the board's link to the host (protocol v6): transfers of three sizes
/// each way (phases link-send and link-receive), three windows each, idle gaps between them
/// for the idle power the transfers' energy is net of.
ProfilePlan link_test_plan(const BoardProfile& board, uint32_t seed);

protocol::PlanOp to_wire(const PlannedOp& op);
/// Inverse of to_wire; false for an unknown op kind or phase code.
bool from_wire(const protocol::PlanOp& wire, PlannedOp& out);

}  // namespace ergon::devices
