#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "devices/board_profile.h"
#include "devices/profile_plan.h"
#include "devices/sim_board.h"
#include "tests/support/sim_harness.h"

namespace ergon::devices {
namespace {

using ergon::testing::Harness;

TEST(BoardProfiles, EveryBoardIsFoundByNameAndKind) {
  for (const char* name : {"tx2", "pi4", "nrf52840", "mkr1000"}) {
    const auto b = find_board(name);
    ASSERT_TRUE(b) << name;
    EXPECT_EQ(find_board(b->kind)->name, b->name);
  }
  EXPECT_FALSE(find_board("pi5"));
}

TEST(BoardProfiles, PagingTimeFollowsThePublishedBandwidthAndLatency) {
  const auto mkr = *find_board("mkr1000");
  const auto t = profile_op_cost(mkr, profiler::paging(4600), profiler::Phase::kPageIn);
  EXPECT_NEAR(t.time_s, 0.109e-3 + 1e-3, 1e-9);  // 4.6 MB/s + 0.109 ms
  EXPECT_NEAR(t.power_w, mkr.idle_w + 0.33, 1e-9);
}

TEST(ProfilePlans, FitTheBoardAndCoverForwardBackwardPagingAndIdle) {
  for (const auto& board : board_profiles()) {
    const ProfilePlan plan = default_profile_plan(board, 1);
    std::set<profiler::Phase> phases;
    std::set<uint32_t> ids;
    for (const auto& op : plan.ops) {
      phases.insert(op.phase);
      EXPECT_TRUE(ids.insert(op.op_id).second) << "duplicate op id";
      EXPECT_LT(op.shape.bytes_in + op.shape.bytes_out, board.ram_bytes) << board.name;
    }
    EXPECT_EQ(phases.size(), 5U) << board.name;  // forward, backward, page-in/out, idle
    EXPECT_EQ(plan.ops.front().phase, profiler::Phase::kIdle);
  }
}

TEST(ProfilePlans, SurviveTheWireUnchanged) {
  for (const auto& op : default_profile_plan(*find_board("pi4"), 3).ops) {
    PlannedOp back;
    ASSERT_TRUE(from_wire(to_wire(op), back));
    EXPECT_EQ(back.op_id, op.op_id);
    EXPECT_EQ(back.shape, op.shape);
    EXPECT_EQ(back.phase, op.phase);
    EXPECT_EQ(back.windows, op.windows);
  }
}

TEST(SimBoard, DeviceClockRunsWithTheBoardsDrift) {
  const auto board = *find_board("mkr1000");  // -55 ppm, 1 MHz ticks
  SimBoard sim(board, {});
  const auto d = static_cast<double>(sim.ticks_at(1'000'000'000'000) - sim.ticks_at(0));
  EXPECT_NEAR(d / 1e9 - 1.0, -55e-6, 1e-9);  // 1000 s of true time
}

TEST(SimBoard, EveryMeasurementWindowLastsAtLeastTheMinimumWindow) {
  Harness h(*find_board("nrf52840"));
  h.run(600);
  ASSERT_EQ(h.session.state(), SessionState::kCompleted);
  const auto& truth = h.sim.truth();
  ASSERT_FALSE(truth.empty());
  for (const auto& t : truth) {
    if (t.phase != profiler::Phase::kIdle) {
      EXPECT_GE(t.end_ns - t.begin_ns, 60'000'000 - 1) << "window shorter than min_window";
    }
  }
}

TEST(SimBoard, MeasuredPowerAgreesWithTruthWithinSensorResolution) {
  Harness h(*find_board("pi4"));
  h.run(120);
  ASSERT_EQ(h.session.state(), SessionState::kCompleted);
  // Mean measured power over the run against the truth's time-weighted mean (idle gaps at
  // idle power): within 1 % (noise averages out; quantization is 2 mW of ~3 W).
  double measured = 0;
  for (const auto& s : h.sink.samples_) measured += s.power_uw * 1e-6;
  measured /= static_cast<double>(h.sink.samples_.size());
  const auto& board = h.sim.board();
  // Warm-up runs draw op power outside every window.
  double energy = h.sim.warmup_energy_j();
  int64_t busy_ns = h.sim.warmup_ns();
  for (const auto& t : h.sim.truth()) {
    energy += t.energy_j;
    busy_ns += t.end_ns - t.begin_ns;
  }
  const double run_s = static_cast<double>(h.sink.samples_.size()) * 2 * 532e-6;
  const double idle_s = run_s - static_cast<double>(busy_ns) * 1e-9;
  const double expected = (energy + idle_s * board.idle_w) / run_s;
  EXPECT_NEAR(measured, expected, 0.01 * expected);
}

TEST(SimBoard, RefusesAStartWhosePlanDidNotArriveWhole) {
  SimBoard sim(*find_board("pi4"), {});
  std::vector<uint8_t> in(protocol::kMaxEncodedFrameBytes), out;
  in.resize(protocol::encode_message(protocol::Start{.run_tag = 1, .op_count = 3}, 0, in.data(),
                                     in.size()));
  sim.receive(in.data(), in.size(), 0, out);
  EXPECT_FALSE(sim.running());
  protocol::Decoder d;
  bool failed_done = false;
  d.feed(out.data(), out.size(), [&](const protocol::Frame& f) {
    protocol::RunDone done;
    if (protocol::parse_message(f, done)) failed_done = done.end == protocol::RunEnd::kFailed;
  });
  EXPECT_TRUE(failed_done);
}

}  // namespace
}  // namespace ergon::devices
