#pragma once

// Reading and setting a board's power mode, behind one interface: Linux cpufreq (a Raspberry
// Pi's CPU ceiling), Jetson nvpmodel, and NVIDIA GPU power limits through NVML. Setting needs
// privileges: a dry run says what would be done, and a refusal says how to get them. Mode
// names match what the boards report in their Hello ("1500MHz", "MAXN", "250W").

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace ergon::probes {
class Nvml;
}

namespace ergon::devices {

struct ModeState {
  std::string current;
  std::vector<std::string> available;
};

class PowerModeControl {
 public:
  virtual ~PowerModeControl() = default;
  [[nodiscard]] virtual std::string kind() const = 0;  ///< "cpufreq", "nvpmodel", "nvml"
  /// Throws DeviceError when the mode cannot be read.
  virtual ModeState state() = 0;
  /// What setting `mode` takes (one line per write or command), done unless `dry_run`.
  /// Throws InputError for a mode the board does not have, DeviceError (saying how to get the
  /// privilege) when a write or command is refused.
  virtual std::vector<std::string> set(const std::string& mode, bool dry_run) = 0;
};

/// Runs a command (argv[0] found on PATH); returns its exit status and standard output.
class CommandRunner {
 public:
  virtual ~CommandRunner() = default;
  virtual std::pair<int, std::string> run(const std::vector<std::string>& argv) = 0;
};
std::unique_ptr<CommandRunner> system_command_runner();

/// cpufreq under `sysfs_root` (/sys): the ceiling (scaling_max_freq) of every CPU.
std::unique_ptr<PowerModeControl> cpufreq_control(const std::filesystem::path& sysfs_root = "/sys");
/// A Jetson's nvpmodel: modes from its configuration file, the current one from `nvpmodel -q`.
std::unique_ptr<PowerModeControl> nvpmodel_control(std::shared_ptr<CommandRunner> runner,
                                                   const std::filesystem::path& conf = "/etc/nvpmodel.conf");
/// A GPU's power limit through NVML: modes are limits in watts within the board's range.
std::unique_ptr<PowerModeControl> nvml_control(std::shared_ptr<probes::Nvml> nvml, unsigned gpu = 0);

/// The line a board logs when it switches to `mode` for a run's backward phase before plan
/// entry `entry` (PhaseModes); the host looks for `phase_switch_line(entry, mode)`, which
/// every such line starts with, to know the run was per phase.
std::string phase_switch_line(std::size_t entry, const std::string& mode);
std::string phase_switch_line(std::size_t entry, const std::string& mode, uint64_t switch_ns);

/// The controls this machine has, and why each other kind is absent.
struct FoundControls {
  std::vector<std::unique_ptr<PowerModeControl>> controls;
  std::vector<std::string> absent;
};
FoundControls find_power_controls(const std::filesystem::path& sysfs_root = "/sys");

}  // namespace ergon::devices
