#pragma once

// Sweeps on Slurm: a job array with one task per cell of a Pareto sweep, each task an
// `ergon pareto ... --cell N` storing its plan in the shared database; and what became of
// the tasks, read back from Slurm and from the tasks' logs. Slurm is driven through its own
// commands (sbatch, scontrol, squeue), never a queue of Ergon's.

#include <cstddef>
#include <filesystem>
#include <string>
#include <vector>

namespace ergon::app {

struct SlurmSubmit {
  /// The command every task runs, without the cell: the ergon binary and its arguments. Each
  /// task appends --cell $SLURM_ARRAY_TASK_ID.
  std::vector<std::string> command;
  std::vector<std::size_t> cells;  ///< the array's task ids: the cells to solve
  std::string partition;           ///< empty: the cluster's default
  std::filesystem::path root = "ergon-slurm";  ///< a folder per job: ROOT/JOBID/task-N.log
};

struct SlurmJob {
  std::string id;
  std::filesystem::path folder;
};

/// Writes the batch script, submits it held (sbatch --hold), moves it into ROOT/JOBID and
/// releases it. Throws InputError naming what failed (no sbatch, a refused submission).
SlurmJob submit_slurm_array(const SlurmSubmit& submit);

/// What became of one task.
struct SlurmTask {
  std::size_t index = 0;
  std::string state;   ///< "pending", "running", "done", "failed", "unknown"
  std::string reason;  ///< for failed: the task's error line; for unknown: why
};

/// The tasks' states: squeue for those still queued or running, the task's log (its exit
/// status line, its last "ergon:" error line) for those that ended.
std::vector<SlurmTask> slurm_task_states(const std::string& job_id, const std::filesystem::path& root,
                                         const std::vector<std::size_t>& cells);

}  // namespace ergon::app
