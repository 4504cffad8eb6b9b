#include "planner/poet.h"

#include "common/units.h"
#include "planner/baselines.h"

#include "planner/bounds.h"
#include "planner/stage_plan.h"
#include "planner/tail_plan.h"

#include <algorithm>
#include <cassert>
#include <chrono>
#include <cmath>
#include <limits>

namespace ergon::planner {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int kNone = -1;

/// The POET model's columns, indexed [t][i]; kNone where a variable must be zero.
class PoetModel {
 public:
  PoetModel(const TrainingGraph& g, const PlanRequest& req)
      : g_(g), n_(g.size()), late_from_(g.backward_phase_start()), objective_(req.objective) {
    inputs_ = g.inputs();
    users_ = g.users();
    // Scale rows to O(1): memory in budgets, time in deadlines or single passes, energy in
    // single passes.
    mem_scale_ = 1.0 / static_cast<double>(std::max<uint64_t>(req.budget_bytes, 1));
    energy_scale_ = 1.0 / std::max(g.single_pass_energy_j(), 1e-300);
    time_scale_ = 1.0 / std::max(g.single_pass_time_s(), 1e-300);
    build(req);
  }

  MilpModel& model() { return m_; }
  [[nodiscard]] double energy_scale() const { return energy_scale_; }

  /// The stage plan a solution describes.
  [[nodiscard]] StagePlan plan_from(const std::vector<double>& x) const {
    auto on = [&](int col) { return static_cast<char>(col != kNone && x[col] > 0.5); };
    StagePlan p(n_);
    for (int t = 0; t < n_; ++t) {
      for (int i = 0; i <= t; ++i) {
        p.compute[t][i] = on(r_[t][i]);
        p.ram[t][i] = on(sram_[t][i]);
        p.ssd[t][i] = on(ssd_[t][i]);
        p.page_in[t][i] = on(min_[t][i]);
        p.page_in_late[t][i] = on(min_late_[t][i]);
        p.page_out[t][i] = on(mout_[t][i]);
      }
    }
    // kTotal: a stage may mark a page-out the solver had no reason to clear (it costs nothing
    // there); only a span that lands the tensor on storage is a page-out.
    if (objective_ == Objective::kTotal) {
      for (int i = 0; i < n_; ++i) {
        for (int t = i + 1; t < n_; ++t) {
          if (!p.page_out[t][i]) continue;
          int last = t;
          while (last + 1 < n_ && p.page_out[last + 1][i]) ++last;
          // The span ends where the tensor lands; the rest of the run pages nothing.
          int kept = t - 1;
          for (int s = t; s <= last && kept < t; ++s)
            if (s + 1 < n_ && p.ssd[s + 1][i] && !p.ssd[s][i]) kept = s;
          for (int s = kept + 1; s <= last; ++s) p.page_out[s][i] = 0;
          t = last;
        }
      }
    }
    return p;
  }

  /// Every column's value for a plan: the binaries as the plan sets them, Free by its
  /// definition, U by the memory recurrence. nullopt when the plan breaks the budget or the
  /// deadline (the caller checks the plan's own rules).
  [[nodiscard]] std::optional<std::vector<double>> assignment(const StagePlan& p,
                                                              const PlanRequest& req) const {
    std::vector<double> x(static_cast<std::size_t>(m_.num_vars()), 0.0);
    bool representable = true;  // false when the plan uses a move the model does not allow
    auto set = [&](int col, char v) {
      if (col != kNone) {
        x[col] = v ? 1.0 : 0.0;
      } else if (v) {
        representable = false;
      }
    };
    const bool total = objective_ == Objective::kTotal;
    const StagePlanCosts costs = evaluate_stage_plan(g_, p, objective_);
    std::vector<double> paged_out_s(static_cast<std::size_t>(n_), 0.0);  // C[t,i] as t goes
    std::size_t next_share = 0;
    for (int t = 0; t < n_; ++t) {
      for (int i = 0; i < t; ++i)
        if (!p.page_out[t][i]) paged_out_s[i] = 0;
      for (; next_share < costs.page_out_shares.size() && costs.page_out_shares[next_share].stage == t; ++next_share) {
        const auto& share = costs.page_out_shares[next_share];
        paged_out_s[share.node] += share.time_s;
        x[paged_[t][share.node]] = share.time_s * time_scale_;
      }
      for (int i = 0; i < t; ++i) {
        if (cum_[t][i] != kNone) x[cum_[t][i]] = paged_out_s[i] * time_scale_;
        if (going_on_[t][i] != kNone) x[going_on_[t][i]] = p.page_out[t][i] && p.page_out[t + 1][i];
        if (through_[t][i] != kNone)
          x[through_[t][i]] = p.page_out[t - 1][i] && p.page_out[t][i] && p.page_out[t + 1][i];
      }
      double u = 0;
      for (int i = 0; i <= t; ++i) {
        set(r_[t][i], p.compute[t][i]);
        set(sram_[t][i], p.ram[t][i]);
        set(ssd_[t][i], p.ssd[t][i]);
        set(min_[t][i], p.page_in[t][i]);
        set(min_late_[t][i], p.page_in_late[t][i]);
        set(mout_[t][i], p.page_out[t][i]);
        if (i < t && (p.ram[t][i] || (total && p.page_in[t][i])))
          u += static_cast<double>(g_.nodes[i].output_bytes);
      }
      for (int k = 0; k <= t; ++k) {
        if (p.compute[t][k]) u += static_cast<double>(g_.nodes[k].output_bytes);
        x[u_[t][k]] = u * mem_scale_;
        if (u * mem_scale_ > 1 + 1e-9) return std::nullopt;
        for (const auto& [i, col] : free_[t][k]) {
          if (!frees_after(p, users_, t, i, k, objective_)) continue;
          x[col] = 1;
          u -= static_cast<double>(g_.nodes[i].output_bytes);
        }
      }
      if (duration_[t] != kNone) x[duration_[t]] = costs.stage_time_s[t] * time_scale_;
    }
    if (!representable || costs.deadline_time_s > req.deadline_s * (1 + 1e-9) ||
        costs.stash_bytes > req.stash_budget_bytes)
      return std::nullopt;
    return x;
  }

  /// Whether i's page-out may span stages (kTotal, a page-out that takes time).
  [[nodiscard]] bool spans(int i) const {
    return objective_ == Objective::kTotal && g_.nodes[i].pageout_time_s > 0;
  }

