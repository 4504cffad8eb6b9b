#pragma once

// Freestanding message definitions. Each message knows its type code and how to write and
// read its payload; docs/protocol.md lists every field with its offset.

#include <cstddef>
#include <cstdint>

#include "devices/protocol/frame.h"
#include "devices/protocol/wire.h"

namespace ergon::devices::protocol {

inline constexpr std::size_t kNameBytes = 15;

/// Copies a C string into a fixed text field, truncating, always NUL-terminated.
template <std::size_t N>
void copy_text(char (&dst)[N], const char* src) {
  std::size_t i = 0;
  for (; i + 1 < N && src[i] != '\0'; ++i) dst[i] = src[i];
  for (std::size_t k = i; k < N; ++k) dst[k] = '\0';
}
inline constexpr std::size_t kMaxRails = 8;

/// Board kinds a Hello can declare. Append only.
enum class BoardKind : uint8_t {
  kUnknown = 0,
  kJetsonTx2 = 1,
  kRaspberryPi4 = 2,
  kNrf52840 = 3,
  kMkr1000 = 4,
  /// A power logger: a small board of its own reading a power monitor on another board's
  /// supply, streaming samples on its own link and clock (no plan, no spans).
  kPowerLogger = 5,
  /// A Linux computer running ergon-agent with no board declared (--board): it has no
  /// published profile, so what it costs is only what is measured on it.
  kLinuxHost = 6,
  /// A board a descriptor file describes (docs/boards.md): its Hello's board_type names the
  /// descriptor (since v7).
  kDescribed = 7,
};

struct RailInfo {
  uint8_t id = 0;
  char name[kNameBytes + 1] = {};
};

/// Device -> host, the answer to HelloRequest; always the first message of a session.
struct Hello {
  static constexpr MsgType kType = MsgType::kHello;
  uint16_t protocol_version = kProtocolVersion;
  BoardKind board_kind = BoardKind::kUnknown;
  uint32_t firmware_version = 0;  ///< major << 16 | minor << 8 | patch
  uint64_t tick_hz = 0;           ///< rate of every device timestamp in this session
  uint32_t ram_bytes = 0;
  char board_name[kNameBytes + 1] = {};
  uint8_t rail_count = 0;
  RailInfo rails[kMaxRails];
  /// The board's power mode as it runs now (nvpmodel mode, cpufreq setting); since v2.
  char power_mode[kNameBytes + 1] = {};
  /// How fast the board's time runs against real time, x 1000 (since v5): 1000 for every
  /// real board; a simulator paced at k simulated seconds per second says 1000 k; 0: its
  /// time is not paced to real time at all (a simulator running as fast as it can).
  uint32_t time_scale_milli = 1000;
  /// The descriptor the board runs as (since v7): its name among the host's board files
  /// (docs/boards.md). Needed for kDescribed; a built-in kind may say its own name.
  char board_type[kNameBytes + 1] = {};

  bool write(Writer& w) const {
    w.u16(protocol_version);
    w.u8(static_cast<uint8_t>(board_kind));
    w.u32(firmware_version);
    w.u64(tick_hz);
    w.u32(ram_bytes);
    w.text(board_name, kNameBytes);
    w.u8(rail_count);
    if (rail_count > kMaxRails) return false;
    for (uint8_t i = 0; i < rail_count; ++i) {
      w.u8(rails[i].id);
      w.text(rails[i].name, kNameBytes);
    }
    w.text(power_mode, kNameBytes);
    w.u32(time_scale_milli);
    w.text(board_type, kNameBytes);
    return w.ok();
  }
  bool read(Reader& r) {
    protocol_version = r.u16();
    board_kind = static_cast<BoardKind>(r.u8());
    firmware_version = r.u32();
    tick_hz = r.u64();
    ram_bytes = r.u32();
    r.text(board_name, kNameBytes);
    rail_count = r.u8();
    if (rail_count > kMaxRails) return false;
    for (uint8_t i = 0; i < rail_count; ++i) {
      rails[i].id = r.u8();
      r.text(rails[i].name, kNameBytes);
    }
    r.text(power_mode, kNameBytes);
    // A Hello of another version ends the session on its version alone: read what it has.
    time_scale_milli = protocol_version >= 5 ? r.u32() : 1000;
    if (protocol_version >= 7) r.text(board_type, kNameBytes);
    return r.ok() && tick_hz != 0;
  }
};

/// Device -> host: one timed window of an op (see profiler::OpSpan).
struct OpSpanMsg {
  static constexpr MsgType kType = MsgType::kOpSpan;
  uint32_t op_id = 0;
  uint8_t phase = 0;
  uint64_t begin_ticks = 0;
  uint64_t end_ticks = 0;
  uint32_t repetitions = 1;

