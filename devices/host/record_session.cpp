#include "devices/host/record_session.h"

#include <algorithm>
#include <cstdio>

#include "common/error.h"
#include "devices/board_file.h"

namespace ergon::devices {
namespace {

constexpr uint32_t kMaxPullBytes = 256U << 20;  // one transfer; a frame is 1 KiB

namespace proto = protocol;

constexpr int64_t kMs = 1'000'000;
constexpr int64_t kHelloRetryNs = 500 * kMs;
constexpr int64_t kModeRetryNs = 2000 * kMs;
constexpr int64_t kSyncSpacingNs = 20 * kMs;
constexpr int64_t kSyncWaitNs = 500 * kMs;
constexpr int kMaxStopAttempts = 3;

int64_t seconds_to_ns(double s) { return static_cast<int64_t>(s * 1e9); }

std::string kind_name(BoardKind kind) {
  if (kind == BoardKind::kPowerLogger) return std::string(kPowerLoggerKindName);
  if (kind == BoardKind::kLinuxHost) return std::string(kLinuxHostKindName);
  const auto board = find_board(kind);
  return board ? std::string(board->name) : "unknown";
}

std::string_view log_kind(proto::LogLevel level) {
  switch (level) {
    case proto::LogLevel::kDebug: return "device-debug";
    case proto::LogLevel::kInfo: return "device-info";
    case proto::LogLevel::kWarning: return "device-warning";
    case proto::LogLevel::kError: return "device-error";
  }
  return "device-log";
}

}  // namespace

std::string_view to_string(SessionState state) {
  switch (state) {
    case SessionState::kHandshake: return "handshake";
    case SessionState::kSettingMode: return "setting power mode";
    case SessionState::kSyncing: return "syncing";
    case SessionState::kRunning: return "running";
    case SessionState::kStopping: return "stopping";
    case SessionState::kClosing: return "closing";
    case SessionState::kCompleted: return "completed";
    case SessionState::kStopped: return "stopped";
    case SessionState::kDisconnected: return "disconnected";
    case SessionState::kFailed: return "failed";
  }
  return "unknown";
}

RecordSession::RecordSession(std::string source, const RecordOptions& options,
                             RecordSink& sink, const Clock& clock)
    : source_(std::move(source)), options_(options), sink_(sink), clock_(clock) {}

template <class Msg>
void RecordSession::send(const Msg& msg, std::vector<uint8_t>& out) {
  uint8_t buf[proto::kMaxEncodedFrameBytes];
  const std::size_t n = proto::encode_message(msg, tx_seq_++, buf, sizeof buf);
  out.insert(out.end(), buf, buf + n);
}

void RecordSession::set_state(SessionState s) {
  if (s == state_) return;
  state_ = s;
  syncs_sent_in_state_ = 0;
  syncs_answered_in_state_ = 0;
  if (hello_) sink_.status(state_, stats_, clock_.now_ns());
}

void RecordSession::fail(SessionState s, std::string why) {
  if (finished()) return;
  error_ = std::move(why);
  if (hello_) sink_.event(clock_.now_ns(), to_string(s), error_);
  set_state(s);
}

void RecordSession::on_open(std::vector<uint8_t>& out) {
  opened_ns_ = clock_.now_ns();
  last_hello_request_ns_ = opened_ns_;
  send(proto::HelloRequest{}, out);
}

void RecordSession::on_bytes(const uint8_t* data, std::size_t n, std::vector<uint8_t>& out) {
  decoder_.feed(data, n, [&](const proto::Frame& f) {
    last_frame_ns_ = clock_.now_ns();
    handle(f, out);
  });
  stats_.decoder = decoder_.stats();
}

void RecordSession::handle(const proto::Frame& frame, std::vector<uint8_t>& out) {
  if (finished()) return;
  const int64_t now = clock_.now_ns();
  auto bad = [&](std::string_view what) {
    ++stats_.bad_messages;
    if (hello_) sink_.event(now, "bad-message", what);
  };
  switch (frame.type) {
    case proto::MsgType::kHello: {
      proto::Hello hello;
      if (!proto::parse_message(frame, hello)) return bad("malformed Hello");
      if (state_ == SessionState::kHandshake) return on_hello(hello, out);
      if (state_ == SessionState::kSyncing || state_ == SessionState::kSettingMode)
        return;  // answer to a repeated HelloRequest
      return fail(SessionState::kFailed, "board restarted during the run (new Hello)");
    }
    case proto::MsgType::kSyncReply: {
      proto::SyncReply reply;
      if (!proto::parse_message(frame, reply)) return bad("malformed SyncReply");
      const profiler::SyncPoint point{.sync_id = reply.sync_id,
                                      .host_tx_ns = static_cast<int64_t>(reply.host_tx_ns),
                                      .device_rx_ticks = reply.device_rx_ticks,
                                      .device_tx_ticks = reply.device_tx_ticks,
                                      .host_rx_ns = now};
      if (!hello_) return;
      sink_.sync(point);
      ++stats_.sync_points;
      ++syncs_answered_in_state_;
      return;
    }
    case proto::MsgType::kOpSpan: {
      proto::OpSpanMsg msg;
      if (!proto::parse_message(frame, msg)) return bad("malformed OpSpan");
      const auto phase = profiler::phase_from_code(msg.phase);
      if (!phase) return bad("OpSpan with an unknown phase code");
      if (!hello_) return;
      sink_.span(profiler::OpSpan{.op_id = msg.op_id,
                                  .phase = *phase,
                                  .begin_ticks = msg.begin_ticks,
                                  .end_ticks = msg.end_ticks,
                                  .repetitions = msg.repetitions});
      ++stats_.spans;
      return;
    }
    case proto::MsgType::kPowerBatch: {
      // Parse straight from the frame into reused storage: this is the hot path.
      static thread_local proto::PowerBatch batch;
      if (!proto::parse_message(frame, batch)) return bad("malformed PowerBatch");
      if (!hello_) return;
      sample_buf_.resize(batch.count);
      for (uint16_t i = 0; i < batch.count; ++i) {
        const auto& w = batch.samples[i];
        sample_buf_[i] = probes::PowerSample{.rail = batch.rail,
                                             .t_ticks = batch.base_ticks + w.dt_ticks,
                                             .bus_uv = w.bus_uv,
                                             .current_ua = w.current_ua,
                                             .power_uw = w.power_uw,
                                             .flags = w.flags};
      }
      sink_.samples(sample_buf_);
      stats_.samples += batch.count;
      return;
    }
    case proto::MsgType::kLog: {
      static thread_local proto::Log log;
      if (!proto::parse_message(frame, log)) return bad("malformed Log");
      if (hello_) sink_.event(now, log_kind(log.level), std::string_view(log.text, log.length));
      return;
    }
    case proto::MsgType::kExecutionReport: {
      proto::ExecutionReport report;
      if (!proto::parse_message(frame, report)) return bad("malformed ExecutionReport");
      if (report.run_tag == run_tag_) stats_.execution = report;
      return;
    }
    case proto::MsgType::kRunDone: {
      proto::RunDone done;
      if (!proto::parse_message(frame, done)) return bad("malformed RunDone");
      if (done.run_tag != run_tag_ ||
          (state_ != SessionState::kRunning && state_ != SessionState::kStopping))
        return;
      stats_.device_done = done;
      switch (done.end) {
        case proto::RunEnd::kCompleted:
          end_state_ = stop_requested_ ? SessionState::kStopped : SessionState::kCompleted;
          break;
        case proto::RunEnd::kStopped:
          // A logger's run ends when the host stops it: that is its normal end.
          end_state_ = is_power_logger() ? SessionState::kCompleted : SessionState::kStopped;
          break;
        case proto::RunEnd::kFailed:
          error_ = "board refused or aborted the run (see the run's events)";
          end_state_ = SessionState::kFailed;
          break;
      }
      set_state(SessionState::kClosing);
      return;
    }
    case proto::MsgType::kPowerModeSet: {
      proto::PowerModeSet answer;
      if (!proto::parse_message(frame, answer)) return bad("malformed PowerModeSet");
      if (state_ == SessionState::kSettingMode) on_mode_set(answer, out);
      return;
    }
    case proto::MsgType::kBye:
      return fail(SessionState::kDisconnected, "board said goodbye");
    case proto::MsgType::kPong:
      return;
    case proto::MsgType::kLinkData: {
      // A link-send window: the board times until every byte is acknowledged.
      static thread_local proto::LinkData data;
      if (!proto::parse_message(frame, data)) return bad("malformed LinkData");
      if (data.transfer != link_transfer_) {
        link_transfer_ = data.transfer;
        link_transfer_bytes_ = 0;
        link_transfer_data_.clear();
      }
      link_transfer_bytes_ += data.length;
      stats_.link_bytes_received += data.length;
      if (options_.relay) link_transfer_data_.insert(link_transfer_data_.end(), data.data, data.data + data.length);
      if (data.last) {
        send(proto::LinkAck{.transfer = data.transfer, .bytes = link_transfer_bytes_}, out);
        if (options_.relay) options_.relay->put(data.transfer, std::move(link_transfer_data_));
        link_transfer_data_.clear();
        link_transfer_ = 0;  // a transfer sent again under its number counts anew
      }
      return;
    }
    case proto::MsgType::kLinkPull: {
      // A link-receive window: the board times until these bytes have all arrived.
      proto::LinkPull pull;
      if (!proto::parse_message(frame, pull)) return bad("malformed LinkPull");
      if (pull.bytes > kMaxPullBytes)
        return bad("LinkPull of " + std::to_string(pull.bytes) + " bytes: more than ergon moves in one transfer (" +
                   std::to_string(kMaxPullBytes >> 20) + " MiB)");
      // Relayed: the bytes go once the board upstream has sent them.
      if (options_.relay && !options_.relay->find(pull.transfer)) pending_pulls_.push_back(pull);
      else send_link_data(pull, out);
      return;
    }
    default:
      return bad("unexpected message type " + std::to_string(static_cast<int>(frame.type)));
  }
}

void RecordSession::serve_relay(std::vector<uint8_t>& out) {
  if (!options_.relay || pending_pulls_.empty() || finished()) return;
  std::erase_if(pending_pulls_, [&](const proto::LinkPull& pull) {
    if (!options_.relay->find(pull.transfer)) return false;
    send_link_data(pull, out);
    return true;
  });
}

void RecordSession::send_link_data(const proto::LinkPull& pull, std::vector<uint8_t>& out) {
  static thread_local proto::HostLinkData data;
  data.transfer = pull.transfer;
  // Relayed: the sending board's own bytes (a tensor); a size other than the pull's is the
  // plan's two ends disagreeing, which the run's events say.
  const std::vector<uint8_t>* relayed = options_.relay ? options_.relay->find(pull.transfer) : nullptr;
  if (relayed && relayed->size() != pull.bytes && hello_)
    sink_.event(clock_.now_ns(), "relay-mismatch",
                "transfer " + std::to_string(pull.transfer) + ": " + std::to_string(relayed->size()) +
                    " bytes sent upstream, " + std::to_string(pull.bytes) + " pulled");
  proto::for_each_link_frame(pull.bytes, pull.frame_bytes, [&](uint32_t offset, uint32_t n, bool last) {
    data.offset = offset;
    data.fill(n);
    if (relayed && relayed->size() >= std::size_t{offset} + n) std::copy_n(relayed->data() + offset, n, data.data);
    data.last = last;
    send(data, out);
    return true;
  });
  stats_.link_bytes_sent += pull.bytes;
  if (relayed) options_.relay->erase(pull.transfer);
}

void RecordSession::on_hello(const proto::Hello& msg, std::vector<uint8_t>& out) {
  // v6 added link transfers, v7 the descriptor a board runs as: a v5 or v6 board records
  // everything else as before.
  if (msg.protocol_version > proto::kProtocolVersion || msg.protocol_version < 5) {
    return fail(SessionState::kFailed,
                source_ + " speaks protocol v" + std::to_string(msg.protocol_version) +
                    ", this ergon speaks v" + std::to_string(proto::kProtocolVersion));
  }
  const bool moves = options_.link_test || (options_.execute && options_.execute->stage) ||
                     (options_.plan && std::any_of(options_.plan->ops.begin(), options_.plan->ops.end(), [](const PlannedOp& op) {
                        return op.shape.kind == profiler::OpKind::kTransfer;
                      }));
  if (moves && msg.protocol_version < 6) {
    return fail(SessionState::kFailed,
                source_ + " speaks protocol v" + std::to_string(msg.protocol_version) +
                    ", which has no link transfers (v6): update its agent or firmware");
  }
  BoardHello hello;
  hello.kind = msg.board_kind;
  hello.kind_name = kind_name(msg.board_kind);
  std::optional<BoardProfile> described;
  if (msg.board_kind == BoardKind::kDescribed) {
    // A board a descriptor describes: the host must know that descriptor by its name.
    const std::string type = msg.board_type;
    if (options_.expected_board && options_.expected_board->name == type) {
      described = options_.expected_board;
    } else {
      try {
        // A name, never a path: what a board says must not make the host open files.
        if (!type.empty() && !is_board_file(type)) described = find_board(type);
      } catch (const InputError& e) {
        return fail(SessionState::kFailed, source_ + " is a '" + type + "' board: " + e.what());
      }
    }
    if (!described)
      return fail(SessionState::kFailed,
                  source_ + " is a '" + type + "' board, and no board file of that name is known here: pass --board " +
                      (type.empty() ? std::string("FILE") : type + ".json") + " or put it in " +
                      (board_search_dirs().empty() ? std::string("a board folder") : board_search_dirs().back().string()));
    hello.kind_name = described->name;
  }
  hello.name = msg.board_name;
  hello.firmware_version = msg.firmware_version;
  hello.protocol_version = msg.protocol_version;
  hello.tick_hz = msg.tick_hz;
  hello.ram_bytes = msg.ram_bytes;
  hello.power_mode = msg.power_mode;
  hello.time_scale = msg.time_scale_milli / 1000.0;
  for (uint8_t i = 0; i < msg.rail_count; ++i)
    hello.rails.push_back({msg.rails[i].id, msg.rails[i].name});

  if (msg.board_kind == BoardKind::kPowerLogger) {
    // A power logger runs no plan: its run streams samples until the host stops it.
    hello_ = hello;
    plan_ = ProfilePlan{};
    const int64_t now = clock_.now_ns();
    sink_.begin(*hello_, plan_, now);
    set_state(SessionState::kSyncing);
    send_sync(out);
    return;
  }
  std::optional<BoardProfile> profile = described ? described : find_board(msg.board_kind);
  std::string mismatch;
  if (msg.board_kind == BoardKind::kLinuxHost) {
    // A Linux host says what it is: its runs are a host's whatever --board expected (an
    // agent that is to stand for a board declares it itself, ergon-agent --board).
    if (options_.expected_board)
      mismatch = "--board said " + std::string(options_.expected_board->name) +
                 " but the board is a Linux host (ergon-agent without --board); recording it as " + hello.kind_name;
  } else if (!profile) {
    // --board names what an undeclared board is.
    profile = options_.expected_board;
    if (!profile)
      return fail(SessionState::kFailed, source_ +
                                             " did not say what board it is; pass --board (" +
                                             board_names() + ")");
    hello.kind_name = std::string(profile->name);
  } else if (options_.expected_board && options_.expected_board->name != profile->name) {
    mismatch = "--board said " + std::string(options_.expected_board->name) +
               " but the board says it is " + hello.kind_name + "; recording it as " +
               hello.kind_name;
  }
  if (!options_.power_mode.empty() && options_.power_mode != hello.power_mode) {
    pending_hello_.emplace(std::move(hello), std::move(mismatch));
    mode_requested_ns_ = clock_.now_ns();
    request_mode(out);
    set_state(SessionState::kSettingMode);
    return;
  }
  begin(std::move(hello), mismatch, out);
}

void RecordSession::request_mode(std::vector<uint8_t>& out) {
  proto::SetPowerMode request;
  proto::copy_text(request.mode, options_.power_mode.c_str());
  send(request, out);
  last_mode_request_ns_ = clock_.now_ns();
}

void RecordSession::on_mode_set(const proto::PowerModeSet& answer, std::vector<uint8_t>& out) {
  auto [hello, warning] = std::move(*pending_hello_);
  pending_hello_.reset();
  const std::string now_in = answer.mode;
  if (answer.status != proto::PowerModeStatus::kOk) {
    const std::string detail = answer.detail;
    return fail(SessionState::kFailed, source_ + " cannot switch to power mode " + options_.power_mode +
                                           (detail.empty() ? std::string() : ": " + detail));
  }
  if (now_in != options_.power_mode)
    return fail(SessionState::kFailed, source_ + " says it runs in mode " + now_in + " after switching to " +
                                           options_.power_mode);
  hello.switched_from = hello.power_mode;
  hello.power_mode = now_in;
  hello.mode_switch_ns = answer.switch_ns;
  begin(std::move(hello), warning, out);
}

void RecordSession::begin(BoardHello hello, const std::string& warning, std::vector<uint8_t>& out) {
  // on_hello resolved the profile (the Hello's kind, else --board) and failed without one,
  // but for a Linux host: its plan is a Linux board's, sized by the RAM it declares.
  std::optional<BoardProfile> profile =
      hello.kind == BoardKind::kDescribed ? find_board(hello.kind_name) : find_board(hello.kind);
  if (!profile && hello.kind != BoardKind::kLinuxHost) profile = options_.expected_board;
  if (!profile) profile = BoardProfile{.kind = hello.kind, .name = std::string(kLinuxHostKindName), .ram_bytes = hello.ram_bytes};
  hello_ = std::move(hello);
  plan_ = options_.plan        ? *options_.plan
          : options_.link_test ? link_test_plan(*profile, options_.seed)
                               : default_profile_plan(*profile, options_.seed);
  if (options_.min_window_us) plan_.min_window_us = *options_.min_window_us;
  // Entries that time an op's tensors warm or at a reuse distance (PlanOp.copies) need
  // protocol v8; an older board runs the rest of the plan.
  const auto cache_entries = std::erase_if(plan_.ops, [&](const PlannedOp& op) {
    return op.copies != 0 && hello_->protocol_version < 8;
  });
  const int64_t now = clock_.now_ns();
  sink_.begin(*hello_, plan_, now);
  if (!warning.empty()) sink_.event(now, "warning", warning);
  if (cache_entries > 0)
    sink_.event(now, "warning",
                source_ + " speaks protocol v" + std::to_string(hello_->protocol_version) + ": the plan's " +
                    std::to_string(cache_entries) + " cache entries (v8) are left out");
  if (hello_->mode_switch_ns) {
    char took[32];
    std::snprintf(took, sizeof took, "%.3f ms", static_cast<double>(*hello_->mode_switch_ns) * 1e-6);
    sink_.event(now, "power-mode",
                "switched from " + (hello_->switched_from.empty() ? std::string("an unknown mode") : hello_->switched_from) +
                    " to " + hello_->power_mode + " in " + took);
  }
  set_state(SessionState::kSyncing);
  send_sync(out);
}

void RecordSession::send_sync(std::vector<uint8_t>& out) {
  const int64_t now = clock_.now_ns();
  send(proto::SyncRequest{.sync_id = next_sync_id_++, .host_tx_ns = static_cast<uint64_t>(now)},
       out);
  last_sync_ns_ = now;
  ++syncs_sent_in_state_;
}

void RecordSession::start_plan(std::vector<uint8_t>& out) {
  run_tag_ = static_cast<uint32_t>(clock_.now_ns() & 0x7FFFFFFF) | 1U;
  for (const PlannedOp& op : plan_.ops) send(to_wire(op), out);
  if (options_.execute) {
    const ExecuteRequest& e = *options_.execute;
    proto::ExecuteModel model;
    proto::copy_text(model.model, e.model.c_str());
    model.batch = e.batch;
    model.seed = e.seed;
    model.step_count = static_cast<uint32_t>(e.steps.size());
    send(model, out);
    if (e.stage)
      send(proto::ExecuteStage{.first_op = e.stage->first_op, .end_op = e.stage->end_op,
                               .microbatches = e.stage->microbatches},
           out);
    for (std::size_t first = 0; first < e.steps.size(); first += proto::ScheduleSteps::kMaxSteps) {
      proto::ScheduleSteps chunk;
      chunk.first = static_cast<uint32_t>(first);
      chunk.count = static_cast<uint8_t>(std::min(proto::ScheduleSteps::kMaxSteps, e.steps.size() - first));
      for (uint8_t i = 0; i < chunk.count; ++i)
        chunk.steps[i] = {e.steps[first + i].first, e.steps[first + i].second};
      send(chunk, out);
    }
  }
  if (options_.phase_modes) {
    proto::PhaseModes phases;
    proto::copy_text(phases.backward, options_.phase_modes->backward.c_str());
    phases.switch_at = options_.phase_modes->switch_at;
    send(phases, out);
  }
  proto::Start start;
  start.run_tag = run_tag_;
  start.mode = options_.mode;
  start.op_count = static_cast<uint16_t>(plan_.ops.size());
  start.loops = is_power_logger() ? 0 : options_.loops;
  start.min_window_us = plan_.min_window_us;
  start.seed = options_.seed;
  send(start, out);
  run_started_ns_ = clock_.now_ns();
  last_frame_ns_ = run_started_ns_;
  set_state(SessionState::kRunning);
}

void RecordSession::request_stop(std::vector<uint8_t>& out) {
  switch (state_) {
    case SessionState::kHandshake:
    case SessionState::kSettingMode:
    case SessionState::kSyncing:
      stop_requested_ = true;
      if (hello_) sink_.event(clock_.now_ns(), "stopped", "stopped before the run started");
      set_state(SessionState::kStopped);
      return;
    case SessionState::kRunning:
      stop_requested_ = true;
      send(proto::Stop{}, out);
      set_state(SessionState::kStopping);
      return;
    case SessionState::kStopping:
    case SessionState::kClosing:
      // Asked twice: do not wait for the board any longer.
      set_state(SessionState::kStopped);
      return;
    default:
      return;
  }
}

void RecordSession::on_link_error(std::string_view what) {
  fail(SessionState::kDisconnected, "link to " + source_ + " lost: " + std::string(what));
}

void RecordSession::on_open_failed(std::string_view what) {
  fail(SessionState::kFailed, "cannot open " + source_ + ": " + std::string(what));
}

void RecordSession::on_tick(std::vector<uint8_t>& out) {
  const int64_t now = clock_.now_ns();
  serve_relay(out);
  switch (state_) {
    case SessionState::kHandshake:
      if (now - opened_ns_ > seconds_to_ns(options_.handshake_timeout_s)) {
        fail(SessionState::kFailed,
             "no answer from " + source_ + " within " +
                 std::to_string(static_cast<int>(options_.handshake_timeout_s)) +
                 " s (is the board powered and running the Ergon agent?)");
      } else if (now - last_hello_request_ns_ > kHelloRetryNs) {
        send(proto::HelloRequest{}, out);
        last_hello_request_ns_ = now;
      }
      return;
    case SessionState::kSettingMode:
      // The request or its answer may have been lost on a noisy link; asking again is
      // harmless (a board already in the mode answers at once).
      if (now - last_mode_request_ns_ > kModeRetryNs) request_mode(out);
      if (now - mode_requested_ns_ > seconds_to_ns(options_.mode_switch_timeout_s))
        fail(SessionState::kFailed, source_ + " did not answer the switch to power mode " + options_.power_mode +
                                        " within " + std::to_string(static_cast<int>(options_.mode_switch_timeout_s)) +
                                        " s");
      return;
    case SessionState::kSyncing:
    case SessionState::kClosing: {
      const bool all_sent = syncs_sent_in_state_ >= options_.initial_syncs;
      if (!all_sent && now - last_sync_ns_ >= kSyncSpacingNs) send_sync(out);
      const bool done = all_sent && (syncs_answered_in_state_ >= options_.initial_syncs ||
                                     now - last_sync_ns_ > kSyncWaitNs);
      if (!done) return;
      if (state_ == SessionState::kSyncing) {
        start_plan(out);
      } else {
        set_state(end_state_);
      }
      return;
    }
    case SessionState::kRunning:
    case SessionState::kStopping:
      if (state_ == SessionState::kRunning && options_.duration_s &&
          now - run_started_ns_ > seconds_to_ns(*options_.duration_s)) {
        request_stop(out);
        return;
      }
      if (now - last_sync_ns_ > seconds_to_ns(options_.sync_interval_s)) send_sync(out);
      if (now - last_frame_ns_ > seconds_to_ns(options_.quiet_timeout_s)) {
        if (++stop_attempts_ > kMaxStopAttempts) {
          fail(SessionState::kFailed, source_ + " stopped answering");
          return;
        }
        // Either the board hangs or its RunDone was lost: a Stop makes it say RunDone again.
        sink_.event(now, "warning", "no data for a while; asking the board to stop");
        send(proto::Stop{}, out);
        last_frame_ns_ = now;
      }
      return;
    default:
      return;
  }
}

}  // namespace ergon::devices
