#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "devices/board_profile.h"
#include "devices/profile_plan.h"
#include "devices/protocol/decoder.h"
#include "devices/protocol/messages.h"
#include "probes/power.h"
#include "profiler/op.h"
#include "profiler/sync.h"

namespace ergon::devices {

/// What the board said about itself in its Hello.
struct BoardHello {
  BoardKind kind = BoardKind::kUnknown;
  std::string kind_name;  ///< "pi4", ... or "unknown"
  std::string name;
  uint32_t firmware_version = 0;
  uint16_t protocol_version = 0;
  uint64_t tick_hz = 0;
  uint64_t ram_bytes = 0;
  std::vector<probes::Rail> rails;
  std::string power_mode;  ///< as the board runs now; empty when it did not say
  /// Board seconds per real second (Hello's time_scale_milli / 1000): 1 for real boards, a
  /// simulator's speed, 0 for an unpaced simulator. The clock fit expects it.
  double time_scale = 1;
  /// Set when the host switched the board's mode for this run (RecordOptions::power_mode):
  /// the mode it ran in before and how long the switch took, as the board measured it.
  std::string switched_from;
  std::optional<uint64_t> mode_switch_ns;
};

/// Data faults the host saw on a link: counted and stored, never fatal.
struct LinkStats {
  protocol::DecoderStats decoder;
  uint64_t spans = 0;
  uint64_t samples = 0;
  uint64_t sync_points = 0;
  uint64_t bad_messages = 0;  ///< intact frames whose payload did not parse
  uint64_t link_bytes_received = 0;  ///< LinkData filler of the board's link-send windows
  uint64_t link_bytes_sent = 0;      ///< filler sent for its link-receive windows
  std::optional<protocol::RunDone> device_done;  ///< what the device said it sent
  /// What an executed schedule computed (RecordOptions::execute), as the device reported it.
  std::optional<protocol::ExecutionReport> execution;
};

/// A schedule for the board to execute on real tensors of a zoo model (protocol v3): the
/// steps go to the board with the model, and the plan's entries are its timed steps.
struct ExecuteRequest {
  std::string model;
  uint16_t batch = 1;
  uint32_t seed = 1;
  /// Each step as (kind, node): kind as planner::StepKind (0 compute, 1 page-out, 2 page-in,
  /// 3 free; for a pipeline stage also 4 link-send and 5 link-receive).
  std::vector<std::pair<uint8_t, uint32_t>> steps;
  /// Set: the model is one stage of a pipeline (protocol v6 ExecuteStage): ops [first_op,
  /// end_op), `microbatches` of them; `steps` is the stage's whole run (ScheduleSteps).
  struct Stage {
    uint32_t first_op = 0, end_op = 0;
    uint16_t microbatches = 1;
  };
  std::optional<Stage> stage;
};

enum class SessionState {
  kHandshake,     ///< waiting for Hello
  kSettingMode,   ///< SetPowerMode sent, waiting for PowerModeSet
  kSyncing,       ///< clock exchanges before the run
  kRunning,       ///< plan running, data flowing
  kStopping,      ///< Stop sent, waiting for RunDone
  kClosing,       ///< final clock exchanges
  kCompleted,
  kStopped,       ///< ended early on request (duration or Ctrl-C)
  kDisconnected,  ///< link lost
  kFailed,        ///< board refused or stopped answering
};
std::string_view to_string(SessionState state);
[[nodiscard]] inline bool is_final(SessionState s) { return s >= SessionState::kCompleted; }

/// Where a session's data goes: the cost database in the CLI, a recorder in tests.
class RecordSink {
 public:
  virtual ~RecordSink() = default;
  /// The board answered and its plan is about to start.
  virtual void begin(const BoardHello& hello, const ProfilePlan& plan, int64_t host_ns) = 0;
  virtual void span(const profiler::OpSpan& span) = 0;
  virtual void samples(std::span<const probes::PowerSample> samples) = 0;
  virtual void sync(const profiler::SyncPoint& point) = 0;
  virtual void event(int64_t host_ns, std::string_view kind, std::string_view text) = 0;
  /// Called on every state change and periodically; the last call carries the final state.
  virtual void status(SessionState state, const LinkStats& stats, int64_t host_ns) = 0;
};

/// The board kind a power logger's runs are recorded under.
inline constexpr std::string_view kPowerLoggerKindName = "power-logger";
/// What a Linux host's runs are stored as (BoardKind::kLinuxHost): a kind with no profile.
inline constexpr std::string_view kLinuxHostKindName = "host";

/// Transfers between boards through the host (a pipeline's activations and gradients): what
/// one board sent under a tag, for the board that pulls that tag. Shared by the sessions of one
/// Recorder (one thread).
class LinkRelay {
 public:
  /// What one board sent under `tag`: the LinkData frames' bytes, in order (a tensor's, when
  /// the board executes on real tensors; filler otherwise).
  void put(uint32_t tag, std::vector<uint8_t> bytes) { arrived_[tag] = std::move(bytes); }
  [[nodiscard]] const std::vector<uint8_t>* find(uint32_t tag) const {
    const auto it = arrived_.find(tag);
    return it == arrived_.end() ? nullptr : &it->second;
  }
  /// The tag was delivered: its bytes are not kept any longer.
  void erase(uint32_t tag) { arrived_.erase(tag); }

