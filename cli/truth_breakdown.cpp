#include "cli/truth_breakdown.h"

#include <fmt/format.h>

#include <algorithm>
#include <ostream>
#include <string>

namespace ergon::cli {

void print_error_breakdown(const devices::BoardProfile& board, const devices::TruthLedger& truth,
                           double predicted_time_s, double measured_time_s,
                           std::optional<double> predicted_energy_j, std::optional<double> measured_energy_j,
                           std::ostream& out) {
  out << fmt::format("what the error is made of (the simulated {}'s truth model against its published profile):\n",
                     board.name);
  auto width = [](const devices::NamedShare& e) { return std::max<std::size_t>(9, e.name.size() + 2); };
  out << fmt::format("  {:<8}{:>9}{:>9}", "", "error", "costs");
  for (const auto& e : devices::named(devices::TruthEffects{})) out << fmt::format("{:>{}}", e.name, width(e));
  out << fmt::format("{:>13}\n", "measurement");
  auto row = [&](const char* what, const devices::ErrorBreakdown& b) {
    out << fmt::format("  {:<8}{:>+7.2f} %{:>+7.2f} %", what, 100 * b.total, 100 * b.costs);
    for (const auto& e : devices::named(b.effects)) out << fmt::format("{:>+{}.2f} %", 100 * e.value, width(e) - 2);
    out << fmt::format("{:>+11.2f} %\n", 100 * b.measurement);
  };
  row("time", devices::break_down_error(truth, devices::Quantity::kTime, predicted_time_s, measured_time_s));
  if (predicted_energy_j && measured_energy_j)
    row("energy", devices::break_down_error(truth, devices::Quantity::kEnergy, *predicted_energy_j, *measured_energy_j));
  out << "  costs: the costs planned on against the profile's figures; measurement: attributed against true";
  if (board.sim_truth.throttle_c > 0)
    out << fmt::format("; the die peaked at {:.0f} C (throttles at {:.0f} C, {:.2g} s throttled)",
                       truth.peak_temperature_c, board.sim_truth.throttle_c, truth.throttled_s);
  out << "\n";
}

}  // namespace ergon::cli
