#include "probes/sim_ppk2.h"

#include <fcntl.h>
#include <poll.h>
#include <termios.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cerrno>
#include <cstring>
#include <vector>

#include "common/error.h"

namespace ergon::probes {

Ppk2Calibration SimPpk2::real_calibration() {
  // A real PPK2's GetMetadata answer, as quoted in hdoordt/ppk2-rs (ppk2/src/types.rs).
  Ppk2Calibration c;
  c.calibrated = false;
  c.r = {1003.3506, 101.5865, 10.3027, 0.9636, 0.0564};
  c.gs = {0.0000, 112.7890, 18.0115, 2.4217, 0.0729};
  c.gi = {1.0000, 0.9695, 0.9609, 0.9519, 0.9582};
  c.o = {112.9420, 75.4627, 64.6020, 50.4983, 87.2177};
  c.vdd_mv = 3000;
  c.hw = 9173;
  c.mode = 2;
  c.s = {0.000000048, 0.000000596, 0.000005281, 0.000062577, 0.002940743};
  c.i = {-0.000000104, -0.000001443, 0.000036439, -0.000374119, -0.009388455};
  c.ug = {1, 1, 1, 1, 1};
  return c;
}

SimPpk2::SimPpk2(SimPpk2Options options) : options_(std::move(options)), cal_(real_calibration()) {
  master_fd_ = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
  if (master_fd_ < 0 || ::grantpt(master_fd_) != 0 || ::unlockpt(master_fd_) != 0)
    throw DeviceError(std::string("cannot create a pty for the simulated PPK2: ") + std::strerror(errno));
  port_ = ::ptsname(master_fd_);
  // Non-blocking: a client that stops reading must not stall the commands (AverageStop) or
  // stop(); what does not fit is dropped, as a real PPK2 drops what USB cannot take.
  ::fcntl(master_fd_, F_SETFL, ::fcntl(master_fd_, F_GETFL) | O_NONBLOCK);
  // Raw, and held open on this side so the pty outlives a client's close.
  slave_fd_ = ::open(port_.c_str(), O_RDWR | O_NOCTTY | O_CLOEXEC);
  termios t{};
  if (slave_fd_ >= 0 && ::tcgetattr(slave_fd_, &t) == 0) {
    ::cfmakeraw(&t);
    ::tcsetattr(slave_fd_, TCSANOW, &t);
  }
  vdd_mv_ = cal_.vdd_mv;
}

SimPpk2::~SimPpk2() {
  stop();
  if (slave_fd_ >= 0) ::close(slave_fd_);
  if (master_fd_ >= 0) ::close(master_fd_);
}

void SimPpk2::start() {
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this] { run(); });
}

void SimPpk2::stop() {
  stop_ = true;
  if (thread_.joinable()) thread_.join();
}

void SimPpk2::command(const uint8_t* b, std::size_t n, std::size_t& used) {
  const auto args = [&](std::size_t k) { return n >= 1 + k; };
  switch (b[0]) {
    case kPpk2GetMetadata: {
      const std::string text = ppk2_metadata_text(cal_);
      (void)!::write(master_fd_, text.data(), text.size());
      used = 1;
      return;
    }
    case kPpk2AverageStart: streaming_ = true, used = 1; return;
    case kPpk2AverageStop: streaming_ = false, used = 1; return;
    case kPpk2DeviceRunningSet:
      if (!args(1)) return;
      powered_ = b[1] != 0, used = 2;
      return;
    case kPpk2SetPowerMode:
      if (!args(1)) return;
      mode_ = b[1], used = 2;
      return;
    case kPpk2RegulatorSet:
      if (!args(2)) return;
      vdd_mv_ = b[1] << 8 | b[2], used = 3;
      return;
    default: used = 1; return;  // commands it does not model take no arguments here
  }
}

void SimPpk2::run() {
  std::vector<uint8_t> in;
  uint64_t index = 0;  // samples generated (sent or dropped)
  auto began = std::chrono::steady_clock::now();
  bool was_streaming = false;
  std::vector<uint8_t> out;
  while (!stop_) {
    pollfd p{master_fd_, POLLIN, 0};
    if (::poll(&p, 1, 1) > 0 && (p.revents & POLLIN)) {
      uint8_t buffer[256];
      const ssize_t n = ::read(master_fd_, buffer, sizeof buffer);
      if (n > 0) in.insert(in.end(), buffer, buffer + n);
    }
    std::size_t used = 0;
    while (!in.empty()) {
      command(in.data(), in.size(), used);
      if (used == 0) break;  // an opcode waiting for its arguments
      in.erase(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(used));
      used = 0;
    }
    if (!streaming_) {
      was_streaming = false;
      continue;
    }
    if (!was_streaming) {
      was_streaming = true;
      began = std::chrono::steady_clock::now();
      index = 0;
    }
    // Paced at 100 kS/s of wall time.
    const auto due = static_cast<uint64_t>(
        std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count() * kPpk2SampleRateHz);
    out.clear();
    for (; index < due && out.size() < 64 * 1024; ++index) {
      if (options_.drop_every && index % options_.drop_every == options_.drop_every - 1) continue;
      const double t = static_cast<double>(index) / kPpk2SampleRateHz;
      const uint32_t w = encode_ppk2_sample(options_.current_a(t), cal_, vdd_mv_, static_cast<uint8_t>(index & 0x3F),
                                            options_.logic(t));
      for (int k = 0; k < 4; ++k) out.push_back(static_cast<uint8_t>(w >> (8 * k)));
      ++sent_;
    }
    std::size_t done = 0;
    for (int tries = 0; done < out.size() && !stop_ && tries < 20; ++tries) {
      const ssize_t n = ::write(master_fd_, out.data() + done, out.size() - done);
      if (n > 0) {
        done += static_cast<std::size_t>(n);
        continue;
      }
      pollfd w{master_fd_, POLLOUT, 0};
      ::poll(&w, 1, 5);  // the client reads a little later, or the rest is dropped
    }
    // Whole samples only: a partial word would misframe every later one.
    if (done % 4 != 0 && done < out.size()) {
      const std::size_t rest = 4 - done % 4;
      while (::write(master_fd_, out.data() + done, rest) < 0 && errno == EAGAIN && !stop_) {
        pollfd w{master_fd_, POLLOUT, 0};
        ::poll(&w, 1, 5);
      }
    }
  }
}

}  // namespace ergon::probes
