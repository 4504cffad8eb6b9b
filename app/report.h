#pragma once

// An energy statement for a recorded run or a stored plan, fit to paste into a paper: energy
// (J and kWh), time, average and peak power, the idle share, the facility's energy with its
// PUE, and emissions at a grid intensity, with what-ifs for other hours or months from a PUE
// profile.

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace ergon::app {

struct ReportRequest {
  std::string db = "ergon.db";
  std::optional<int64_t> run;   ///< a recorded run (its power samples, or its logger's)
  std::optional<int64_t> plan;  ///< a stored plan (the simulator's energy per iteration)
  uint64_t iterations = 1;      ///< a plan's energy is per training iteration: this many
  double pue = 1.0;             ///< the facility's power usage effectiveness (>= 1)
  std::string pue_profile;      ///< CSV "period,pue[,gco2_per_kwh]" for what-ifs
  std::optional<double> grid_gco2_per_kwh;
};

struct WhatIf {
  std::string period;  ///< "03:00", "2026-07", as the profile names it
  double pue = 1;
  std::optional<double> gco2_per_kwh;
  double facility_kwh = 0;
  std::optional<double> gco2;
};

struct EnergyStatement {
  std::string subject;  ///< what was measured, for people
  bool measured = false;  ///< a run's samples (true) or the planner's prediction (false)
  double energy_j = 0;
  double time_s = 0;
  double average_power_w = 0;
  std::optional<double> peak_power_w;  ///< runs only
  std::optional<double> idle_power_w;  ///< from the run's attribution, when there is one
  std::optional<double> idle_share;    ///< idle power x time / energy
  double energy_kwh = 0;
  double pue = 1;
  double facility_kwh = 0;
  std::optional<double> gco2_per_kwh;
  std::optional<double> gco2;
  std::vector<WhatIf> what_ifs;
  /// One line on what the PUE profile held besides its rows (comments, blank lines, a
  /// header); empty without a profile.
  std::string profile_note;
  uint64_t samples = 0;
};

/// Throws InputError for a missing run or plan, a PUE below 1, a malformed profile line
/// (naming it), or neither/both of run and plan.
EnergyStatement energy_statement(const ReportRequest& args);

}  // namespace ergon::app