  bool write(Writer& w) const {
    w.u32(op_id);
    w.u8(phase);
    w.u64(begin_ticks);
    w.u64(end_ticks);
    w.u32(repetitions);
    return w.ok();
  }
  bool read(Reader& r) {
    op_id = r.u32();
    phase = r.u8();
    begin_ticks = r.u64();
    end_ticks = r.u64();
    repetitions = r.u32();
    return r.ok() && end_ticks >= begin_ticks && repetitions != 0;
  }
};

struct WireSample {
  uint32_t dt_ticks = 0;  ///< after the batch's base_ticks
  int32_t bus_uv = 0;
  int32_t current_ua = 0;
  int32_t power_uw = 0;
  uint8_t flags = 0;
};

inline constexpr std::size_t kBatchHeaderBytes = 12;
inline constexpr std::size_t kWireSampleBytes = 17;
inline constexpr std::size_t kMaxBatchSamples =
    (kMaxPayloadBytes - kBatchHeaderBytes) / kWireSampleBytes;

/// Device -> host: consecutive samples of one rail.
struct PowerBatch {
  static constexpr MsgType kType = MsgType::kPowerBatch;
  uint8_t rail = 0;
  uint16_t count = 0;
  uint64_t base_ticks = 0;
  WireSample samples[kMaxBatchSamples];

  /// Whether a sample taken at `ticks` can join the batch (its offset from the base fits
  /// dt_ticks); when not, send the batch first.
  [[nodiscard]] bool fits(uint64_t ticks) const {
    return count == 0 || (ticks >= base_ticks && ticks - base_ticks <= UINT32_MAX);
  }
  /// Appends a sample (the first one sets the base time). True when the batch is now full:
  /// send it.
  bool append(uint64_t ticks, int32_t bus_uv, int32_t current_ua, int32_t power_uw, uint8_t flags) {
    if (count == 0) base_ticks = ticks;
    samples[count++] = {static_cast<uint32_t>(ticks - base_ticks), bus_uv, current_ua, power_uw, flags};
    return count == kMaxBatchSamples;
  }

  bool write(Writer& w) const {
    if (count > kMaxBatchSamples) return false;
    w.u8(rail);
    w.u8(0);
    w.u16(count);
    w.u64(base_ticks);
    for (uint16_t i = 0; i < count; ++i) {
      w.u32(samples[i].dt_ticks);
      w.i32(samples[i].bus_uv);
      w.i32(samples[i].current_ua);
      w.i32(samples[i].power_uw);
      w.u8(samples[i].flags);
    }
    return w.ok();
  }
  bool read(Reader& r) {
    rail = r.u8();
    r.u8();
    count = r.u16();
    base_ticks = r.u64();
    if (count > kMaxBatchSamples || r.remaining() != count * kWireSampleBytes) return false;
    for (uint16_t i = 0; i < count; ++i) {
      samples[i].dt_ticks = r.u32();
      samples[i].bus_uv = r.i32();
      samples[i].current_ua = r.i32();
      samples[i].power_uw = r.i32();
      samples[i].flags = r.u8();
    }
    return r.ok();
  }
};

/// Host -> device: one NTP-style exchange; the device answers with SyncReply.
struct SyncRequest {
  static constexpr MsgType kType = MsgType::kSyncRequest;
  uint32_t sync_id = 0;
  uint64_t host_tx_ns = 0;

  bool write(Writer& w) const {
    w.u32(sync_id);
    w.u64(host_tx_ns);
    return w.ok();
  }
  bool read(Reader& r) {
    sync_id = r.u32();
    host_tx_ns = r.u64();
    return r.ok();
  }
};

struct SyncReply {
  static constexpr MsgType kType = MsgType::kSyncReply;
  uint32_t sync_id = 0;
  uint64_t host_tx_ns = 0;  ///< echoed from the request
  uint64_t device_rx_ticks = 0;
  uint64_t device_tx_ticks = 0;

