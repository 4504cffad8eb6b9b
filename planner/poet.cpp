#include "planner/poet.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <limits>

namespace ergon::planner {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kNone = -1;

std::string human_bytes(uint64_t b) {
  char buf[64];
  if (b >= (1ULL << 20)) {
    std::snprintf(buf, sizeof buf, "%.2f MiB", static_cast<double>(b) / (1 << 20));
  } else if (b >= 1024) {
    std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(b) / 1024);
  } else {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(b));
  }
  return buf;
}

/// The POET model's columns, indexed [t][i]; kNone where a variable must be zero.
class PoetModel {
 public:
  PoetModel(const TrainingGraph& g, const PlanRequest& req) : g_(g), n_(g.size()) {
    inputs_ = g.inputs();
    users_ = g.users();
    // Scale rows to O(1): memory in budgets, time in deadlines, energy in single passes.
    mem_scale_ = 1.0 / static_cast<double>(std::max<uint64_t>(req.budget_bytes, 1));
    energy_scale_ = 1.0 / std::max(g.single_pass_energy_j(), 1e-300);
    build(req);
  }

  MilpModel& model() { return m_; }
  [[nodiscard]] double energy_scale() const { return energy_scale_; }

  /// The schedule a solution describes: per stage, page-outs, then computes (each followed
  /// by the frees it triggers), then drops of what the next stage does not keep, then
  /// page-ins.
  Schedule extract(const std::vector<double>& x, uint64_t* claimed_peak) const {
    auto on = [&](int col) { return col != kNone && x[col] > 0.5; };
    Schedule s;
    std::vector<char> resident(n_, 0);
    double peak = 0;
    for (int t = 0; t < n_; ++t) {
      for (int i = 0; i < t; ++i)
        if (on(mout_[t][i])) s.steps.push_back({StepKind::kPageOut, i});
      for (int k = 0; k <= t; ++k) {
        peak = std::max(peak, x[u_[t][k]]);
        if (!on(r_[t][k])) continue;
        s.steps.push_back({StepKind::kCompute, k});
        resident[k] = 1;
        for (const auto& [i, col] : free_[t][k]) {
          if (on(col) && resident[i]) {
            s.steps.push_back({StepKind::kFree, i});
            resident[i] = 0;
          }
        }
      }
      if (t + 1 == n_) break;
      for (int i = 0; i <= t; ++i) {
        if (resident[i] && !on(sram_[t + 1][i])) {
          s.steps.push_back({StepKind::kFree, i});
          resident[i] = 0;
        }
      }
      for (int i = 0; i < t; ++i) {
        if (!on(min_[t][i])) continue;
        s.steps.push_back({StepKind::kPageIn, i});
        if (!on(sram_[t + 1][i])) {
          s.steps.push_back({StepKind::kFree, i});
        } else {
          resident[i] = 1;
        }
      }
    }
    *claimed_peak = static_cast<uint64_t>(std::ceil(peak / mem_scale_));
    return s;
  }

  /// Store-all steers CBC well (it is optimal with room to spare); the paging heuristic does
  /// not (as a MIP start it slowed CBC 10x on the MLP), so it is only a fallback.
  [[nodiscard]] std::optional<std::vector<double>> warm_start(const PlanRequest& req) const {
    auto x = store_all_assignment(req);
    assert(!x || m_.max_violation(*x) < 1e-6);
    return x;
  }
  [[nodiscard]] std::optional<std::vector<double>> fallback(const PlanRequest& req) const {
    auto x = store_all_assignment(req);
    if (!x) x = paging_assignment(req);
    assert(!x || m_.max_violation(*x) < 1e-6);
    return x;
  }

  /// Store-all as an assignment: each output resident from its computation to its last use.
  [[nodiscard]] std::optional<std::vector<double>> store_all_assignment(
      const PlanRequest& req) const {
    Residency res(n_, std::vector<char>(n_, 0));
    for (int t = 0; t < n_; ++t)
      for (int i = 0; i < t; ++i) res[t][i] = static_cast<char>(last_use(i) >= t);
    return residency_assignment(res, {}, req);
  }