  int binary(double obj = 0) { return m_.add_var(0, 1, obj, MilpModel::VarType::kBinary); }
  int continuous01() { return m_.add_var(0, 1, 0, MilpModel::VarType::kContinuous); }

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
    const bool total = objective_ == Objective::kTotal;
    // kTotal charges energy above idle per activity and idle power over the stages' durations.
    auto charge = [&](double energy_j, double time_s) {
      return (total ? g_.dynamic_energy_j(energy_j, time_s) : energy_j) * e;
    };
    r_.assign(n_, std::vector<int>(n_, kNone));
    sram_ = ssd_ = min_ = mout_ = u_ = min_late_ = cum_ = paged_ = going_on_ = through_ = r_;
    duration_.assign(n_, kNone);
    free_.assign(n_, std::vector<std::vector<std::pair<int, int>>>(n_));

    for (int t = 0; t < n_; ++t) {
      for (int i = 0; i <= t; ++i) {
        const NodeCost c = g_.compute_cost(i, t >= late_from_);
        const double cost = charge(c.energy_j, c.time_s);
        if (i == t) {
          r_[t][i] = m_.add_var(1, 1, cost, MilpModel::VarType::kBinary);
        } else if (req.allowed.recompute) {
          r_[t][i] = binary(cost);
        }
      }
      for (int i = 0; i < t; ++i) {
        sram_[t][i] = binary();
        if (!req.allowed.paging) continue;
        ssd_[t][i] = binary();
        min_[t][i] = binary(charge(nodes[i].pagein_energy_j, nodes[i].pagein_time_s));
        // kTotal: a page-in may also go after the stage's computes (memory from t + 1).
        if (total)
          min_late_[t][i] = binary(charge(nodes[i].pagein_energy_j, nodes[i].pagein_time_s));
        if (spans(i)) {
          // The page-out's energy goes with its channel time Y, at the transfer's rate.
          mout_[t][i] = binary();
          const double out_s = nodes[i].pageout_time_s * time_scale_;
          paged_[t][i] = m_.add_var(0, out_s,
                                    charge(nodes[i].pageout_energy_j, nodes[i].pageout_time_s) / out_s,
                                    MilpModel::VarType::kContinuous);
          cum_[t][i] = m_.add_var(0, out_s, 0, MilpModel::VarType::kContinuous);
        } else {
          mout_[t][i] = binary(charge(nodes[i].pageout_energy_j, nodes[i].pageout_time_s));
        }
      }
      for (int k = 0; k <= t; ++k) u_[t][k] = m_.add_var(0, 1, 0, MilpModel::VarType::kContinuous);
      for (int k = 0; k <= t; ++k) {
        // Free[t,(i,k)] for each input i of k, and k's self-edge (Checkmate).
        for (int i : inputs_[k]) free_[t][k].emplace_back(i, continuous01());
        free_[t][k].emplace_back(k, continuous01());
      }
    }

    for (int t = 0; t < n_; ++t) {
      // Dependencies: k computed in t needs each input computed in t or resident at its start.
      for (int k = 0; k <= t; ++k)
        for (int i : inputs_[k]) row({{r_[t][k], 1}, {r_[t][i], -1}, {sram_[t][i], -1}}, -kInf, 0);
      // Paging needs the source, and residency carries over only from what was there.
      for (int i = 0; i < t; ++i) {
        row({{min_[t][i], 1}, {ssd_[t][i], -1}}, -kInf, 0);
        row({{min_late_[t][i], 1}, {ssd_[t][i], -1}}, -kInf, 0);
        row({{mout_[t][i], 1}, {sram_[t][i], -1}}, -kInf, 0);
        if (cum_[t][i] != kNone) {
          // Y[t,i], the channel time i's page-out takes in stage t, and C[t,i], what its
          // page-out has done by the end of stage t, are zero unless stage t pages i out; C
          // grows by Y (a page-out interrupted starts over); i is on storage from t + 1
          // only once C[t,i] covers the whole page-out, or it was already.
          const double out_s = nodes[i].pageout_time_s * time_scale_;
          const int before = cum_[t - 1][i];  // kNone at t = i + 1: nothing before
          row({{paged_[t][i], 1}, {mout_[t][i], -out_s}}, -kInf, 0);
          row({{cum_[t][i], 1}, {mout_[t][i], -out_s}}, -kInf, 0);
          row({{cum_[t][i], 1}, {before, -1}, {paged_[t][i], -1}}, -kInf, 0);
          if (t + 1 < n_)
            row({{ssd_[t + 1][i], out_s}, {ssd_[t][i], -out_s}, {cum_[t][i], -1}}, -kInf, 0);
        }
      }
      if (t + 1 < n_) {
        for (int i = 0; i <= t; ++i) {
          row({{sram_[t + 1][i], 1},
               {sram_[t][i], -1},
               {r_[t][i], -1},
               {min_[t][i], -1},
               {min_late_[t][i], -1}},
              -kInf, 0);
          row({{ssd_[t + 1][i], 1}, {ssd_[t][i], -1}, {mout_[t][i], -1}}, -kInf, 0);
        }
      }
      // The stash: what the backward phase's first stage starts with in RAM.
      if (t == late_from_ && req.stash_budget_bytes != std::numeric_limits<uint64_t>::max()) {
        std::vector<std::pair<int, double>> terms;
        for (int i = 0; i < t; ++i)
          terms.emplace_back(sram_[t][i], static_cast<double>(nodes[i].output_bytes) * mem_scale_);
        row(terms, -kInf, static_cast<double>(req.stash_budget_bytes) * mem_scale_);
      }
      // Memory: U[t,0] = R[t,0] m_0 + sum_i S_RAM[t,i] m_i;
      // U[t,k+1] = U[t,k] + R[t,k+1] m_{k+1} - sum over edges into k (and k) of m_i Free.
      auto m = [&](int i) { return static_cast<double>(nodes[i].output_bytes) * mem_scale_; };
      {
        std::vector<std::pair<int, double>> terms = {{u_[t][0], 1}, {r_[t][0], -m(0)}};
        for (int i = 0; i < t; ++i) terms.emplace_back(sram_[t][i], -m(i));
        // kTotal: what is paged in during the stage holds its memory all stage.
        if (total)
          for (int i = 0; i < t; ++i) terms.emplace_back(min_[t][i], -m(i));
        row(terms, 0, 0);
      }
      for (int k = 0; k < t; ++k) {
        std::vector<std::pair<int, double>> terms = {
            {u_[t][k + 1], 1}, {u_[t][k], -1}, {r_[t][k + 1], -m(k + 1)}};
        for (const auto& [i, col] : free_[t][k]) terms.emplace_back(col, m(i));
        row(terms, 0, 0);
      }
      // Free[t,(i,k)] = R[t,k] (1 - S_RAM[t+1,i]) prod_{users j > k of i} (1 - R[t,j]).
      // Freeing only ever lowers memory, so Free needs no lower bound: a continuous Free
      // below each factor (Free <= R[t,k], Free <= 1 - S_RAM[t+1,i], Free <= 1 - R[t,j])
      // takes the product's value at an optimum. This is tighter than Checkmate's aggregated
      // linearization (kappa (1 - Free) >= sum of hazards) and needs no binaries.
      for (int k = 0; k <= t; ++k) {
        for (const auto& [i, col] : free_[t][k]) {
          row({{col, 1}, {r_[t][k], -1}}, -kInf, 0);
          if (t + 1 < n_) row({{col, 1}, {sram_[t + 1][i], 1}}, -kInf, 1);
          // kTotal: an output being paged out stays until the stage ends.
          if (total && i < t) row({{col, 1}, {mout_[t][i], 1}}, -kInf, 1);
          for (int j : users_[i])
            if (j > k && j <= t) row({{col, 1}, {r_[t][j], 1}}, -kInf, 1);
        }
      }
    }
    if (total) {
      build_span_rule();
      build_durations(req);
      return;
    }
    // Deadline on compute time (POET leaves paging time out).
    if (std::isfinite(req.deadline_s)) {
      std::vector<std::pair<int, double>> terms;
      for (int t = 0; t < n_; ++t)
        for (int i = 0; i <= t; ++i)
          terms.emplace_back(r_[t][i], g_.compute_cost(i, t >= late_from_).time_s / req.deadline_s);
      row(terms, -kInf, 1);
    }
  }

