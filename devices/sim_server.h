#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <thread>

#include "devices/board_profile.h"
#include "devices/sim_board.h"

namespace ergon::devices {

struct SimServerOptions {
  /// Simulated seconds per wall second; 0 streams as fast as the reader takes the bytes.
  double speed = 1.0;
  double corrupt_probability = 0.0;
  /// > 0: the board drops off the link this many wall seconds after its first Start.
  double disconnect_after_s = 0.0;
  uint64_t seed = 1;
  /// When set, the true energy of every span is written here as CSV after each run.
  std::filesystem::path truth_csv;
  /// Measure the board with a power logger on its own pty (its own link and clock) instead
  /// of the board's own monitor. Pty only.
  bool logger = false;
  /// The board's power mode (BoardProfile::power_modes); empty: its default.
  std::string power_mode;
  /// Cores its kernels run on (with_threads()).
  int threads = 1;
  /// Its own power monitor: the INA219 model, or tegrastats' interval means.
  SimPowerSensor sensor = SimPowerSensor::kIna219;
  /// The link kind the board's transfers take the time and power of (link_profiles());
  /// empty: default_link() for the board.
  std::string link;
};

/// A simulated board behind a real byte link: a pseudo-terminal (the host opens its slave
/// path like any serial port) or a TCP port. Runs its own thread; the host side never knows
/// it is not talking to hardware.
class SimServer {
 public:
  /// Opens a pty. Throws DeviceError when the system has none to give.
  static std::unique_ptr<SimServer> open_pty(const BoardProfile& board,
                                             const SimServerOptions& options);
  /// Listens on 127.0.0.1:port (0 picks a free port). Throws DeviceError when it cannot.
  static std::unique_ptr<SimServer> listen_tcp(const BoardProfile& board,
                                               const SimServerOptions& options, uint16_t port);

  ~SimServer();
  SimServer(const SimServer&) = delete;
  SimServer& operator=(const SimServer&) = delete;

  /// What a host passes to `ergon record --port`: "/dev/pts/N" or "tcp:127.0.0.1:PORT".
  [[nodiscard]] const std::string& link_name() const { return link_name_; }
  /// The power logger's pty ("/dev/pts/N"), when the options asked for one; else empty.
  [[nodiscard]] const std::string& logger_link_name() const { return logger_link_name_; }

  void start();  ///< serve on a background thread
  void stop();   ///< stop serving and join; safe to call twice
  /// Serves on the calling thread until `stop` turns true.
  void run(const std::atomic<bool>& stop);

  /// Ground truth so far. Only call while the server is stopped (or from its own thread).
  [[nodiscard]] const SimBoard& board() const { return board_; }

 private:
  SimServer(const BoardProfile& board, const SimServerOptions& options);
  void serve_fd(int fd, const std::atomic<bool>& stop, bool is_pty);

  SimBoard board_;
  SimServerOptions options_;
  std::string link_name_;
  std::string logger_link_name_;
  int master_fd_ = -1;  ///< pty master
  int slave_fd_ = -1;   ///< kept open so the pty survives the host closing and reopening it
  int logger_master_fd_ = -1;
  int logger_slave_fd_ = -1;
  int listen_fd_ = -1;
  std::atomic<bool> stop_flag_{false};
  std::thread thread_;
  int64_t wall0_ns_ = 0;
  int64_t skew_ns_ = 0;
  int64_t first_start_wall_ns_ = -1;
  bool dropped_ = false;
};

/// Writes truth spans as CSV (header + one row per span): what really happened, then the
/// published profile's time and energy and each truth-model effect's share of time.
void write_truth_csv(const std::filesystem::path& path, const SimBoard& board);

}  // namespace ergon::devices
