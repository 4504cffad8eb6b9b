// The only translation unit that sees COIN-OR CBC. Uses CBC's C interface, which runs the
// full CbcMain1 strategy (presolve, cuts, heuristics, threads) on a loaded problem.
//
// Each solve, and each LP relaxation, runs in a forked child process. CBC and CLP do not
// always honour their time limits (the root LP, preprocessing and one factorization of a
// large model run far past them), CBC prints to stdout from places no callback reaches, and
// it can crash on some parameter combinations. The child reports progress and the result
// through a pipe; the parent enforces a hard deadline and turns a crash into an error result
// instead of losing the process.

#include <coin/Cbc_C_Interface.h>
#include <coin/ClpSimplex.hpp>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>

#include "planner/milp.h"

namespace ergon::planner {
namespace {

/// How long past its limit the LP relaxation's child may run before it is stopped by force.
constexpr double kRelaxationGraceS = 0.1;
constexpr int kMsgSolutionFound = 4;     // Cbc0004I Integer solution of X found after ...
constexpr int kMsgNodeProgress = 10;     // Cbc0010I After N nodes, .. best solution, best possible
constexpr int kMsgIntegerSolution = 12;  // Cbc0012I Integer solution of X found by ...

// Records on the pipe from child to parent.
enum class Record : uint8_t { kProgress = 1, kResult = 2 };

struct ResultHeader {
  int32_t call_ok = 0;
  int32_t model_status = 0;
  double objective = 0;
  double bound = 0;
  int32_t has_solution = 0;
  int32_t cbc_status = 0;
  int32_t secondary = 0;
};

int g_pipe_fd = -1;  // the child's write end (the child is single-threaded)
std::optional<double> g_incumbent;
std::optional<double> g_bound;

bool write_all(int fd, const void* data, std::size_t n) {
  const auto* p = static_cast<const uint8_t*>(data);
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= static_cast<std::size_t>(w);
  }
  return true;
}

bool read_all(int fd, void* data, std::size_t n) {
  auto* p = static_cast<uint8_t*>(data);
  while (n > 0) {
    const ssize_t r = ::read(fd, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= static_cast<std::size_t>(r);
  }
  return true;
}

void COINLINKAGE_CB on_message(Cbc_Model* /*model*/, int msgno, int ndouble, const double* dvec,
                               int /*nint*/, const int* /*ivec*/, int /*nchar*/,
                               char** /*cvec*/) {
  if (msgno == kMsgNodeProgress && ndouble >= 2) {
    if (dvec[0] < 1e49) g_incumbent = dvec[0];
    g_bound = dvec[1];
  } else if ((msgno == kMsgIntegerSolution || msgno == kMsgSolutionFound) && ndouble >= 1) {
    g_incumbent = dvec[0];
  } else {
    return;
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double values[2] = {g_incumbent.value_or(nan), g_bound.value_or(nan)};
  const auto tag = static_cast<uint8_t>(Record::kProgress);
  write_all(g_pipe_fd, &tag, 1);
  write_all(g_pipe_fd, values, sizeof values);
}

// CBC and CLP load columns in compressed column form with finite bounds; the model stores
// rows with infinities.
struct ColumnForm {
  explicit ColumnForm(const MilpModel& m) {
    const int ncols = m.num_vars();
    col_start.assign(static_cast<std::size_t>(ncols) + 1, 0);
    for (int idx : m.row_idx_) ++col_start[static_cast<std::size_t>(idx) + 1];
    for (int j = 0; j < ncols; ++j) col_start[j + 1] += col_start[j];
    row_of.resize(m.row_idx_.size());
    value.resize(m.row_idx_.size());
    std::vector<CoinBigIndex> fill(col_start.begin(), col_start.end() - 1);
    for (int r = 0; r < m.num_rows(); ++r) {
      for (int64_t k = m.row_start_[r]; k < m.row_start_[r + 1]; ++k) {
        const int c = m.row_idx_[k];
        row_of[fill[c]] = r;
        value[fill[c]] = m.row_coef_[k];
        ++fill[c];
      }
    }
    row_lower = finite(m.row_lower_);
    row_upper = finite(m.row_upper_);
    col_lower = finite(m.lower_);
    col_upper = finite(m.upper_);
  }
  static std::vector<double> finite(std::vector<double> v) {
    constexpr double kMax = std::numeric_limits<double>::max();
    for (double& x : v) x = std::clamp(x, -kMax, kMax);
    return v;
  }
  std::vector<CoinBigIndex> col_start;
  std::vector<int> row_of;
  std::vector<double> value, row_lower, row_upper, col_lower, col_upper;
};

/// A forked child and the read end of the pipe it reports through.
struct Forked {
  pid_t pid = -1;
  int fd = -1;
  std::string error;  ///< why no child was started
};

/// Forks a child that runs `child(write_fd)`, which must not return (it ends with _exit).
template <class Child>
Forked fork_with_pipe(Child&& child) {
  int fds[2];
  if (::pipe(fds) != 0) return {.error = std::strerror(errno)};
  std::fflush(stdout);
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int e = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return {.error = std::strerror(e)};
  }
  if (pid == 0) {
    ::close(fds[0]);
    child(fds[1]);
  }
  ::close(fds[1]);
  return {.pid = pid, .fd = fds[0]};
}

// Runs in the child: build, solve, report. Never returns.
[[noreturn]] void solve_in_child(const MilpModel& m, const SolveOptions& options, int fd) {
  g_pipe_fd = fd;
  if (!options.solver_log) {
    const int null_fd = ::open("/dev/null", O_WRONLY);
    if (null_fd >= 0) ::dup2(null_fd, STDOUT_FILENO);
  }
  const int ncols = m.num_vars();
  const ColumnForm cf(m);
  Cbc_Model* model = Cbc_newModel();
  Cbc_loadProblem(model, ncols, m.num_rows(), cf.col_start.data(), cf.row_of.data(),
                  cf.value.data(), cf.col_lower.data(), cf.col_upper.data(), m.objective_.data(),
                  cf.row_lower.data(), cf.row_upper.data());
  for (int j = 0; j < ncols; ++j)
    if (m.type_[j] == MilpModel::VarType::kBinary) Cbc_setInteger(model, j);
  Cbc_setObjSense(model, 1.0);
  Cbc_setMaximumSeconds(model, options.time_limit_s);
  Cbc_setAllowableFractionGap(model, options.relative_gap);
  Cbc_setParameter(model, "threads", std::to_string(std::max(1, options.threads)).c_str());
  Cbc_setParameter(model, "timeMode", "elapsed");  // the limit is wall time, not CPU time
  Cbc_setLogLevel(model, 1);
  for (const auto& [key, val] : options.backend_parameters)
    Cbc_setParameter(model, key.c_str(), val.c_str());
  if (options.warm_start && static_cast<int>(options.warm_start->size()) == ncols) {
    std::vector<int> idx(static_cast<std::size_t>(ncols));
    for (int j = 0; j < ncols; ++j) idx[j] = j;
    Cbc_setMIPStartI(model, ncols, idx.data(), options.warm_start->data());
  }
  if (const char* mps = std::getenv("ERGON_CBC_WRITE_MPS"); mps != nullptr)
    Cbc_writeMps(model, mps);
  if (!options.solver_log) Cbc_registerCallBack(model, on_message);

  Cbc_solve(model);

  ResultHeader h;
  h.cbc_status = Cbc_status(model);  // 0 finished, 1 stopped on a limit, 2 abandoned
  h.secondary = Cbc_secondaryStatus(model);
  h.call_ok = h.cbc_status == 2 || Cbc_isAbandoned(model) != 0 ? 0 : 1;
  const double* best = Cbc_bestSolution(model);
  h.has_solution = best != nullptr ? 1 : 0;
  h.bound = Cbc_getBestPossibleObjValue(model);
  if (Cbc_isProvenInfeasible(model) != 0) {
    h.model_status = static_cast<int32_t>(ModelStatus::kInfeasible);
  } else if (Cbc_isContinuousUnbounded(model) != 0) {
    h.model_status = static_cast<int32_t>(ModelStatus::kUnbounded);
  } else if (best == nullptr) {
    h.model_status = static_cast<int32_t>(ModelStatus::kNoSolutionFound);
  } else {
    h.objective = Cbc_getObjValue(model);
    h.model_status = static_cast<int32_t>(Cbc_isProvenOptimal(model) != 0 ? ModelStatus::kOptimal
                                                                          : ModelStatus::kFeasible);
  }
  const auto tag = static_cast<uint8_t>(Record::kResult);
  bool ok = write_all(fd, &tag, 1) && write_all(fd, &h, sizeof h);
  if (ok && best != nullptr) ok = write_all(fd, best, sizeof(double) * static_cast<std::size_t>(ncols));
  std::fflush(stdout);
  ::_exit(ok ? 0 : 3);
}

class CbcSolver final : public MilpSolver {
 public:
  [[nodiscard]] std::string name() const override { return "cbc"; }

  /// CLP's dual simplex (CBC's own LP solver), in this process: it keeps to its time limit.
  /// The LP relaxation, in a forked child like a solve: CLP checks its wall-clock limit only
  /// between iterations, and on a model of a million rows one factorization (and the load
  /// before it) runs seconds past it (resnet50, Pi 4, 30 %: 4.6 s for a 2.7 s limit). The
  /// child gets what is left of the limit after its setup; the parent stops it by force at the
  /// limit plus kRelaxationGraceS, and the caller goes on without a bound from it.
  RelaxationResult solve_relaxation(const MilpModel& m, double time_limit_s) override {
    RelaxationResult result;
    const auto start = std::chrono::steady_clock::now();
    auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
    const Forked child = fork_with_pipe([&](int fd) {
      const ColumnForm cf(m);
      ClpSimplex lp;
      lp.setLogLevel(0);
      lp.loadProblem(m.num_vars(), m.num_rows(), cf.col_start.data(), cf.row_of.data(), cf.value.data(),
                     cf.col_lower.data(), cf.col_upper.data(), m.objective_.data(), cf.row_lower.data(),
                     cf.row_upper.data());
      lp.setMaximumWallSeconds(std::max(0.05, time_limit_s - elapsed()));  // CLP's plain limit counts CPU time
      lp.dual();
      const double answer[2] = {lp.isProvenOptimal() ? 1.0 : lp.isProvenPrimalInfeasible() ? 2.0 : 0.0,
                                lp.objectiveValue()};
      const bool sent = ::write(fd, answer, sizeof answer) == static_cast<ssize_t>(sizeof answer);
      ::_exit(sent ? 0 : 1);
    });
    if (child.pid < 0) {
      result.message = "cannot start the LP relaxation: " + child.error;
      return result;
    }
    const pid_t pid = child.pid;
    const int fd = child.fd;
    double answer[2] = {0, 0};
    bool got = false;
    while (true) {
      const double left_s = time_limit_s + kRelaxationGraceS - elapsed();
      if (left_s <= 0) {
        ::kill(pid, SIGKILL);
        break;
      }
      pollfd p{fd, POLLIN, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(std::min(left_s * 1000, 500.0)) + 1);
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) continue;
      got = read_all(fd, answer, sizeof answer);
      break;
    }
    ::close(fd);
    int wstatus = 0;
    ::waitpid(pid, &wstatus, 0);
    result.solve_time_s = elapsed();
    if (got && answer[0] == 1.0) {
      result.optimal = true;
      result.objective = answer[1];
    } else if (got && answer[0] == 2.0) {
      result.infeasible = true;
    } else {
      char buf[96];
      std::snprintf(buf, sizeof buf, "the LP relaxation did not finish in %.3g s", time_limit_s);
      result.message = buf;
    }
    return result;
  }

  SolveResult solve(const MilpModel& m, const SolveOptions& options) override {
    SolveResult result;
    const auto start = std::chrono::steady_clock::now();
    auto elapsed = [&] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    };
    const Forked child = fork_with_pipe([&](int fd) { solve_in_child(m, options, fd); });
    if (child.pid < 0) {
      result.message = "cannot start the solver: " + child.error;
      return result;
    }
    const pid_t pid = child.pid;
    const int fd = child.fd;

    // A grace period past the limit for CBC to wrap up before it is stopped by force.
    const double hard_limit_s =
        options.kill_after_s.value_or(options.time_limit_s * 1.1 + std::min(5.0, 1 + options.time_limit_s / 4));
    bool got_result = false;
    bool killed = false;
    std::optional<double> last_bound;
    ResultHeader h;
    while (true) {
      const double left_s = hard_limit_s - elapsed();
      if (left_s <= 0) {
        ::kill(pid, SIGKILL);
        killed = true;
        break;
      }
      pollfd p{fd, POLLIN, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(std::min(left_s * 1000, 500.0)) + 1);
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0) continue;
      uint8_t tag = 0;
      if (!read_all(fd, &tag, 1)) break;  // the child exited (or crashed) without a result
      if (tag == static_cast<uint8_t>(Record::kProgress)) {
        double values[2];
        if (!read_all(fd, values, sizeof values)) break;
        if (!std::isnan(values[1])) last_bound = values[1];
        if (options.progress) {
          SolveProgress sp;
          sp.elapsed_s = elapsed();
          if (!std::isnan(values[0])) sp.incumbent = values[0];
          if (!std::isnan(values[1])) sp.bound = values[1];
          options.progress(sp);
        }
        continue;
      }
      if (tag != static_cast<uint8_t>(Record::kResult) || !read_all(fd, &h, sizeof h)) break;
      if (h.has_solution != 0) {
        result.x.resize(static_cast<std::size_t>(m.num_vars()));
        if (!read_all(fd, result.x.data(), sizeof(double) * result.x.size())) break;
      }
      got_result = true;
      break;
    }
    ::close(fd);
    int wstatus = 0;
    ::waitpid(pid, &wstatus, 0);
    result.solve_time_s = elapsed();