  /// kTotal: the rules that keep the channel's order of issue, which the simulator and a
  /// board follow, from making a stage wait longer than the model says (see StagePlan). A
  /// stage's page-ins go first, then its page-outs, one that goes on into the next stage
  /// last. G[t,i] >= M_out[t,i] + M_out[t+1,i] - 1 marks a page-out going on from stage t:
  /// at most one does, and then the stage has no late page-in. K[t,i] >= M_out[t-1,i] +
  /// M_out[t,i] + M_out[t+1,i] - 2 marks one running through stage t: then the stage's
  /// transfers count 1, its own.
  void build_span_rule() {
    const double big = n_;
    for (int t = 0; t + 1 < n_; ++t) {
      std::vector<std::pair<int, double>> count, going;
      for (int i = 0; i < t; ++i) {
        count.emplace_back(min_[t][i], 1);
        count.emplace_back(min_late_[t][i], 1);
        count.emplace_back(mout_[t][i], 1);
        going.emplace_back(min_late_[t][i], 1);
        if (cum_[t][i] == kNone) continue;
        going_on_[t][i] = continuous01();
        row({{going_on_[t][i], 1}, {mout_[t][i], -1}, {mout_[t + 1][i], -1}}, -1, kInf);
        going.emplace_back(going_on_[t][i], big);
        if (i + 1 < t) {  // paged out in stage t - 1 too
          through_[t][i] = continuous01();
          row({{through_[t][i], 1}, {mout_[t - 1][i], -1}, {mout_[t][i], -1}, {mout_[t + 1][i], -1}}, -2, kInf);
          count.emplace_back(through_[t][i], big);
        }
      }
      row(count, -kInf, big + 1);
      row(going, -kInf, big);
    }
  }

  /// kTotal: a stage lasts D[t] >= its compute time and >= its transfer time (transfers
  /// overlap compute); idle power is charged over sum D, and the deadline bounds sum D.
  void build_durations(const PlanRequest& req) {
    const auto& nodes = g_.nodes;
    std::vector<std::pair<int, double>> makespan;
    for (int t = 0; t < n_; ++t) {
      // D is in single passes; idle power over one single pass is its cost per unit.
      duration_[t] = m_.add_var(0, kInf, g_.idle_power_w / time_scale_ * energy_scale_,
                                MilpModel::VarType::kContinuous);
      // D >= compute + late page-ins and D >= transfers + late page-ins.
      std::vector<std::pair<int, double>> compute = {{duration_[t], 1}};
      for (int i = 0; i <= t; ++i)
        compute.emplace_back(r_[t][i], -g_.compute_cost(i, t >= late_from_).time_s * time_scale_);
      std::vector<std::pair<int, double>> transfers = {{duration_[t], 1}};
      for (int i = 0; i < t; ++i) {
        transfers.emplace_back(min_[t][i], -nodes[i].pagein_time_s * time_scale_);
        if (paged_[t][i] != kNone) {
          transfers.emplace_back(paged_[t][i], -1);
        } else {
          transfers.emplace_back(mout_[t][i], -nodes[i].pageout_time_s * time_scale_);
        }
        compute.emplace_back(min_late_[t][i], -nodes[i].pagein_time_s * time_scale_);
        transfers.emplace_back(min_late_[t][i], -nodes[i].pagein_time_s * time_scale_);
      }
      row(compute, 0, kInf);
      row(transfers, 0, kInf);
      makespan.emplace_back(duration_[t], 1);
    }
    if (std::isfinite(req.deadline_s)) row(makespan, -kInf, req.deadline_s * time_scale_);
  }

  const TrainingGraph& g_;
  int n_;
  int late_from_ = 0;  ///< stages from here on run in the backward phase's mode
  Objective objective_;
  std::vector<std::vector<int>> inputs_, users_;
  double mem_scale_ = 1;
  double energy_scale_ = 1;
  double time_scale_ = 1;
  std::vector<int> duration_;  ///< D[t] (kTotal), kNone otherwise
  MilpModel m_;
  std::vector<std::vector<int>> r_, sram_, ssd_, min_, mout_, u_;
  std::vector<std::vector<int>> min_late_;  ///< kTotal: page-in after the stage's computes
  /// kTotal: C[t,i], the time the page-out of i under way in stage t has used the storage
  /// channel by the stage's end (in single passes); a page-out may span stages, and i lands
  /// on storage once C reaches its page-out time.
  std::vector<std::vector<int>> cum_;
  std::vector<std::vector<int>> paged_;  ///< kTotal: Y[t,i], stage t's share of i's page-out
  std::vector<std::vector<int>> going_on_;  ///< kTotal: G[t,i], a page-out goes on from stage t
  std::vector<std::vector<int>> through_;  ///< kTotal: K[t,i], a page-out runs through stage t
  std::vector<std::vector<std::vector<std::pair<int, int>>>> free_;  // [t][k] -> (i, column)
};

