#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "devices/host/record_session.h"

namespace ergon::cli {

struct RecordRequest {
  std::vector<std::string> ports;
  /// A power logger measuring the (one) board's supply, on its own link and clock: recorded
  /// as a run of its own, linked to the board's run, stopped when the board is done.
  std::optional<std::string> logger_port;
  uint32_t baud = 115200;
  std::filesystem::path db_path = "ergon.db";
  devices::RecordOptions options;
};

struct BoardOutcome {
  std::string port;
  devices::SessionState state = devices::SessionState::kFailed;
  std::string error;
  std::optional<int64_t> run_id;
  devices::LinkStats stats;
  /// How long the board took to switch to RecordOptions::power_mode (nullopt: no switch).
  std::optional<double> mode_switch_s;
};

/// Records every port into the database with a live status line on `out` (carriage-return
/// updates on a terminal, a line a second otherwise). Commits four times a second, so a
/// killed process loses at most the last quarter second. Each increment of `interrupts`
/// asks the boards to stop.
std::vector<BoardOutcome> record_boards(const RecordRequest& request, std::ostream& out,
                                        const std::atomic<int>& interrupts);

/// Counts Ctrl-C / SIGTERM into the returned counter for the process's lifetime.
std::atomic<int>& install_interrupt_counter();

}  // namespace ergon::cli
