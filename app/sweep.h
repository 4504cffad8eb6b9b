#pragma once

// The same profile plan at each power mode of a board, recorded and attributed, and the
// energy-against-time curve it traces, per op kind and for the whole plan.

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace ergon::app {

struct SweepRequest {
  std::string board = "pi4";
  std::string modes = "all";  ///< "all" or a comma-separated list of the board's modes
  bool sim = false;           ///< an in-process simulated board, set to each mode in turn
  std::string port;           ///< a real board: switched to each mode through the protocol
  int threads = 1;            ///< --sim: cores the kernels run on
  std::string db = "ergon.db";
};

struct ModeCost {
  std::string mode;
  int64_t run_id = 0;
  /// Per repetition, summed over the plan's ops (each op once): what one pass costs.
  double time_s = 0;
  double energy_j = 0;
  /// The same by op kind ("conv2d forward", "paging page-out", ...).
  std::vector<std::pair<std::string, std::pair<double, double>>> by_kind;  ///< (time_s, energy_j)
  bool on_front = false;  ///< no other mode is both faster and cheaper
  /// How long the board took to switch into the mode (nullopt: it was already in it).
  std::optional<double> switch_s;
};

/// Records and attributes the board's default profile plan in each mode, switching the board
/// before each run (protocol v4 SetPowerMode); InputError for an unknown board or mode,
/// DeviceError when the board cannot switch or a run fails.
/// Called as each mode's run starts: the mode, its number (from 1), how many.
using SweepProgress = std::function<void(const std::string& mode, std::size_t n, std::size_t total)>;

std::vector<ModeCost> sweep_modes(const SweepRequest& args, const SweepProgress& progress = {});

}  // namespace ergon::app
