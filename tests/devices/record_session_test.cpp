#include <gtest/gtest.h>

#include <algorithm>

#include "devices/board_profile.h"
#include "devices/host/record_session.h"
#include "tests/support/sim_harness.h"

namespace ergon::devices {
namespace {

using ergon::testing::Harness;

bool has_event(const std::vector<std::string>& events, std::string_view needle) {
  return std::any_of(events.begin(), events.end(),
                     [&](const std::string& e) { return e.find(needle) != std::string::npos; });
}

TEST(RecordSession, RecordsEverySpanAndSampleTheBoardSent) {
  Harness h(*find_board("mkr1000"));
  h.run(900);
  ASSERT_EQ(h.session.state(), SessionState::kCompleted) << h.session.error();
  const auto& done = h.session.stats().device_done;
  ASSERT_TRUE(done);
  EXPECT_EQ(h.sink.spans.size(), done->spans_sent);
  EXPECT_EQ(h.sink.samples_.size(), done->samples_sent);
  EXPECT_EQ(h.sink.spans.size(), h.sim.truth().size());
  EXPECT_EQ(h.session.stats().decoder.frames_lost, 0U);
  EXPECT_EQ(h.sink.hello.kind_name, "mkr1000");
  EXPECT_EQ(h.sink.hello.tick_hz, 1'000'000U);
  EXPECT_GE(h.sink.syncs.size(), 16U);  // 8 before, 8 after, more during
  // Spans arrive exactly as the board timed them.
  for (std::size_t i = 0; i < h.sink.spans.size(); ++i) {
    EXPECT_EQ(h.sink.spans[i].begin_ticks, h.sim.truth()[i].begin_ticks);
    EXPECT_EQ(h.sink.spans[i].end_ticks, h.sim.truth()[i].end_ticks);
  }
  // Samples are in time order, one every ~1.064 ms of device time.
  for (std::size_t i = 1; i < h.sink.samples_.size(); ++i)
    ASSERT_GT(h.sink.samples_[i].t_ticks, h.sink.samples_[i - 1].t_ticks);
}

ProfilePlan one_linear_plan() {
  ProfilePlan plan;
  plan.min_window_us = 20'000;
  plan.ops.push_back({.op_id = 1, .shape = profiler::linear(16, 256, 128, profiler::Phase::kForward),
                      .phase = profiler::Phase::kForward, .windows = 2, .idle_after_us = 10'000});
  return plan;
}

/// A short run that asks the board for `mode` first.
RecordOptions switching_to(const std::string& mode) {
  RecordOptions options;
  options.plan = one_linear_plan();
  options.power_mode = mode;
  return options;
}

TEST(RecordSession, SwitchesTheBoardToTheRequestedPowerModeBeforeTheRun) {
  Harness h(*find_board("pi4"), switching_to("600MHz"));
  h.run(60);
  ASSERT_EQ(h.session.state(), SessionState::kCompleted) << h.session.error();
  EXPECT_EQ(h.sim.board().power_mode, "600MHz");
  EXPECT_EQ(h.sink.hello.power_mode, "600MHz") << "the run is recorded in the mode it ran in";
  EXPECT_EQ(h.sink.hello.switched_from, "1500MHz");
  ASSERT_TRUE(h.sink.hello.mode_switch_ns);
  EXPECT_EQ(*h.sink.hello.mode_switch_ns, 355'000U) << "the Pi 4's transition latency";
  EXPECT_TRUE(has_event(h.sink.events, "power-mode: switched from 1500MHz to 600MHz in 0.355 ms"));
  EXPECT_EQ(h.sink.begins, 1);
}

TEST(RecordSession, ABoardAlreadyInTheModeIsNotAskedToSwitch) {
  Harness h(*find_board("pi4"), switching_to("1500MHz"));
  h.run(60);
  ASSERT_EQ(h.session.state(), SessionState::kCompleted) << h.session.error();
  EXPECT_EQ(h.sink.hello.power_mode, "1500MHz");
  EXPECT_FALSE(h.sink.hello.mode_switch_ns);
  EXPECT_EQ(std::count(h.sink.states.begin(), h.sink.states.end(), SessionState::kSettingMode), 0);
}

TEST(RecordSession, AModeTheBoardCannotSwitchToFailsWithItsReasonAndRecordsNothing) {
  Harness h(*find_board("pi4"), switching_to("2000MHz"));
  h.run(60);
  EXPECT_EQ(h.session.state(), SessionState::kFailed);
  EXPECT_EQ(h.session.error(),
            "mem:pi4 cannot switch to power mode 2000MHz: this board's modes: 1500MHz, 1000MHz, 600MHz");
  EXPECT_EQ(h.sink.begins, 0);
  EXPECT_EQ(h.sim.board().power_mode, "1500MHz");
}

// The request (or its answer) lost on the link is asked again; a board that never answers
// fails the session after mode_switch_timeout_s, with nothing recorded.
TEST(RecordSession, ALostModeRequestIsRepeatedAndAnUnansweredOneTimesOut) {
  const RecordOptions options = switching_to("600MHz");
  for (const bool comes_back : {true, false}) {
    SCOPED_TRACE(comes_back ? "link comes back" : "link stays down");
    Harness h(*find_board("pi4"), options);
    h.session.on_open(h.to_board);
    for (int i = 0; i < 1000 && h.session.state() != SessionState::kSettingMode; ++i) {
      h.clock.advance_ns(2'000'000);
      h.pump();
    }
    ASSERT_EQ(h.session.state(), SessionState::kSettingMode);
    for (int i = 0; i < 500; ++i) {  // 1 s down: the request is lost
      h.clock.advance_ns(2'000'000);
      h.pump(false);
    }
    EXPECT_EQ(h.sim.board().power_mode, "1500MHz");
    h.run(comes_back ? 60 : 40, comes_back);
    if (comes_back) {
      EXPECT_EQ(h.session.state(), SessionState::kCompleted) << h.session.error();
      EXPECT_EQ(h.sink.hello.power_mode, "600MHz");
    } else {
      EXPECT_EQ(h.session.state(), SessionState::kFailed);
      EXPECT_EQ(h.session.error(), "mem:pi4 did not answer the switch to power mode 600MHz within 30 s");
      EXPECT_EQ(h.sink.begins, 0);
    }
  }
}

// A board kind this ergon does not know (a newer firmware) is recorded as --board says.
TEST(RecordSession, ABoardKindBeyondTheKnownOnesIsRecordedAsTheBoardOptionSays) {
  BoardProfile future = *find_board("pi4");
  future.kind = static_cast<BoardKind>(9);
  RecordOptions options;
  options.expected_board = find_board("pi4");
  Harness h(future, options);
  h.run(120);
  ASSERT_EQ(h.session.state(), SessionState::kCompleted) << h.session.error();
  EXPECT_EQ(h.sink.hello.kind_name, "pi4");
  EXPECT_FALSE(h.sink.plan.ops.empty()) << "the pi4's default profile plan";
}

TEST(RecordSession, ABoardOfProtocolV7GetsThePlanWithoutItsCacheEntriesAndTheRunSaysSo) {
  RecordOptions options;
  options.plan = one_linear_plan();
  PlannedOp warm = options.plan->ops.front();
  warm.op_id = 2;
  warm.copies = 1;  // protocol v8: a v7 board would read it as the same entry from memory
  options.plan->ops.push_back(warm);
  Harness h(*find_board("pi4"), options, SimBoardOptions{.protocol_version = 7});
  h.run(60);
  ASSERT_EQ(h.session.state(), SessionState::kCompleted) << h.session.error();
  ASSERT_EQ(h.sink.plan.ops.size(), 1U);
  EXPECT_EQ(h.sink.plan.ops.front().copies, 0);
  EXPECT_TRUE(has_event(h.sink.events, "1 cache entries (v8) are left out"));
  EXPECT_EQ(h.sink.spans.size(), 2U);  // the one entry's two windows
}

TEST(RecordSession, SyncRepliesStampTheDeviceClock) {
  Harness h(*find_board("pi4"));
  h.run(120);
  ASSERT_FALSE(h.sink.syncs.empty());
  for (const auto& s : h.sink.syncs) {
    EXPECT_GE(s.host_rx_ns, s.host_tx_ns);
    EXPECT_EQ(s.device_rx_ticks, h.sim.ticks_at(s.host_rx_ns));  // answered on arrival
  }
}

TEST(RecordSession, UnansweredBoardFailsWithAClearMessage) {
  Harness h(*find_board("pi4"));
  h.run(30, /*link_up=*/false);
  EXPECT_EQ(h.session.state(), SessionState::kFailed);
  EXPECT_NE(h.session.error().find("no answer from mem:pi4 within 5 s"), std::string::npos)
      << h.session.error();
  EXPECT_EQ(h.sink.begins, 0);
}

TEST(RecordSession, StopsCleanlyWhenAskedAndTheBoardConfirms) {
  RecordOptions opt;
  opt.loops = 0;
  opt.duration_s = 2.0;
  Harness h(*find_board("pi4"), opt);
  h.run(60);
  ASSERT_EQ(h.session.state(), SessionState::kStopped) << h.session.error();
  ASSERT_TRUE(h.session.stats().device_done);
  EXPECT_EQ(h.session.stats().device_done->end, protocol::RunEnd::kStopped);
  EXPECT_EQ(h.sink.samples_.size(), h.session.stats().device_done->samples_sent);
}

TEST(RecordSession, NoisyLinkLosesOnlyDamagedFramesAndCountsThem) {
  SimBoardOptions sim_opt;
  sim_opt.corrupt_probability = 0.002;
  sim_opt.seed = 7;
  Harness h(*find_board("nrf52840"), {}, sim_opt);
  h.run(900);
  ASSERT_EQ(h.session.state(), SessionState::kCompleted) << h.session.error();
  const auto& run = h.sim.runs().back();
  ASSERT_LT(run.frames_intact, run.frames_sent) << "no damage: the test proves nothing";
  EXPECT_EQ(h.sink.spans.size(), run.spans_intact);
  EXPECT_EQ(h.sink.samples_.size(), run.samples_intact);
  const auto& st = h.session.stats().decoder;
  EXPECT_GT(st.crc_errors + st.malformed, 0U);
  EXPECT_GT(st.frames_lost, 0U);
}

TEST(RecordSession, LinkErrorEndsTheSessionAsDisconnected) {
  Harness h(*find_board("pi4"));
  h.session.on_open(h.to_board);
  for (int i = 0; i < 500 && h.session.state() != SessionState::kRunning; ++i) {
    h.clock.advance_ns(2'000'000);
    h.pump();
  }
  ASSERT_EQ(h.session.state(), SessionState::kRunning);
  h.session.on_link_error("Input/output error");
  EXPECT_EQ(h.session.state(), SessionState::kDisconnected);
  EXPECT_TRUE(has_event(h.sink.events, "Input/output error"));
  EXPECT_EQ(h.sink.states.back(), SessionState::kDisconnected);
}

TEST(RecordSession, UnknownBoardKindNeedsTheBoardOption) {
  BoardProfile anonymous = *find_board("pi4");
  anonymous.kind = BoardKind::kUnknown;
  Harness h(anonymous);
  h.run(10);
  EXPECT_EQ(h.session.state(), SessionState::kFailed);
  EXPECT_NE(h.session.error().find("pass --board"), std::string::npos);

  RecordOptions opt;
  opt.expected_board = *find_board("pi4");
  Harness h2(anonymous, opt);
  h2.run(120);
  EXPECT_EQ(h2.session.state(), SessionState::kCompleted) << h2.session.error();
  EXPECT_EQ(h2.sink.hello.kind_name, "pi4");
}

TEST(RecordSession, BoardMismatchIsRecordedAsTheBoardSaysWithAWarning) {
  RecordOptions opt;
  opt.expected_board = *find_board("tx2");
  Harness h(*find_board("pi4"), opt);
  h.run(120);
  EXPECT_EQ(h.session.state(), SessionState::kCompleted);
  EXPECT_EQ(h.sink.hello.kind_name, "pi4");
  EXPECT_TRUE(has_event(h.sink.events, "--board said tx2"));
}

TEST(RecordSession, ABoardFromADescriptorFileIsRecordedUnderItsName) {
  const auto file = std::string(ERGON_TEST_DATA_DIR) + "/../../boards/examples/pi5.json";
  const BoardProfile pi5 = *find_board(file);
  RecordOptions options;
  options.plan = one_linear_plan();
  Harness h(pi5, options);
  h.run(60);
  ASSERT_EQ(h.session.state(), SessionState::kCompleted) << h.session.error();
  EXPECT_EQ(h.sink.hello.kind, BoardKind::kDescribed);
  EXPECT_EQ(h.sink.hello.kind_name, "pi5");
  EXPECT_EQ(h.sink.hello.power_mode, "2400MHz");
  EXPECT_FALSE(h.sink.spans.empty());
}

TEST(RecordSession, ABoardWhoseDescriptorTheHostLacksIsRefusedWithWhereToPutIt) {
  BoardProfile stranger = *find_board("pi4");
  stranger.kind = BoardKind::kDescribed;
  stranger.name = "orin-nano";
  RecordOptions options;
  options.plan = one_linear_plan();
  Harness h(stranger, options);
  h.run(5);
  ASSERT_EQ(h.session.state(), SessionState::kFailed);
  EXPECT_NE(h.session.error().find("is a 'orin-nano' board, and no board file of that name is known here: pass "
                                   "--board orin-nano.json or put it in"),
            std::string::npos)
      << h.session.error();

  // A board type that looks like a path is a name nobody has: the host opens no file for it.
  BoardProfile hostile = stranger;
  hostile.name = "/dev/zero";
  Harness refused(hostile, options);
  refused.run(5);
  ASSERT_EQ(refused.session.state(), SessionState::kFailed);
  EXPECT_NE(refused.session.error().find("no board file of that name is known here"), std::string::npos)
      << refused.session.error();

  // Told what it is (ergon record --board FILE), the host records it.
  RecordOptions told = options;
  told.expected_board = stranger;
  Harness known(stranger, told);
  known.run(60);
  ASSERT_EQ(known.session.state(), SessionState::kCompleted) << known.session.error();
  EXPECT_EQ(known.sink.hello.kind_name, "orin-nano");
}

}  // namespace
}  // namespace ergon::devices
