// ergon pareto: its options and run.

#include "cli/commands.h"

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "cli/options.h"
#include "cli/pareto_cmd.h"

namespace ergon::cli {
namespace {

/// This process's command line for a Slurm task: the ergon binary by its absolute path, and
/// the arguments without the options that are the submission's (--slurm, --partition,
/// --slurm-dir) or that a task must not repeat (--jobs, --csv, --json; the task adds --jobs 1).
std::vector<std::string> task_command(int argc, char** argv) {
  std::error_code ec;
  const auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  std::vector<std::string> command{ec ? std::string(argv[0]) : self.string()};
  const std::vector<std::string> flags{"--slurm"};
  const std::vector<std::string> with_value{"--partition", "--slurm-dir", "--jobs", "--csv", "--json"};
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto name = arg.substr(0, arg.find('='));
    if (std::find(flags.begin(), flags.end(), arg) != flags.end()) continue;
    if (std::find(with_value.begin(), with_value.end(), name) != with_value.end()) {
      if (arg.find('=') == std::string::npos) ++i;  // its value is the next argument
      continue;
    }
    command.push_back(arg);
  }
  return command;
}

}  // namespace

void add_pareto_command(CLI::App& app, Commands& commands, int argc, char** argv) {
  static ParetoArgs pareto;
  static ParetoOutput pareto_output;
  static ParetoSlurm slurm;
  static std::size_t cell = 0;
  static CLI::Option* cell_option = nullptr;
  pareto.plan.gap = 0.01;  // a sweep wants many points quickly
  auto* pareto_cmd = app.add_subcommand(
      "pareto", "sweep memory budgets for several planners; store every plan; print the fronts");
  {
    auto* c = pareto_cmd;
    add_graph_source(*c, pareto.plan);
    add_board_and_mode(*c, pareto.plan,
                       "the board's power mode (see ergon plan --help); all, or MODE,MODE: a front "
                       "per planner and mode, against one deadline in seconds");
    c->add_option("--planners", pareto.planners,
                  "comma-separated: poet, checkmate, paging, store-all, chen, capuchin, "
                  "rotor, pofo")
        ->capture_default_str();
    c->add_option("--budgets", pareto.budgets,
                  "budget points from the largest working set to store-all's peak")
        ->capture_default_str()
        ->check(CLI::Range(1, 1000));
    add_deadline(*c, pareto.plan);
    add_solver(*c, pareto.plan, /*planner=*/false);
    c->get_option("--gap")->description(
        "relative optimality gap to prove (default 0.01: a sweep wants many points quickly)");
    c->add_option("--jobs", pareto.jobs, "plans solved at once (default: one per core)")
        ->check(CLI::NonNegativeNumber);
    c->add_option("--db", pareto.db, "database that stores every plan (a rerun resumes)")
        ->capture_default_str();
    c->add_flag("--fresh", pareto.fresh, "solve again even what the database holds");
    c->add_flag("--measured", pareto.measured,
                "cost the graph with the board's measurements in --db (ergon attribute) "
                "instead of its published profile");
    c->add_option("--csv", pareto_output.csv, "write every point as CSV");
    c->add_option("--json", pareto_output.json, "write every point as JSON");
    auto* submit = c->add_flag("--slurm", slurm.submit,
                               "submit the sweep to Slurm (sbatch) as a job array, a task per cell (planner, "
                               "budget, mode) not stored yet, each planning into --db (a PostgreSQL one for a "
                               "cluster: docs/lab.md); prints the job id");
    c->add_option("--partition", slurm.partition, "the Slurm partition of --slurm (default: the cluster's)")
        ->needs(submit);
    auto* collect = c->add_option("--collect", slurm.collect,
                                  "with the sweep's own options: the fronts of what job JOBID's tasks stored so "
                                  "far, and its pending, running and failed tasks (with why)")
                        ->excludes(submit);
    c->add_option("--slurm-dir", slurm.root, "where --slurm keeps a folder per job (task logs)")
        ->capture_default_str();
    cell_option = c->add_option("--cell", cell, "(a Slurm task's) solve only this cell of the sweep")
                      ->group("")
                      ->excludes(submit)
                      ->excludes(collect);
  }
  commands.add(pareto_cmd, [argc, argv] {
    for (const std::string& line : app::fill_defaults(pareto.plan, pareto.measured ? pareto.db : ""))
      std::cerr << line << "\n";
    if (cell_option->count() > 0) pareto.cell = cell;
    if (slurm.submit) return submit_pareto(pareto, slurm, task_command(argc, argv), std::cout);
    if (!slurm.collect.empty()) return collect_pareto(pareto, slurm, pareto_output, std::cout);
    return run_pareto(pareto, pareto_output, std::cout);
  });
}

}  // namespace ergon::cli