  bool write(Writer& w) const {
    w.u32(sync_id);
    w.u64(host_tx_ns);
    w.u64(device_rx_ticks);
    w.u64(device_tx_ticks);
    return w.ok();
  }
  bool read(Reader& r) {
    sync_id = r.u32();
    host_tx_ns = r.u64();
    device_rx_ticks = r.u64();
    device_tx_ticks = r.u64();
    return r.ok() && device_tx_ticks >= device_rx_ticks;
  }
};

enum class LogLevel : uint8_t { kDebug = 0, kInfo = 1, kWarning = 2, kError = 3 };
inline constexpr std::size_t kMaxLogText = kMaxPayloadBytes - 1;

/// Device -> host: a line of text for the run's event log.
struct Log {
  static constexpr MsgType kType = MsgType::kLog;
  LogLevel level = LogLevel::kInfo;
  uint16_t length = 0;
  char text[kMaxLogText + 1] = {};

  bool write(Writer& w) const {
    if (length > kMaxLogText) return false;
    w.u8(static_cast<uint8_t>(level));
    w.bytes(text, length);
    return w.ok();
  }
  bool read(Reader& r) {
    const uint8_t lv = r.u8();
    if (lv > static_cast<uint8_t>(LogLevel::kError)) return false;
    level = static_cast<LogLevel>(lv);
    length = static_cast<uint16_t>(r.remaining());
    if (length > kMaxLogText) return false;
    r.bytes(text, length);
    text[length] = '\0';
    return r.ok();
  }
};

enum class ByeReason : uint8_t { kShutdown = 0, kError = 1, kHostRequest = 2 };

/// Device -> host: the device is going away (the host closes the run).
struct Bye {
  static constexpr MsgType kType = MsgType::kBye;
  ByeReason reason = ByeReason::kShutdown;

  bool write(Writer& w) const {
    w.u8(static_cast<uint8_t>(reason));
    return w.ok();
  }
  bool read(Reader& r) {
    const uint8_t v = r.u8();
    reason = static_cast<ByeReason>(v);
    return r.ok() && v <= static_cast<uint8_t>(ByeReason::kHostRequest);
  }
};

enum class RunEnd : uint8_t { kCompleted = 0, kStopped = 1, kFailed = 2 };

/// Device -> host: the plan started by Start has ended. The counters cover the run's OpSpan
/// and PowerBatch traffic so the host can tell exactly what it lost.
struct RunDone {
  static constexpr MsgType kType = MsgType::kRunDone;
  uint32_t run_tag = 0;
  RunEnd end = RunEnd::kCompleted;
  uint32_t spans_sent = 0;
  uint32_t samples_sent = 0;
  uint32_t frames_sent = 0;  ///< OpSpan and PowerBatch frames of this run

  bool write(Writer& w) const {
    w.u32(run_tag);
    w.u8(static_cast<uint8_t>(end));
    w.u32(spans_sent);
    w.u32(samples_sent);
    w.u32(frames_sent);
    return w.ok();
  }
  bool read(Reader& r) {
    run_tag = r.u32();
    const uint8_t e = r.u8();
    end = static_cast<RunEnd>(e);
    spans_sent = r.u32();
    samples_sent = r.u32();
    frames_sent = r.u32();
    return r.ok() && e <= static_cast<uint8_t>(RunEnd::kFailed);
  }
};

/// Host -> device: who is there?
struct HelloRequest {
  static constexpr MsgType kType = MsgType::kHelloRequest;
  uint16_t host_protocol_version = kProtocolVersion;