  /// "Page out what waits": an output stays in RAM only in the stages that read it and the
  /// stage after its computation; one read three or more stages later is paged out in that
  /// next stage and paged back in the stage before each later read. No recomputation. Fits
  /// budgets far below store-all, at the price of paging energy.
  [[nodiscard]] std::optional<std::vector<double>> paging_assignment(
      const PlanRequest& req) const {
    Residency res(n_, std::vector<char>(n_, 0));
    std::vector<char> paged(n_, 0);
    for (int i = 0; i < n_; ++i) {
      const bool later = last_use(i) > i + 1;
      if (later && i + 1 < n_) res[i + 1][i] = 1;
      paged[i] = static_cast<char>(last_use(i) >= i + 3);
      for (int s : users_[i]) res[s][i] = 1;
    }
    return residency_assignment(res, paged, req);
  }

  using Residency = std::vector<std::vector<char>>;  // [t][i]: output i in RAM at start of t

  [[nodiscard]] int last_use(int i) const { return users_[i].empty() ? i : users_[i].back(); }

  /// The full assignment of a schedule that computes node t (only) in stage t, with the given
  /// RAM residency at each stage start; `paged[i]` pages i out in stage i + 1 and back in at
  /// the end of the stage before each stage that needs it resident without having it. Frees,
  /// memory and paging follow from the model's rules. nullopt when the budget or the deadline
  /// breaks, or when the residency is not reachable.
  [[nodiscard]] std::optional<std::vector<double>> residency_assignment(
      const Residency& res, const std::vector<char>& paged, const PlanRequest& req) const {
    if (g_.single_pass_time_s() > req.deadline_s) return std::nullopt;
    std::vector<double> x(static_cast<std::size_t>(m_.num_vars()), 0.0);
    auto set = [&](int col, double v) {
      if (col != kNone) x[col] = v;
    };
    auto stored = [&](int t, int i) { return !paged.empty() && paged[i] && t >= i + 2; };
    for (int t = 0; t < n_; ++t) {
      set(r_[t][t], 1);
      double u = 0;
      for (int i = 0; i < t; ++i) {
        if (!res[t][i]) continue;
        // Reachable: carried over, just computed, or paged in at the end of the last stage.
        const bool carried = t >= 1 && (res[t - 1][i] || i == t - 1);
        if (!carried && !stored(t - 1, i)) return std::nullopt;
        if (!carried) set(min_[t - 1][i], 1);
        set(sram_[t][i], 1);
        u += static_cast<double>(g_.nodes[i].output_bytes);
      }
      for (int i = 0; i < t; ++i) {
        if (stored(t, i)) set(ssd_[t][i], 1);
        if (!paged.empty() && paged[i] && t == i + 1) {
          if (!res[t][i]) return std::nullopt;
          set(mout_[t][i], 1);
        }
      }
      for (int i : inputs_[t])
        if (!res[t][i] && i != t) return std::nullopt;
      for (int k = 0; k <= t; ++k) {
        if (k == t) u += static_cast<double>(g_.nodes[t].output_bytes);
        set(u_[t][k], u * mem_scale_);
        if (u * mem_scale_ > 1 + 1e-9) return std::nullopt;
        if (k != t) continue;
        for (const auto& [i, col] : free_[t][k]) {
          const bool kept = t + 1 < n_ && res[t + 1][i];
          if (!kept) {
            set(col, 1);
            u -= static_cast<double>(g_.nodes[i].output_bytes);
          }
        }
      }
    }
    return x;
  }

  int binary(double obj = 0) { return m_.add_var(0, 1, obj, MilpModel::VarType::kBinary); }

  void row(std::vector<std::pair<int, double>> terms, double lo, double hi) {
    std::vector<int> idx;
    std::vector<double> coef;
    for (const auto& [col, c] : terms) {
      if (col == kNone || c == 0) continue;
      idx.push_back(col);
      coef.push_back(c);
    }
    if (idx.empty()) return;
    m_.add_row(idx, coef, lo, hi);
  }

