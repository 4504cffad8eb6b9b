// The only translation unit that sees COIN-OR CBC. Uses CBC's C interface, which runs the
// full CbcMain1 strategy (presolve, cuts, heuristics, threads) on a loaded problem.

#include <coin/Cbc_C_Interface.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>

#include "planner/milp.h"

namespace ergon::planner {
namespace {

// CBC's message callback carries no user pointer: map the model to the solve's context.
struct Context {
  std::function<void(const SolveProgress&)> progress;
  std::chrono::steady_clock::time_point start;
  std::optional<double> incumbent;
  std::optional<double> bound;
};
std::mutex g_contexts_mutex;
std::map<const void*, Context*> g_contexts;

constexpr int kMsgNodeProgress = 10;     // Cbc0010I After N nodes, .. best solution, best possible
constexpr int kMsgIntegerSolution = 12;  // Cbc0012I Integer solution of X found by ...
constexpr int kMsgSolutionFound = 4;     // Cbc0004I Integer solution of X found after ...

void COINLINKAGE_CB on_message(Cbc_Model* model, int msgno, int ndouble, const double* dvec,
                               int /*nint*/, const int* /*ivec*/, int /*nchar*/,
                               char** /*cvec*/) {
  Context* ctx = nullptr;
  {
    std::lock_guard lock(g_contexts_mutex);
    const auto it = g_contexts.find(model);
    if (it != g_contexts.end()) ctx = it->second;
  }
  if (ctx == nullptr || !ctx->progress) return;
  if (msgno == kMsgNodeProgress && ndouble >= 2) {
    if (dvec[0] < 1e49) ctx->incumbent = dvec[0];
    ctx->bound = dvec[1];
  } else if ((msgno == kMsgIntegerSolution || msgno == kMsgSolutionFound) && ndouble >= 1) {
    ctx->incumbent = dvec[0];
  } else {
    return;
  }
  SolveProgress p;
  p.elapsed_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - ctx->start).count();
  p.incumbent = ctx->incumbent;
  p.bound = ctx->bound;
  ctx->progress(p);
}

// CBC's preprocessing and heuristics print to stdout through handlers the C interface does
// not reach. While any quiet solve runs, stdout goes to /dev/null (reference-counted, so
// concurrent solves nest); the caller's own output goes to stderr or comes after the solve.
class StdoutSilencer {
 public:
  StdoutSilencer() {
    std::lock_guard lock(mutex_);
    if (depth_++ > 0) return;
    std::fflush(stdout);
    saved_ = ::dup(STDOUT_FILENO);
    const int null_fd = ::open("/dev/null", O_WRONLY);
    if (null_fd >= 0) {
      ::dup2(null_fd, STDOUT_FILENO);
      ::close(null_fd);
    }
  }
  ~StdoutSilencer() {
    std::lock_guard lock(mutex_);
    if (--depth_ > 0) return;
    std::fflush(stdout);
    if (saved_ >= 0) {
      ::dup2(saved_, STDOUT_FILENO);
      ::close(saved_);
    }
  }
  StdoutSilencer(const StdoutSilencer&) = delete;
  StdoutSilencer& operator=(const StdoutSilencer&) = delete;

 private:
  static inline std::mutex mutex_;
  static inline int depth_ = 0;
  static inline int saved_ = -1;
};

class CbcSolver final : public MilpSolver {
 public:
  [[nodiscard]] std::string name() const override { return "cbc"; }

