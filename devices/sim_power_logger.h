#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "devices/board_profile.h"
#include "devices/protocol/decoder.h"
#include "devices/protocol/messages.h"
#include "probes/ina219_model.h"

namespace ergon::devices {

struct PowerLoggerOptions {
  uint64_t seed = 7;
  /// Its own crystal and boot time: logger clock = true time x (1 + drift) + offset.
  double clock_drift_ppm = 70;
  int64_t clock_offset_ns = 9'876'543'210;
  uint64_t tick_hz = 1'000'000;  ///< micros(), as on an Arduino-class logger
  double time_scale = 1;  ///< simulated seconds per real second (the board's; Hello says so)
};

/// What the logger sent in one run.
struct LoggerRunStats {
  uint32_t run_tag = 0;
  uint32_t samples_sent = 0;
  uint32_t frames_sent = 0;
};

/// A simulated power logger: an INA219 on a board's supply lead, read by a small board of its
/// own that streams the samples on its own link, stamped by its own clock. It speaks the
/// device protocol: Hello (kind power-logger, one rail), SyncReply in its ticks, and a Start
/// with no plan entries streams samples until Stop, then RunDone. The board it measures
/// (SimBoard with an external logger) tells it the power it draws as simulated time passes.
class SimPowerLogger {
 public:
  SimPowerLogger(const BoardProfile& board, const PowerLoggerOptions& options);

  /// Host commands that arrived at true time now_ns; answers are appended to out.
  void receive(const uint8_t* data, std::size_t n, int64_t now_ns, std::vector<uint8_t>& out);
  /// Samples the supply at every conversion up to true time t_ns while the board draws
  /// power_w (nothing when not running; times already sampled are not sampled again).
  void sample_until(int64_t t_ns, double power_w, std::vector<uint8_t>& out);

  [[nodiscard]] bool running() const { return running_; }
  [[nodiscard]] uint64_t ticks_at(int64_t true_ns) const;
  [[nodiscard]] const std::vector<LoggerRunStats>& runs() const { return runs_; }

 private:
  template <class Msg>
  void send(const Msg& msg, std::vector<uint8_t>& out);
  void flush_batch(std::vector<uint8_t>& out);
  void end_run(std::vector<uint8_t>& out);
  void send_run_done(std::vector<uint8_t>& out);

  BoardProfile board_;
  PowerLoggerOptions options_;
  probes::Ina219Model ina_;
  std::mt19937_64 rng_;
  protocol::Decoder decoder_;
  uint16_t tx_seq_ = 0;
  bool running_ = false;
  int64_t next_sample_ns_ = 0;
  int64_t sample_period_ns_ = 0;
  protocol::PowerBatch batch_{};
  std::vector<LoggerRunStats> runs_;
};

}  // namespace ergon::devices
