#include "planner/milp.h"

#include <algorithm>
#include <cassert>
#include <cmath>

namespace ergon::planner {

int MilpModel::add_var(double lower, double upper, double objective, VarType type) {
  lower_.push_back(lower);
  upper_.push_back(upper);
  objective_.push_back(objective);
  type_.push_back(type);
  return num_vars() - 1;
}

void MilpModel::add_row(std::span<const int> idx, std::span<const double> coef, double lower,
                        double upper) {
  assert(idx.size() == coef.size());
  for (std::size_t j = 0; j < idx.size(); ++j) {
    assert(idx[j] >= 0 && idx[j] < num_vars());
    row_idx_.push_back(idx[j]);
    row_coef_.push_back(coef[j]);
  }
  row_start_.push_back(static_cast<int64_t>(row_idx_.size()));
  row_lower_.push_back(lower);
  row_upper_.push_back(upper);
}

int MilpModel::num_integers() const {
  return static_cast<int>(std::count(type_.begin(), type_.end(), VarType::kBinary));
}

double MilpModel::max_violation(const std::vector<double>& x) const {
  assert(static_cast<int>(x.size()) == num_vars());
  double worst = 0;
  for (int j = 0; j < num_vars(); ++j) {
    worst = std::max({worst, lower_[j] - x[j], x[j] - upper_[j]});
    if (type_[j] == VarType::kBinary) worst = std::max(worst, std::abs(x[j] - std::round(x[j])));
  }
  for (int r = 0; r < num_rows(); ++r) {
    double activity = 0;
    for (int64_t k = row_start_[r]; k < row_start_[r + 1]; ++k)
      activity += row_coef_[k] * x[row_idx_[k]];
    worst = std::max({worst, row_lower_[r] - activity, activity - row_upper_[r]});
  }
  return worst;
}

double MilpModel::objective_value(const std::vector<double>& x) const {
  double v = 0;
  for (int j = 0; j < num_vars(); ++j) v += objective_[j] * x[j];
  return v;
}

std::string to_string(ModelStatus status) {
  switch (status) {
    case ModelStatus::kOptimal: return "optimal";
    case ModelStatus::kFeasible: return "feasible";
    case ModelStatus::kInfeasible: return "infeasible";
    case ModelStatus::kNoSolutionFound: return "no solution found";
    case ModelStatus::kUnbounded: return "unbounded";
  }
  return "unknown";
}

}  // namespace ergon::planner
