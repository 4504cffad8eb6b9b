#include "cli/power_mode_cmd.h"

#include <fmt/format.h>

#include <algorithm>
#include <ostream>

#include "common/error.h"
#include "devices/power_control.h"

namespace ergon::cli {

int run_power_mode(const PowerModeArgs& args, std::ostream& out) {
  auto found = devices::find_power_controls(args.sysfs);
  if (args.set.empty()) {
    for (const auto& c : found.controls) {
      const auto s = c->state();
      out << fmt::format("{:<9} now {:<14} modes: {}\n", c->kind(), s.current, fmt::join(s.available, ", "));
    }
    for (const auto& why : found.absent) out << "absent   " << why << "\n";
    if (found.controls.empty()) out << "no power-mode control on this machine\n";
    return 0;
  }
  devices::PowerModeControl* chosen = nullptr;
  for (const auto& c : found.controls) {
    if (!args.kind.empty() && c->kind() != args.kind) continue;
    const auto s = c->state();
    const bool has = std::find(s.available.begin(), s.available.end(), args.set) != s.available.end() ||
                     (c->kind() == "nvml" && args.set.ends_with("W"));
    if (has) {
      chosen = c.get();
      break;
    }
  }
  if (chosen == nullptr)
    throw InputError("no power-mode control here has a mode '" + args.set + "' (ergon power-mode lists them)");
  for (const auto& step : chosen->set(args.set, args.dry_run)) out << (args.dry_run ? "would run: " : "") << step << "\n";
  if (!args.dry_run) out << chosen->kind() << " now " << chosen->state().current << "\n";
  return 0;
}

}  // namespace ergon::cli
