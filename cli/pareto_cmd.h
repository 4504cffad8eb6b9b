#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "app/pareto.h"

namespace ergon::cli {

using app::ParetoArgs;
using app::ParetoPoint;

/// Where `ergon pareto` writes its points besides the table it prints.
struct ParetoOutput {
  std::string csv;   ///< the points as CSV, when not empty
  std::string json;  ///< the points as JSON, when not empty
};

/// ergon pareto on Slurm.
struct ParetoSlurm {
  bool submit = false;    ///< --slurm
  std::string partition;  ///< --partition
  std::string collect;    ///< --collect JOBID
  std::string root = "ergon-slurm";  ///< where job folders go (--slurm-dir)
};

/// Submits a job array of the sweep's cells not stored yet; each task runs `task_command`
/// (this command line without --slurm and its options) with --cell N. Prints the job and the
/// --collect command line.
int submit_pareto(const ParetoArgs& args, const ParetoSlurm& slurm, const std::vector<std::string>& task_command,
                  std::ostream& out);
/// The fronts of what the tasks stored so far, and which cells are pending, running or failed
/// (with their reasons). Exit code 0 when every cell is stored, 2 while some are to come, 1
/// when some failed.
int collect_pareto(const ParetoArgs& args, const ParetoSlurm& slurm, const ParetoOutput& output, std::ostream& out);

/// Runs the sweep (progress on stderr) and prints the fronts; returns the process exit code.
int run_pareto(const ParetoArgs& args, const ParetoOutput& output, std::ostream& out);

}  // namespace ergon::cli