    // Without a solution of its own, the caller's fallback (or warm start), a feasible
    // assignment, is the best known answer; the bound is whatever CBC proved before it stopped.
    const auto& known = options.fallback ? options.fallback : options.warm_start;
    auto fall_back_on_warm_start = [&](std::string why) {
      result.call = CallStatus::kOk;
      result.message = std::move(why);
      if (!known) {
        result.model = ModelStatus::kNoSolutionFound;
        result.x.clear();
        return result;
      }
      result.model = ModelStatus::kFeasible;
      result.x = *known;
      result.objective = m.objective_value(result.x);
      // A bound above a feasible point's objective is one CBC lost numerically (it then
      // also claims infeasibility): no bound is known.
      const double lowest = -std::numeric_limits<double>::infinity();
      const double b = last_bound.value_or(lowest);
      result.bound = b <= result.objective + 1e-9 * std::max(1.0, std::abs(result.objective))
                         ? b
                         : lowest;
      result.gap = (result.objective - result.bound) / std::max(std::abs(result.objective), 1e-12);
      return result;
    };
    if (killed) return fall_back_on_warm_start("cbc did not stop within its time limit and was stopped");
    if (!got_result) {
      result.call = CallStatus::kError;
      result.message = WIFSIGNALED(wstatus)
                           ? "cbc crashed (signal " + std::to_string(WTERMSIG(wstatus)) + ")"
                           : "cbc exited without a result";
      result.x.clear();
      return result;
    }
    if (h.call_ok == 0) {
      result.call = CallStatus::kError;
      result.message = "cbc abandoned the solve (numerical trouble), secondary status " +
                       std::to_string(h.secondary);
      result.x.clear();
      return result;
    }
    if (h.has_solution == 0 && known)
      return fall_back_on_warm_start("cbc found no solution of its own");
    result.call = CallStatus::kOk;
    result.model = static_cast<ModelStatus>(h.model_status);
    if (h.has_solution != 0) {
      result.objective = h.objective;
      result.bound = std::min(h.bound, h.objective);
      result.gap =
          (result.objective - result.bound) / std::max(std::abs(result.objective), 1e-12);
      if (result.gap <= options.relative_gap) result.model = ModelStatus::kOptimal;
    } else {
      result.bound = h.bound;
    }
    return result;
  }
};

}  // namespace

std::unique_ptr<MilpSolver> make_cbc_solver() { return std::make_unique<CbcSolver>(); }

}  // namespace ergon::planner
