#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "devices/host/record_session.h"

namespace ergon::app {

struct RecordRequest {
  std::vector<std::string> ports;
  /// A power logger measuring the (one) board's supply, on its own link and clock: recorded
  /// as a run of its own, linked to the board's run, stopped when the board is done.
  std::optional<std::string> logger_port;
  /// A power monitor this host reads (a probe spec: a PPK2, a sigrok instrument, an INA219 on a
  /// USB-I2C bridge) on the (one) board's supply: its samples, stamped by the host's clock, go
  /// into a power logger's run of their own, linked to the board's run, so attribution maps
  /// them to the board's clock as it does a logger's. Not with `logger_port`.
  std::optional<std::string> host_probe;
  uint32_t baud = 115200;
  std::filesystem::path db_path = "ergon.db";
  devices::RecordOptions options;
  /// Per port (same order as `ports`, when not empty): the plan that port's board runs
  /// instead of options.plan (a pipeline gives each board its own stage).
  std::vector<devices::ProfilePlan> port_plans;
  /// Per port likewise: the schedule that port's board executes on real tensors.
  std::vector<devices::ExecuteRequest> port_executes;
};

struct BoardOutcome {
  std::string port;
  devices::SessionState state = devices::SessionState::kFailed;
  std::string error;
  std::optional<int64_t> run_id;
  devices::LinkStats stats;
  /// How long the board took to switch to RecordOptions::power_mode (nullopt: no switch).
  std::optional<double> mode_switch_s;
  /// The logger's outcome only: why its run was not linked to the board's (empty: linked, or
  /// no run to link).
  std::string not_linked_because;
};

/// What the host probe (RecordRequest::host_probe) read.
struct HostProbeOutcome {
  int64_t run_id = 0;
  uint64_t samples = 0;
  uint64_t read_errors = 0;
  std::string error;  ///< why it stopped early; empty when it read until the board was done
};

/// One board's state at a database commit, for a live status display.
struct BoardStatus {
  std::string name;  ///< the board's name once it said Hello, else its port
  devices::SessionState state = devices::SessionState::kHandshake;
  devices::LinkStats stats;
  uint64_t committed_samples = 0;  ///< samples safely in the database
};

/// Called after each commit (four times a second) with every board's status and the host's
/// steady-clock time.
using RecordProgress = std::function<void(std::span<const BoardStatus> boards, int64_t now_ns)>;

/// Records every port into the database. Commits four times a second, so a killed process
/// loses at most the last quarter second. Each increment of `interrupts` asks the boards to
/// stop. InputError for a logger with other than one board.
std::vector<BoardOutcome> record_boards(const RecordRequest& request, const RecordProgress& progress,
                                        const std::atomic<int>& interrupts,
                                        HostProbeOutcome* host_probe = nullptr);

}  // namespace ergon::app
