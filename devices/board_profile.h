#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "devices/protocol/messages.h"
#include "probes/ina219_model.h"
#include "profiler/op.h"

namespace ergon::devices {

using protocol::BoardKind;

/// A setting of a board's clocks or power limit (Jetson nvpmodel mode, Linux cpufreq
/// frequency) and what it does to compute: ops run `speed` times as fast and draw
/// `dynamic_power` times the dynamic power (idle power and paging are unchanged).
struct PowerMode {
  std::string name;
  std::string description;
  double speed = 1;
  double dynamic_power = 1;
  /// What the board's mode control sets for it (BoardProfile::mode_control): a cpufreq
  /// ceiling in kHz, an nvpmodel mode id, a power limit in watts; empty when there is none.
  std::string setting;
};


/// What a simulated board does that its published figures do not say: the simulator's truth
/// model (devices/truth_model.h; each effect, its figures and their sources in
/// docs/accuracy.md, "Simulator truth model"). The published-profile costs the planner uses
/// (profile_op_cost(), app::BoardProfileCosts) never read it, so validating against a
/// simulated board measures the cost model against something it does not share.
struct SimTruth {
  /// Spread of one invocation's time (lognormal sigma; mean 1: the published time is the mean).
  double time_jitter = 0;
  /// First-order thermal model: with nothing running the die sits at `idle_temp_c`; drawing
  /// dynamic power P it tends to idle_temp_c + temp_rise_c_per_w x P with time constant
  /// `thermal_tau_s`.
  double idle_temp_c = 25;
  double temp_rise_c_per_w = 0;
  double thermal_tau_s = 1;
  /// From `throttle_c` up (0: never) the governor caps the clock at `throttle_speed` of the
  /// fastest power mode's, drawing `throttle_dynamic_power` of its dynamic power, until the die
  /// cools to `release_c`. Decided at each window's start.
  double throttle_c = 0;
  double release_c = 0;
  double throttle_speed = 1;
  double throttle_dynamic_power = 1;
  /// Last-level cache (0: none). An op touching `bytes` runs its memory-bound part
  /// 1 + spill_slowdown x r^2 / (1 + r^2) times as long, r = bytes / cache_bytes: the
  /// published memory rate is the cache-resident one, DRAM is slower.
  uint64_t cache_bytes = 0;
  double spill_slowdown = 0;
  /// Spread of a page-in's or page-out's latency (lognormal sigma, mean 1).
  double storage_latency_jitter = 0;
};

/// What a board is and costs: the simulator's published figures, its truth model and the
/// host's descriptor. Figures from DESIGN.md's published POET platform profiles where they
/// exist; the rest (idle power, noise, drift) are typical values for such boards.
struct BoardProfile {
  BoardKind kind = BoardKind::kUnknown;
  std::string name;         ///< CLI name: tx2, pi4, nrf52840, mkr1000, or a descriptor's
  std::string description;
  std::string cpu;               ///< "Cortex-A72"
  std::string storage;           ///< what pages go to: "microSD card", "eMMC"
  /// Where the figures came from: "built-in boards/pi4.json" or a descriptor file's path.
  std::string origin;
  uint64_t tick_hz = 0;          ///< device timestamp rate
  uint64_t ram_bytes = 0;
  uint32_t firmware_version = 0;

  double flops_per_s = 0;        ///< sustained fp32 rate of the profiled kernels
  double mem_bytes_per_s = 0;    ///< streaming rate for memory-bound ops
  double op_overhead_s = 0;      ///< fixed cost per op invocation
  double bus_v = 0;              ///< supply rail voltage
  double idle_w = 0;             ///< board power with nothing running
  double compute_w = 0;          ///< extra power while computing, per busy core
  /// Cores the agent's kernels may spread over (with_threads()); the figures above are for one.
  int cores = 1;
  double storage_w = 0;          ///< extra power while paging
  double pagein_bytes_per_s = 0;
  double pagein_latency_s = 0;
  double pageout_bytes_per_s = 0;
  double pageout_latency_s = 0;

