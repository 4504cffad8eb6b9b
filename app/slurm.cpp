#include "app/slurm.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <map>
#include <sstream>
#include <system_error>

#include "common/error.h"
#include "devices/power_control.h"

namespace ergon::app {
namespace {

/// Slurm's own limit on array task ids unless the cluster raises MaxArraySize.
constexpr std::size_t kDefaultMaxArrayIndex = 1000;

std::string shell_quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

/// Runs a Slurm command; throws InputError with its first line of output when it fails.
std::string run_slurm(devices::CommandRunner& runner, const std::vector<std::string>& argv) {
  const auto [status, out] = runner.run(argv);
  if (status == 127) throw InputError(argv.front() + " is not installed (Debian package slurm-client or slurm-wlm)");
  if (status != 0) {
    const std::string line = out.substr(0, out.find('\n'));
    throw InputError(fmt::format("{} failed: {}", argv.front(), line.empty() ? "exit status " + std::to_string(status) : line));
  }
  return out;
}

/// "0-3,7,9-10" for Slurm's --array.
std::string array_spec(std::vector<std::size_t> cells) {
  std::sort(cells.begin(), cells.end());
  std::string spec;
  for (std::size_t i = 0; i < cells.size();) {
    std::size_t j = i;
    while (j + 1 < cells.size() && cells[j + 1] == cells[j] + 1) ++j;
    spec += (spec.empty() ? "" : ",") + (i == j ? std::to_string(cells[i]) : fmt::format("{}-{}", cells[i], cells[j]));
    i = j + 1;
  }
  return spec;
}

}  // namespace

SlurmJob submit_slurm_array(const SlurmSubmit& submit) {
  if (submit.cells.empty()) throw InputError("nothing to submit: every cell of the sweep is stored already");
  const std::size_t largest = *std::max_element(submit.cells.begin(), submit.cells.end());
  std::error_code ec;
  const std::filesystem::path root = std::filesystem::absolute(submit.root, ec);
  std::filesystem::create_directories(root, ec);
  if (ec) throw InputError("cannot create " + root.string() + ": " + ec.message());
  const std::filesystem::path pending = root / fmt::format("pending-{}", ::getpid());
  std::filesystem::create_directories(pending, ec);
  if (ec) throw InputError("cannot create " + pending.string() + ": " + ec.message());

  // Each task runs the sweep's own command for its cell and says how it ended, so that a
  // cluster without accounting still tells a failed task from a finished one.
  std::string command;
  for (const auto& arg : submit.command) command += (command.empty() ? "" : " ") + shell_quote(arg);
  const std::filesystem::path script = pending / "sweep.sbatch";
  {
    std::ofstream out(script);
    out << "#!/bin/bash\n"
        << "#SBATCH --job-name=ergon-pareto\n"
        << "#SBATCH --array=" << array_spec(submit.cells) << "\n"
        << "#SBATCH --ntasks=1\n#SBATCH --cpus-per-task=1\n"
        << "#SBATCH --output=" << (root / "%A" / "task-%a.log").string() << "\n";
    if (!submit.partition.empty()) out << "#SBATCH --partition=" << submit.partition << "\n";
    out << command << " --cell \"$SLURM_ARRAY_TASK_ID\" --jobs 1\n"
        << "status=$?\n"
        << "echo \"ergon-task-exit $status\"\n"
        << "exit $status\n";
    if (!out) throw InputError("cannot write " + script.string());
  }
  auto runner = devices::system_command_runner();
  std::string id;
  try {
    id = run_slurm(*runner, {"sbatch", "--hold", "--parsable", script.string()});
  } catch (const InputError& e) {
    std::filesystem::remove_all(pending, ec);
    if (largest < kDefaultMaxArrayIndex) throw;
    throw InputError(fmt::format("{} (cell {} is past Slurm's default MaxArraySize of {}: raise it on the cluster, "
                                 "or sweep fewer --budgets)",
                                 e.what(), largest, kDefaultMaxArrayIndex + 1));
  }
  id = id.substr(0, id.find_first_of(";\n"));
  if (id.empty() || id.find_first_not_of("0123456789") != std::string::npos)
    throw InputError("sbatch answered '" + id + "', not a job id");
  const std::filesystem::path folder = root / id;
  std::filesystem::rename(pending, folder, ec);
  if (ec) {
    run_slurm(*runner, {"scancel", id});
    throw InputError("cannot create " + folder.string() + " for job " + id + " (cancelled): " + ec.message());
  }
  run_slurm(*runner, {"scontrol", "release", id});
  return {id, folder};
}

std::vector<SlurmTask> slurm_task_states(const std::string& job_id, const std::filesystem::path& root,
                                         const std::vector<std::size_t>& cells) {
  std::map<std::size_t, std::string> queued;
  auto runner = devices::system_command_runner();
  const auto [status, out] = runner->run({"squeue", "-h", "-r", "-j", job_id, "-o", "%K %T"});
  // A job that left the queue is unknown to squeue (an error with exit status 1): no task queued.
  if (status == 0) {
    std::istringstream lines(out);
    std::size_t index = 0;
    std::string state;
    while (lines >> index >> state) {
      for (char& c : state) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      queued[index] = state;
    }
  }
  std::vector<SlurmTask> tasks;
  for (std::size_t cell : cells) {
    SlurmTask task{.index = cell};
    if (const auto q = queued.find(cell); q != queued.end()) {
      task.state = q->second == "running" || q->second == "completing" ? "running" : q->second;
      tasks.push_back(task);
      continue;
    }
    const auto log = root / job_id / fmt::format("task-{}.log", cell);
    std::ifstream in(log);
    if (!in) {
      task.state = status == 0 ? "pending" : "unknown";
      if (status != 0) task.reason = "squeue does not know job " + job_id + " and the task left no log";
      tasks.push_back(task);
      continue;
    }
    std::string line, last_error, last_line;
    std::optional<int> exit_status;
    while (std::getline(in, line)) {
      if (line.rfind("ergon-task-exit ", 0) == 0) exit_status = std::atoi(line.c_str() + 16);
      else if (line.rfind("ergon: ", 0) == 0) last_error = line;
      if (!line.empty()) last_line = line;
    }
    if (exit_status && *exit_status == 0) {
      task.state = "done";
    } else if (exit_status) {
      task.state = "failed";
      task.reason = !last_error.empty() ? last_error : "exit status " + std::to_string(*exit_status);
    } else {
      task.state = "failed";
      task.reason = "ended without its exit line (killed, or out of time or memory?): " + last_line;
    }
    tasks.push_back(task);
  }
  return tasks;
}

}  // namespace ergon::app