  SolveResult solve(const MilpModel& m, const SolveOptions& options) override {
    SolveResult result;
    const auto start = std::chrono::steady_clock::now();
    const int ncols = m.num_vars();
    const int nrows = m.num_rows();

    // CBC loads columns in compressed column form; the model stores rows.
    std::vector<CoinBigIndex> col_start(static_cast<std::size_t>(ncols) + 1, 0);
    for (int idx : m.row_idx_) ++col_start[static_cast<std::size_t>(idx) + 1];
    for (int j = 0; j < ncols; ++j) col_start[j + 1] += col_start[j];
    std::vector<int> row_of(m.row_idx_.size());
    std::vector<double> value(m.row_idx_.size());
    std::vector<CoinBigIndex> fill(col_start.begin(), col_start.end() - 1);
    for (int r = 0; r < nrows; ++r) {
      for (int64_t k = m.row_start_[r]; k < m.row_start_[r + 1]; ++k) {
        const int c = m.row_idx_[k];
        row_of[fill[c]] = r;
        value[fill[c]] = m.row_coef_[k];
        ++fill[c];
      }
    }
    auto finite = [](std::vector<double> v) {
      for (double& x : v) x = std::clamp(x, -std::numeric_limits<double>::max(), std::numeric_limits<double>::max());
      return v;
    };
    const auto row_lower = finite(m.row_lower_);
    const auto row_upper = finite(m.row_upper_);
    const auto col_lower = finite(m.lower_);
    const auto col_upper = finite(m.upper_);

    Cbc_Model* model = Cbc_newModel();
    Cbc_loadProblem(model, ncols, nrows, col_start.data(), row_of.data(), value.data(),
                    col_lower.data(), col_upper.data(), m.objective_.data(), row_lower.data(),
                    row_upper.data());
    for (int j = 0; j < ncols; ++j)
      if (m.type_[j] == MilpModel::VarType::kBinary) Cbc_setInteger(model, j);
    Cbc_setObjSense(model, 1.0);
    Cbc_setMaximumSeconds(model, options.time_limit_s);
    Cbc_setAllowableFractionGap(model, options.relative_gap);
    Cbc_setParameter(model, "threads", std::to_string(std::max(1, options.threads)).c_str());
    Cbc_setParameter(model, "timeMode", "elapsed");  // the limit is wall time, not CPU time
    Cbc_setLogLevel(model, options.solver_log ? 1 : (options.progress ? 1 : 0));
    if (!options.solver_log) {
      Cbc_setParameter(model, "log", options.progress ? "1" : "0");
      Cbc_setParameter(model, "slog", "0");
    }
    for (const auto& [key, val] : options.backend_parameters)
      Cbc_setParameter(model, key.c_str(), val.c_str());
    if (options.warm_start && static_cast<int>(options.warm_start->size()) == ncols) {
      std::vector<int> idx(static_cast<std::size_t>(ncols));
      for (int j = 0; j < ncols; ++j) idx[j] = j;
      Cbc_setMIPStartI(model, ncols, idx.data(), options.warm_start->data());
    }

    Context ctx{.progress = options.progress, .start = start};
    if (!options.solver_log) {
      {
        std::lock_guard lock(g_contexts_mutex);
        g_contexts[model] = &ctx;
      }
      Cbc_registerCallBack(model, on_message);
    }
    int rc = 0;
    if (options.solver_log) {
      rc = Cbc_solve(model);
    } else {
      const StdoutSilencer quiet;
      rc = Cbc_solve(model);
    }
    if (!options.solver_log) {
      std::lock_guard lock(g_contexts_mutex);
      g_contexts.erase(model);
    }
    result.solve_time_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

    // Cbc_status: 0 finished, 1 stopped on a limit, 2 abandoned, 5 stopped by an event.
    const int status = Cbc_status(model);
    if (status == 2 || Cbc_isAbandoned(model) != 0) {
      result.call = CallStatus::kError;
      result.message = "cbc abandoned the solve (numerical trouble), return code " +
                       std::to_string(rc) + ", secondary status " +
                       std::to_string(Cbc_secondaryStatus(model));
      Cbc_deleteModel(model);
      return result;
    }
    result.call = CallStatus::kOk;
    const double* best = Cbc_bestSolution(model);
    if (Cbc_isProvenInfeasible(model) != 0) {
      result.model = ModelStatus::kInfeasible;
    } else if (Cbc_isContinuousUnbounded(model) != 0) {
      result.model = ModelStatus::kUnbounded;
    } else if (best == nullptr) {
      result.model = ModelStatus::kNoSolutionFound;
      result.bound = Cbc_getBestPossibleObjValue(model);
    } else {
      result.x.assign(best, best + ncols);
      result.objective = Cbc_getObjValue(model);
      result.bound = std::min(Cbc_getBestPossibleObjValue(model), result.objective);
      result.gap = (result.objective - result.bound) /
                   std::max(std::abs(result.objective), 1e-12);
      result.model = Cbc_isProvenOptimal(model) != 0 || result.gap <= options.relative_gap
                         ? ModelStatus::kOptimal
                         : ModelStatus::kFeasible;
    }
    Cbc_deleteModel(model);
    return result;
  }
};

}  // namespace

std::unique_ptr<MilpSolver> make_cbc_solver() { return std::make_unique<CbcSolver>(); }

}  // namespace ergon::planner