  bool write(Writer& w) const {
    w.u16(host_protocol_version);
    return w.ok();
  }
  bool read(Reader& r) {
    host_protocol_version = r.u16();
    return r.ok();
  }
};

inline constexpr std::size_t kPlanDims = 6;

/// Host -> device: one entry of the profile plan that the next Start runs. Entries are run in
/// the order sent (the host randomizes it).
struct PlanOp {
  static constexpr MsgType kType = MsgType::kPlanOp;
  uint32_t op_id = 0;
  uint8_t kind = 0;   ///< profiler::OpKind code
  uint8_t phase = 0;  ///< profiler::Phase code
  uint8_t dim_count = 0;
  uint32_t dims[kPlanDims] = {};
  uint64_t flops = 0;
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;
  uint16_t windows = 1;      ///< measurement windows of this op
  uint32_t idle_after_us = 0;  ///< idle gap after each window (for idle-power estimates)
  /// Untimed runs of the op before each window (clocks ramp up, caches warm). Since v2.
  uint16_t warmup_reps = 0;
  /// Since v8: how many copies of the op's tensors the board cycles through, one per run. 0:
  /// as many as it takes to read them from memory every run (the default); 1: the same
  /// tensors every run, in cache when they fit; k: k - 1 other copies touched between two
  /// runs on one copy. Sent only when not 0, so a v7 board reads a plan that needs none.
  uint16_t copies = 0;

  bool write(Writer& w) const {
    if (dim_count > kPlanDims) return false;
    w.u32(op_id);
    w.u8(kind);
    w.u8(phase);
    w.u8(dim_count);
    for (uint32_t d : dims) w.u32(d);
    w.u64(flops);
    w.u64(bytes_in);
    w.u64(bytes_out);
    w.u16(windows);
    w.u32(idle_after_us);
    w.u16(warmup_reps);
    if (copies != 0) w.u16(copies);
    return w.ok();
  }
  bool read(Reader& r) {
    op_id = r.u32();
    kind = r.u8();
    phase = r.u8();
    dim_count = r.u8();
    for (uint32_t& d : dims) d = r.u32();
    flops = r.u64();
    bytes_in = r.u64();
    bytes_out = r.u64();
    windows = r.u16();
    idle_after_us = r.u32();
    warmup_reps = r.u16();
    copies = r.remaining() > 0 ? r.u16() : 0;
    return r.ok() && dim_count <= kPlanDims && windows != 0;
  }
};

/// kProfile: time each entry in windows; kSchedule: run a training schedule's entries once
/// each, by their work; kExecute (since v3): run the schedule on real tensors of the model an
/// ExecuteModel named, step by step, timing each entry as kSchedule does.
enum class StartMode : uint8_t { kProfile = 0, kSchedule = 1, kExecute = 2 };

/// Host -> device: run the plan entries sent since the last Start.
struct Start {
  static constexpr MsgType kType = MsgType::kStart;
  uint32_t run_tag = 0;
  StartMode mode = StartMode::kProfile;
  uint16_t op_count = 0;        ///< PlanOps the host sent; the device refuses a mismatch
  uint16_t loops = 1;           ///< passes over the plan; 0 = until Stop
  uint32_t min_window_us = 0;   ///< repeat an op until its window lasts at least this long
  uint32_t seed = 0;

  bool write(Writer& w) const {
    w.u32(run_tag);
    w.u8(static_cast<uint8_t>(mode));
    w.u16(op_count);
    w.u16(loops);
    w.u32(min_window_us);
    w.u32(seed);
    return w.ok();
  }
  bool read(Reader& r) {
    run_tag = r.u32();
    const uint8_t m = r.u8();
    mode = static_cast<StartMode>(m);
    op_count = r.u16();
    loops = r.u16();
    min_window_us = r.u32();
    seed = r.u32();
    return r.ok() && m <= static_cast<uint8_t>(StartMode::kExecute);
  }
};

/// Host -> device: end the running plan after the current window; the device sends RunDone.
struct Stop {
  static constexpr MsgType kType = MsgType::kStop;
  bool write(Writer& w) const { return w.ok(); }
  bool read(Reader& r) { return r.ok(); }
};

struct Ping {
  static constexpr MsgType kType = MsgType::kPing;
  uint32_t nonce = 0;
  bool write(Writer& w) const {
    w.u32(nonce);
    return w.ok();
  }
  bool read(Reader& r) {
    nonce = r.u32();
    return r.ok();
  }
};

struct Pong {
  static constexpr MsgType kType = MsgType::kPong;
  uint32_t nonce = 0;
  uint64_t device_ticks = 0;
  bool write(Writer& w) const {
    w.u32(nonce);
    w.u64(device_ticks);
    return w.ok();
  }
  bool read(Reader& r) {
    nonce = r.u32();
    device_ticks = r.u64();
    return r.ok();
  }
};

inline constexpr std::size_t kModelNameBytes = 24;

/// Host -> device (since v3): the model whose training iteration the next Start in mode
/// kExecute runs, and how many schedule steps (ScheduleSteps) describe it.
struct ExecuteModel {
  static constexpr MsgType kType = MsgType::kExecuteModel;
  char model[kModelNameBytes] = {};  ///< a zoo name, NUL-padded
  uint16_t batch = 1;
  uint32_t seed = 1;  ///< fixes the data, labels and parameters
  uint32_t step_count = 0;

