#include "cli/plan_cmd.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <condition_variable>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <thread>

#include "common/error.h"
#include "common/units.h"
#include "planner/schedule.h"

namespace ergon::cli {

void write_schedule(const std::vector<uint8_t>& encoded, const std::string& path) {
  const std::string tmp = path + ".tmp";
  std::ofstream file(tmp, std::ios::binary);
  file.write(reinterpret_cast<const char*>(encoded.data()), static_cast<std::streamsize>(encoded.size()));
  file.close();
  if (!file) throw InputError("cannot write " + path);
  std::filesystem::rename(tmp, path);
}

namespace {

/// The phase, the best plan and the bound on one terminal line while planning runs: drawn as
/// each report comes (at most five times a second: a small graph's search improves hundreds
/// of times a second), and about once a second between reports, the elapsed time moving on
/// through phases that report nothing for a while (CBC's preprocessing, an LP relaxation).
/// The mode being planned (--power-mode auto) gets a line of its own.
class PlanProgressLine {
 public:
  explicit PlanProgressLine(const char* unit)
      : unit_(unit), ticker_([this](const std::stop_token& stop) { tick(stop); }) {}
  PlanProgressLine(const PlanProgressLine&) = delete;
  PlanProgressLine& operator=(const PlanProgressLine&) = delete;
  ~PlanProgressLine() {
    ticker_.request_stop();
    ticker_.join();
    const std::scoped_lock lock(mutex_);
    if (last_) std::cerr << "\r\033[K" << std::flush;
  }

  app::PlanProgress callbacks() {
    app::PlanProgress p;
    p.on_mode = [this](const std::string& mode, std::size_t n, std::size_t total) {
      const std::scoped_lock lock(mutex_);
      std::cerr << "\r\033[K" << fmt::format("planning in mode {} ({} of {})\n", mode, n, total) << std::flush;
      last_.reset();
    };
    p.on_mode_again = [this](const std::string& mode, double time_limit_s) {
      const std::scoped_lock lock(mutex_);
      std::cerr << "\r\033[K"
                << fmt::format("planning in mode {} again, with the {:.3g} s the modes not planned left\n", mode,
                               time_limit_s)
                << std::flush;
      last_.reset();
    };
    p.on_solve = [this](const planner::SolveProgress& s) {
      const std::scoped_lock lock(mutex_);
      const auto now = Clock::now();
      const bool new_phase = !last_ || last_->phase != s.phase;
      last_ = s;
      last_at_ = now;
      if (new_phase || now - drawn_at_ >= std::chrono::milliseconds(200)) draw(s.elapsed_s, now);
    };
    return p;
  }

 private:
  using Clock = std::chrono::steady_clock;

  void tick(const std::stop_token& stop) {
    std::unique_lock lock(mutex_);
    while (!stop.stop_requested()) {
      wake_.wait_for(lock, stop, std::chrono::milliseconds(250), [] { return false; });
      if (stop.stop_requested() || !last_) continue;
      const auto now = Clock::now();
      if (now - drawn_at_ < std::chrono::seconds(1)) continue;
      draw(last_->elapsed_s + std::chrono::duration<double>(now - last_at_).count(), now);
    }
  }

  /// With mutex_ held.
  void draw(double elapsed_s, Clock::time_point now) {
    const planner::SolveProgress& s = *last_;
    const std::string gap = s.incumbent && s.bound && *s.incumbent > 0
                                ? fmt::format("{:.2f} %", 100 * std::max(0.0, 1 - *s.bound / *s.incumbent))
                                : "-";
    std::cerr << fmt::format("\r\033[K  {:5.1f} s  {:<42} best {:>12}  bound {:>12}  gap {:>8}", elapsed_s, s.phase,
                             s.incumbent ? fmt::format("{:.6g} {}", *s.incumbent, unit_) : "-",
                             s.bound ? fmt::format("{:.6g} {}", *s.bound, unit_) : "-", gap)
              << std::flush;
    drawn_at_ = now;
  }

