#include "cli/sweep_cmd.h"

#include <fmt/format.h>

#include <iostream>
#include <nlohmann/json.hpp>


namespace ergon::cli {
int run_sweep(const app::SweepRequest& args, bool json, std::ostream& out) {
  const auto modes = app::sweep_modes(args, [&](const std::string& mode, std::size_t, std::size_t) {
    std::cerr << fmt::format("{} in mode {}: recording the profile plan\n", args.board, mode);
  });
  if (json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& m : modes) {
      nlohmann::json kinds = nlohmann::json::object();
      for (const auto& [k, v] : m.by_kind) kinds[k] = {{"time_s", v.first}, {"energy_j", v.second}};
      j.push_back({{"mode", m.mode}, {"run_id", m.run_id}, {"time_s", m.time_s}, {"energy_j", m.energy_j},
                   {"on_front", m.on_front}, {"by_kind", kinds},
                   {"switch_s", m.switch_s ? nlohmann::json(*m.switch_s) : nlohmann::json(nullptr)}});
    }
    out << j.dump(2) << "\n";
    return 0;
  }
  const app::ModeCost& ref = modes.front();
  out << fmt::format("{}: one pass of the profile plan per mode, against {} (* on the energy/time front)\n",
                     args.board, ref.mode);
  out << fmt::format("  {:<16} {:>6} {:>12} {:>8} {:>12} {:>8} {:>12}\n", "mode", "run", "time (s)", "time",
                     "energy (J)", "energy", "switch (ms)");
  for (const auto& m : modes)
    out << fmt::format("  {:<16} {:>6} {:>12.5g} {:>7.3f}x {:>12.5g} {:>7.3f}x {:>12} {}\n", m.mode, m.run_id,
                       m.time_s, m.time_s / ref.time_s, m.energy_j, m.energy_j / ref.energy_j,
                       m.switch_s ? fmt::format("{:.3f}", *m.switch_s * 1e3) : "-", m.on_front ? "*" : "");
  out << "\nby op kind (time x, energy x against " << ref.mode << "):\n";
  for (std::size_t k = 0; k < ref.by_kind.size(); ++k) {
    out << fmt::format("  {:<22}", ref.by_kind[k].first);
    for (const auto& m : modes) {
      const auto it = std::find_if(m.by_kind.begin(), m.by_kind.end(),
                                   [&](const auto& e) { return e.first == ref.by_kind[k].first; });
      if (it == m.by_kind.end() || ref.by_kind[k].second.first <= 0) continue;
      out << fmt::format("  {}: {:.2f}x {:.2f}x", m.mode, it->second.first / ref.by_kind[k].second.first,
                         it->second.second / ref.by_kind[k].second.second);
    }
    out << "\n";
  }
  out << "\nplan with a mode's costs: ergon plan --db " << args.db << " --board " << args.board
      << " --power-mode MODE (or auto)\n";
  return 0;
}

}  // namespace ergon::cli
