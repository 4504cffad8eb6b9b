#include "devices/sim_board.h"

#include "common/error.h"
#include "devices/power_control.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <utility>

namespace ergon::devices {
namespace {

namespace proto = protocol;
using profiler::Phase;

constexpr int64_t kReplyLatencyNs = 20'000;        // device time between rx and tx of a reply
constexpr int64_t kRelayTimeoutNs = 120'000'000'000;  // as the agent waits for a relayed transfer

}  // namespace

SimBoard::SimBoard(const BoardProfile& board, const SimBoardOptions& options)
    : base_(board),
      board_(with_threads(board_in_mode(board, options.power_mode), options.threads)),
      options_(options),
      ina_(board.ina219),
      rng_(options.seed),
      truth_model_(board.sim_truth, options.seed) {
  truth_model_.set_link(link_named(options.link.empty() ? default_link(board.name, board.name) : options.link));
  if (options.external_logger) {
    PowerLoggerOptions logger = *options.external_logger;
    logger.time_scale = options.time_scale;  // one simulation: its clock runs at the board's pace
    logger_.emplace(board, logger);
  }
  sample_period_ns_ = options.sensor == SimPowerSensor::kTegrastats
                          ? std::max<int64_t>(1, options.tegrastats_interval_ns)
                          : static_cast<int64_t>(std::llround(ina_.sample_period_s() * 1e9));
}

uint64_t SimBoard::ticks_at(int64_t true_ns) const {
  return simulated_ticks(true_ns, board_.clock_drift_ppm, options_.clock_offset_ns, board_.tick_hz);
}

template <class Msg>
bool SimBoard::send(const Msg& msg, std::vector<uint8_t>& out) {
  uint8_t buf[proto::kMaxEncodedFrameBytes];
  const std::size_t n = proto::encode_message(msg, tx_seq_, buf, sizeof buf);
  assert(n != 0 && "every message the board builds fits a frame");
  ++tx_seq_;
  ++tx_seq_count_;
  bool intact = true;
  if (options_.corrupt_probability > 0) {
    std::bernoulli_distribution hit(options_.corrupt_probability);
    std::uniform_int_distribution<int> bit(0, 7);
    for (std::size_t i = 0; i < n; ++i) {
      if (hit(rng_)) {
        buf[i] = static_cast<uint8_t>(buf[i] ^ (1U << bit(rng_)));
        intact = false;
      }
    }
  }
  out.insert(out.end(), buf, buf + n);
  return intact;
}

void SimBoard::log(proto::LogLevel level, const std::string& text, std::vector<uint8_t>& out) {
  proto::Log msg;
  msg.level = level;
  msg.length = static_cast<uint16_t>(std::min(text.size(), proto::kMaxLogText));
  std::memcpy(msg.text, text.data(), msg.length);
  send(msg, out);
}

void SimBoard::receive(const uint8_t* data, std::size_t n, int64_t now_ns,
                       std::vector<uint8_t>& out) {
  decoder_.feed(data, n, [&](const proto::Frame& f) { handle_frame(f, now_ns, out); });
}

void SimBoard::handle_frame(const proto::Frame& frame, int64_t now_ns,
                            std::vector<uint8_t>& out) {
  switch (frame.type) {
    case proto::MsgType::kHelloRequest: {
      proto::Hello hello;
      hello.board_kind = board_.kind;
      hello.protocol_version = options_.protocol_version;
      hello.firmware_version = board_.firmware_version;
      hello.tick_hz = board_.tick_hz;
      hello.time_scale_milli = static_cast<uint32_t>(std::lround(std::max(0.0, options_.time_scale) * 1000));
      hello.ram_bytes = static_cast<uint32_t>(std::min<uint64_t>(board_.ram_bytes, UINT32_MAX));
      const std::string name = std::string(board_.name) + "-sim";
      proto::copy_text(hello.board_name, name.c_str());
      proto::copy_text(hello.board_type, board_.name.c_str());
      // Measured by an external logger: no rail of its own.
      proto::copy_text(hello.power_mode, std::string(board_.power_mode).c_str());
      hello.rail_count = logger_ ? 0 : 1;
      hello.rails[0].id = 0;
      proto::copy_text(hello.rails[0].name, std::string(board_.rail_name).c_str());
      send(hello, out);
      return;
    }
    case proto::MsgType::kSyncRequest: {
      proto::SyncRequest req;
      if (!proto::parse_message(frame, req)) break;
      proto::SyncReply reply;
      reply.sync_id = req.sync_id;
      reply.host_tx_ns = req.host_tx_ns;
      reply.device_rx_ticks = ticks_at(now_ns);
      reply.device_tx_ticks = ticks_at(now_ns + kReplyLatencyNs);
      send(reply, out);
      return;
    }
    case proto::MsgType::kPlanOp: {
      proto::PlanOp wire;
      PlannedOp op;
      if (!proto::parse_message(frame, wire) || !from_wire(wire, op)) break;
      if (running_) {
        log(proto::LogLevel::kWarning, "plan op ignored: a run is active", out);
        return;
      }
      pending_plan_.push_back(op);
      return;
    }
    case proto::MsgType::kStart: {
      proto::Start start;
      if (!proto::parse_message(frame, start)) break;
      start_run(start, now_ns, out);
      return;
    }
    case proto::MsgType::kStop:
      if (running_) {
        stop_requested_ = true;
        if (segment_.waiting) {  // waiting for bytes that may never come: stop now
          segment_.waiting = false;
          segment_.wait_end_ns = std::max(now_ns, cursor_ns_);
          segment_.end_ns = segment_.wait_end_ns;
        }
      } else if (!runs_.empty()) {
        // The host missed our RunDone (a noisy link): say it again.
        const SimRunStats& last = runs_.back();
        proto::RunDone done;
        done.run_tag = last.run_tag;
        done.end = last_end_;
        done.spans_sent = last.spans_sent;
        done.samples_sent = last.samples_sent;
        done.frames_sent = last.frames_sent;
        send(done, out);
      }
      return;
    case proto::MsgType::kPing: {
      proto::Ping ping;
      if (!proto::parse_message(frame, ping)) break;
      proto::Pong pong;
      pong.nonce = ping.nonce;
      pong.device_ticks = ticks_at(now_ns);
      send(pong, out);
      return;
    }
    case proto::MsgType::kHostLinkData: {
      static thread_local proto::HostLinkData data;
      if (!proto::parse_message(frame, data)) break;
      link_bytes_received_ += data.length;
      if (data.last && running_ && segment_.waiting && plan_[op_index_].shape.dims[1] == data.transfer)
        relayed_data_arrived(now_ns);
      return;
    }
    case proto::MsgType::kLinkAck:
      return;  // the simulated link's time is the truth model's, not the host's answer
    case proto::MsgType::kPhaseModes: {
      proto::PhaseModes phases;
      if (!proto::parse_message(frame, phases)) break;
      pending_phases_ = phases;
      return;
    }
    case proto::MsgType::kSetPowerMode: {
      proto::SetPowerMode request;
      if (!proto::parse_message(frame, request)) break;
      set_power_mode(request, out);
      return;
    }
    default:
      break;
  }
  log(proto::LogLevel::kWarning,
      "ignored host message type 0x" + std::to_string(static_cast<int>(frame.type)), out);
}

void SimBoard::set_power_mode(const proto::SetPowerMode& request, std::vector<uint8_t>& out) {
  proto::PowerModeSet answer;
  const std::string wanted = request.mode;
  const auto in_wanted = in_mode(base_, wanted);
  if (running_) {
    answer.status = proto::PowerModeStatus::kBusy;
    proto::copy_text(answer.detail, "a run is in progress; change modes between runs");
  } else if (!in_wanted) {
    answer.status = proto::PowerModeStatus::kUnknownMode;
    proto::copy_text(answer.detail, ("this board's modes: " + power_mode_names(base_)).c_str());
  } else {
    answer.switch_ns = wanted == board_.power_mode
                           ? 0
                           : static_cast<uint64_t>(std::llround(base_.mode_switch_s * 1e9));
    board_ = with_threads(*in_wanted, options_.threads);
    cold_ = true;  // clocks settle after a switch like after an idle gap
  }
  proto::copy_text(answer.mode, std::string(board_.power_mode).c_str());
  send(answer, out);
}

void SimBoard::start_run(const proto::Start& start, int64_t now_ns, std::vector<uint8_t>& out) {
  auto refuse = [&](const std::string& why) {
    log(proto::LogLevel::kError, why, out);
    proto::RunDone done;
    done.run_tag = start.run_tag;
    done.end = proto::RunEnd::kFailed;
    send(done, out);
    pending_plan_.clear();
  };
  if (running_) return refuse("start refused: a run is active");
  if (start.mode == proto::StartMode::kExecute)
    return refuse("start refused: a simulated board has no tensors to execute a schedule on "
                  "(run ergon-agent for that)");
  // A schedule is a plan too: each entry once, in order (the host sends one window per
  // entry, no idle gaps and no minimum window), so the same loop executes both.
  if (start.op_count != pending_plan_.size() || pending_plan_.empty())
    return refuse("start refused: expected " + std::to_string(start.op_count) +
                  " plan ops, received " + std::to_string(pending_plan_.size()));

  phases_ = std::exchange(pending_phases_, std::nullopt);
  phase_switched_ = false;
  started_in_.reset();
  if (phases_ && !in_mode(base_, phases_->backward))
    return refuse(std::string("start refused: no power mode '") + phases_->backward + "' for the backward phase (" +
                  power_mode_names(base_) + ")");
  if (phases_) started_in_ = board_;
  plan_ = std::move(pending_plan_);
  pending_plan_.clear();
  start_ = start;
  running_ = true;
  stop_requested_ = false;
  op_index_ = 0;
  window_ = 0;
  in_gap_ = false;
  warmed_up_ = false;
  cold_ = true;
  loop_ = 0;
  runs_.push_back(SimRunStats{.run_tag = start.run_tag});
  cursor_ns_ = std::max(cursor_ns_, now_ns);
  truth_model_.advance(cursor_ns_, 0);  // it idled (and cooled) since the last run
  // tegrastats prints its first line an interval in; the INA219 converts at once.
  next_sample_ns_ = cursor_ns_ + (options_.sensor == SimPowerSensor::kTegrastats ? sample_period_ns_ : 0);
  mean_until_ns_ = cursor_ns_;
  mean_energy_j_ = 0;
  batch_.count = 0;
  next_segment(cursor_ns_);
  send_due_pull(out);
}

void SimBoard::send_due_pull(std::vector<uint8_t>& out) {
  if (pull_due_ == 0) return;
  send(proto::LinkPull{.transfer = pull_due_, .bytes = plan_[op_index_].shape.dims[0]}, out);
  pull_due_ = 0;
}

void SimBoard::relayed_data_arrived(int64_t now_ns) {
  Segment& s = segment_;
  const int64_t arrived = std::max({now_ns, cursor_ns_, s.begin_ns});
  // The truth's time for the transfer is a round trip plus the bytes: the bytes' part runs
  // from the arrival on.
  const LinkProfile& link = *truth_model_.link();
  const auto bytes_ns = std::llround(static_cast<double>(s.run.duration_ns) -
                                     2 * link.latency_s * 1e9 * s.run.invocations);
  s.waiting = false;
  s.wait_end_ns = arrived;
  s.power_w = s.run.power_w;
  s.end_ns = std::max(s.begin_ns + s.run.duration_ns, arrived + std::max<int64_t>(1, bytes_ns));
}

// Picks the segment that begins at begin_ns: a measurement window of the current op, or the
// idle gap after it. Returns false when the plan is over.
bool SimBoard::next_segment(int64_t begin_ns) {
  if (stop_requested_ || op_index_ >= plan_.size()) return false;
  const PlannedOp& op = plan_[op_index_];
  Segment s;
  s.begin_ns = begin_ns;
  if (phases_ && !phase_switched_ && op_index_ >= phases_->switch_at && !in_gap_ && window_ == 0 &&
      !warmed_up_) {
    // Per-phase modes: the board idles while it switches, then runs the rest in the new mode.
    phase_switched_ = true;
    const bool change = phases_->backward != board_.power_mode;
    board_ = with_threads(*in_mode(base_, phases_->backward), options_.threads);
    s.is_switch = true;
    s.phase = Phase::kIdle;
    s.power_w = board_.idle_w;
    s.end_ns = begin_ns + (change ? std::llround(base_.mode_switch_s * 1e9) : 0) + 1;
    segment_ = s;
    return true;
  }
  if (in_gap_) {
    s.is_span = false;
    s.phase = Phase::kIdle;
    s.power_w = board_.idle_w;
    s.end_ns = begin_ns + int64_t{op.idle_after_us} * 1000;
    cold_ = true;
  } else {
    // The truth model runs the op: invocations until the window lasts the plan's minimum,
    // each drawn with its jitter, at the clock the governor allows now. The first run after
    // a gap is slower; warm-up runs, when the plan asks for them, take that before the
    // window opens.
    const bool idle = op.shape.kind == profiler::OpKind::kIdle;
    const bool cold = cold_ && !idle;
    if (!warmed_up_ && op.warmup_reps > 0 && !idle) {
      s.is_warmup = true;
      s.run = truth_model_.run(board_, op.shape, op.phase, op.warmup_reps, 0, cold);
      warmed_up_ = true;
    } else {
      s.is_span = true;
      s.op_id = op.op_id;
      s.run = truth_model_.run(board_, op.shape, op.phase, 1, start_.min_window_us * 1e-6, cold);
      s.repetitions = s.run.invocations;
    }
    s.phase = op.phase;
    s.power_w = s.run.power_w;
    s.end_ns = begin_ns + s.run.duration_ns;
    s.wait_end_ns = begin_ns;
    if (s.is_span && op.shape.kind == profiler::OpKind::kTransfer && op.phase == Phase::kLinkReceive &&
        op.shape.dim_count > 1 && op.shape.dims[1] != 0) {
      // A relayed transfer: the board asks for its bytes and idles until the host has them.
      s.waiting = true;
      s.power_w = board_.idle_w;
      s.end_ns = std::numeric_limits<int64_t>::max();
      pull_due_ = op.shape.dims[1];
    }
    cold_ = idle;
  }
  segment_ = s;
  return true;
}

void SimBoard::receive_logger(const uint8_t* data, std::size_t n, int64_t now_ns,
                              std::vector<uint8_t>& logger_out) {
  // The board may have been simulated ahead of now: the logger starts no earlier than that.
  if (logger_) logger_->receive(data, n, std::max(now_ns, cursor_ns_), logger_out);
}

void SimBoard::advance_to(int64_t t_ns, std::vector<uint8_t>& out,
                          std::vector<uint8_t>* logger_out) {
  assert((!logger_ || logger_out != nullptr) && "a board with a logger needs its link");
  while (running_) {
    // Unpaced, a board waiting for relayed bytes does not run ahead: its time is not real time.
    if (segment_.waiting && options_.time_scale <= 0) return;
    if (segment_.waiting && t_ns - segment_.begin_ns > kRelayTimeoutNs) {
      log(proto::LogLevel::kError, "link-receive: the host relayed no data within 120 s", out);
      end_run(proto::RunEnd::kFailed, out);
      return;
    }
    const int64_t until = std::min(segment_.end_ns, t_ns);
    if (logger_) {
      logger_->sample_until(segment_.end_ns > t_ns ? t_ns : segment_.end_ns - 1,
                            segment_.power_w, *logger_out);
    } else if (options_.sensor == SimPowerSensor::kTegrastats) {
      average_until(until, segment_.power_w, out);
    } else {
      while (next_sample_ns_ < segment_.end_ns && next_sample_ns_ <= until) {
        take_sample(next_sample_ns_, segment_.power_w, out);
        next_sample_ns_ += sample_period_ns_;
      }
    }
    cursor_ns_ = std::max(cursor_ns_, until);
    if (segment_.end_ns > t_ns) return;
    finish_segment(out);
  }
  if (logger_) logger_->sample_until(t_ns, board_.idle_w, *logger_out);  // the board idles
}

void SimBoard::finish_segment(std::vector<uint8_t>& out) {
  const Segment s = segment_;
  truth_model_.advance(s.end_ns, s.power_w - board_.idle_w);  // the die heats or cools
  if (s.is_switch) {
    log(proto::LogLevel::kInfo,
        phase_switch_line(op_index_, phases_->backward, static_cast<uint64_t>(s.end_ns - s.begin_ns)), out);
  }
  if (s.is_warmup) {
    warmup_ns_ += s.end_ns - s.begin_ns;
    warmup_energy_j_ += s.power_w * static_cast<double>(s.end_ns - s.begin_ns) * 1e-9;
  }
  // A relayed (tagged) link-receive sent its LinkPull when it began; any other transfer
  // puts its bytes on the link now.
  const PlannedOp& now_op = plan_[op_index_];
  const bool relayed_receive = s.phase == Phase::kLinkReceive && now_op.shape.dims[1] != 0;
  if (s.is_span && now_op.shape.kind == profiler::OpKind::kTransfer && !relayed_receive)
    exchange_transfer(now_op, out);
  if (s.is_span) {
    proto::OpSpanMsg span;
    span.op_id = s.op_id;
    span.phase = static_cast<uint8_t>(s.phase);
    span.begin_ticks = ticks_at(s.begin_ns);
    span.end_ticks = ticks_at(s.end_ns);
    span.repetitions = s.repetitions;
    const bool intact = send(span, out);
    SimRunStats& run = runs_.back();
    ++run.spans_sent;
    ++run.frames_sent;
    run.spans_intact += intact ? 1 : 0;
    run.frames_intact += intact ? 1 : 0;
    truth_.push_back({.run_tag = start_.run_tag,
                      .op_id = s.op_id,
                      .phase = s.phase,
                      .begin_ticks = span.begin_ticks,
                      .end_ticks = span.end_ticks,
                      .repetitions = s.repetitions,
                      .begin_ns = s.begin_ns,
                      .end_ns = s.end_ns,
                      .power_w = s.power_w,
                      .energy_j = (board_.idle_w * static_cast<double>(s.wait_end_ns - s.begin_ns) +
                                   s.power_w * static_cast<double>(s.end_ns - s.wait_end_ns)) *
                                  1e-9,
                      .frame_intact = intact,
                      .throttled = s.run.throttled,
                      .temperature_c = s.run.temperature_c,
                      .profile_time_s = s.run.profile_time_s,
                      .profile_energy_j = s.run.profile_energy_j,
                      .time_by = s.run.time_by,
                      .energy_by = s.run.energy_by});
    if (s.phase != Phase::kIdle) run.truth.add(s.run);
  }

  // Advance the plan cursor: (warm-up ->) window -> gap -> next window ... -> next op -> next
  // loop.
  const PlannedOp& op = plan_[op_index_];
  if (s.is_warmup || s.is_switch) {
    // the window itself comes next
  } else if (!in_gap_ && op.idle_after_us > 0) {
    in_gap_ = true;
  } else {
    in_gap_ = false;
    warmed_up_ = false;
    if (++window_ >= op.windows) {
      window_ = 0;
      if (++op_index_ >= plan_.size()) {
        ++loop_;
        if (start_.loops == 0 || loop_ < start_.loops) op_index_ = 0;
      }
    }
  }
  if (!next_segment(s.end_ns))
    end_run(stop_requested_ ? proto::RunEnd::kStopped : proto::RunEnd::kCompleted, out);
  else
    send_due_pull(out);
}

void SimBoard::exchange_transfer(const PlannedOp& op, std::vector<uint8_t>& out) {
  const uint32_t bytes = op.shape.dims[0];
  const uint32_t transfer = op.shape.dims[1] != 0 ? op.shape.dims[1] : next_transfer_++;
  if (op.phase == Phase::kLinkReceive) {
    send(proto::LinkPull{.transfer = transfer, .bytes = bytes}, out);
    return;
  }
  static thread_local proto::LinkData data;
  data.transfer = transfer;
  proto::for_each_link_frame(bytes, proto::kMaxLinkDataBytes, [&](uint32_t offset, uint32_t n, bool last) {
    data.offset = offset;
    data.fill(n);
    data.last = last;
    send(data, out);
    return true;
  });
}

void SimBoard::take_sample(int64_t t_ns, double power_w, std::vector<uint8_t>& out) {
  std::normal_distribution<double> noise(0.0, board_.shunt_noise_v);
  const uint64_t ticks = ticks_at(t_ns);
  const auto sample = monitor_sample(board_, ina_, power_w, noise(rng_), ticks);
  append_sample(ticks, sample.bus_uv, sample.current_ua, sample.power_uw, sample.flags, out);
}

void SimBoard::average_until(int64_t t_ns, double power_w, std::vector<uint8_t>& out) {
  while (next_sample_ns_ <= t_ns) {
    mean_energy_j_ += power_w * static_cast<double>(next_sample_ns_ - mean_until_ns_) * 1e-9;
    const double mean_w = mean_energy_j_ / (static_cast<double>(sample_period_ns_) * 1e-9);
    const auto mw = static_cast<int32_t>(std::lround(mean_w * 1000));  // tegrastats prints mW
    append_sample(ticks_at(next_sample_ns_), 0, 0, mw * 1000, 0, out);
    flush_batch(out);  // a line at a time, as the agent streams tegrastats
    mean_until_ns_ = next_sample_ns_;
    mean_energy_j_ = 0;
    next_sample_ns_ += sample_period_ns_;
  }
  if (t_ns > mean_until_ns_) {
    mean_energy_j_ += power_w * static_cast<double>(t_ns - mean_until_ns_) * 1e-9;
    mean_until_ns_ = t_ns;
  }
}

void SimBoard::append_sample(uint64_t ticks, int32_t bus_uv, int32_t current_ua, int32_t power_uw, uint8_t flags,
                             std::vector<uint8_t>& out) {
  if (!batch_.fits(ticks)) flush_batch(out);
  ++runs_.back().samples_sent;
  if (batch_.append(ticks, bus_uv, current_ua, power_uw, flags)) flush_batch(out);
}

void SimBoard::flush_batch(std::vector<uint8_t>& out) {
  if (batch_.count == 0) return;
  const bool intact = send(batch_, out);
  SimRunStats& run = runs_.back();
  ++run.frames_sent;
  run.frames_intact += intact ? 1 : 0;
  run.samples_intact += intact ? batch_.count : 0;
  batch_.count = 0;
}

void SimBoard::end_run(proto::RunEnd end, std::vector<uint8_t>& out) {
  flush_batch(out);
  proto::RunDone done;
  done.run_tag = start_.run_tag;
  done.end = end;
  const SimRunStats& run = runs_.back();
  done.spans_sent = run.spans_sent;
  done.samples_sent = run.samples_sent;
  done.frames_sent = run.frames_sent;
  send(done, out);
  last_end_ = end;
  running_ = false;
  plan_.clear();
  if (started_in_) board_ = *std::exchange(started_in_, std::nullopt);  // back to the run's first mode
  phases_.reset();
}

}  // namespace ergon::devices
