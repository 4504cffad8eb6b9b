#include "cli/pareto_cmd.h"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "app/slurm.h"
#include "common/error.h"
#include "costdb/database.h"

namespace ergon::cli {

namespace {

/// The fronts as a table on `out`, and the points as CSV and JSON files when asked.
void print_pareto(const std::vector<ParetoPoint>& points, const ParetoOutput& output, std::ostream& out) {
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
}

}  // namespace

int run_pareto(const ParetoArgs& args, const ParetoOutput& output, std::ostream& out) {
  print_pareto(app::pareto_sweep(args, [](const std::string& line) { std::cerr << line << "\n"; }), output, out);
  return 0;
}

int submit_pareto(const ParetoArgs& args, const ParetoSlurm& slurm, const std::vector<std::string>& task_command,
                  std::ostream& out) {
  ParetoArgs count = args;
  count.solve = false;
  std::vector<app::ParetoCell> missing;
  count.missing = &missing;
  const auto stored = app::pareto_sweep(count);
  if (missing.empty()) {
    out << fmt::format("every one of the sweep's {} cells is stored in {} already: nothing to submit\n", stored.size(),
                       args.db);
    return 0;
  }
  if (!costdb::is_postgres_locator(args.db))
    std::cerr << "note: every task writes into the SQLite file " << args.db
              << ": it must be on a file system all nodes share (and SQLite over NFS is unsafe); a "
                 "PostgreSQL --db is the lab's way (docs/lab.md)\n";
  app::SlurmSubmit submit;
  submit.command = task_command;
  submit.partition = slurm.partition;
  submit.root = slurm.root;
  for (const auto& cell : missing) submit.cells.push_back(cell.index);
  const auto job = app::submit_slurm_array(submit);
  out << fmt::format("submitted job {}: {} tasks, one per cell not stored yet ({} of {} are); logs in {}\n", job.id,
                     missing.size(), stored.size(), stored.size() + missing.size(), job.folder.string());
  std::string again;  // to paste into a shell: quoted where it has to be
  for (std::size_t i = 1; i < task_command.size(); ++i) {
    const std::string& arg = task_command[i];
    const bool plain = !arg.empty() && arg.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                                             "0123456789-_=./,:@%+") == std::string::npos;
    std::string quoted = "'";
    for (char c : arg) quoted += c == '\'' ? std::string("'\\''") : std::string(1, c);
    again += " " + (plain ? arg : quoted + "'");
  }
  out << fmt::format("the fronts as tasks finish: ergon{} --collect {}\n", again, job.id);
  return 0;
}

int collect_pareto(const ParetoArgs& args, const ParetoSlurm& slurm, const ParetoOutput& output, std::ostream& out) {
  // The tasks' states are read between two reads of the database: a task seen ended had
  // committed its plan before it ended, so the second read has it. (Read the other way round,
  // a task ending in between would look as if it had stored nothing.)
  ParetoArgs collect = args;
  collect.solve = false;
  std::vector<app::ParetoCell> before;
  collect.missing = &before;
  app::pareto_sweep(collect);
  std::vector<std::size_t> cells;
  for (const auto& cell : before) cells.push_back(cell.index);
  const auto states = app::slurm_task_states(slurm.collect, slurm.root, cells);
  std::vector<app::ParetoCell> missing;
  collect.missing = &missing;
  const auto points = app::pareto_sweep(collect);
  print_pareto(points, output, out);

  std::map<std::string, int> count;
  std::vector<std::pair<app::ParetoCell, app::SlurmTask>> troubled;
  for (const auto& cell : missing) {
    const auto it = std::find_if(states.begin(), states.end(), [&](const auto& t) { return t.index == cell.index; });
    if (it == states.end()) continue;
    ++count[it->state];
    if (it->state == "failed" || it->state == "unknown" || it->state == "done") troubled.emplace_back(cell, *it);
  }
  const std::size_t total = missing.size() + points.size();
  out << fmt::format("job {}: {} of {} cells stored", slurm.collect, points.size(), total);
  for (const char* state : {"running", "pending", "failed", "done", "unknown"})
    if (count[state] > 0)
      out << fmt::format("; {} {}", count[state], std::string(state) == "done" ? "ended without a plan" : state);
  out << "\n";
  for (const auto& [cell, task] : troubled)
    out << fmt::format("  cell {} ({} at {} B{}): {}\n", cell.index, cell.planner, cell.budget_bytes,
                       cell.power_mode.empty() ? "" : " in " + cell.power_mode,
                       task.state == "done" ? "the task ended well but its plan is not in this --db (another --db?)"
                                            : task.reason);
  // 2 while any cell is still to come, even beside a failed one: a caller polling until the
  // status is not 2 must not stop before every cell has ended (and its failure is listed).
  if (count["running"] + count["pending"] > 0) return 2;
  if (!troubled.empty()) return 1;
  return missing.empty() ? 0 : 2;
}

}  // namespace ergon::cli