  const char* unit_;
  std::mutex mutex_;
  std::condition_variable_any wake_;
  std::optional<planner::SolveProgress> last_;
  Clock::time_point last_at_, drawn_at_;
  std::jthread ticker_;  ///< last: it starts once the rest is ready
};

/// `ergon plan --json`.
int print_plan_json(const app::PlanOutcome& o, std::ostream& out) {
  const auto& r = o.result;
  const auto& sim = o.sim;
  const planner::Objective objective = o.request.objective;
  nlohmann::json j;
  j["graph"] = o.graph.name;
  j["costs"] = o.cost_source;
  if (!o.modes.empty()) {
    j["power_mode"] = o.power_mode;
    j["modes"] = nlohmann::json::array();
    for (const auto& m : o.modes)
      j["modes"].push_back({{"mode", m.mode},
                            {"energy_j", m.energy_j ? nlohmann::json(*m.energy_j) : nullptr},
                            {"time_s", m.time_s ? nlohmann::json(*m.time_s) : nullptr},
                            {"why", m.why}});
    if (!o.per_phase_note.empty()) j["per_phase_note"] = o.per_phase_note;
    if (o.again_s > 0) j["mode_planned_again_s"] = o.again_s;
  }
  if (o.switch_time_s > 0)
    j["mode_switches"] = {{"count", 2}, {"time_s", o.switch_time_s}, {"energy_j", o.switch_energy_j}};
  j["nodes"] = o.graph.size();
  j["planner"] = r.planner;
  j["objective"] = o.time_objective ? std::string("time") : std::string(planner::to_string(objective));
  j["fixed_bytes"] = o.graph.fixed_bytes;
  j["status"] = planner::to_string(r.status);
  j["budget_bytes"] = o.request.budget_bytes;
  j["deadline_s"] = std::isfinite(o.request.deadline_s) ? nlohmann::json(o.request.deadline_s) : nullptr;
  if (o.time_objective) {  // the plan's figures are seconds; no energy was planned
    j["objective_s"] = r.schedule ? nlohmann::json(r.objective_j) : nullptr;
    j["bound_s"] = r.bound_j;
  } else {
    j["objective_j"] = r.schedule ? nlohmann::json(r.objective_j) : nullptr;
    j["bound_j"] = r.bound_j;
  }
  j["gap"] = r.gap;
  j["gap_asked"] = {{"gap", o.gap.gap}, {"why", o.gap.why}};
  j["solve_time_s"] = r.solve_time_s;
  if (!r.note.empty()) j["note"] = r.note;
  j["model"] = {{"variables", r.variables}, {"integers", r.integers}, {"rows", r.rows},
                {"nonzeros", r.nonzeros}};
  auto energy = [&](double j_value) { return o.time_objective ? nlohmann::json(nullptr) : nlohmann::json(j_value); };
  j["store_all"] = {{"energy_j", energy(planner::objective_energy_j(o.store_all, objective))},
                    {"time_s", planner::deadline_time_s(o.store_all, objective)},
                    {"peak_bytes", o.store_all.peak_bytes}};
  if (sim) {
    // energy_j and time_s are what the objective minimizes and the deadline bounds.
    j["energy_j"] = energy(planner::objective_energy_j(*sim, objective));
    j["time_s"] = planner::deadline_time_s(*sim, objective);
    j["poet_energy_j"] = energy(sim->energy_j);
    j["total_energy_j"] = energy(sim->total_energy_j);
    j["compute_time_s"] = sim->compute_time_s;
    j["makespan_s"] = sim->makespan_s;
    j["paging_time_s"] = sim->paging_time_s;
    j["peak_bytes"] = sim->peak_bytes;
    j["recomputes"] = sim->recomputes;
    j["page_ins"] = sim->page_ins;
    j["page_outs"] = sim->page_outs;
    j["schedule_bytes"] = o.encoded.size();
  } else {
    j["why"] = r.why;
  }
  out << j.dump(2) << "\n";
  return r.schedule ? 0 : 1;
}

/// `ergon plan`'s report for people; the solver's failure on stderr.
int print_plan_text(const PlanArgs& args, const app::PlanOutcome& o, const PlanOutput& output, std::ostream& out) {
  const auto& graph = o.graph;
  const auto& req = o.request;
  const auto& r = o.result;
  const auto& store_all = o.store_all;
  const auto& sim = o.sim;
  const auto& encoded = o.encoded;
  const planner::Objective objective = req.objective;
  const uint64_t store_all_peak = store_all.peak_bytes;
  const bool total = objective == planner::Objective::kTotal;
  const uint64_t fixed_bytes = total ? graph.fixed_bytes : 0;  // what the budget covers too
  const double store_all_j = planner::objective_energy_j(store_all, objective);
  const double store_all_s = planner::deadline_time_s(store_all, objective);
  const char* unit = o.time_objective ? "s" : "J";  // what the objective and its bound count
  out << fmt::format("{}: {} training nodes, store-all peak {}{}, one pass {:.4g} s{}\n", graph.name, graph.size(),
                     format_bytes(store_all_peak),
                     total ? fmt::format(" + {} fixed", format_bytes(fixed_bytes)) : std::string(), store_all_s,
                     o.time_objective ? std::string() : fmt::format(" / {:.4g} J", store_all_j));
  // A fallback is a warning: stderr, so that scripts reading stdout still see it on a terminal.
  (o.costs == app::CostSource::kProfileFallback ? std::cerr : out) << o.cost_source << "\n";
  if (!o.modes.empty()) {
    out << fmt::format("power mode: {} (the least energy of the {} modes and per-phase pairs tried)\n", o.power_mode, o.modes.size());
    for (const auto& m : o.modes)
      out << fmt::format("  {:<16} {}\n", m.mode,
                         m.energy_j ? fmt::format("{:.6g} J, {:.6g} s", *m.energy_j, *m.time_s)
                                    : m.skipped ? m.why : "no schedule: " + m.why);
    if (!o.per_phase_note.empty()) out << "  " << o.per_phase_note << "\n";
    if (o.again_s > 0)
      out << fmt::format("  {} planned again with the {:.3g} s the modes not planned left; its cheaper plan stands\n",
                         o.power_mode, o.again_s);
  }
  if (o.switch_time_s > 0)
    out << fmt::format("mode switches: 2 per iteration, {:.4g} s and {:.4g} J on top of the figures below "
                       "(the deadline below is what is left for the schedule)\n",
                       o.switch_time_s, o.switch_energy_j);
  const uint64_t activation_budget = planner::activation_budget_bytes(graph, req);
  out << fmt::format("budget {}{} ({:.0f}% of store-all's activations), deadline {}, objective {}\n",
                     format_bytes(req.budget_bytes),
                     total ? fmt::format(": {} fixed + {} activations", format_bytes(fixed_bytes),
                                         format_bytes(activation_budget))
                           : std::string(),
                     100.0 * static_cast<double>(activation_budget) /
                         static_cast<double>(store_all_peak),
                     std::isfinite(req.deadline_s) ? fmt::format("{:.4g} s", req.deadline_s)
                                                   : std::string("none"),
                     o.time_objective ? std::string("time (the iteration's makespan; energy not planned)")
                                      : std::string(planner::to_string(objective)));
  if (r.variables > 0) {
    out << fmt::format("{} MILP: {} variables ({} binary), {} rows, {} nonzeros; cbc {} thread(s)\n",
                       r.planner, r.variables, r.integers, r.rows, r.nonzeros, args.threads);
  } else if (r.schedule && r.note.empty() && (r.planner == "poet" || r.planner == "checkmate" || r.planner == "paging")) {
    out << r.planner << ": the plan is proven within the gap by the bound; no MILP needed\n";
  }
  if (!r.schedule) {
    std::cerr << "ergon: " << r.why << "\n";
    return 1;
  }
  out << fmt::format("{} in {:.2f} s (bound {:.6g} {}, gap {:.3g}%; asked {:.3g}%: {})\n", planner::to_string(r.status),
                     r.solve_time_s, r.bound_j, unit, 100 * r.gap, 100 * o.gap.gap, o.gap.why);
  if (!r.note.empty()) out << "  note: " << r.note << "\n";
  const double energy_j = planner::objective_energy_j(*sim, objective);
  const double time_s = planner::deadline_time_s(*sim, objective);
  if (!o.time_objective)
    out << fmt::format("  energy  {:.6g} J   ({:+.2f}% vs store-all{})\n", energy_j,
                       100 * (energy_j / store_all_j - 1),
                       total ? fmt::format("; idle {:.4g} J", graph.idle_power_w * sim->makespan_s)
                             : std::string());
  if (total) {
    out << fmt::format("  time    {:.6g} s   ({:+.2f}%; compute {:.4g} s, transfers {:.4g} s, "
                       "stalled {:.4g} s)\n",
                       time_s, 100 * (time_s / store_all_s - 1), sim->compute_time_s,
                       sim->paging_time_s, sim->makespan_s - sim->compute_time_s);
  } else {
    out << fmt::format("  time    {:.6g} s   ({:+.2f}%; paging {:.4g} s more)\n", time_s,
                       100 * (time_s / store_all_s - 1), sim->paging_time_s);
  }
  out << fmt::format("  peak    {}   ({:.0f}% of store-all)\n", format_bytes(sim->peak_bytes),
                     100.0 * static_cast<double>(sim->peak_bytes) / static_cast<double>(store_all_peak));
  out << fmt::format("  {} recomputations, {} page-outs, {} page-ins; schedule {} bytes encoded{}\n",
                     sim->recomputes, sim->page_outs, sim->page_ins, encoded.size(),
                     output.out.empty() ? "" : " -> " + output.out);
  return 0;
}

}  // namespace

int run_plan(const PlanArgs& args, const PlanOutput& output, std::ostream& out) {
  const bool tty = !output.json && ::isatty(STDERR_FILENO) == 1;
  std::optional<PlanProgressLine> line;
  if (tty) line.emplace(app::time_objective(args) ? "s" : "J");
  const PlanOutcome o = app::plan(args, line ? line->callbacks() : app::PlanProgress{});
  line.reset();  // the progress line is cleared before the answer is printed
  if (o.result.schedule && !output.out.empty()) write_schedule(o.encoded, output.out);
  return output.json ? print_plan_json(o, out) : print_plan_text(args, o, output, out);
}

}  // namespace ergon::cli
