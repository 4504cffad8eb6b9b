#include "cli/report_cmd.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <ostream>

namespace ergon::cli {

int run_report(const app::ReportRequest& args, bool json, std::ostream& out) {
  const app::EnergyStatement s = app::energy_statement(args);
  if (json) {
    nlohmann::json j{{"subject", s.subject},
                     {"measured", s.measured},
                     {"energy_j", s.energy_j},
                     {"energy_kwh", s.energy_kwh},
                     {"time_s", s.time_s},
                     {"average_power_w", s.average_power_w},
                     {"pue", s.pue},
                     {"facility_kwh", s.facility_kwh}};
    j["peak_power_w"] = s.peak_power_w ? nlohmann::json(*s.peak_power_w) : nullptr;
    j["idle_power_w"] = s.idle_power_w ? nlohmann::json(*s.idle_power_w) : nullptr;
    j["idle_share"] = s.idle_share ? nlohmann::json(*s.idle_share) : nullptr;
    j["grid_gco2_per_kwh"] = s.gco2_per_kwh ? nlohmann::json(*s.gco2_per_kwh) : nullptr;
    j["gco2"] = s.gco2 ? nlohmann::json(*s.gco2) : nullptr;
    j["what_if"] = nlohmann::json::array();
    if (!s.profile_note.empty()) j["profile_note"] = s.profile_note;
    for (const auto& w : s.what_ifs)
      j["what_if"].push_back({{"period", w.period},
                              {"pue", w.pue},
                              {"grid_gco2_per_kwh", w.gco2_per_kwh ? nlohmann::json(*w.gco2_per_kwh) : nullptr},
                              {"facility_kwh", w.facility_kwh},
                              {"gco2", w.gco2 ? nlohmann::json(*w.gco2) : nullptr}});
    out << j.dump(2) << "\n";
    return 0;
  }
  out << "## Energy statement\n\n" << s.subject << "\n\n| quantity | value |\n|---|---|\n";
  out << fmt::format("| energy{} | {:.6g} J ({:.4g} kWh) |\n", s.measured ? " (measured at the supply)" : " (predicted)",
                     s.energy_j, s.energy_kwh);
  out << fmt::format("| time | {:.6g} s |\n", s.time_s);
  out << fmt::format("| average power | {:.4g} W |\n", s.average_power_w);
  if (s.peak_power_w) out << fmt::format("| peak power | {:.4g} W |\n", *s.peak_power_w);
  if (s.idle_share)
    out << fmt::format("| idle share | {:.1f} % (idle power {:.4g} W) |\n", 100 * *s.idle_share, *s.idle_power_w);
  out << fmt::format("| facility energy (PUE {:.3g}) | {:.4g} kWh |\n", s.pue, s.facility_kwh);
  if (s.gco2) out << fmt::format("| emissions ({:.4g} gCO2e/kWh) | {:.4g} gCO2e |\n", *s.gco2_per_kwh, *s.gco2);
  if (!s.what_ifs.empty()) {
    out << "\nWhat if it ran in another period:\n\n| period | PUE | gCO2e/kWh | facility kWh | gCO2e |\n|---|---|---|---|---|\n";
    for (const auto& w : s.what_ifs)
      out << fmt::format("| {} | {:.3g} | {} | {:.4g} | {} |\n", w.period, w.pue,
                         w.gco2_per_kwh ? fmt::format("{:.4g}", *w.gco2_per_kwh) : "-", w.facility_kwh,
                         w.gco2 ? fmt::format("{:.4g}", *w.gco2) : "-");
    out << "\n(" << s.profile_note << ")\n";
  }
  out << "\nMethod: "
      << (s.measured ? fmt::format("{} power samples of the board's input rail integrated by the trapezoid rule",
                                   s.samples)
                     : std::string("the planner's simulator replaying the stored schedule on the board's costs"))
      << "; facility energy = energy x PUE; emissions = facility energy x grid intensity.\n";
  return 0;
}

}  // namespace ergon::cli