  /// The first op run after an idle gap (or at the start of a run) takes this fraction
  /// longer (clocks ramping up, caches cold): what a profile plan's warm-up runs absorb.
  double cold_start_penalty = 0;
  double clock_drift_ppm = 0;    ///< device clock error against true time
  double power_jitter = 0;       ///< relative spread of true power between windows
  double shunt_noise_v = 0;      ///< sensor noise (1 sigma) on the shunt voltage
  probes::Ina219Config ina219;
  std::string rail_name;
  /// How an agent on the board reads its power (`ergon-agent --probe`); empty when the
  /// firmware's own driver does.
  std::string probe_spec;
  /// How its power modes are set: "cpufreq", "nvpmodel", "nvml" or "none".
  std::string mode_control = "none";
  /// The power modes the board offers, its default (the profile's figures) first.
  std::vector<PowerMode> power_modes;
  /// The mode the figures above describe (in_mode() sets it).
  std::string power_mode;
  /// How long a change of mode takes, the board idling meanwhile: what switching per phase
  /// of an iteration costs (cpufreq: the CPU's transition latency; nvpmodel: cores
  /// hot-plugged and clocks set by a process).
  double mode_switch_s = 0;
  /// What the simulated board does beyond the figures above (never the cost model's).
  SimTruth sim_truth;
};

/// The board running its kernels on `threads` cores (at most `cores`): compute scales with
/// them, and so does dynamic power; memory bandwidth, storage and idle power do not. Many
/// busy cores make dynamic power outweigh idle power, which is when a capped power mode saves
/// energy. InputError for fewer than one thread.
BoardProfile with_threads(const BoardProfile& board, int threads);

/// The board's figures in one of its power modes; nullopt when it has no mode of that name.
std::optional<BoardProfile> in_mode(const BoardProfile& board, std::string_view mode);
/// "1500MHz, 1000MHz, 600MHz": the board's mode names, for messages.
std::string power_mode_names(const BoardProfile& board);

/// Every board this process knows, in CLI order: the built-in descriptors (tx2, pi4,
/// nrf52840, mkr1000), then those of the user folders (board_search_dirs(); one of a built-in
/// board's name replaces it), then files loaded by path.
std::vector<BoardProfile> board_profiles();
/// The built-in boards alone (tx2, pi4, nrf52840, mkr1000), as the binary was built.
std::vector<BoardProfile> builtin_boards();
/// One line per user-folder descriptor that did not load, naming its file and field.
std::vector<std::string> board_file_problems();
/// Looks a board up by CLI name, or loads a descriptor file when `name` is a path (has a '/'
/// or ends in .json; the board is then known by its name for the rest of the process);
/// nullopt when unknown. InputError for a file that does not load, or for a name whose user
/// file did not.
std::optional<BoardProfile> find_board(std::string_view name);
/// A built-in kind's board; nullopt for kUnknown, kDescribed and the rest.
std::optional<BoardProfile> find_board(BoardKind kind);
/// Whether a --board value names a descriptor file rather than a board: it has a '/' or ends
/// in .json.
bool is_board_file(std::string_view name);
/// "tx2, pi4, nrf52840, mkr1000", for error messages and --help.
std::string board_names();
/// find_board(name), or InputError "unknown board 'NAME' (known: tx2, pi4, ...; or a
/// descriptor file)".
BoardProfile board_named(std::string_view name);
/// in_mode(board, mode) (the board as it is for an empty mode), or InputError "board pi4 has
/// no power mode 'MODE' (it has ...)".
BoardProfile board_in_mode(const BoardProfile& board, std::string_view mode);

/// One invocation of an op as the board's published profile costs it: what the planner's
/// profile costs are (app::BoardProfileCosts), and what the simulator's truth model
/// (truth_model.h) starts from before adding what the profile does not say.
struct ProfileCost {
  double time_s = 0;
  double power_w = 0;  ///< total board power while it runs (idle included)
};
ProfileCost profile_op_cost(const BoardProfile& board, const profiler::OpShape& shape,
                            profiler::Phase phase);
/// The compute part for any op: a roofline of FLOPs against bytes moved, plus a fixed
/// invocation overhead; memory-bound ops draw 0.7 of the dynamic power.
ProfileCost profile_compute_cost(const BoardProfile& board, uint64_t flops, uint64_t bytes);
/// What a power monitor on the board's supply sees while the board draws `power_w` at its
/// terminals: the supply droops through its source resistance, (V - R I) I = P.
struct SupplyReading {
  double bus_v = 0;
  double current_a = 0;
};
SupplyReading supply_reading(const BoardProfile& board, double power_w);
/// One conversion of the board's INA219 while the board draws `power_w`: the drooped rail as
/// the chip quantizes it, with `shunt_noise_v` of noise (the board simulator and the
/// simulated power logger both measure through this).
probes::PowerSample monitor_sample(const BoardProfile& board, const probes::Ina219Model& ina,
                                   double power_w, double shunt_noise_v, uint64_t ticks);
/// A simulated device's clock: its tick at a true time, given its crystal's error and the
/// time since its boot (device ns = true ns x (1 + drift) + offset).
uint64_t simulated_ticks(int64_t true_ns, double drift_ppm, int64_t offset_ns, uint64_t tick_hz);
/// The paging part: latency + bytes / bandwidth at idle + storage power.
ProfileCost profile_paging_cost(const BoardProfile& board, uint64_t bytes, profiler::Phase direction);

}  // namespace ergon::devices
