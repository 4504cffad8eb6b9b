// Pareto sweeps on Slurm, end to end: a single-node cluster (Debian's slurm-wlm and munge,
// started by tests/scripts/slurm_cluster.sh in a folder of its own), a real PostgreSQL server
// (tests/support/postgres_server.h), and the real ergon binary submitting, running as the
// array's tasks and collecting.

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/postgres_server.h"

namespace ergon {
namespace {

namespace fs = std::filesystem;
using testing::PostgresServer;

/// Runs a shell command line; (exit status, stdout and stderr).
std::pair<int, std::string> shell(const std::string& command) {
  std::string out;
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return {-1, ""};
  char buf[4096];
  while (std::fgets(buf, sizeof buf, p) != nullptr) out += buf;
  const int status = ::pclose(p);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

std::string quote(const std::string& s) { return "'" + s + "'"; }

class SlurmSweep : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::string pattern = "/tmp/ergon-slurm-XXXXXX";
    ASSERT_NE(::mkdtemp(pattern.data()), nullptr);
    cluster_ = pattern;
    // munged runs as the munge user: it must reach its folder inside.
    fs::permissions(cluster_, fs::perms::owner_all | fs::perms::group_exec | fs::perms::others_exec);
    const auto [status, out] = shell(std::string(ERGON_SOURCE_DIR) + "/tests/scripts/slurm_cluster.sh start " +
                                     (cluster_ / "cluster").string());
    ASSERT_EQ(status, 0) << out;
    conf_ = out.substr(0, out.find('\n'));
    ::setenv("SLURM_CONF", conf_.c_str(), 1);  // for sbatch, squeue, scontrol in ergon
  }
  static void TearDownTestSuite() {
    shell(std::string(ERGON_SOURCE_DIR) + "/tests/scripts/slurm_cluster.sh stop " + (cluster_ / "cluster").string());
    std::error_code ec;
    fs::remove_all(cluster_, ec);
  }
  void SetUp() override {
    ASSERT_FALSE(conf_.empty()) << "no Slurm cluster";
    auto& server = PostgresServer::shared();
    ASSERT_TRUE(server.available()) << "PostgreSQL: " << server.why_not();
  }

  /// `ergon ARGS` in the cluster's folder (where ergon-slurm/JOBID/ goes).
  static std::pair<int, std::string> ergon(const std::string& args) {
    return shell("cd " + quote(cluster_.string()) + " && " + std::string(ERGON_BINARY_DIR) + "/cli/ergon " + args);
  }

  /// --collect until no task is left to come (exit status 0 or 1); the last answer.
  static std::pair<int, std::string> collect_until_done(const std::string& sweep, const std::string& job) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(4);
    std::pair<int, std::string> last;
    while (std::chrono::steady_clock::now() < deadline) {
      last = ergon(sweep + " --collect " + job);
      if (last.first != 2) return last;
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
    }
    return last;
  }

  static std::string job_of(const std::string& submit_out) {
    std::smatch m;
    return std::regex_search(submit_out, m, std::regex("submitted job ([0-9]+)")) ? m[1].str() : "";
  }

  static inline fs::path cluster_;
  static inline std::string conf_;
};

/// planner, budget, status, energy, peak and front of every point of a --csv file, sorted.
std::vector<std::string> plan_rows(const fs::path& csv) {
  std::ifstream in(csv);
  std::vector<std::string> rows;
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    std::stringstream ss(line);
    for (std::string cell; std::getline(ss, cell, ',');) f.push_back(cell);
    if (f.size() < 13) continue;
    rows.push_back(f[0] + "," + f[1] + "," + f[3] + "," + f[4] + "," + f[7] + "," + f[11]);
  }
  std::sort(rows.begin(), rows.end());
  return rows;
}

TEST_F(SlurmSweep, AnArrayOfCellsStoresTheSamePlansAsTheSweepInOneProcess) {
  auto& server = PostgresServer::shared();
  const std::string lab = server.create_database("slurm_sweep");
  // A limit far above what each cell needs (paging's tightest cell: 3.3 s alone), so that a
  // busy machine cannot stop one of the two sweeps early and give a different plan.
  const std::string sweep = "pareto --model mlp --board pi4 --planners chen,rotor,pofo,paging --budgets 4 --time-limit 120";

  const auto [submitted, submit_out] = ergon(sweep + " --db " + quote(lab) + " --slurm");
  ASSERT_EQ(submitted, 0) << submit_out;
  EXPECT_NE(submit_out.find("16 tasks, one per cell not stored yet (0 of 16 are)"), std::string::npos) << submit_out;
  const std::string job = job_of(submit_out);
  ASSERT_FALSE(job.empty()) << submit_out;

  const fs::path slurm_csv = cluster_ / "slurm.csv";
  const auto [collected, collect_out] = collect_until_done(sweep + " --db " + quote(lab) + " --csv " + slurm_csv.string(), job);
  EXPECT_EQ(collected, 0) << collect_out;
  EXPECT_NE(collect_out.find("job " + job + ": 16 of 16 cells stored"), std::string::npos) << collect_out;
  EXPECT_TRUE(fs::exists(cluster_ / "ergon-slurm" / job / "task-0.log"));

  // The same sweep in one process, into a file of its own.
  const fs::path one_csv = cluster_ / "one.csv";
  const auto [one, one_out] = ergon(sweep + " --db " + (cluster_ / "one.db").string() + " --csv " + one_csv.string());
  ASSERT_EQ(one, 0) << one_out;
  const auto slurm_rows = plan_rows(slurm_csv);
  EXPECT_EQ(slurm_rows.size(), 16U);
  EXPECT_EQ(slurm_rows, plan_rows(one_csv));

  // Submitting again finds every cell stored.
  const auto [again, again_out] = ergon(sweep + " --db " + quote(lab) + " --slurm");
  EXPECT_EQ(again, 0) << again_out;
  EXPECT_NE(again_out.find("nothing to submit"), std::string::npos) << again_out;
}

TEST_F(SlurmSweep, TasksThatCannotStoreTheirPlansAreListedWithTheirReasons) {
  auto& server = PostgresServer::shared();
  server.create_database("slurm_denied");
  ASSERT_EQ(ergon("upgrade --db " + quote(server.locator("slurm_denied"))).first, 0);
  server.admin("DROP ROLE IF EXISTS slurm_viewer");
  ASSERT_EQ(server.admin("CREATE ROLE slurm_viewer LOGIN"), "");
  ASSERT_EQ(server.admin("GRANT SELECT ON ALL TABLES IN SCHEMA public TO slurm_viewer", "slurm_denied"), "");
  const std::string viewer = quote(server.locator("slurm_denied", "slurm_viewer"));
  const std::string sweep = "pareto --model mlp --board pi4 --planners chen --budgets 2 --db " + viewer;

  const auto [submitted, submit_out] = ergon(sweep + " --slurm");
  ASSERT_EQ(submitted, 0) << submit_out;
  const std::string job = job_of(submit_out);
  const auto [collected, collect_out] = collect_until_done(sweep, job);
  EXPECT_EQ(collected, 1) << collect_out;
  EXPECT_NE(collect_out.find("0 of 2 cells stored; 2 failed"), std::string::npos) << collect_out;
  EXPECT_NE(collect_out.find("cell 0 (chen at"), std::string::npos) << collect_out;
  EXPECT_NE(collect_out.find("permission denied"), std::string::npos) << collect_out;
}

}  // namespace
}  // namespace ergon
