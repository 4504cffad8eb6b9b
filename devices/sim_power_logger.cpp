#include "devices/sim_power_logger.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace ergon::devices {
namespace {

namespace proto = protocol;

constexpr int64_t kReplyLatencyNs = 30'000;  // logger time between rx and tx of a reply

}  // namespace

SimPowerLogger::SimPowerLogger(const BoardProfile& board, const PowerLoggerOptions& options)
    : board_(board), options_(options), ina_(board.ina219), rng_(options.seed) {
  sample_period_ns_ = static_cast<int64_t>(std::llround(ina_.sample_period_s() * 1e9));
}

uint64_t SimPowerLogger::ticks_at(int64_t true_ns) const {
  return simulated_ticks(true_ns, options_.clock_drift_ppm, options_.clock_offset_ns,
                         options_.tick_hz);
}

template <class Msg>
void SimPowerLogger::send(const Msg& msg, std::vector<uint8_t>& out) {
  uint8_t buf[proto::kMaxEncodedFrameBytes];
  const std::size_t n = proto::encode_message(msg, tx_seq_++, buf, sizeof buf);
  assert(n != 0 && "every message the logger builds fits a frame");
  out.insert(out.end(), buf, buf + n);
}

void SimPowerLogger::receive(const uint8_t* data, std::size_t n, int64_t now_ns,
                             std::vector<uint8_t>& out) {
  decoder_.feed(data, n, [&](const proto::Frame& frame) {
    switch (frame.type) {
      case proto::MsgType::kHelloRequest: {
        proto::Hello hello;
        hello.board_kind = proto::BoardKind::kPowerLogger;
        hello.firmware_version = 1U << 16;
        hello.tick_hz = options_.tick_hz;
        hello.time_scale_milli = static_cast<uint32_t>(std::lround(std::max(0.0, options_.time_scale) * 1000));
        proto::copy_text(hello.board_name, "logger-sim");
        hello.rail_count = 1;
        hello.rails[0].id = 0;
        proto::copy_text(hello.rails[0].name, std::string(board_.rail_name).c_str());
        send(hello, out);
        return;
      }
      case proto::MsgType::kSyncRequest: {
        proto::SyncRequest req;
        if (!proto::parse_message(frame, req)) return;
        send(proto::SyncReply{.sync_id = req.sync_id,
                              .host_tx_ns = req.host_tx_ns,
                              .device_rx_ticks = ticks_at(now_ns),
                              .device_tx_ticks = ticks_at(now_ns + kReplyLatencyNs)},
             out);
        return;
      }
      case proto::MsgType::kStart: {
        proto::Start start;
        if (!proto::parse_message(frame, start) || running_) return;
        running_ = true;
        runs_.push_back({.run_tag = start.run_tag});
        next_sample_ns_ = std::max(next_sample_ns_, now_ns);
        batch_.count = 0;
        return;
      }
      case proto::MsgType::kStop:
        if (running_) {
          end_run(out);
        } else if (!runs_.empty()) {
          send_run_done(out);  // the host missed it (a noisy link): say it again
        }
        return;
      case proto::MsgType::kPing: {
        proto::Ping ping;
        if (!proto::parse_message(frame, ping)) return;
        send(proto::Pong{.nonce = ping.nonce, .device_ticks = ticks_at(now_ns)}, out);
        return;
      }
      default:
        return;  // a logger has no plan: PlanOps and the rest are not for it
    }
  });
}

void SimPowerLogger::sample_until(int64_t t_ns, double power_w, std::vector<uint8_t>& out) {
  if (!running_) return;
  std::normal_distribution<double> noise(0.0, board_.shunt_noise_v);
  for (; next_sample_ns_ <= t_ns; next_sample_ns_ += sample_period_ns_) {
    const uint64_t ticks = ticks_at(next_sample_ns_);
    const auto sample = monitor_sample(board_, ina_, power_w, noise(rng_), ticks);
    if (!batch_.fits(ticks)) flush_batch(out);
    ++runs_.back().samples_sent;
    if (batch_.append(ticks, sample.bus_uv, sample.current_ua, sample.power_uw, sample.flags))
      flush_batch(out);
  }
}

void SimPowerLogger::flush_batch(std::vector<uint8_t>& out) {
  if (batch_.count == 0) return;
  send(batch_, out);
  ++runs_.back().frames_sent;
  batch_.count = 0;
}

void SimPowerLogger::send_run_done(std::vector<uint8_t>& out) {
  const LoggerRunStats& run = runs_.back();
  send(proto::RunDone{.run_tag = run.run_tag,
                      .end = proto::RunEnd::kStopped,
                      .spans_sent = 0,
                      .samples_sent = run.samples_sent,
                      .frames_sent = run.frames_sent},
       out);
}

void SimPowerLogger::end_run(std::vector<uint8_t>& out) {
  flush_batch(out);
  send_run_done(out);
  running_ = false;
}

}  // namespace ergon::devices
