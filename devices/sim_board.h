#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "devices/board_profile.h"
#include "devices/sim_power_logger.h"
#include "devices/profile_plan.h"
#include "devices/protocol/decoder.h"
#include "devices/protocol/messages.h"
#include "devices/truth_model.h"
#include "probes/ina219_model.h"

namespace ergon::devices {

/// The simulator's record of what really happened in a span (for accuracy tests).
struct TruthSpan {
  uint32_t run_tag = 0;
  uint32_t op_id = 0;
  profiler::Phase phase = profiler::Phase::kForward;
  uint64_t begin_ticks = 0;
  uint64_t end_ticks = 0;
  uint32_t repetitions = 1;
  int64_t begin_ns = 0;  ///< true simulation time
  int64_t end_ns = 0;
  double power_w = 0;    ///< true board power during the span (constant within a window)
  double energy_j = 0;   ///< exact: power_w x (end_ns - begin_ns)
  bool frame_intact = true;  ///< false when link corruption touched the span's frame
  bool throttled = false;    ///< the governor had capped the clock for it
  double temperature_c = 0;  ///< the die's temperature when it began
  /// What the published profile says the span's runs take, and how the truth model's
  /// effects moved its time and energy away from that (they sum to the truth).
  double profile_time_s = 0;
  double profile_energy_j = 0;
  TruthEffects time_by;
  TruthEffects energy_by;
};

/// What the board sent in one run, and how much of it the simulated link left intact.
struct SimRunStats {
  uint32_t run_tag = 0;
  uint32_t spans_sent = 0;
  uint32_t samples_sent = 0;
  uint32_t frames_sent = 0;  ///< OpSpan and PowerBatch frames
  uint32_t spans_intact = 0;
  uint32_t samples_intact = 0;
  uint32_t frames_intact = 0;
  /// The run's timed non-idle spans against the published profile: how much of their true
  /// time and energy each effect of the truth model made (what a validation's error is
  /// made of, with break_down_error()).
  TruthLedger truth;
};

/// The simulated board's own power monitor.
enum class SimPowerSensor {
  kIna219,      ///< the INA219 at register level: a conversion pair every 1.064 ms
  /// A Jetson's rail as tegrastats prints it: the mean power over each interval, in whole
  /// milliwatts, stamped when the line prints (no bus voltage, no current).
  kTegrastats,
};

struct SimBoardOptions {
  uint64_t seed = 1;
  /// Device clock = true time x (1 + drift) + offset; the offset is "time since boot".
  int64_t clock_offset_ns = 123'456'789'000;
  /// Probability that each byte the board sends gets one bit flipped (a noisy link).
  double corrupt_probability = 0.0;
  /// Set: the board has no power monitor of its own; a power logger on its supply lead (a
  /// second device, on its own link and clock) measures it instead.
  std::optional<PowerLoggerOptions> external_logger;
  /// The power mode the board runs in (BoardProfile::power_modes); empty: its default.
  std::string power_mode;
  /// Cores its kernels run on (with_threads()).
  int threads = 1;
  /// Simulated seconds per real second, as its Hello declares it (SimServer's speed; 0:
  /// unpaced); in-memory tests drive it on one clock, real time.
  double time_scale = 1;
  SimPowerSensor sensor = SimPowerSensor::kIna219;
  int64_t tegrastats_interval_ns = 100'000'000;  ///< ergon's tegrastats probe's default
  /// The link kind the board talks to its host over (link_profiles()): what its transfers
  /// take and draw. Empty: default_link() for the board.
  std::string link;
  /// The protocol version its Hello declares: an older firmware's, to test what a host of
  /// this version leaves out for it (5 and up).
  uint16_t protocol_version = protocol::kProtocolVersion;
};

/// A simulated board running the Ergon agent, without any I/O: host bytes go in through
/// receive(), the plan runs in simulated time through advance_to(), and every frame the
/// board sends is appended to `out`. The pty/TCP server (sim_server.h) and tests drive it.
class SimBoard {
 public:
  SimBoard(const BoardProfile& board, const SimBoardOptions& options);

  /// Handles host commands that arrived at true time now_ns (answers go to out at once).
  void receive(const uint8_t* data, std::size_t n, int64_t now_ns, std::vector<uint8_t>& out);
  /// Runs the active plan up to true time t_ns, emitting spans and power batches; with an
  /// external logger, the logger's samples of the board's supply go to `logger_out`.
  void advance_to(int64_t t_ns, std::vector<uint8_t>& out,
                  std::vector<uint8_t>* logger_out = nullptr);
  /// Host commands on the external logger's link (answers to `logger_out`).
  void receive_logger(const uint8_t* data, std::size_t n, int64_t now_ns,
                      std::vector<uint8_t>& logger_out);
  /// The external logger, when the options asked for one.
  [[nodiscard]] const SimPowerLogger* logger() const { return logger_ ? &*logger_ : nullptr; }

