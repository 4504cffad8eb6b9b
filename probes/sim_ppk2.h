#pragma once
// A simulated Nordic PPK2 on a pseudo-terminal, speaking its serial protocol (probes/ppk2.h):
// it answers GetMetadata with a real device's calibration, takes the mode, regulator and power
// commands, and streams 100 kS/s of samples encoding a current the caller gives, with digital
// inputs, until AverageStop. For tests and for trying `ergon probe read --probe ppk2:PTY`.

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "probes/ppk2.h"

namespace ergon::probes {

struct SimPpk2Options {
  /// The current the board draws at `t_s` seconds of streaming (sample index / 100 kS/s).
  std::function<double(double t_s)> current_a = [](double) { return 0.010; };
  /// The digital inputs at `t_s`.
  std::function<uint8_t(double t_s)> logic = [](double) { return uint8_t{0}; };
  /// Leave out one sample in every this many (0: none), as a lossy USB link would.
  uint32_t drop_every = 0;
};

class SimPpk2 {
 public:
  /// The calibration of a real PPK2's metadata (tests/data/ppk2/README.md).
  static Ppk2Calibration real_calibration();

  explicit SimPpk2(SimPpk2Options options = {});
  ~SimPpk2();
  SimPpk2(const SimPpk2&) = delete;
  SimPpk2& operator=(const SimPpk2&) = delete;

  /// The pty a client opens, as it would /dev/ttyACM0.
  [[nodiscard]] const std::string& port() const { return port_; }
  void start();  ///< serve on a thread of its own
  void stop();   ///< stop serving and join; safe to call twice

  [[nodiscard]] uint64_t samples_sent() const { return sent_; }
  [[nodiscard]] int mode() const { return mode_; }  ///< 1 ampere, 2 source (0: never set)
  [[nodiscard]] int vdd_mv() const { return vdd_mv_; }
  [[nodiscard]] bool board_powered() const { return powered_; }

 private:
  void run();
  void command(const uint8_t* bytes, std::size_t n, std::size_t& used);

  SimPpk2Options options_;
  Ppk2Calibration cal_;
  int master_fd_ = -1;
  int slave_fd_ = -1;
  std::string port_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> streaming_{false};
  std::atomic<uint64_t> sent_{0};
  std::atomic<int> mode_{0};
  std::atomic<int> vdd_mv_{0};
  std::atomic<bool> powered_{false};
};

}  // namespace ergon::probes