 private:
  std::map<uint32_t, std::vector<uint8_t>> arrived_;
};

struct RecordOptions {
  /// Board profile to assume when the Hello does not name a known kind; also checked
  /// against the Hello (a mismatch is logged, the Hello wins).
  std::optional<BoardProfile> expected_board;
  uint16_t loops = 1;                   ///< passes over the plan; 0 = until duration/Ctrl-C
  std::optional<double> duration_s;     ///< stop the run after this long
  uint32_t seed = 1;                    ///< shuffles the plan
  /// Each measurement window repeats its op for at least this long (default: the plan's,
  /// 60 ms, >= 50 INA219 samples); shorter windows make faster, less accurate runs.
  std::optional<uint32_t> min_window_us;
  /// Run this plan instead of the board's default profile plan, in this mode (kSchedule: a
  /// training schedule's steps, each once, in order).
  std::optional<ProfilePlan> plan;
  /// Run link_test_plan() (protocol v6 transfers to and from the host) instead of the
  /// board's profile plan; `link` names the link kind the costs are stored under.
  bool link_test = false;
  std::string link;
  /// Set: tagged transfers are relayed between the boards sharing it (a board's LinkPull is
  /// answered once another board has sent that tag); unset: answered at once with filler.
  std::shared_ptr<LinkRelay> relay;
  protocol::StartMode mode = protocol::StartMode::kProfile;
  /// With mode kExecute: the model and schedule the board executes.
  std::optional<ExecuteRequest> execute;
  /// Switch the board to this power mode before the run (protocol v4 SetPowerMode); the
  /// session fails, recording nothing, when the board cannot. Empty: the mode it is in.
  std::string power_mode;
  double mode_switch_timeout_s = 30;    ///< nvpmodel may take seconds
  /// Per-phase modes (protocol v4 PhaseModes): from plan entry `switch_at` on the board runs
  /// in mode `backward`, and switches back when the run ends.
  struct PhaseSwitch {
    std::string backward;
    uint32_t switch_at = 0;
  };
  std::optional<PhaseSwitch> phase_modes;
  int initial_syncs = 8;                ///< exchanges before and after the run
  double sync_interval_s = 1.0;         ///< exchanges during the run
  double handshake_timeout_s = 5.0;
  double quiet_timeout_s = 3.0;         ///< no frame for this long while running: ask again
};

/// The host side of one board, without I/O: bytes in, bytes out, decisions by the clock.
/// The transport (Recorder) calls on_open, then on_bytes as data arrives and on_tick often
/// (every few ms), and sends whatever the calls appended to `out`.
class RecordSession {
 public:
  RecordSession(std::string source, const RecordOptions& options, RecordSink& sink,
                const Clock& clock);

