#include "app/db_sink.h"

#include "common/clock.h"
#include "devices/link_profile.h"

namespace ergon::app {
namespace {

costdb::RunStatus to_run_status(devices::SessionState state) {
  switch (state) {
    case devices::SessionState::kCompleted: return costdb::RunStatus::kCompleted;
    case devices::SessionState::kStopped: return costdb::RunStatus::kStopped;
    case devices::SessionState::kDisconnected: return costdb::RunStatus::kDisconnected;
    case devices::SessionState::kFailed: return costdb::RunStatus::kFailed;
    default: return costdb::RunStatus::kRecording;
  }
}

costdb::LinkCounters to_counters(const devices::LinkStats& stats) {
  costdb::LinkCounters c;
  c.bytes = stats.decoder.bytes;
  c.frames_ok = stats.decoder.frames_ok;
  c.frames_lost = stats.decoder.frames_lost;
  c.crc_errors = stats.decoder.crc_errors;
  c.malformed = stats.decoder.malformed + stats.bad_messages;
  if (stats.device_done) {
    c.device_spans_sent = stats.device_done->spans_sent;
    c.device_samples_sent = stats.device_done->samples_sent;
    c.device_frames_sent = stats.device_done->frames_sent;
  }
  return c;
}

}  // namespace

void DbSink::begin(const devices::BoardHello& hello, const devices::ProfilePlan& plan,
                   int64_t host_ns) {
  wall_offset_ns_ = wall_time_ns() - host_ns;
  costdb::BoardInfo board;
  board.name = hello.name;
  board.kind = hello.kind_name;
  board.firmware_version = hello.firmware_version;
  board.tick_hz = hello.tick_hz;
  board.ram_bytes = hello.ram_bytes;
  board.rails = hello.rails;
  board.power_mode = hello.power_mode;
  board.mode_switch_ns = hello.mode_switch_ns;
  board.time_scale = hello.time_scale;
    std::string link;
  if (link_) {
    link = !link_->empty()               ? *link_
           : source_.starts_with("tcp:") ? std::string("ethernet")
                                         : std::string(devices::default_link(board.kind, board.kind));
  }
  writer_.emplace(db_, board, source_, host_ns + wall_offset_ns_, plan_, link);
  for (const auto& op : plan.ops) writer_->add_op(op.op_id, op.shape, op.phase, op.copies);
}

void DbSink::span(const profiler::OpSpan& span) { writer_->add_span(span); }

void DbSink::samples(std::span<const probes::PowerSample> samples) {
  writer_->add_samples(samples);
}

void DbSink::sync(const profiler::SyncPoint& point) { writer_->add_sync(point); }

void DbSink::event(int64_t host_ns, std::string_view kind, std::string_view text) {
  if (writer_) writer_->add_event(host_ns + wall_offset_ns_, kind, text);
}

void DbSink::status(devices::SessionState state, const devices::LinkStats& stats,
                    int64_t host_ns) {
  if (!writer_) return;
  writer_->update(to_run_status(state), to_counters(stats),
                  devices::is_final(state) ? host_ns + wall_offset_ns_ : 0);
}

std::optional<int64_t> DbSink::run_id() const {
  if (!writer_) return std::nullopt;
  return writer_->run_id();
}

void DbSink::mark_committed(const devices::LinkStats& stats) {
  committed_samples_ = stats.samples;
  committed_spans_ = stats.spans;
}

}  // namespace ergon::app