  void build(const PlanRequest& req) {
    const auto& nodes = g_.nodes;
    const double e = energy_scale_;
    r_.assign(n_, std::vector<int>(n_, kNone));
    sram_ = ssd_ = min_ = mout_ = u_ = r_;
    free_.assign(n_, std::vector<std::vector<std::pair<int, int>>>(n_));

    for (int t = 0; t < n_; ++t) {
      for (int i = 0; i <= t; ++i) {
        r_[t][i] = i == t ? m_.add_var(1, 1, nodes[i].energy_j * e, MilpModel::VarType::kBinary)
                          : binary(nodes[i].energy_j * e);
      }
      for (int i = 0; i < t; ++i) {
        sram_[t][i] = binary();
        ssd_[t][i] = binary();
        min_[t][i] = binary(nodes[i].pagein_energy_j * e);
        mout_[t][i] = binary(nodes[i].pageout_energy_j * e);
      }
      for (int k = 0; k <= t; ++k) u_[t][k] = m_.add_var(0, 1, 0, MilpModel::VarType::kContinuous);
      for (int k = 0; k <= t; ++k) {
        // Free[t,(i,k)] for each input i of k, and k's self-edge (Checkmate).
        for (int i : inputs_[k]) free_[t][k].emplace_back(i, binary());
        free_[t][k].emplace_back(k, binary());
      }
    }

    for (int t = 0; t < n_; ++t) {
      // Dependencies: k computed in t needs each input computed in t or resident at its start.
      for (int k = 0; k <= t; ++k)
        for (int i : inputs_[k]) row({{r_[t][k], 1}, {r_[t][i], -1}, {sram_[t][i], -1}}, -kInf, 0);
      // Paging needs the source, and residency carries over only from what was there.
      for (int i = 0; i < t; ++i) {
        row({{min_[t][i], 1}, {ssd_[t][i], -1}}, -kInf, 0);
        row({{mout_[t][i], 1}, {sram_[t][i], -1}}, -kInf, 0);
      }
      if (t + 1 < n_) {
        for (int i = 0; i <= t; ++i) {
          row({{sram_[t + 1][i], 1}, {sram_[t][i], -1}, {r_[t][i], -1}, {min_[t][i], -1}}, -kInf,
              0);
          row({{ssd_[t + 1][i], 1}, {ssd_[t][i], -1}, {mout_[t][i], -1}}, -kInf, 0);
        }
      }
      // Memory: U[t,0] = R[t,0] m_0 + sum_i S_RAM[t,i] m_i;
      // U[t,k+1] = U[t,k] + R[t,k+1] m_{k+1} - sum over edges into k (and k) of m_i Free.
      auto m = [&](int i) { return static_cast<double>(nodes[i].output_bytes) * mem_scale_; };
      {
        std::vector<std::pair<int, double>> terms = {{u_[t][0], 1}, {r_[t][0], -m(0)}};
        for (int i = 0; i < t; ++i) terms.emplace_back(sram_[t][i], -m(i));
        row(terms, 0, 0);
      }
      for (int k = 0; k < t; ++k) {
        std::vector<std::pair<int, double>> terms = {
            {u_[t][k + 1], 1}, {u_[t][k], -1}, {r_[t][k + 1], -m(k + 1)}};
        for (const auto& [i, col] : free_[t][k]) terms.emplace_back(col, m(i));
        row(terms, 0, 0);
      }
      // Free[t,(i,k)] = R[t,k] (1 - S_RAM[t+1,i]) prod_{users j > k of i} (1 - R[t,j]),
      // linearized with the hazard count h: Free >= 1 - h and kappa (1 - Free) >= h.
      for (int k = 0; k <= t; ++k) {
        for (const auto& [i, col] : free_[t][k]) {
          std::vector<std::pair<int, double>> hazards = {{r_[t][k], -1}};  // (1 - R) -> const 1
          double constant = 1;
          if (t + 1 < n_) hazards.emplace_back(sram_[t + 1][i], 1);
          for (int j : users_[i])
            if (j > k && j <= t) hazards.emplace_back(r_[t][j], 1);
          const double kappa = static_cast<double>(hazards.size());
          // 1 - Free <= constant + sum(h)  ->  -Free - sum(h) <= constant - 1
          std::vector<std::pair<int, double>> a = {{col, -1}};
          for (const auto& [c, v] : hazards) a.emplace_back(c, -v);
          row(a, -kInf, constant - 1);
          // kappa (1 - Free) >= constant + sum(h)  ->  -kappa Free - sum(h) >= constant - kappa
          std::vector<std::pair<int, double>> b = {{col, -kappa}};
          for (const auto& [c, v] : hazards) b.emplace_back(c, -v);
          row(b, constant - kappa, kInf);
        }
      }
    }
    // Deadline on compute time (POET leaves paging time out).
    if (std::isfinite(req.deadline_s)) {
      std::vector<std::pair<int, double>> terms;
      for (int t = 0; t < n_; ++t)
        for (int i = 0; i <= t; ++i) terms.emplace_back(r_[t][i], nodes[i].time_s / req.deadline_s);
      row(terms, -kInf, 1);
    }
  }