/// The budget a request gives the greedy search: its stages' and its stash's.
MemoryBudget memory_budget(const PlanRequest& req) { return {req.budget_bytes, req.stash_budget_bytes}; }

}  // namespace

PoetModelInfo build_poet_model(const TrainingGraph& graph, const PlanRequest& request) {
  const PlanRequest req = for_activations(graph, request);
  PoetModel poet(graph, req);
  PoetModelInfo info;
  if (auto plan = greedy_stage_plan(graph, memory_budget(req), req.deadline_s, req.allowed, 5,
                                    req.objective))
    info.warm_start = poet.assignment(*plan, req);
  info.model = std::move(poet.model());
  return info;
}

uint64_t activation_budget_bytes(const TrainingGraph& graph, const PlanRequest& request) {
  if (request.objective != Objective::kTotal || request.activations_only)
    return request.budget_bytes;
  return request.budget_bytes > graph.fixed_bytes ? request.budget_bytes - graph.fixed_bytes : 0;
}

PlanRequest for_activations(const TrainingGraph& graph, const PlanRequest& request) {
  PlanRequest req = request;
  req.budget_bytes = activation_budget_bytes(graph, request);
  if (request.stash_budget_bytes != std::numeric_limits<uint64_t>::max()) {
    PlanRequest stash = request;
    stash.budget_bytes = request.stash_budget_bytes;
    req.stash_budget_bytes = activation_budget_bytes(graph, stash);
  }
  req.activations_only = true;
  return req;
}