  bool write(Writer& w) const {
    w.bytes(model, kModelNameBytes);
    w.u16(batch);
    w.u32(seed);
    w.u32(step_count);
    return w.ok();
  }
  bool read(Reader& r) {
    r.bytes(model, kModelNameBytes);
    batch = r.u16();
    seed = r.u32();
    step_count = r.u32();
    return r.ok() && model[kModelNameBytes - 1] == '\0' && batch != 0;
  }
};

/// Host -> device (since v3): consecutive steps of the schedule to execute, from `first`.
/// Step kinds as planner::StepKind: 0 compute, 1 page-out, 2 page-in, 3 free. After an
/// ExecuteStage (v6), a step's node carries its micro-batch in its top 8 bits, and kinds 4
/// (link-send) and 5 (link-receive) move the micro-batch's activation or gradient: their node
/// is the transfer's tag.
struct ScheduleSteps {
  static constexpr MsgType kType = MsgType::kScheduleSteps;
  static constexpr std::size_t kMaxSteps = (kMaxPayloadBytes - 5) / 5;
  struct Step {
    uint8_t kind = 0;
    uint32_t node = 0;
  };
  uint32_t first = 0;
  uint8_t count = 0;
  Step steps[kMaxSteps] = {};

  bool write(Writer& w) const {
    if (count > kMaxSteps) return false;
    w.u32(first);
    w.u8(count);
    for (uint8_t i = 0; i < count; ++i) {
      w.u8(steps[i].kind);
      w.u32(steps[i].node);
    }
    return w.ok();
  }
  bool read(Reader& r) {
    first = r.u32();
    count = r.u8();
    if (count > kMaxSteps) return false;
    for (uint8_t i = 0; i < count; ++i) {
      steps[i].kind = r.u8();
      steps[i].node = r.u32();
      if (steps[i].kind > 5) return false;
    }
    return r.ok();
  }
};

/// Host -> device (since v6): the ExecuteModel's model is one stage of a pipeline: forward ops
/// [first_op, end_op), `microbatches` of them per batch, micro-batch j with seed j + 1 and the
/// model's parameters of seed 1 (as app::check_gradients runs them in one process). The
/// ScheduleSteps are the stage's whole run, micro-batch by micro-batch, with its transfers.
struct ExecuteStage {
  static constexpr MsgType kType = MsgType::kExecuteStage;
  uint32_t first_op = 0;
  uint32_t end_op = 0;
  uint16_t microbatches = 1;
  bool write(Writer& w) const {
    w.u32(first_op);
    w.u32(end_op);
    w.u16(microbatches);
    return w.ok();
  }
  bool read(Reader& r) {
    first_op = r.u32();
    end_op = r.u32();
    microbatches = r.u16();
    return r.ok() && end_op > first_op && microbatches != 0 && microbatches <= 256;
  }
};

/// Device -> host (since v3): what an executed training iteration computed and held, sent
/// before its RunDone. The digest (FNV-1a, 64 bits, over every parameter gradient's bytes in
/// op order) is equal for two schedules of the same model exactly when their gradients are.
struct ExecutionReport {
  static constexpr MsgType kType = MsgType::kExecutionReport;
  uint32_t run_tag = 0;
  uint32_t loss_bits = 0;  ///< the loss, IEEE-754 binary32
  uint32_t computes = 0;
  uint32_t recomputes = 0;
  uint64_t paged_out_bytes = 0;
  uint64_t paged_in_bytes = 0;
  uint64_t peak_bytes = 0;
  uint64_t gradient_digest = 0;

