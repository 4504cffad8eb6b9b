#include "devices/cortexm/firmware.h"

namespace ergon::devices::cortexm {
namespace proto = protocol;
namespace {

// profiler::OpKind and profiler::Phase codes (the wire's; profiler/op.h is not freestanding).
enum Kind : uint8_t {
  kConv2d = 1, kLinear = 2, kRelu = 3, kMaxPool = 4, kAdd = 5, kPaging = 6, kIdle = 7, kTransfer = 18
};
enum PhaseCode : uint8_t {
  kForward = 1, kBackward = 2, kRecompute = 3, kPageIn = 4, kPageOut = 5, kLinkSend = 8, kLinkReceive = 9
};
constexpr uint64_t kTransferTimeoutUs = 10'000'000;
constexpr uint64_t kRelayedTimeoutUs = 120'000'000;  // a pipeline's: the upstream board may still be filling

const char* kind_name(uint8_t kind) {
  static const char* const names[] = {"?", "conv2d", "linear", "relu", "maxpool", "add", "paging", "idle",
                                      "batchnorm", "layernorm", "relu6", "gelu", "tanh", "avgpool",
                                      "embedding", "attention_scores", "attention_context", "cross_entropy", "transfer"};
  return kind < sizeof names / sizeof names[0] ? names[kind] : "?";
}

TinyConv conv_of(const uint32_t* d) {
  const uint32_t window = d[5];
  const uint32_t stride = (window >> 8 & 0xFF) == 0 ? 1 : window >> 8 & 0xFF;
  return {d[0], d[1], d[2], d[3], d[4], window & 0xFF, stride};
}

/// Appends decimal `v` to `out` at `at` (bounded); returns the new position.
std::size_t put_number(char* out, std::size_t at, std::size_t cap, uint64_t v) {
  char digits[20];
  std::size_t n = 0;
  do {
    digits[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  while (n > 0 && at + 1 < cap) out[at++] = digits[--n];
  out[at] = '\0';
  return at;
}
std::size_t put_text(char* out, std::size_t at, std::size_t cap, const char* text) {
  while (*text != '\0' && at + 1 < cap) out[at++] = *text++;
  out[at] = '\0';
  return at;
}

}  // namespace

Firmware::Firmware(const BoardInfo& board, const Hal& hal, const Ina219Config* ina, uint8_t* arena,
                   std::size_t arena_bytes)
    : board_(board),
      hal_(hal),
      ina_(ina != nullptr ? hal.i2c : nullptr, ina != nullptr ? *ina : Ina219Config{}),
      has_ina_(ina != nullptr && hal.i2c != nullptr),
      arena_(arena),
      arena_bytes_(arena_bytes) {}

bool Firmware::start() {
  ina_ok_ = has_ina_ && ina_.start();
  return ina_ok_ || !has_ina_;
}

uint64_t Firmware::us_to_ticks(uint64_t us) const { return us * hal_.clock.tick_hz() / 1'000'000; }

template <class Msg>
bool Firmware::send(const Msg& msg) {
  const std::size_t n = proto::encode_message(msg, tx_seq_++, tx_frame_, sizeof tx_frame_);
  return n != 0 && hal_.link.write(tx_frame_, n);
}

void Firmware::log(proto::LogLevel level, const char* text) {
  static proto::Log msg;
  msg.level = level;
  std::size_t n = 0;
  while (text[n] != '\0' && n < proto::kMaxLogText) {
    msg.text[n] = text[n];
    ++n;
  }
  msg.length = static_cast<uint16_t>(n);
  send(msg);
}

Firmware::Activity Firmware::activity() const {
  if (!running_ || stage_ == Stage::kGap) return Activity::kIdle;
  const uint8_t kind = plan_[op_index_].kind;
  if (kind == kIdle) return Activity::kIdle;
  return kind == kPaging ? Activity::kPaging : Activity::kComputing;
}

void Firmware::yield_trampoline(void* self) { static_cast<Firmware*>(self)->service(); }

void Firmware::poll() {
  service();
  if (running_) step();
}

void Firmware::service() {
  if (in_service_) return;  // a kernel yielded from inside a message handler: not again
  in_service_ = true;
  uint8_t buf[64];
  for (;;) {
    const std::size_t n = hal_.link.read(buf, sizeof buf);
    if (n == 0) break;
    const uint64_t rx = hal_.clock.now_ticks();
    decoder_.feed(buf, n, [&](const proto::Frame& f) { on_frame(f, rx); });
  }
  if (running_) sample_power();
  in_service_ = false;
}

void Firmware::on_frame(const proto::Frame& f, uint64_t rx_ticks) {
  switch (f.type) {
    case proto::MsgType::kHelloRequest: {
      static proto::Hello hello;
      hello = proto::Hello{};
      hello.board_kind = board_.kind;
      hello.firmware_version = board_.firmware_version;
      hello.tick_hz = hal_.clock.tick_hz();
      hello.ram_bytes = board_.ram_bytes;
      proto::copy_text(hello.board_name, board_.name);
      proto::copy_text(hello.power_mode, board_.power_mode);
      if (ina_ok_) {
        hello.rail_count = 1;
        hello.rails[0].id = 0;
        proto::copy_text(hello.rails[0].name, board_.rail_name);
      }
      send(hello);
      return;
    }
    case proto::MsgType::kSyncRequest: {
      proto::SyncRequest req;
      if (!proto::parse_message(f, req)) return;
      send(proto::SyncReply{.sync_id = req.sync_id,
                            .host_tx_ns = req.host_tx_ns,
                            .device_rx_ticks = rx_ticks,
                            .device_tx_ticks = hal_.clock.now_ticks()});
      return;
    }
    case proto::MsgType::kPing: {
      proto::Ping ping;
      if (proto::parse_message(f, ping)) send(proto::Pong{.nonce = ping.nonce, .device_ticks = hal_.clock.now_ticks()});
      return;
    }
    case proto::MsgType::kPlanOp: {
      proto::PlanOp wire;
      if (running_ || !proto::parse_message(f, wire)) return;
      if (plan_closed_) plan_size_ = plan_received_ = 0, plan_closed_ = false;
      if (plan_received_ < kMaxPlanOps) {
        Op& op = plan_[plan_received_];
        op.op_id = wire.op_id;
        op.kind = wire.kind;
        op.phase = wire.phase;
        op.dim_count = wire.dim_count;
        for (std::size_t i = 0; i < proto::kPlanDims; ++i) op.dims[i] = wire.dims[i];
        op.bytes = wire.bytes_in;
        op.windows = wire.windows;
        op.warmup_reps = wire.warmup_reps;
        op.idle_after_us = wire.idle_after_us;
        plan_size_ = plan_received_ + 1;
      }
      ++plan_received_;
      return;
    }
    case proto::MsgType::kStart: {
      proto::Start start;
      if (!proto::parse_message(f, start)) return;
      if (running_) return refuse(start.run_tag, "start refused: a run is active");
      if (phase_modes_pending_) {
        phase_modes_pending_ = false;
        plan_closed_ = true;
        return refuse(start.run_tag, "start refused: per-phase modes, but the firmware runs at one fixed clock");
      }
      start_run(start);
      plan_closed_ = true;  // the next PlanOp begins a new plan
      return;
    }
    case proto::MsgType::kStop:
      if (running_) stop_requested_ = true;
      else if (have_done_) send(done_);  // the host missed it
      return;
    case proto::MsgType::kPhaseModes:
      // One fixed clock: a run asked to switch mid-way is refused at its Start.
      if (!running_) phase_modes_pending_ = true;
      return;
    case proto::MsgType::kSetPowerMode: {
      proto::SetPowerMode request;
      if (!proto::parse_message(f, request)) return;
      static proto::PowerModeSet answer;
      answer = proto::PowerModeSet{};
      proto::copy_text(answer.mode, board_.power_mode);
      const char* a = request.mode;
      const char* b = board_.power_mode;
      while (*a != '\0' && *a == *b) ++a, ++b;
      if (running_) {
        answer.status = proto::PowerModeStatus::kBusy;
        proto::copy_text(answer.detail, "a run is in progress");
      } else if (*a != '\0' || *b != '\0') {
        answer.status = proto::PowerModeStatus::kNoControl;
        proto::copy_text(answer.detail, "the firmware runs at one fixed clock (its Hello's power mode)");
      }
      send(answer);
      return;
    }
    case proto::MsgType::kLinkAck: {
      proto::LinkAck ack;
      if (proto::parse_message(f, ack) && ack.transfer == transfer_) transfer_done_ = true;
      return;
    }
    case proto::MsgType::kHostLinkData: {
      // Only its header is read: the filler is not kept (no RAM for it).
      proto::Reader r(f.payload, f.payload_size);
      const uint32_t transfer = r.u32();
      (void)r.u32();
      const uint8_t last = r.u8();
      if (r.ok() && last == 1 && transfer == transfer_) transfer_done_ = true;
      return;
    }
    default:
      return;  // ExecuteModel, ScheduleSteps: a microcontroller does not execute schedules
  }
}

void Firmware::refuse(uint32_t run_tag, const char* why) {
  log(proto::LogLevel::kError, why);
  send(proto::RunDone{.run_tag = run_tag, .end = proto::RunEnd::kFailed});
}

void Firmware::start_run(const proto::Start& start) {
  char why[160];
  if (start.mode == proto::StartMode::kExecute)
    return refuse(start.run_tag, "start refused: this board runs schedules by their work; "
                                 "executing one on real tensors needs ergon-agent");
  if (plan_received_ > kMaxPlanOps) {
    std::size_t at = put_text(why, 0, sizeof why, "start refused: a plan of ");
    at = put_number(why, at, sizeof why, plan_received_);
    at = put_text(why, at, sizeof why, " entries; this firmware holds ");
    put_number(why, at, sizeof why, kMaxPlanOps);
    return refuse(start.run_tag, why);
  }
  if (plan_size_ == 0 || start.op_count != plan_size_) {
    std::size_t at = put_text(why, 0, sizeof why, "start refused: expected ");
    at = put_number(why, at, sizeof why, start.op_count);
    at = put_text(why, at, sizeof why, " plan ops, received ");
    put_number(why, at, sizeof why, plan_size_);
    return refuse(start.run_tag, why);
  }
  // Every entry must fit before anything runs: a plan fails whole, at once, with the reason.
  for (std::size_t i = 0; i < plan_size_; ++i) {
    const Op& op = plan_[i];
    if (prepare(op, false)) continue;
    std::size_t at = put_text(why, 0, sizeof why, "start refused: op ");
    at = put_number(why, at, sizeof why, op.op_id);
    at = put_text(why, at, sizeof why, " (");
    at = put_text(why, at, sizeof why, kind_name(op.kind));
    if (op.kind == kPaging && hal_.storage == nullptr) {
      put_text(why, at, sizeof why, ") needs storage, and this board has none");
    } else if ((op.kind > kIdle && op.kind != kTransfer) || (op.kind == kConv2d && (op.dims[5] >> 16 & 1) != 0)) {
      put_text(why, at, sizeof why, ") has no kernel on this board");
    } else if (op.kind != kPaging && op.dims[0] == 0) {
      put_text(why, at, sizeof why, ") came without its dimensions");
    } else {
      at = put_text(why, at, sizeof why, ") does not fit: the tensors' arena holds ");
      at = put_number(why, at, sizeof why, arena_bytes_);
      put_text(why, at, sizeof why, " bytes");
    }
    return refuse(start.run_tag, why);
  }
  start_ = start;
  running_ = true;
  stop_requested_ = false;
  have_done_ = false;
  done_ = proto::RunDone{.run_tag = start.run_tag};
  op_index_ = 0;
  loop_ = 0;
  batch_.count = 0;
  last_flush_ = hal_.clock.now_ticks();
  begin_op();
}

float* Firmware::take(std::size_t floats) {
  const std::size_t bytes = floats * sizeof(float);
  if (bytes > arena_bytes_ - arena_used_) return nullptr;
  auto* p = reinterpret_cast<float*>(arena_ + arena_used_);
  arena_used_ += bytes;
  return p;
}

bool Firmware::prepare(const Op& op, bool fill) {
  arena_used_ = 0;
  a_ = b_ = c_ = d_ = e_ = nullptr;
  const uint32_t* d = op.dims;
  const bool backward = op.phase == kBackward;
  std::size_t na = 0, nb = 0, nc = 0, nd = 0, ne = 0;
  switch (op.kind) {
    case kConv2d: {
      if ((d[5] >> 16 & 1) != 0) return false;  // depthwise: not in the tiny kernels
      const TinyConv s = conv_of(d);
      na = s.input_size(), nb = s.weight_size(), nc = s.output_size();
      if (backward) nd = na, ne = nb;
      break;
    }
    case kLinear:
      na = std::size_t{d[0]} * d[1], nb = std::size_t{d[2]} * d[1], nc = std::size_t{d[0]} * d[2];
      if (backward) nd = na, ne = nb;
      break;
    case kRelu:
    case kAdd:
      na = nb = nc = d[0];
      break;
    case kMaxPool:
      na = std::size_t{d[0]} * d[1] * d[2] * d[3];
      nc = d[4] == 0 ? 0 : na / (std::size_t{d[4]} * d[4]);
      nd = na;
      break;
    case kPaging: {
      if (hal_.storage == nullptr) return false;
      const uint64_t block = hal_.storage->block_bytes();
      const uint64_t blocks = (op.bytes + block - 1) / block;
      if (blocks > hal_.storage->block_count()) return false;
      // A chunk of whole blocks moves the bytes through the arena.
      const uint64_t chunk_blocks = blocks < arena_bytes_ / block ? blocks : arena_bytes_ / block;
      if (chunk_blocks == 0) return false;
      na = static_cast<std::size_t>(chunk_blocks * block / sizeof(float));
      break;
    }
    case kIdle:
      return true;
    case kTransfer:
      return op.dims[0] != 0 && (op.phase == kLinkSend || op.phase == kLinkReceive);
    default:
      return false;
  }
  if (op.kind != kPaging && na == 0) return false;  // an op without its dimensions
  a_ = take(na), b_ = take(nb), c_ = take(nc), d_ = take(nd), e_ = take(ne);
  if ((na && !a_) || (nb && !b_) || (nc && !c_) || (nd && !d_) || (ne && !e_)) return false;
  if (!fill) return true;
  // Small pseudo-random values (xorshift), the same every run.
  uint32_t x = 2463534242U;
  auto* f = reinterpret_cast<float*>(arena_);
  for (std::size_t i = 0; i < arena_used_ / sizeof(float); ++i) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    f[i] = static_cast<float>(static_cast<int32_t>(x % 2001) - 1000) * 1e-3F;
  }
  return true;
}

bool Firmware::run_once(const Op& op) {
  const uint32_t* d = op.dims;
  const bool backward = op.phase == kBackward;
  const Yield yield{&Firmware::yield_trampoline, this};
  switch (op.kind) {
    case kConv2d: {
      const TinyConv s = conv_of(d);
      if (backward) conv2d_backward(s, a_, b_, c_, d_, e_, yield);
      else conv2d_forward(s, a_, b_, c_, yield);
      return true;
    }
    case kLinear:
      if (backward) linear_backward(d[0], d[1], d[2], a_, b_, c_, d_, e_, yield);
      else linear_forward(d[0], d[1], d[2], a_, b_, c_, yield);
      return true;
    case kRelu:
      if (backward) relu_backward(d[0], a_, b_, c_);
      else relu_forward(d[0], a_, c_);
      return true;
    case kAdd:
      if (backward) add_backward(d[0], a_, b_, c_);
      else add_forward(d[0], a_, b_, c_);
      return true;
    case kMaxPool:
      if (backward) max_pool_backward(d[0], d[1], d[2], d[3], d[4], a_, c_, d_);
      else max_pool_forward(d[0], d[1], d[2], d[3], d[4], a_, c_);
      return true;
    case kPaging: {
      const uint32_t block = hal_.storage->block_bytes();
      const uint32_t total = static_cast<uint32_t>((op.bytes + block - 1) / block);
      const uint32_t chunk = static_cast<uint32_t>(arena_used_ / block);
      auto* bytes = reinterpret_cast<uint8_t*>(a_);
      for (uint32_t first = 0; first < total; first += chunk) {
        const uint32_t n = total - first < chunk ? total - first : chunk;
        const bool ok = op.phase == kPageIn ? hal_.storage->read(first, bytes, n)
                                            : hal_.storage->write(first, bytes, n);
        if (!ok) return false;
        service();
      }
      return true;
    }
    case kTransfer:
      return transfer(op);
    default:
      return true;
  }
}

bool Firmware::transfer(const Op& op) {
  // A pipeline's transfers carry their tag (dims[1]); a link test's are numbered here.
  transfer_ = op.dims[1] != 0 ? op.dims[1] : ++next_transfer_;
  transfer_done_ = false;
  const uint32_t bytes = op.dims[0];
  if (op.phase == kLinkReceive) {
    send(proto::LinkPull{.transfer = transfer_, .bytes = bytes});
  } else {
    proto::LinkFiller frame{.transfer = transfer_};
    proto::for_each_link_frame(bytes, proto::kMaxLinkDataBytes, [&](uint32_t offset, uint32_t n, bool last) {
      frame.offset = offset;
      frame.length = static_cast<uint16_t>(n);
      frame.last = last;
      send(frame);
      service();  // samples and syncs keep flowing
      return true;
    });
  }
  const uint64_t since = hal_.clock.now_ticks();
  const uint64_t limit = us_to_ticks(op.dims[1] != 0 ? kRelayedTimeoutUs : kTransferTimeoutUs);
  while (!transfer_done_) {
    service();
    if (stop_requested_) return true;  // the run ends after this window, as any op's does
    if (hal_.clock.now_ticks() - since > limit) {
      log(proto::LogLevel::kError, op.phase == kLinkReceive ? "link-receive: the host sent no data in time"
                                                            : "link-send: no acknowledgement from the host in time");
      return false;
    }
  }
  return true;
}

void Firmware::begin_op() {
  const Op& op = plan_[op_index_];
  (void)prepare(op, true);  // checked at start
  window_ = 0;
  reps_ = 0;
  stage_ = op.warmup_reps > 0 ? Stage::kWarmup : Stage::kWindow;
}

void Firmware::step() {
  if (stop_requested_) return finish(proto::RunEnd::kStopped);
  const Op& op = plan_[op_index_];
  const uint64_t now = hal_.clock.now_ticks();
  switch (stage_) {
    case Stage::kGap:
      if (now >= gap_until_) {
        ++window_;
        reps_ = 0;
        if (window_ < op.windows) {
          stage_ = op.warmup_reps > 0 ? Stage::kWarmup : Stage::kWindow;
        } else if (++op_index_ < plan_size_) {
          begin_op();
        } else if (start_.loops != 0 && ++loop_ >= start_.loops) {
          finish(proto::RunEnd::kCompleted);
        } else {
          op_index_ = 0;
          begin_op();
        }
      }
      return;
    case Stage::kWarmup:
      if (!run_once(op)) return finish(proto::RunEnd::kFailed);
      if (++reps_ >= op.warmup_reps) {
        stage_ = Stage::kWindow;
        reps_ = 0;
      }
      return;
    case Stage::kWindow:
      if (reps_ == 0) window_begin_ = now;
      if (op.kind == kIdle) {
        reps_ = 1;
        if (now - window_begin_ >= us_to_ticks(op.dims[0])) end_window();
        return;
      }
      if (!run_once(op)) {
        if (op.kind == kPaging) log(proto::LogLevel::kError, "storage failed during a page transfer");
        return finish(proto::RunEnd::kFailed);
      }
      ++reps_;
      if (hal_.clock.now_ticks() - window_begin_ >= us_to_ticks(start_.min_window_us)) end_window();
      return;
  }
}

void Firmware::end_window() {
  const Op& op = plan_[op_index_];
  const uint64_t end = hal_.clock.now_ticks();
  if (send(proto::OpSpanMsg{.op_id = op.op_id,
                            .phase = op.phase,
                            .begin_ticks = window_begin_,
                            .end_ticks = end,
                            .repetitions = reps_})) {
    ++done_.spans_sent;
    ++done_.frames_sent;
  }
  stage_ = Stage::kGap;
  gap_until_ = end + us_to_ticks(op.idle_after_us);
}

void Firmware::sample_power() {
  if (!ina_ok_) return;
  Ina219Sample s;
  if (ina_.read(s)) {
    const uint64_t t = hal_.clock.now_ticks();
    if (!batch_.fits(t)) flush_power();
    if (batch_.append(t, s.bus_uv, s.current_ua, s.power_uw, s.flags)) flush_power();
  }
  if (hal_.clock.now_ticks() - last_flush_ > us_to_ticks(50'000)) flush_power();
}

void Firmware::flush_power() {
  last_flush_ = hal_.clock.now_ticks();
  if (batch_.count == 0) return;
  batch_.rail = 0;
  if (send(batch_)) {
    done_.samples_sent += batch_.count;
    ++done_.frames_sent;
  }
  batch_.count = 0;
}

void Firmware::finish(proto::RunEnd end) {
  flush_power();
  done_.end = end;
  running_ = false;
  have_done_ = true;
  send(done_);
}

}  // namespace ergon::devices::cortexm
