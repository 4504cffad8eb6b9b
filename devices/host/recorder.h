#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "common/clock.h"
#include "devices/host/record_session.h"

namespace ergon::devices {

/// Records several boards at once over real links (Boost.Asio serial ports and TCP, one
/// io_context, one thread). Each board gets a RecordSession; this class only moves bytes and
/// time. A link that cannot be opened or breaks ends that board's session, not the others.
/// A power logger (a device whose Hello says power-logger) records until every other board
/// has ended, and is then stopped.
class Recorder {
 public:
  explicit Recorder(const Clock& clock);
  ~Recorder();
  Recorder(const Recorder&) = delete;
  Recorder& operator=(const Recorder&) = delete;

  /// port: a serial device ("/dev/ttyACM0", a pty path) or "tcp:HOST:PORT".
  void add(const std::string& port, uint32_t baud, const RecordOptions& options,
           RecordSink& sink);

  using Progress = std::function<void(std::span<const RecordSession* const>)>;
  /// Runs until every session has ended. `on_progress` is called every progress_interval_s
  /// and once at the end; each increment of `interrupts` (Ctrl-C) asks every board to stop,
  /// a second one stops waiting for them.
  void run(const Progress& on_progress, const std::atomic<int>& interrupts,
           double progress_interval_s = 0.25);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace ergon::devices
