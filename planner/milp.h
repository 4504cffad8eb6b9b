#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace ergon::planner {

/// A mixed-integer linear program, minimized; solver-neutral (no solver types leak here).
class MilpModel {
 public:
  enum class VarType { kContinuous, kBinary };

  /// Adds a column; returns its index.
  int add_var(double lower, double upper, double objective, VarType type);
  /// Adds lower <= sum(coef[j] * x[idx[j]]) <= upper (use +-infinity for one-sided rows).
  void add_row(std::span<const int> idx, std::span<const double> coef, double lower,
               double upper);

  [[nodiscard]] int num_vars() const { return static_cast<int>(lower_.size()); }
  [[nodiscard]] int num_rows() const { return static_cast<int>(row_lower_.size()); }
  [[nodiscard]] int num_integers() const;
  [[nodiscard]] std::size_t num_nonzeros() const { return row_idx_.size(); }
  /// The largest amount by which `x` breaks a bound, a row or integrality (0 when feasible).
  [[nodiscard]] double max_violation(const std::vector<double>& x) const;
  [[nodiscard]] double objective_value(const std::vector<double>& x) const;

  // Storage, read by solver backends: columns, then rows in compressed row form.
  std::vector<double> lower_, upper_, objective_;
  std::vector<VarType> type_;
  std::vector<int64_t> row_start_{0};
  std::vector<int> row_idx_;
  std::vector<double> row_coef_;
  std::vector<double> row_lower_, row_upper_;
};

struct SolveProgress {
  std::string phase;  ///< what is running, for people ("greedy search", "branch and bound", ...)
  double elapsed_s = 0;
  std::optional<double> incumbent;  ///< best objective found so far
  std::optional<double> bound;      ///< best proven lower bound
};

struct SolveOptions {
  double time_limit_s = 60;
  double relative_gap = 1e-6;  ///< stop when (incumbent - bound) / |incumbent| <= this
  int threads = 1;
  std::optional<std::vector<double>> warm_start;  ///< a feasible assignment of every column
  /// A feasible assignment returned (as kFeasible) when the solver finds no solution of its
  /// own; unlike warm_start it does not steer the search (a poor MIP start can slow CBC).
  std::optional<std::vector<double>> fallback;
  std::function<void(const SolveProgress&)> progress;
  bool solver_log = false;  ///< let the backend print its own log to stdout
  /// Stop the backend by force this long after the call began, whatever it is doing (its
  /// best solution so far is lost when it cannot report it in time). Unset: the backend's
  /// own grace past time_limit_s.
  std::optional<double> kill_after_s;
  /// Backend-specific settings by name (for CBC: its command-line parameters, e.g.
  /// {"preprocess", "off"}); unknown names are the backend's to reject.
  std::vector<std::pair<std::string, std::string>> backend_parameters;
};

/// Did the call work at all (a separate question from what the answer is).
enum class CallStatus { kOk, kError };
/// What the answer is.
enum class ModelStatus {
  kOptimal,          ///< proven within the relative gap asked for
  kFeasible,         ///< a solution, stopped by the time limit with a gap
  kInfeasible,       ///< proven: no solution exists
  kNoSolutionFound,  ///< the time limit stopped the search before any solution
  kUnbounded,
};
std::string to_string(ModelStatus status);

struct SolveResult {
  CallStatus call = CallStatus::kError;
  ModelStatus model = ModelStatus::kNoSolutionFound;
  std::string message;  ///< why the call failed, or the backend's one-line summary
  double objective = 0;
  double bound = 0;
  double gap = 0;  ///< relative: (objective - bound) / max(|objective|, tiny)
  double solve_time_s = 0;
  std::vector<double> x;  ///< column values when a solution exists
  [[nodiscard]] bool has_solution() const {
    return call == CallStatus::kOk &&
           (model == ModelStatus::kOptimal || model == ModelStatus::kFeasible);
  }
};

/// The LP relaxation (integrality dropped): its optimum is a lower bound on the MILP's.
struct RelaxationResult {
  bool optimal = false;     ///< solved: `objective` is a proven bound
  bool infeasible = false;  ///< proven: then the MILP is infeasible too
  double objective = 0;
  double solve_time_s = 0;
  std::string message;  ///< why there is no answer
};

class MilpSolver {
 public:
  virtual ~MilpSolver() = default;
  [[nodiscard]] virtual std::string name() const = 0;
  virtual SolveResult solve(const MilpModel& model, const SolveOptions& options) = 0;
  virtual RelaxationResult solve_relaxation(const MilpModel& model, double time_limit_s) = 0;
};

/// COIN-OR CBC (branch and cut). All CBC types stay inside cbc_solver.cpp.
std::unique_ptr<MilpSolver> make_cbc_solver();

}  // namespace ergon::planner