  bool write(Writer& w) const {
    w.u32(run_tag);
    w.u32(loss_bits);
    w.u32(computes);
    w.u32(recomputes);
    w.u64(paged_out_bytes);
    w.u64(paged_in_bytes);
    w.u64(peak_bytes);
    w.u64(gradient_digest);
    return w.ok();
  }
  bool read(Reader& r) {
    run_tag = r.u32();
    loss_bits = r.u32();
    computes = r.u32();
    recomputes = r.u32();
    paged_out_bytes = r.u64();
    paged_in_bytes = r.u64();
    peak_bytes = r.u64();
    gradient_digest = r.u64();
    return r.ok();
  }
};

/// Host -> device (since v4): switch the board to a power mode (a name its Hello could
/// report: "MAXQ", "600MHz") before the next run. The device answers PowerModeSet. Sent only
/// between runs; a device that is running answers kBusy.
struct SetPowerMode {
  static constexpr MsgType kType = MsgType::kSetPowerMode;
  char mode[kNameBytes + 1] = {};
  bool write(Writer& w) const {
    w.text(mode, kNameBytes);
    return w.ok();
  }
  bool read(Reader& r) {
    r.text(mode, kNameBytes);
    return r.ok() && mode[0] != '\0';
  }
};

/// How a SetPowerMode ended. Append only.
enum class PowerModeStatus : uint8_t {
  kOk = 0,
  kUnknownMode = 1,  ///< the board has no mode of that name
  kRefused = 2,      ///< the agent lacks the privilege (detail says how to get it)
  kBusy = 3,         ///< a run is in progress
  kFailed = 4,       ///< the write or command failed
  kNoControl = 5,    ///< the board cannot change its mode (detail says why)
};
inline constexpr std::size_t kDetailBytes = 95;

/// Device -> host (since v4): the answer to SetPowerMode: the mode the board runs in now
/// (the old one unless kOk) and how long the switch took, wall clock.
struct PowerModeSet {
  static constexpr MsgType kType = MsgType::kPowerModeSet;
  PowerModeStatus status = PowerModeStatus::kOk;
  char mode[kNameBytes + 1] = {};
  uint64_t switch_ns = 0;
  char detail[kDetailBytes + 1] = {};  ///< why, when not kOk (one line)

  bool write(Writer& w) const {
    w.u8(static_cast<uint8_t>(status));
    w.text(mode, kNameBytes);
    w.u64(switch_ns);
    w.text(detail, kDetailBytes);
    return w.ok();
  }
  bool read(Reader& r) {
    const uint8_t s = r.u8();
    status = static_cast<PowerModeStatus>(s);
    r.text(mode, kNameBytes);
    switch_ns = r.u64();
    r.text(detail, kDetailBytes);
    return r.ok() && s <= static_cast<uint8_t>(PowerModeStatus::kNoControl);
  }
};

/// Host -> device (since v4): per-phase power modes for the next run. From plan entry
/// `switch_at` on (the entries of a training schedule after its forward pass), the board runs
/// in mode `backward`; it switches back to the mode it started in when the run ends. Applies
/// to the next Start only.
struct PhaseModes {
  static constexpr MsgType kType = MsgType::kPhaseModes;
  char backward[kNameBytes + 1] = {};
  uint32_t switch_at = 0;
  bool write(Writer& w) const {
    w.text(backward, kNameBytes);
    w.u32(switch_at);
    return w.ok();
  }
  bool read(Reader& r) {
    r.text(backward, kNameBytes);
    switch_at = r.u32();
    return r.ok() && backward[0] != '\0';
  }
};

/// Filler bytes a LinkData frame carries at most.
inline constexpr std::size_t kMaxLinkDataBytes = kMaxPayloadBytes - 9;

/// Byte `i` of a transfer's filler: never zero, so COBS adds one byte per 254.
constexpr uint8_t link_filler_byte(uint32_t i) { return static_cast<uint8_t>(1 + i % 251); }

/// The frames of a transfer of `bytes`, at most `frame_bytes` each: calls
/// frame(offset, length, last) for each in order until it returns false. A transfer of 0
/// bytes is one empty last frame, so the receiver always sees its end.
template <class Frame>
void for_each_link_frame(uint32_t bytes, uint32_t frame_bytes, Frame&& frame) {
  uint32_t offset = 0;
  do {
    const uint32_t rest = bytes - offset;
    const uint32_t n = rest < frame_bytes ? rest : frame_bytes;
    if (!frame(offset, n, offset + n >= bytes)) return;
    offset += n;
  } while (offset < bytes);
}

/// The bytes of a link transfer (since v6), in either direction: device -> host as kLinkData
/// while the board times a link-send, host -> device as kHostLinkData answering a LinkPull.
/// `offset` counts the transfer's bytes before this frame; `last` ends the transfer. The
/// filler carries no meaning (a pattern without zero bytes, so COBS adds a byte per 254).
template <MsgType Type>
struct LinkDataOf {
  static constexpr MsgType kType = Type;
  uint32_t transfer = 0;
  uint32_t offset = 0;
  bool last = false;
  uint16_t length = 0;
  uint8_t data[kMaxLinkDataBytes] = {};

