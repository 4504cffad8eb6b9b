#pragma once

#include <string>
#include <vector>

#include "devices/host/record_session.h"
#include "devices/sim_board.h"
#include "tests/support/fake_clock.h"

namespace ergon::testing {

/// Remembers everything a session hands its sink.
class CollectingSink final : public devices::RecordSink {
 public:
  void begin(const devices::BoardHello& h, const devices::ProfilePlan& p, int64_t) override {
    hello = h;
    plan = p;
    ++begins;
  }
  void span(const profiler::OpSpan& s) override { spans.push_back(s); }
  void samples(std::span<const probes::PowerSample> s) override {
    samples_.insert(samples_.end(), s.begin(), s.end());
  }
  void sync(const profiler::SyncPoint& p) override { syncs.push_back(p); }
  void event(int64_t, std::string_view kind, std::string_view text) override {
    events.push_back(std::string(kind) + ": " + std::string(text));
  }
  void status(devices::SessionState s, const devices::LinkStats&, int64_t) override {
    states.push_back(s);
  }

  devices::BoardHello hello;
  devices::ProfilePlan plan;
  int begins = 0;
  std::vector<profiler::OpSpan> spans;
  std::vector<probes::PowerSample> samples_;
  std::vector<profiler::SyncPoint> syncs;
  std::vector<std::string> events;
  std::vector<devices::SessionState> states;
};

/// A session wired to a simulated board in memory, both driven by one fake clock; the
/// simulator's true time is the host clock (as if the link had no latency).
struct Harness {
  explicit Harness(const devices::BoardProfile& board, devices::RecordOptions options = {},
                   devices::SimBoardOptions sim_options = {})
      : sim(board, sim_options), session("mem:" + std::string(board.name), options, sink, clock) {}

  /// Runs until the session ends or max_s of fake time pass. `link_up` false: the board is
  /// deaf and mute (unplugged).
  void run(double max_s, bool link_up = true, double step_s = 0.002) {
    session.on_open(to_board);
    const int64_t end = clock.now_ns() + static_cast<int64_t>(max_s * 1e9);
    while (!session.finished() && clock.now_ns() < end) {
      clock.advance_ns(static_cast<int64_t>(step_s * 1e9));
      pump(link_up);
    }
  }

  void pump(bool link_up = true) {
    const int64_t t = clock.now_ns();
    if (link_up) {
      sim.receive(to_board.data(), to_board.size(), t, to_host);
      to_board.clear();
      sim.advance_to(t, to_host);
      session.on_bytes(to_host.data(), to_host.size(), to_board);  // answers go out next pump
    }
    if (!link_up) to_board.clear();
    to_host.clear();
    session.on_tick(to_board);
  }

  FakeClock clock;
  CollectingSink sink;
  devices::SimBoard sim;
  devices::RecordSession session;
  std::vector<uint8_t> to_board;
  std::vector<uint8_t> to_host;
};

/// A board measured by an external power logger: two sessions (board and logger), each on
/// its own in-memory link, one fake clock; the logger is stopped once the board's session
/// ends, as Recorder does.
struct LoggedHarness {
  explicit LoggedHarness(const devices::BoardProfile& board, devices::RecordOptions options = {},
                         devices::PowerLoggerOptions logger = {})
      : sim(board, devices::SimBoardOptions{.external_logger = logger}),
        session("mem:" + std::string(board.name), options, sink, clock),
        logger_session("mem:logger", options, logger_sink, clock) {}

  void run(double max_s, double step_s = 0.002) {
    session.on_open(to_board);
    logger_session.on_open(to_logger);
    const int64_t end = clock.now_ns() + static_cast<int64_t>(max_s * 1e9);
    while (!(session.finished() && logger_session.finished()) && clock.now_ns() < end) {
      clock.advance_ns(static_cast<int64_t>(step_s * 1e9));
      const int64_t t = clock.now_ns();
      sim.receive(to_board.data(), to_board.size(), t, to_host);
      sim.receive_logger(to_logger.data(), to_logger.size(), t, logger_to_host);
      sim.advance_to(t, to_host, &logger_to_host);
      session.on_bytes(to_host.data(), to_host.size(), to_board);
      logger_session.on_bytes(logger_to_host.data(), logger_to_host.size(), to_logger);
      to_board.clear();
      to_host.clear();
      to_logger.clear();
      logger_to_host.clear();
      session.on_tick(to_board);
      logger_session.on_tick(to_logger);
      if (session.finished() && !logger_stopped) {
        logger_session.request_stop(to_logger);
        logger_stopped = true;
      }
    }
  }

  FakeClock clock;
  CollectingSink sink;
  CollectingSink logger_sink;
  devices::SimBoard sim;
  devices::RecordSession session;
  devices::RecordSession logger_session;
  bool logger_stopped = false;
  std::vector<uint8_t> to_board, to_host, to_logger, logger_to_host;
};

}  // namespace ergon::testing