std::string infeasibility_reason(const TrainingGraph& graph, const PlanRequest& request) {
  int node = 0;
  const uint64_t min_bytes = graph.min_working_set_bytes(&node);
  if (activation_budget_bytes(graph, request) < min_bytes) {
    const bool total = request.objective == Objective::kTotal && !request.activations_only;
    return "budget " + format_bytes(request.budget_bytes) + " is below the " +
           format_bytes(min_bytes + (total ? graph.fixed_bytes : 0)) + " any schedule needs (" +
           (total ? format_bytes(graph.fixed_bytes) + " of parameters, gradients and optimizer "
                                                     "state, and " : std::string()) +
           graph.nodes[node].name + " needs its inputs and output in memory at once)";
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

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// Sets a result's bound (never above its objective), and its gap and status from it.
void set_bound(PlanResult& r, double bound_j, double relative_gap) {
  r.bound_j = std::min(bound_j, r.objective_j);
  r.gap = (r.objective_j - r.bound_j) / std::max(r.objective_j, 1e-300);
  // The plan's energy and the bound add the same costs in different orders: a gap of a
  // few ulps is rounding, and the output says 0 rather than 4.5e-14 %.
  if (r.gap < 1e-12) r.gap = 0;
  r.status = r.gap <= relative_gap ? ModelStatus::kOptimal : ModelStatus::kFeasible;
}

/// Fills the result's claims from a plan. Every node is computed at least once, so one pass
/// is a lower bound whatever else is known.
void claim(const TrainingGraph& graph, const StagePlan& plan, double bound_j,
           const PlanRequest& request, PlanResult& result) {
  const StagePlanCosts costs = evaluate_stage_plan(graph, plan, request.objective);
  result.objective_j = costs.energy_j;
  result.claimed_peak_bytes = costs.peak_bytes;
  set_bound(result, std::max(bound_j, graph.single_pass_energy_j()), request.relative_gap);
  result.schedule = to_schedule(graph, plan, request.objective);
}

/// Above this many nodes the stage MILP (about 5 n^2 / 2 binaries) is not built: it would
/// take gigabytes and its LP alone more than any default time limit.
constexpr int kMaxMilpNodes = 400;
/// The share of the time limit the greedy search may take to find its first plan. It binds
/// only where the greedy is slow (250+ nodes: each candidate it measures re-evaluates the whole plan),
/// and there the stage MILP finds nothing in the time left either: measured on bert-base,
/// gpt2, mobilenetv2 and resnet50 (docs/performance.md), a half left many of them to the
/// fallback baseline, depending on the machine's load.
constexpr double kGreedyGiveUpShare = 0.8;
/// The share of the time limit the local search may run to on graphs too large for the stage
/// MILP, which then has nothing after it but the replay. Half, as on smaller graphs, left
/// DenseNet-121, Inception-v3, Swin-T and EfficientNet-B0 (Pi 4, 30 %) searching when it
/// stopped; given the rest they improved (docs/performance.md, twelfth increment). On graphs
/// of 270 to 400 nodes 85 % instead of half changed no plan: their searches end on their own.
constexpr double kSearchShareWithoutMilp = 0.85;
/// The share of the limit replan_tail() may take after the greedy search.
constexpr double kTailShare = 0.1;
/// whole_graph_search() (graphs under 64 nodes): the time and states it may take. Those it
/// ends on end fast (the MLP: 0.2 s); bert-tiny (55 nodes) does not end in 5,000,000 states,
/// and what it proves there is below the memory bound.
constexpr double kWholeGraphShare = 0.05;
constexpr double kWholeGraphMaxS = 1.0;
constexpr std::size_t kWholeGraphMaxStates = 250'000;
/// The same search again, longer, where the greedy search and the tails leave a small
/// graph's plan unproven: where it ends, its plan is the stage model's optimum under poet.
/// The stem and layer1 of ResNet-18 CIFAR at 45 % of the Pi 4 take 447,000 states (1.5 s);
/// the greedy search, its kicks and CBC for 455 s all end 1.25 % above that optimum.
constexpr double kWholeGraphAgainShare = 0.25;
constexpr std::size_t kWholeGraphAgainMaxStates = 2'000'000;

/// Whether `plan` keeps the request's budget, stash budget and deadline, as the stage model
/// measures it: what a plan from another model (a contained one, the relaxed whole-graph
/// search, which leaves the deadline and the stash out) must show.
bool meets_request(const TrainingGraph& graph, const StagePlan& plan, const PlanRequest& req) {
  const StagePlanCosts costs = evaluate_stage_plan(graph, plan, req.objective);
  return costs.peak_bytes <= req.budget_bytes && costs.stash_bytes <= req.stash_budget_bytes &&
         costs.deadline_time_s <= req.deadline_s * (1 + 1e-9);
}

/// The share of the limit each contained baseline may take, and its least time.
constexpr double kBaselineShare = 0.05;
constexpr double kBaselineMinS = 0.1;

/// The schedules of the baselines whose moves POET's contain, each a result of poet's bounded
/// by `bound_j`: store-all; chen with recomputation; capuchin with what the request allows,
/// and with recomputation only and paging only; rotor (recomputation) and pofo (both) where
/// the graph is a chain; page-all with paging. Only those that found a schedule.
std::vector<PlanResult> contained_baselines(const TrainingGraph& graph, const PlanRequest& request,
                                            double bound_j) {
  const AllowedMoves allowed = request.allowed;
  std::vector<std::pair<std::string, AllowedMoves>> runs = {{"store-all", allowed}};
  if (allowed.recompute) runs.emplace_back("chen", allowed);
  runs.emplace_back("capuchin", allowed);
  if (allowed.recompute && allowed.paging) {
    runs.emplace_back("capuchin", AllowedMoves{.recompute = true, .paging = false});
    runs.emplace_back("capuchin", AllowedMoves{.recompute = false, .paging = true});
    runs.emplace_back("pofo", allowed);
  }
  if (allowed.recompute) runs.emplace_back("rotor", allowed);
  if (allowed.paging) runs.emplace_back("page-all", allowed);
  std::vector<PlanResult> found;
  for (const auto& [name, moves] : runs) {
    PlanRequest sub = request;
    sub.allowed = moves;
    // Each finds its schedule in milliseconds where it finds one (DenseNet-121's slowest, 51
    // ms: bench_planner's capuchin/); one that cannot meet the budget must not take the
    // search's time.
    sub.time_limit_s = std::max(kBaselineMinS, kBaselineShare * request.time_limit_s);
    PlanResult r = plan_baseline(name, graph, sub);
    if (!r.schedule) continue;
    r.note = "the " + r.planner + " baseline's schedule stands";
    r.planner = "poet";
    // A baseline's own bound (rotor's and pofo's DP) holds only among its own schedules.
    set_bound(r, std::max(bound_j, graph.single_pass_energy_j()), request.relative_gap);
    found.push_back(std::move(r));
  }
  return found;
}

/// A plan of a model POET contains (POET limited to paging, or to recomputation), solved for
/// at most `limit_s` from that model's own greedy plan: a warm start the full model's search
/// may take long to find (a paging-only optimum is often proven in a fraction of a second).
/// nullopt when neither the greedy search nor the solver finds one in time, or the plan
/// breaks the budget or deadline as the full model measures it.
std::optional<StagePlan> contained_plan(const TrainingGraph& graph, const PlanRequest& req, AllowedMoves moves,
                                        double limit_s, MilpSolver& solver) {
  const auto start = std::chrono::steady_clock::now();
  PlanRequest sub = req;
  sub.allowed = moves;
  std::optional<StagePlan> plan = greedy_stage_plan(graph, memory_budget(req), req.deadline_s, moves, limit_s / 4,
                                                    req.objective, 0, limit_s / 2);
  PoetModel model(graph, sub);
  // CBC gets what the greedy search and the model's build left, less its usual overrun.
  const double left_s = limit_s - seconds_since(start);
  SolveOptions options;
  options.time_limit_s = std::max(0.2, left_s * 0.75);
  options.kill_after_s = std::max(0.2, left_s) + 0.3;
  options.relative_gap = req.relative_gap;
  options.threads = req.threads;
  options.backend_parameters = req.solver_parameters;
  if (plan) {
    options.warm_start = model.assignment(*plan, sub);
    options.fallback = options.warm_start;
  }
  const SolveResult solved = solver.solve(model.model(), options);
  if (solved.call == CallStatus::kOk && solved.has_solution()) {
    StagePlan found = model.plan_from(solved.x);
    if (check_stage_plan(graph, found).empty()) plan = std::move(found);
  }
  if (!plan || !meets_request(graph, *plan, req)) return std::nullopt;
  return plan;
}

/// The smallest budget (within 1 %) at which the greedy heuristic finds a plan, between the
/// request's budget and store-all's peak: guidance when nothing was found at the budget.
std::optional<uint64_t> smallest_greedy_budget(const TrainingGraph& graph,
                                               const PlanRequest& request) {
  auto found_at = [&](uint64_t budget) {
    return greedy_stage_plan(graph, MemoryBudget(budget, request.stash_budget_bytes), request.deadline_s,
                             request.allowed, 0, request.objective, 0, /*give_up_s=*/1.0)
        .has_value();
  };
  uint64_t lo = request.budget_bytes;  // nothing found here
  uint64_t hi = std::max(graph.store_all_peak_bytes(), lo + 1);
  if (!found_at(hi)) return std::nullopt;
  while (hi - lo > std::max<uint64_t>(hi / 100, 1)) {
    const uint64_t mid = lo + (hi - lo) / 2;
    (found_at(mid) ? hi : lo) = mid;
  }
  return hi;
}

/// POET's search for a feasible request: greedy search (from its own start and from the
/// baselines' schedules, `seeds`), the contained models, the LP relaxation and branch and
/// bound, each while the gap is open and time is left. `fallback` is the cheapest contained
/// baseline: the answer where the search finds nothing, and the bar contained models must
/// pass.
PlanResult search_poet(const TrainingGraph& graph, const PlanRequest& request, MilpSolver& solver,
                       std::chrono::steady_clock::time_point start, double memory_bound_j,
                       const std::vector<Schedule>& seeds, std::optional<PlanResult> fallback,
                       std::optional<StagePlan> whole_plan, bool whole_ended) {
  PlanResult result;
  result.planner = "poet";
  // From here on the budget is what activations may use; messages speak of the user's.
  const PlanRequest req = for_activations(graph, request);
  const uint64_t user_budget_bytes = request.budget_bytes;
  const std::string stash_words = request.stash_budget_bytes == std::numeric_limits<uint64_t>::max()
                                      ? ""
                                      : ", a stash of " + format_bytes(request.stash_budget_bytes);
  // The greedy plan often proves itself against the memory bound (one pass plus the
  // cheapest way to make up the worst shortfall, planner/bounds.h): then no solver is
  // needed (store-all, whenever it fits, is exactly optimal). Otherwise it is the solver's
  // warm start and what is returned if the solver finds nothing better.
  // Local search gets half the time limit (within 0.2 to 30 s; past kMaxMilpNodes, where no
  // MILP follows, kSearchShareWithoutMilp of it), and stops once the bound
  // proves the gap or its kicks find nothing cheaper (stage_plan.h). Past 130 nodes or so the
  // LP relaxation does not finish within a 10 s limit (ResNet-18 CIFAR's takes over 45 s),
  // so the time the local search does not use is all the MILP gets to do anything with;
  // on ResNet-50 (Pi 4, 30 %) a fifth left a 2.30 % gap that half brings to 1.74 %.
  // Progress for people: each phase as it starts, with the best plan and bound known then.
  double known_bound_j = 0;
  std::optional<double> known_plan_j;
  auto report = [&](const char* phase) {
    if (req.progress)
      req.progress({.phase = phase,
                    .elapsed_s = seconds_since(start),
                    .incumbent = known_plan_j,
                    .bound = known_bound_j > 0 ? std::optional(known_bound_j) : std::nullopt});
  };
  known_bound_j = memory_bound_j;
  if (fallback) known_plan_j = fallback->objective_j;
  report("greedy search");
  const double good_enough_j =
      req.relative_gap < 1 ? memory_bound_j / (1 - req.relative_gap) : memory_bound_j;
  const double search_s = graph.size() > kMaxMilpNodes
                              ? std::max(0.2, kSearchShareWithoutMilp * req.time_limit_s - seconds_since(start))
                              : std::clamp(req.time_limit_s / 2, 0.2, 30.0);
  // Each cheaper plan the search finds, as it finds it: on large graphs the search is the
  // whole limit, and a terminal showed the same incumbent for all of it.
  std::function<void(double)> on_better;
  if (req.progress)
    on_better = [&](double energy_j) {
      req.progress({.phase = "greedy search",
                    .elapsed_s = seconds_since(start),
                    .incumbent = known_plan_j ? std::min(*known_plan_j, energy_j) : energy_j,
                    .bound = known_bound_j});
    };
  std::optional<StagePlan> heuristic;
  // `plan` becomes the plan in hand, claimed against the memory bound: true where that
  // proves it within the gap, and the search is done.
  auto adopt = [&](StagePlan plan) {
    heuristic = std::move(plan);
    claim(graph, *heuristic, memory_bound_j, req, result);
    known_plan_j = result.objective_j;
    if (result.status != ModelStatus::kOptimal) return false;
    result.solve_time_s = seconds_since(start);
    return true;
  };
  // The plan a small graph's whole search ended on: under poet it costs the bound it raised,
  // and is the answer at once; under total a start the greedy search's plan must beat.
  if (whole_plan && adopt(std::move(*whole_plan))) return result;
  // A plan found later, where it is cheaper than the one in hand.
  auto adopt_cheaper = [&](StagePlan plan) {
    if (heuristic && evaluate_stage_plan(graph, plan, req.objective).energy_j >= result.objective_j)
      plan = *heuristic;
    return adopt(std::move(plan));
  };
  if (auto plan = greedy_stage_plan(graph, memory_budget(req), req.deadline_s, req.allowed, search_s, req.objective,
                                    good_enough_j,
                                    std::max(1.0, kGreedyGiveUpShare * req.time_limit_s - seconds_since(start)),
                                    seeds, req.threads, std::move(on_better))) {
    if (adopt_cheaper(std::move(*plan))) return result;
    // The last stages of the backward pass planned again exactly, with a tenth of the limit
    // (at most 5 s): where a tight budget needs the largest tensors and their gradients
    // together, the local search leaves pages that holding and recomputing save.
    const double tail_s = std::min(std::clamp(kTailShare * req.time_limit_s, 0.1, 5.0),
                                   (1 - kTailShare / 2) * req.time_limit_s - seconds_since(start));
    if (tail_s > 0) {
      report("tail of the backward pass");
      const auto stop_at = std::chrono::steady_clock::now() +
                           std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                               std::chrono::duration<double>(tail_s));
      auto better = replan_tail(graph, *heuristic, memory_budget(req), req.deadline_s, req.allowed, req.objective,
                                stop_at);
      if (better && adopt(std::move(*better))) return result;
    }
    // A small graph searched whole again, longer than before the greedy search: where it
    // ends, its bound is the relaxation's optimum and its plan, under poet, that optimum.
    const double whole_s =
        std::min(kWholeGraphAgainShare * req.time_limit_s, (1 - kTailShare) * req.time_limit_s - seconds_since(start));
    if (whole_s > 0 && graph.size() < 64 && !whole_ended) {
      report("whole-graph search");
      const auto found = whole_graph_search(
          graph, req.budget_bytes, req.allowed, req.objective,
          std::chrono::steady_clock::now() +
              std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(whole_s)),
          kWholeGraphAgainMaxStates);
      if (found) {
        memory_bound_j = std::max(memory_bound_j, found->bound_j);
        known_bound_j = memory_bound_j;
        const bool usable = found->plan && meets_request(graph, *found->plan, req);
        if (adopt_cheaper(usable ? *found->plan : *heuristic)) return result;  // against the bound found
      }
    }
  }
  // No greedy plan in its time (large graphs): the best contained baseline is the incumbent,
  // and the answer when the stage model is too large to build or no time is left.
  auto fall_back = [&](const std::string& why) {
    PlanResult r = std::move(*fallback);
    r.note = why + "; " + r.note;
    r.solve_time_s = seconds_since(start);
    return r;
  };
  if (!heuristic) {
    const bool milp_too_large = graph.size() > kMaxMilpNodes;
    if (fallback && (milp_too_large || req.time_limit_s - seconds_since(start) < 1.0)) {
      result = std::move(*fallback);
      result.note = std::string(milp_too_large ? "the graph's " + std::to_string(graph.size()) +
                                                     " nodes are too many for the stage MILP"
                                               : "no time left for the solver") +
                    " and the greedy search found no plan in time; " + result.note;
      result.solve_time_s = seconds_since(start);
      return result;
    }
    if (milp_too_large) {
      result.status = ModelStatus::kNoSolutionFound;
      result.why = "the graph's " + std::to_string(graph.size()) +
                   " nodes are too many for the stage MILP, and neither the greedy search nor "
                   "a baseline found a schedule";
      result.solve_time_s = seconds_since(start);
      return result;
    }
  }

  // A greedy plan on a graph too large for the stage MILP: it stands, with the memory bound.
  if (graph.size() > kMaxMilpNodes) {
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "the graph's %d nodes are too many for the stage MILP: the greedy search's plan "
                  "stands at a %.3g %% gap",
                  graph.size(), 100 * result.gap);
    result.note = buf;
    result.solve_time_s = seconds_since(start);
    return result;
  }
  const double build_from_s = seconds_since(start);
  PoetModel poet(graph, req);
  const double build_s = seconds_since(start) - build_from_s;
  MilpModel& model = poet.model();
  result.variables = model.num_vars();
  result.integers = model.num_integers();
  result.rows = model.num_rows();
  result.nonzeros = model.num_nonzeros();

  // POET's moves contain paging-only and recomputation-only schedules: their models, smaller
  // and often solved fast, give warm starts the full search may not reach in its time (on
  // POET's own M4 case the recomputation-only model finds in 3 s what the full model's LP
  // and search miss in a minute). They go before the full model's LP relaxation, which on
  // large models takes most of the limit. A model whose own memory bound is no better than
  // the plan in hand cannot improve it and is skipped; the others run, most promising
  // first, each with a quarter of the time left (at least a second). POET's answer is then
  // never worse than what they find. Each is built like the full model (about build_s), so
  // they run only where the time left holds several builds.
  if (req.allowed.recompute && req.allowed.paging &&
      req.time_limit_s - seconds_since(start) > std::max(3.0, 6 * build_s)) {
    const double incumbent_j = heuristic ? evaluate_stage_plan(graph, *heuristic, req.objective).energy_j
                               : fallback ? fallback->objective_j
                                          : std::numeric_limits<double>::infinity();
    std::vector<std::pair<double, AllowedMoves>> promising;
    for (const AllowedMoves moves : {AllowedMoves{.recompute = false, .paging = true},
                                     AllowedMoves{.recompute = true, .paging = false}}) {
      const double own_bound_j = memory_lower_bound_j(graph, req.budget_bytes, req.objective, moves);
      if (own_bound_j < incumbent_j * (1 - req.relative_gap)) promising.emplace_back(own_bound_j, moves);
    }
    std::stable_sort(promising.begin(), promising.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    if (!promising.empty()) report("paging-only and recomputation-only models");
    for (const auto& [own_bound_j, moves] : promising) {
      const double limit_s = std::max(1.0, (req.time_limit_s - seconds_since(start)) / 4);
      auto plan = contained_plan(graph, req, moves, limit_s, solver);
      if (!plan) continue;
      const double energy_j = evaluate_stage_plan(graph, *plan, req.objective).energy_j;
      if (heuristic && energy_j >= evaluate_stage_plan(graph, *heuristic, req.objective).energy_j) continue;
      if (fallback && energy_j >= fallback->objective_j) continue;  // the baseline stays ahead
      if (!poet.assignment(*plan, req)) continue;
      if (adopt(std::move(*plan))) return result;
    }
  }

  // The LP relaxation's optimum is a bound that often proves the heuristic within the gap;
  // CBC's own root solve on large models spends its whole limit in preprocessing first.
  double bound_j = memory_bound_j;  // the best lower bound known so far
  // Under a second left, the LP relaxation (and branch and bound after it) would only overrun
  // the limit: the plan in hand stands.
  RelaxationResult lp;
  if (req.time_limit_s - seconds_since(start) >= 1.0) {
    report("LP relaxation");
    lp = solver.solve_relaxation(model, std::max(0.2, 0.9 * (req.time_limit_s - seconds_since(start)) - 0.2));
  }
  if (lp.infeasible) {
    result.status = ModelStatus::kInfeasible;
    result.schedule.reset();
    result.why = "no schedule fits a budget of " + format_bytes(user_budget_bytes) + stash_words +
                 " and the deadline together (even fractionally); loosen either";
    result.solve_time_s = seconds_since(start);
    return result;
  }
  if (lp.optimal) bound_j = std::max(bound_j, lp.objective / poet.energy_scale());
  if (heuristic) {
    claim(graph, *heuristic, bound_j, req, result);
    if (result.status == ModelStatus::kOptimal) {
      result.solve_time_s = seconds_since(start);
      return result;
    }
  }

  // Too little time left for branch and bound: the heuristic and the bound are the answer.
  if (heuristic && req.time_limit_s - seconds_since(start) < 1.0) {
    result.solve_time_s = seconds_since(start);
    char buf[160];
    std::snprintf(buf, sizeof buf, "the time limit (%.3g s) left no time for branch and bound: a %.3g %% gap",
                  req.time_limit_s, 100 * result.gap);
    result.note = buf;
    return result;
  }
  SolveOptions options;
  // The request's limit bounds the whole call: CBC gets what is left less its usual overrun,
  // and is stopped by force a fifth of a second past the limit (the warm start then stands).
  const double left_s = req.time_limit_s - seconds_since(start);
  options.time_limit_s = std::max(0.5, (left_s - 0.3) / 1.1);
  options.kill_after_s = std::max(left_s, options.time_limit_s) + 0.2;
  options.relative_gap = req.relative_gap;
  options.threads = req.threads;
  options.backend_parameters = req.solver_parameters;
  const double scale = poet.energy_scale();
  if (req.progress) {
    const double solver_start_s = seconds_since(start);
    options.progress = [&, solver_start_s](const SolveProgress& p) {
      SolveProgress unscaled = p;
      unscaled.phase = "branch and bound";
      unscaled.elapsed_s = solver_start_s + p.elapsed_s;
      if (p.incumbent) unscaled.incumbent = *p.incumbent / scale;
      unscaled.bound = p.bound ? std::max(*p.bound / scale, bound_j) : bound_j;  // the best known
      req.progress(unscaled);
    };
  }
  if (heuristic) {
    options.warm_start = poet.assignment(*heuristic, req);
    assert(options.warm_start && model.max_violation(*options.warm_start) < 1e-6);
    options.fallback = options.warm_start;
  }

  const SolveResult solved = solver.solve(model, options);
  result.solve_time_s = seconds_since(start);
  if (solved.call != CallStatus::kOk) {
    // The solver failing (a crash, numerical trouble) is no reason to lose the heuristic's
    // plan: it stands, with the bound found before, and the user is told.
    if (heuristic) {
      result.note = solved.message + "; the greedy plan stands";
      return result;
    }
    if (fallback) return fall_back(solved.message);
    result.call = solved.call;
    result.status = ModelStatus::kNoSolutionFound;
    result.schedule.reset();
    result.why = solved.message;
    return result;
  }
  if (!solved.has_solution() && fallback && solved.model != ModelStatus::kInfeasible)
    return fall_back("the greedy search found no plan in time and the solver none within the limit");
  if (!solved.has_solution()) {
    result.status = solved.model;
    result.bound_j = std::max(solved.bound / scale, bound_j);
    if (solved.model == ModelStatus::kInfeasible) {
      result.why = "no schedule fits a budget of " + format_bytes(user_budget_bytes) + stash_words +
                   " and the deadline together; loosen either";
    } else if (solved.solve_time_s >= options.time_limit_s) {
      result.why = "the time limit (" + std::to_string(static_cast<int>(req.time_limit_s)) +
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
    if (auto found = smallest_greedy_budget(graph, req)) {
      *found += user_budget_bytes - req.budget_bytes;  // kTotal: fixed bytes back in
      result.why += "; the greedy heuristic finds schedules from " + format_bytes(*found) +
                    " (" + std::to_string(*found) + " bytes) up";
    }
    return result;
  }
  const StagePlan plan = poet.plan_from(solved.x);
  assert(check_stage_plan(graph, plan).empty());
  claim(graph, plan, std::max(solved.bound / scale, bound_j), req, result);
  if (result.status == ModelStatus::kFeasible && result.note.empty()) {
    // Not proven within the gap asked for: say what stopped the search.
    char buf[200];
    if (solved.solve_time_s >= options.time_limit_s * 0.95) {
      std::snprintf(buf, sizeof buf, "the time limit (%.3g s) stopped the search at a %.3g %% gap (asked: %.3g %%)",
                    req.time_limit_s, 100 * result.gap, 100 * req.relative_gap);
    } else {
      std::snprintf(buf, sizeof buf,
                    "the solver stopped after %.3g s of its %.3g s without closing the gap to %.3g %% (%s)",
                    solved.solve_time_s, options.time_limit_s, 100 * req.relative_gap,
                    solved.message.empty() ? "its own node or stall limits" : solved.message.c_str());
    }
    result.note = buf;
  }
  return result;
}

}  // namespace

