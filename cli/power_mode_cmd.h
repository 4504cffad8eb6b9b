#pragma once

#include <filesystem>
#include <iosfwd>
#include <string>

namespace ergon::cli {

struct PowerModeArgs {
  std::string set;    ///< a mode to set; empty: list
  std::string kind;   ///< cpufreq, nvpmodel or nvml; empty: the only one that has the mode
  bool dry_run = false;
  std::filesystem::path sysfs = "/sys";
};

/// `ergon power-mode`: this machine's power-mode controls with their current and available
/// modes (and why others are absent), or sets one (a dry run prints what it would do).
int run_power_mode(const PowerModeArgs& args, std::ostream& out);

}  // namespace ergon::cli
