#include "app/report.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "common/error.h"
#include "costdb/costs.h"
#include "costdb/database.h"
#include "costdb/plans.h"

namespace ergon::app {
namespace {

constexpr double kJoulesPerKwh = 3.6e6;

std::vector<WhatIf> read_profile(const std::string& path, std::string& note) {
  std::ifstream in(path);
  if (!in) throw InputError("cannot read the PUE profile " + path);
  std::vector<WhatIf> out;
  std::string line;
  int comments = 0, blanks = 0, headers = 0;
  for (int n = 1; std::getline(in, line); ++n) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) {
      ++blanks;
      continue;
    }
    if (line[0] == '#') {
      ++comments;
      continue;
    }
    std::vector<std::string> cells;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');) cells.push_back(cell);
    const std::string where = path + " line " + std::to_string(n);
    if (cells.size() < 2 || cells.size() > 3) throw InputError(where + ": expected period,pue[,gco2_per_kwh]");
    if (cells[0] == "period") {  // a header
      ++headers;
      continue;
    }
    WhatIf w;
    w.period = cells[0];
    try {
      std::size_t used = 0;
      w.pue = std::stod(cells[1], &used);
      if (used != cells[1].size()) throw std::invalid_argument(cells[1]);
      if (cells.size() == 3) {
        w.gco2_per_kwh = std::stod(cells[2], &used);
        if (used != cells[2].size()) throw std::invalid_argument(cells[2]);
      }
    } catch (const std::exception&) {
      throw InputError(where + ": '" + line + "' is not period,pue[,gco2_per_kwh] with numbers");
    }
    if (w.pue < 1) throw InputError(where + ": a PUE is at least 1");
    if (w.gco2_per_kwh && *w.gco2_per_kwh < 0) throw InputError(where + ": a grid intensity is not negative");
    out.push_back(w);
  }
  if (out.empty()) throw InputError("the PUE profile " + path + " has no rows");
  note = fmt::format("{}: {} rows read; skipped {} comment lines, {} blank lines, {} header lines",
                     path, out.size(), comments, blanks, headers);
  return out;
}

}  // namespace

EnergyStatement energy_statement(const ReportRequest& args) {
  if (args.run.has_value() == args.plan.has_value()) throw InputError("report on one --run or one --plan");
  if (args.pue < 1) throw InputError("--pue is at least 1 (the IT equipment's own energy)");
  if (args.grid_gco2_per_kwh && *args.grid_gco2_per_kwh < 0) throw InputError("--grid-gco2-per-kwh is not negative");
  if (args.iterations == 0) throw InputError("--iterations is at least 1");
  auto db = costdb::Database::open_read_only(args.db);
  EnergyStatement s;
  if (args.run) {
    const auto run = costdb::find_run(db, *args.run);
    if (!run) throw InputError("no run " + std::to_string(*args.run) + " in " + args.db);
    // A board measured by a power logger has its samples in the logger's run.
    const int64_t source = run->power_run_id.value_or(run->id);
    const costdb::RunData data = costdb::load_run_data(db, source);
    if (data.tick_hz == 0) throw InputError("run " + std::to_string(source) + " has no tick rate");
    std::vector<std::pair<double, double>> trace;  // (s, W) of the board's input rail
    for (const auto& p : data.samples)
      if (p.rail == 0)
        trace.emplace_back(static_cast<double>(p.t_ticks) / static_cast<double>(data.tick_hz),
                           static_cast<double>(p.power_uw) * 1e-6);
    std::sort(trace.begin(), trace.end());
    if (trace.size() < 2)
      throw InputError("run " + std::to_string(*args.run) + " has " + std::to_string(trace.size()) +
                       " power samples: nothing to integrate");
    double peak = 0;
    for (std::size_t i = 1; i < trace.size(); ++i)
      s.energy_j += 0.5 * (trace[i].second + trace[i - 1].second) * (trace[i].first - trace[i - 1].first);
    for (const auto& [t, w] : trace) peak = std::max(peak, w);
    s.time_s = trace.back().first - trace.front().first;
    s.peak_power_w = peak;
    s.samples = trace.size();
    s.measured = true;
    if (const auto a = costdb::find_attribution(db, *args.run); a && a->idle_samples > 0) {
      s.idle_power_w = a->idle_power_w;
      s.idle_share = s.energy_j > 0 ? std::min(1.0, a->idle_power_w * s.time_s / s.energy_j) : 0.0;
    }
    s.subject = fmt::format("run {}: {} \"{}\"{}, {}", run->id, run->board_kind, run->board_name,
                            run->power_mode.empty() ? "" : " in mode " + run->power_mode,
                            costdb::to_string(run->status));
  } else {
    const auto plan = costdb::find_plan_by_id(db, *args.plan);
    if (!plan) throw InputError("no plan " + std::to_string(*args.plan) + " in " + args.db);
    if (!plan->energy_j || !plan->time_s)
      throw InputError("plan " + std::to_string(plan->id) + " has no schedule (" + plan->status + ")");
    s.energy_j = *plan->energy_j * static_cast<double>(args.iterations);
    s.time_s = *plan->time_s * static_cast<double>(args.iterations);
    s.subject = fmt::format("plan {}: {} on {} by {} at {} bytes, {} iteration{} (predicted)", plan->id,
                            plan->model, plan->board_kind, plan->planner, plan->budget_bytes, args.iterations,
                            args.iterations == 1 ? "" : "s");
  }
  s.average_power_w = s.time_s > 0 ? s.energy_j / s.time_s : 0;
  s.energy_kwh = s.energy_j / kJoulesPerKwh;
  s.pue = args.pue;
  s.facility_kwh = s.energy_kwh * args.pue;
  s.gco2_per_kwh = args.grid_gco2_per_kwh;
  if (s.gco2_per_kwh) s.gco2 = s.facility_kwh * *s.gco2_per_kwh;
  if (!args.pue_profile.empty()) {
    s.what_ifs = read_profile(args.pue_profile, s.profile_note);
    for (WhatIf& w : s.what_ifs) {
      if (!w.gco2_per_kwh) w.gco2_per_kwh = args.grid_gco2_per_kwh;
      w.facility_kwh = s.energy_kwh * w.pue;
      if (w.gco2_per_kwh) w.gco2 = w.facility_kwh * *w.gco2_per_kwh;
    }
  }
  return s;
}

}  // namespace ergon::app