  const TrainingGraph& g_;
  int n_;
  std::vector<std::vector<int>> inputs_, users_;
  double mem_scale_ = 1;
  double energy_scale_ = 1;
  MilpModel m_;
  std::vector<std::vector<int>> r_, sram_, ssd_, min_, mout_, u_;
  std::vector<std::vector<std::vector<std::pair<int, int>>>> free_;  // [t][k] -> (i, column)
};

}  // namespace

PoetModelInfo build_poet_model(const TrainingGraph& graph, const PlanRequest& request) {
  PoetModel poet(graph, request);
  PoetModelInfo info;
  info.warm_start = poet.warm_start(request);
  info.fallback = poet.fallback(request);
  info.model = std::move(poet.model());
  return info;
}

std::string infeasibility_reason(const TrainingGraph& graph, const PlanRequest& request) {
  int node = 0;
  const uint64_t min_bytes = graph.min_working_set_bytes(&node);
  if (request.budget_bytes < min_bytes) {
    return "budget " + human_bytes(request.budget_bytes) + " is below the " +
           human_bytes(min_bytes) + " any schedule needs (" + graph.nodes[node].name +
           " needs its inputs and output in memory at once)";
  }
  const double one_pass = graph.single_pass_time_s();
  if (request.deadline_s < one_pass * (1 - 1e-12)) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "deadline %.6g s is shorter than one pass over the graph (%.6g s): no "
                  "schedule can meet it",
                  request.deadline_s, one_pass);
    return buf;
  }
  return {};
}

PlanResult plan_poet(const TrainingGraph& graph, const PlanRequest& request, MilpSolver& solver) {
  PlanResult result;
  result.planner = "poet";
  if (std::string why = infeasibility_reason(graph, request); !why.empty()) {
    result.status = ModelStatus::kInfeasible;
    result.why = std::move(why);
    return result;
  }
  PoetModel poet(graph, request);
  MilpModel& model = poet.model();
  result.variables = model.num_vars();
  result.integers = model.num_integers();
  result.rows = model.num_rows();
  result.nonzeros = model.num_nonzeros();

  SolveOptions options;
  options.time_limit_s = request.time_limit_s;
  options.relative_gap = request.relative_gap;
  options.threads = request.threads;
  options.backend_parameters = request.solver_parameters;
  const double scale = poet.energy_scale();
  if (request.progress) {
    options.progress = [&](const SolveProgress& p) {
      SolveProgress unscaled = p;
      if (p.incumbent) unscaled.incumbent = *p.incumbent / scale;
      if (p.bound) unscaled.bound = *p.bound / scale;
      request.progress(unscaled);
    };
  }
  options.warm_start = poet.warm_start(request);
  options.fallback = poet.fallback(request);

  const SolveResult solved = solver.solve(model, options);
  result.call = solved.call;
  result.status = solved.model;
  result.solve_time_s = solved.solve_time_s;
  if (solved.call != CallStatus::kOk) {
    result.why = solved.message;
    return result;
  }
  result.bound_j = solved.bound / scale;
  if (!solved.has_solution()) {
    if (solved.model == ModelStatus::kInfeasible) {
      result.why = "no schedule fits a budget of " + human_bytes(request.budget_bytes) +
                   " and the deadline together; loosen either";
    } else if (solved.solve_time_s >= request.time_limit_s) {
      result.why = "the time limit (" + std::to_string(static_cast<int>(request.time_limit_s)) +
                   " s) ran out before a schedule was found" +
                   (solved.message.empty() ? "" : " (" + solved.message + ")");
    } else {
      char buf[200];
      std::snprintf(buf, sizeof buf,
                    "the solver stopped after %.1f s without a schedule and without proving "
                    "that none exists; the budget may be too small for POET's stage model",
                    solved.solve_time_s);
      result.why = buf;
    }
    return result;
  }
  result.objective_j = solved.objective / scale;
  // Every node is computed at least once: one pass is a lower bound whatever the solver says.
  result.bound_j = std::max(result.bound_j, graph.single_pass_energy_j());
  result.bound_j = std::min(result.bound_j, result.objective_j);
  result.gap = (result.objective_j - result.bound_j) / std::max(result.objective_j, 1e-300);
  if (result.gap <= request.relative_gap) result.status = ModelStatus::kOptimal;
  result.schedule = poet.extract(solved.x, &result.claimed_peak_bytes);
  return result;
}

}  // namespace ergon::planner