  [[nodiscard]] bool running() const { return running_; }
  /// How far the plan has been simulated (true ns).
  [[nodiscard]] int64_t cursor_ns() const { return cursor_ns_; }
  [[nodiscard]] uint64_t ticks_at(int64_t true_ns) const;
  [[nodiscard]] const std::vector<TruthSpan>& truth() const { return truth_; }
  /// The truth model: the die's temperature and the governor's state now.
  [[nodiscard]] const TruthModel& truth_model() const { return truth_model_; }
  /// Warm-up runs (untimed, before windows) so far: their true duration and energy.
  [[nodiscard]] int64_t warmup_ns() const { return warmup_ns_; }
  [[nodiscard]] double warmup_energy_j() const { return warmup_energy_j_; }
  /// One entry per run started, the current one last.
  [[nodiscard]] const std::vector<SimRunStats>& runs() const { return runs_; }
  [[nodiscard]] const BoardProfile& board() const { return board_; }
  [[nodiscard]] const protocol::DecoderStats& host_link_stats() const {
    return decoder_.stats();
  }
  /// Frames of any kind sent since construction.
  [[nodiscard]] uint64_t frames_sent() const { return tx_seq_count_; }

 private:
  struct Segment {
    bool is_span = false;
    bool is_warmup = false;  ///< untimed runs before a window: the plan cursor stays
    bool is_switch = false;  ///< the board switching power modes mid-run: the cursor stays
    uint32_t op_id = 0;
    profiler::Phase phase = profiler::Phase::kIdle;
    uint32_t repetitions = 1;
    int64_t begin_ns = 0;
    int64_t end_ns = 0;
    double power_w = 0;
    OpRun run;  ///< spans and warm-ups: the truth model's account of them
    /// A tagged link-receive waiting for the host to relay its bytes (end_ns unknown yet);
    /// then when they came: the board idled until then.
    bool waiting = false;
    int64_t wait_end_ns = 0;
  };

  void handle_frame(const protocol::Frame& frame, int64_t now_ns, std::vector<uint8_t>& out);
  void start_run(const protocol::Start& start, int64_t now_ns, std::vector<uint8_t>& out);
  void set_power_mode(const protocol::SetPowerMode& request, std::vector<uint8_t>& out);
  void end_run(protocol::RunEnd end, std::vector<uint8_t>& out);
  bool next_segment(int64_t begin_ns);
  void finish_segment(std::vector<uint8_t>& out);
  void take_sample(int64_t t_ns, double power_w, std::vector<uint8_t>& out);
  /// tegrastats: integrates power up to t_ns, sending each interval's mean as it closes.
  void average_until(int64_t t_ns, double power_w, std::vector<uint8_t>& out);
  void append_sample(uint64_t ticks, int32_t bus_uv, int32_t current_ua, int32_t power_uw, uint8_t flags,
                     std::vector<uint8_t>& out);
  void flush_batch(std::vector<uint8_t>& out);
  /// A transfer window's bytes on the real link: one transfer's LinkData frames (link-send),
  /// or a LinkPull the host answers (link-receive). Its time is the truth model's.
  void exchange_transfer(const PlannedOp& op, std::vector<uint8_t>& out);
  /// Sends the LinkPull of a tagged link-receive that next_segment() began.
  void send_due_pull(std::vector<uint8_t>& out);
  /// The bytes of the waiting link-receive arrived (true time now_ns): it ends a transfer's
  /// worth of time later, and no sooner than the truth model's own time for it.
  void relayed_data_arrived(int64_t now_ns);
  void log(protocol::LogLevel level, const std::string& text, std::vector<uint8_t>& out);
  /// Encodes and appends one frame; returns whether the (simulated) link left it intact.
  template <class Msg>
  bool send(const Msg& msg, std::vector<uint8_t>& out);

  BoardProfile base_;   ///< the board as constructed, before any mode or thread count
  BoardProfile board_;  ///< in the mode it runs now
  SimBoardOptions options_;
  probes::Ina219Model ina_;
  std::optional<SimPowerLogger> logger_;
  std::mt19937_64 rng_;  ///< the sensor's noise and the link's damage
  TruthModel truth_model_;
  protocol::Decoder decoder_;
  uint16_t tx_seq_ = 0;
  uint64_t tx_seq_count_ = 0;

  std::vector<PlannedOp> pending_plan_;
  /// Per-phase modes for the next run (PhaseModes), then for the running one; the mode the
  /// run started in, to switch back to; whether the switch has happened.
  std::optional<protocol::PhaseModes> pending_phases_, phases_;
  std::optional<BoardProfile> started_in_;
  bool phase_switched_ = false;
  std::vector<PlannedOp> plan_;
  protocol::Start start_{};
  bool running_ = false;
  bool stop_requested_ = false;
  protocol::RunEnd last_end_ = protocol::RunEnd::kCompleted;
  std::size_t op_index_ = 0;
  uint32_t window_ = 0;
  bool in_gap_ = false;
  bool warmed_up_ = false;  ///< the current window's warm-up runs are done
  bool cold_ = true;        ///< the next op run follows an idle gap or the run's start
  uint32_t loop_ = 0;
  Segment segment_;
  int64_t cursor_ns_ = 0;
  int64_t next_sample_ns_ = 0;
  int64_t sample_period_ns_ = 0;
  int64_t mean_until_ns_ = 0;  ///< tegrastats: the interval integrated so far
  double mean_energy_j_ = 0;

  protocol::PowerBatch batch_{};
  std::vector<SimRunStats> runs_;
  std::vector<TruthSpan> truth_;
  int64_t warmup_ns_ = 0;
  double warmup_energy_j_ = 0;
  uint32_t next_transfer_ = 1;
  uint32_t pull_due_ = 0;  ///< a tagged link-receive began: its LinkPull is to be sent
  uint64_t link_bytes_received_ = 0;  ///< HostLinkData filler from the host
};

}  // namespace ergon::devices