  /// Fills `data` with the filler pattern for `n` bytes from `offset`.
  void fill(std::size_t n) {
    length = static_cast<uint16_t>(n);
    for (std::size_t i = 0; i < n; ++i) data[i] = link_filler_byte(static_cast<uint32_t>(offset + i));
  }
  bool write(Writer& w) const {
    if (length > kMaxLinkDataBytes) return false;
    w.u32(transfer);
    w.u32(offset);
    w.u8(last ? 1 : 0);
    w.bytes(data, length);
    return w.ok();
  }
  bool read(Reader& r) {
    transfer = r.u32();
    offset = r.u32();
    const uint8_t l = r.u8();
    last = l == 1;
    length = static_cast<uint16_t>(r.remaining());
    if (length > kMaxLinkDataBytes || l > 1) return false;
    r.bytes(data, length);
    return r.ok();
  }
};
using LinkData = LinkDataOf<MsgType::kLinkData>;

/// LinkData as a board with little RAM sends it: the same bytes, the filler written as it is
/// encoded, never held (write only; hosts parse LinkData).
struct LinkFiller {
  static constexpr MsgType kType = MsgType::kLinkData;
  uint32_t transfer = 0;
  uint32_t offset = 0;
  bool last = false;
  uint16_t length = 0;
  bool write(Writer& w) const {
    if (length > kMaxLinkDataBytes) return false;
    w.u32(transfer);
    w.u32(offset);
    w.u8(last ? 1 : 0);
    for (uint32_t i = 0; i < length; ++i) w.u8(link_filler_byte(offset + i));
    return w.ok();
  }
};
using HostLinkData = LinkDataOf<MsgType::kHostLinkData>;

/// Device -> host (since v6): the board's link-receive window has begun; send `bytes` bytes
/// of transfer `transfer` as HostLinkData frames of up to `frame_bytes` filler each.
struct LinkPull {
  static constexpr MsgType kType = MsgType::kLinkPull;
  uint32_t transfer = 0;
  uint32_t bytes = 0;
  uint16_t frame_bytes = kMaxLinkDataBytes;
  bool write(Writer& w) const {
    w.u32(transfer);
    w.u32(bytes);
    w.u16(frame_bytes);
    return w.ok();
  }
  bool read(Reader& r) {
    transfer = r.u32();
    bytes = r.u32();
    frame_bytes = r.u16();
    return r.ok() && bytes != 0 && frame_bytes != 0 && frame_bytes <= kMaxLinkDataBytes;
  }
};

/// Host -> device (since v6): every byte of the board's transfer `transfer` arrived (the
/// last LinkData frame did): the board's link-send window ends when this does.
struct LinkAck {
  static constexpr MsgType kType = MsgType::kLinkAck;
  uint32_t transfer = 0;
  uint32_t bytes = 0;  ///< what the host received of it (frames lost on the way are missing)
  bool write(Writer& w) const {
    w.u32(transfer);
    w.u32(bytes);
    return w.ok();
  }
  bool read(Reader& r) {
    transfer = r.u32();
    bytes = r.u32();
    return r.ok();
  }
};

}  // namespace ergon::devices::protocol