  void on_open(std::vector<uint8_t>& out);
  void on_bytes(const uint8_t* data, std::size_t n, std::vector<uint8_t>& out);
  void on_tick(std::vector<uint8_t>& out);
  void on_link_error(std::string_view what);
  /// The link could not be opened at all (no such port, permission denied, refused).
  void on_open_failed(std::string_view what);
  /// Ctrl-C or end of duration: stop the plan cleanly (the device sends RunDone).
  void request_stop(std::vector<uint8_t>& out);
  /// Answers the board's LinkPulls whose bytes the relay now has (another board sent them).
  /// Called on every tick, and by the transport whenever another board's bytes arrived.
  void serve_relay(std::vector<uint8_t>& out);

  [[nodiscard]] SessionState state() const { return state_; }
  [[nodiscard]] bool finished() const { return is_final(state_); }
  [[nodiscard]] const LinkStats& stats() const { return stats_; }
  [[nodiscard]] const std::string& source() const { return source_; }
  [[nodiscard]] const std::optional<BoardHello>& hello() const { return hello_; }
  /// The device is a power logger (its Hello said so): it measures another board's supply
  /// and runs until stopped. Recorder stops it once the boards it measures are done.
  [[nodiscard]] bool is_power_logger() const {
    return hello_ && hello_->kind == BoardKind::kPowerLogger;
  }
  /// The reason for kFailed / kDisconnected, empty otherwise.
  [[nodiscard]] const std::string& error() const { return error_; }

 private:
  template <class Msg>
  void send(const Msg& msg, std::vector<uint8_t>& out);
  void handle(const protocol::Frame& frame, std::vector<uint8_t>& out);
  void on_hello(const protocol::Hello& hello, std::vector<uint8_t>& out);
  void request_mode(std::vector<uint8_t>& out);  ///< SetPowerMode(options_.power_mode)
  void on_mode_set(const protocol::PowerModeSet& answer, std::vector<uint8_t>& out);
  /// The board is known (and in its mode): tell the sink, then sync clocks.
  void begin(BoardHello hello, const std::string& warning, std::vector<uint8_t>& out);
  void start_plan(std::vector<uint8_t>& out);
  void send_sync(std::vector<uint8_t>& out);
  void set_state(SessionState s);
  void fail(SessionState s, std::string why);

  std::string source_;
  RecordOptions options_;
  RecordSink& sink_;
  const Clock& clock_;
  protocol::Decoder decoder_;
  uint16_t tx_seq_ = 0;
  SessionState state_ = SessionState::kHandshake;
  std::string error_;
  std::optional<BoardHello> hello_;
  /// The Hello (and any warning about it) while the board switches modes; hello_ stays unset
  /// until then, so nothing reaches the sink for a board that cannot switch.
  std::optional<std::pair<BoardHello, std::string>> pending_hello_;
  int64_t mode_requested_ns_ = 0;
  int64_t last_mode_request_ns_ = 0;
  ProfilePlan plan_;
  LinkStats stats_;
  std::vector<probes::PowerSample> sample_buf_;

  int64_t opened_ns_ = 0;
  int64_t last_hello_request_ns_ = 0;
  int64_t run_started_ns_ = 0;
  int64_t last_frame_ns_ = 0;
  int64_t last_sync_ns_ = 0;
  int stop_attempts_ = 0;
  bool stop_requested_ = false;
  uint32_t next_sync_id_ = 1;
  int syncs_sent_in_state_ = 0;
  int syncs_answered_in_state_ = 0;
  uint32_t run_tag_ = 0;
  uint32_t link_transfer_ = 0;        ///< the board's link-send transfer arriving now
  uint32_t link_transfer_bytes_ = 0;  ///< and its bytes so far
  std::vector<uint8_t> link_transfer_data_;  ///< and the bytes themselves, when relaying
  std::vector<protocol::LinkPull> pending_pulls_;  ///< waiting for the relay to have their tag
  void send_link_data(const protocol::LinkPull& pull, std::vector<uint8_t>& out);
  SessionState end_state_ = SessionState::kCompleted;
};

}  // namespace ergon::devices
