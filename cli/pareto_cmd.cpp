#include "cli/pareto_cmd.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "common/error.h"

namespace ergon::cli {

int run_pareto(const ParetoArgs& args, const ParetoOutput& output, std::ostream& out) {
  const auto points = app::pareto_sweep(args, [](const std::string& line) { std::cerr << line << "\n"; });

  // One row per budget, one column per planner: energy, with * on the planner's front.
  std::vector<std::string> planners;
  std::vector<uint64_t> budgets;
  for (const auto& p : points) {
    if (std::find(planners.begin(), planners.end(), app::series_name(p.plan)) == planners.end())
      planners.push_back(app::series_name(p.plan));
    budgets.push_back(p.plan.budget_bytes);
  }
  std::sort(budgets.begin(), budgets.end());
  budgets.erase(std::unique(budgets.begin(), budgets.end()), budgets.end());
  out << fmt::format("{:>12}", "budget (B)");
  for (const auto& name : planners) out << fmt::format(" {:>14}", name + " (J)");
  // (with several power modes, a column per planner and mode: poet@MAXQ)
  out << "\n";
  for (uint64_t b : budgets) {
    out << fmt::format("{:>12}", b);
    for (const auto& name : planners) {
      auto it = std::find_if(points.begin(), points.end(), [&](const auto& p) {
        return app::series_name(p.plan) == name && p.plan.budget_bytes == b;
      });
      if (it == points.end() || !it->plan.energy_j) {
        out << fmt::format(" {:>14}", it == points.end() ? "" : "-");
      } else {
        out << fmt::format(" {:>13.6g}{}", *it->plan.energy_j, it->on_front ? "*" : " ");
      }
    }
    out << "\n";
  }
  out << "(* on that planner's front; - no schedule at that budget)\n";

  if (!output.csv.empty()) {
    std::ofstream csv(output.csv);
    csv << "planner,budget_bytes,deadline_s,status,energy_j,time_s,paging_time_s,peak_bytes,"
           "bound_j,gap,solve_time_s,on_front,plan_id\n";
    auto opt = [](const auto& v) { return v ? fmt::format("{}", *v) : std::string(); };
    for (const auto& p : points) {
      const auto& r = p.plan;
      csv << fmt::format("{},{},{},{},{},{},{},{},{},{},{},{},{}\n", r.planner, r.budget_bytes,
                         opt(r.deadline_s), r.status, opt(r.energy_j), opt(r.time_s),
                         opt(r.paging_time_s), opt(r.peak_bytes), opt(r.bound_j), opt(r.gap),
                         r.solve_time_s, p.on_front ? 1 : 0, r.id);
    }
    if (!csv) throw InputError("cannot write " + output.csv);
  }
  if (!output.json.empty()) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& p : points) {
      const auto& r = p.plan;
      auto opt = [](const auto& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
      j.push_back({{"planner", r.planner}, {"budget_bytes", r.budget_bytes},
                   {"deadline_s", opt(r.deadline_s)}, {"status", r.status},
                   {"energy_j", opt(r.energy_j)}, {"time_s", opt(r.time_s)},
                   {"paging_time_s", opt(r.paging_time_s)}, {"peak_bytes", opt(r.peak_bytes)},
                   {"bound_j", opt(r.bound_j)}, {"gap", opt(r.gap)},
                   {"solve_time_s", r.solve_time_s}, {"on_front", p.on_front},
                   {"plan_id", r.id}, {"reused", p.reused}});
    }
    std::ofstream(output.json) << j.dump(2) << "\n";
  }
  return 0;
}

}  // namespace ergon::cli