PlanResult plan_poet(const TrainingGraph& graph, const PlanRequest& request, MilpSolver& solver) {
  const auto start = std::chrono::steady_clock::now();
  if (std::string why = infeasibility_reason(graph, request); !why.empty()) {
    PlanResult result;
    result.planner = "poet";
    result.status = ModelStatus::kInfeasible;
    result.why = std::move(why);
    return result;
  }
  if (request.progress)
    request.progress({.phase = "memory bound and baselines", .elapsed_s = 0});
  const PlanRequest req = for_activations(graph, request);
  double memory_bound_j = memory_lower_bound_j(graph, req.budget_bytes, req.objective, req.allowed);
  // The baselines POET's moves contain: starts for the greedy search, and the answer
  // wherever the search ends dearer (POET is never worse than a schedule it contains). Their
  // energy is the simulator's, which overlaps transfers beyond the stage model: their bound
  // charges no transfer time.
  const bool total = req.objective == Objective::kTotal;
  const double replay_bound_j =
      total ? memory_lower_bound_j(graph, req.budget_bytes, req.objective, req.allowed, false) : memory_bound_j;
  std::vector<PlanResult> baselines = contained_baselines(graph, request, replay_bound_j);
  std::vector<Schedule> seeds;
  std::optional<PlanResult> cheapest;
  for (PlanResult& b : baselines) {
    seeds.push_back(*b.schedule);
    // The baselines do not see a stash budget: one that stashes more only seeds the search.
    if (req.stash_budget_bytes != std::numeric_limits<uint64_t>::max() &&
        simulate(graph, *b.schedule).stash_bytes > req.stash_budget_bytes)
      continue;
    if (!cheapest || b.objective_j < cheapest->objective_j) cheapest = std::move(b);
  }
  // A baseline already proven within the gap by the memory bound is the answer.
  if (cheapest && request.baseline_may_answer && cheapest->status == ModelStatus::kOptimal) {
    cheapest->solve_time_s = seconds_since(start);
    return std::move(*cheapest);
  }
  // A small graph's stage plans searched whole, relaxed: a bound on the stage model that sees
  // every moment at once (the MLP on the TX2 at 50 % under poet: its plan proven optimal,
  // where the memory bound leaves 3.7 %). After the baselines, which answer where the
  // memory bound proves one of them (the MLP elsewhere, in milliseconds).
  const auto whole_stop_at = std::chrono::steady_clock::now() +
                            std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(
                                std::min(kWholeGraphShare * req.time_limit_s, kWholeGraphMaxS)));
  std::optional<StagePlan> whole_plan;
  bool whole_ended = false;
  if (auto whole = whole_graph_search(graph, req.budget_bytes, req.allowed, req.objective, whole_stop_at,
                                      kWholeGraphMaxStates)) {
    memory_bound_j = std::max(memory_bound_j, whole->bound_j);
    whole_ended = whole->ended;
    if (whole->plan && meets_request(graph, *whole->plan, req)) whole_plan = std::move(whole->plan);
  }
  PlanResult found =
      search_poet(graph, request, solver, start, memory_bound_j, seeds, cheapest, std::move(whole_plan), whole_ended);
  if (!request.baseline_may_answer || !cheapest || (found.schedule && found.objective_j <= cheapest->objective_j) ||
      found.status == ModelStatus::kInfeasible)
    return found;
  // The baseline's schedule is cheaper: it stands, with the best bound the search proved.
  PlanResult r = std::move(*cheapest);
  // Under kTotal the search's bound holds for the stage model, not for the replay.
  if (found.schedule && !total) set_bound(r, std::max(r.bound_j, found.bound_j), request.relative_gap);
  r.variables = found.variables;
  r.integers = found.integers;
  r.rows = found.rows;
  r.nonzeros = found.nonzeros;
  r.solve_time_s = seconds_since(start);
  if (found.schedule) {
    // A note of the search that quotes its plan's gap measures it against the stage model's
    // bound, and the baseline's gap is against the bound for replayed schedules: such a note
    // is left out, and the search's energy told instead. Others (a solver's failure) stay.
    char buf[120];
    std::snprintf(buf, sizeof buf, "the search's best plan (%.6g J) was dearer; ", found.objective_j);
    const bool quotes_gap = found.note.find("% gap") != std::string::npos;
    r.note = (found.note.empty() || quotes_gap || found.note == r.note ? "" : "the search: " + found.note + "; ") +
             buf + r.note;
  } else if (!found.note.empty() && found.note != r.note) {
    r.note = found.note + "; " + r.note;
  }
  return r;
}

}  // namespace ergon::planner
