#include "planner/rotor.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <numeric>
#include <optional>
#include <utility>

#include "common/units.h"
#include "planner/baselines.h"

namespace ergon::planner {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

/// What the DP needs to know of a chain's training graph beyond sizes and costs. Op i's
/// forward node is i, the loss is n, op i's backward node is 2n - i.
struct Chain {
  int n = 0;
  std::vector<char> reads_input;   ///< backward of op i reads a[i-1]
  std::vector<char> reads_output;  ///< backward of op i reads a[i]
};

/// The chain shape of `g`, or why it has none.
std::pair<std::optional<Chain>, std::string> as_chain(const TrainingGraph& g,
                                                      const std::string& planner) {
  const std::string prefix = planner + " needs a chain; " + g.name + " ";
  const auto in = g.inputs();
  int n = 0;
  while (n < g.size() && g.nodes[n].phase == NodePhase::kForward) ++n;
  if (n == 0 || g.size() != 2 * n + 1 || g.nodes[n].phase != NodePhase::kLoss)
    return {std::nullopt,
            prefix + "is not forward nodes, one loss and one backward node per forward node"};
  for (int k = 0; k < n; ++k) {
    const auto& name = g.nodes[k].name;
    if (in[k].size() > 1)
      return {std::nullopt, prefix + "has a node with two inputs (" + name + ")"};
    if (k > 0 && in[k].empty())
      return {std::nullopt,
              prefix + "has a forward node that reads no earlier node (" + name + ")"};
    if (k > 0 && in[k][0] != k - 1)
      return {std::nullopt, prefix + "has a forward node that reads " + g.nodes[in[k][0]].name +
                                " instead of the node before it (" + name + ")"};
  }
  if (in[n] != std::vector<int>{n - 1})
    return {std::nullopt, prefix + "has a loss that does not read only the last forward node"};
  Chain c;
  c.n = n;
  c.reads_input.assign(n, 0);
  c.reads_output.assign(n, 0);
  for (int i = 0; i < n; ++i) {
    const int b = 2 * n - i;
    const auto& node = g.nodes[b];
    if (node.phase != NodePhase::kBackward)
      return {std::nullopt, prefix + "has " + node.name + " where op " + std::to_string(i) +
                                "'s backward node should be"};
    const int gradient = i == n - 1 ? n : b - 1;
    bool has_gradient = false;
    for (int j : in[b]) {
      if (j == gradient) {
        has_gradient = true;
      } else if (i > 0 && j == i - 1) {
        c.reads_input[i] = 1;
      } else if (j == i) {
        c.reads_output[i] = 1;
      } else {
        return {std::nullopt, prefix + "has a backward node that reads " + g.nodes[j].name +
                                  ", beyond its op's input and output (" + node.name + ")"};
      }
    }
    if (!has_gradient)
      return {std::nullopt, prefix + "has a backward node that does not read the gradient " +
                                "before it (" + node.name + ")"};
  }
  return {c, {}};
}

enum class Rounding { kUp, kDown };
/// What the DP may do with a checkpoint that a later sub-problem needs: hold it (rotor), or
/// also page it out for the sub-problems in between and back in (POFO-style).
enum class Moves { kRecompute, kRecomputeAndOffload };

/// The DP over two families of sub-problems, each a table over memory 0..M slots (see
/// rotor.h): Grad(s, t, K, T) starts with op t's incoming gradient resident (the loss output
/// when t is the last op), Turn(s, K) before the loss has been computed.
class RotorDp {
 public:
  RotorDp(const TrainingGraph& g, const Chain& c, uint64_t slot_bytes, int64_t budget_slots,
          Rounding rounding, Moves moves)
      : c_(c), n_(c.n), m_(budget_slots), offload_(moves == Moves::kRecomputeAndOffload) {
    // A size over the budget only has to stay over it: clamping keeps sums from overflowing.
    auto slots = [&](uint64_t bytes) {
      const uint64_t s =
          rounding == Rounding::kUp ? (bytes + slot_bytes - 1) / slot_bytes : bytes / slot_bytes;
      return static_cast<int64_t>(std::min<uint64_t>(s, static_cast<uint64_t>(m_) + 1));
    };
    forward_j_before_.push_back(0);
    for (int i = 0; i < n_; ++i) {
      act_.push_back(slots(g.nodes[i].output_bytes));
      grad_.push_back(slots(g.nodes[bwd(i)].output_bytes));
      forward_j_before_.push_back(forward_j_before_.back() + g.nodes[i].energy_j);
      bwd_j_.push_back(g.nodes[bwd(i)].energy_j);
      round_trip_j_.push_back(g.nodes[i].pageout_energy_j + g.nodes[i].pagein_energy_j);
    }
    loss_ = slots(g.nodes[n_].output_bytes);
    loss_j_ = g.nodes[n_].energy_j;
    // pair_max_[s][e]: the largest a[k-1] + a[k] over s < k <= e (what a sweep from s to e
    // holds at once after its first step).
    pair_max_.assign(n_, std::vector<int64_t>(n_, 0));
    for (int s = 0; s < n_; ++s)
      for (int e = s + 1; e < n_; ++e)
        pair_max_[s][e] = std::max(pair_max_[s][e - 1], act_[e - 1] + act_[e]);

    grad_table_.resize(static_cast<std::size_t>(4 * n_ * n_));
    turn_table_.resize(static_cast<std::size_t>(2 * n_));
    for (int t = 0; t < n_; ++t)
      for (int s = t; s >= 0; --s)
        for (int keep = 0; keep < 2; ++keep)
          for (int top = 1; top >= 0; --top)  // T = 0 may continue into T = 1
            if (keep_valid(s, keep) && top_valid(t, top)) fill({Kind::kGrad, s, t, keep, top});
    for (int s = n_ - 1; s >= 0; --s)
      for (int keep = 0; keep < 2; ++keep)
        if (keep_valid(s, keep)) fill({Kind::kTurn, s, n_ - 1, keep, 0});
  }

  /// The least energy of the whole chain within the budget (infinity when nothing fits).
  [[nodiscard]] double energy_j() const { return table({Kind::kTurn, 0, n_ - 1, 0, 0})[m_]; }

  /// The least memory (slots) a schedule of the family needs, if one fits in M.
  [[nodiscard]] std::optional<int64_t> least_memory() const {
    const auto& whole = table({Kind::kTurn, 0, n_ - 1, 0, 0});
    for (int64_t m = 0; m <= m_; ++m)
      if (whole[m] < kInf) return m;
    return std::nullopt;
  }

  /// The schedule behind energy_j(); only when it is finite.
  [[nodiscard]] Schedule schedule() const {
    Schedule out;
    emit({Kind::kTurn, 0, n_ - 1, 0, 0}, m_, out);
    out.steps.push_back({StepKind::kFree, bwd(0)});
    return out;
  }

 private:
  enum class Kind { kGrad, kTurn };
  /// A sub-problem. Grad(s, t, K, T): a[s-1] (when it needs it), op t's incoming gradient and,
  /// when T, a[t] are resident; it runs the backward nodes of ops t..s and leaves op s's
  /// gradient, and a[s-1] too when K. Turn(s, K): only a[s-1] is resident; it computes the
  /// loss on the way (t is the last op).
  struct Sub {
    Kind kind = Kind::kGrad;
    int s = 0;
    int t = 0;
    int keep = 0;
    int top = 0;
  };

  /// One way to solve a sub-problem: a forward sweep from a[s-1] to a[last] (freeing each
  /// activation once the next exists, and a[s-1] once nothing later reads it), then the loss
  /// when `loss`, then `first`, then `second` (if any). `holds_input`: a[s-1] stays resident
  /// across `first` for `second`, so `first` has that much less memory. `offloads_input`:
  /// a[s-1] is paged out after the sweep's first step and back in for `second` instead.
  struct Option {
    int last = -1;  ///< -1: no sweep (the base case: op s's backward alone)
    bool holds_input = false;
    bool offloads_input = false;
    bool loss = false;
    int64_t peak = 0;  ///< of the option's own steps (the sweep, the loss, the base backward)
    double energy_j = 0;
    Sub first;
    std::optional<Sub> second;
  };

  [[nodiscard]] int bwd(int i) const { return 2 * n_ - i; }
  [[nodiscard]] bool keep_valid(int s, int keep) const {
    return keep == 0 || (s > 0 && c_.reads_output[s - 1]);
  }
  /// a[t] resident on entry only matters when op t's backward reads it.
  [[nodiscard]] bool top_valid(int t, int top) const { return top == 0 || c_.reads_output[t]; }

  [[nodiscard]] std::size_t index(const Sub& p) const {
    if (p.kind == Kind::kTurn) return static_cast<std::size_t>(p.s * 2 + p.keep);
    return static_cast<std::size_t>(((p.s * n_ + p.t) * 2 + p.keep) * 2 + p.top);
  }
  [[nodiscard]] const std::vector<double>& table(const Sub& p) const {
    return p.kind == Kind::kTurn ? turn_table_[index(p)] : grad_table_[index(p)];
  }
  std::vector<double>& table(const Sub& p) {
    return p.kind == Kind::kTurn ? turn_table_[index(p)] : grad_table_[index(p)];
  }

  /// The incoming gradient of a Grad sub-problem ending at op t: op t + 1's, or the loss's.
  [[nodiscard]] int64_t grad_in(int t) const { return t < n_ - 1 ? grad_[t + 1] : loss_; }
  [[nodiscard]] int grad_node(int t) const { return t < n_ - 1 ? bwd(t + 1) : n_; }

  /// Whether a sub-problem reads its checkpoint a[s-1] at all; when not, the caller frees it
  /// first. Grad with s == t reads it for op t's backward or to recompute a[t].
  [[nodiscard]] bool needs_input(const Sub& p) const {
    if (p.s == 0) return false;
    if (p.kind == Kind::kTurn || p.keep || p.s < p.t || c_.reads_input[p.t]) return true;
    return !p.top && c_.reads_output[p.t];
  }

  /// A sweep from a[s-1] through a[last] with `held` slots resident besides: its peak.
  [[nodiscard]] int64_t sweep_peak(int s, int last, int64_t held, bool holds_input) const {
    const int64_t input = s > 0 ? act_[s - 1] : 0;
    int64_t peak = input + held + act_[s];
    if (last > s) peak = std::max(peak, (holds_input ? input : 0) + held + pair_max_[s][last]);
    return peak;
  }
  [[nodiscard]] double sweep_j(int s, int last) const {
    return forward_j_before_[last + 1] - forward_j_before_[s];
  }

  template <typename F>
  void for_each_option(const Sub& p, F&& f) const {
    const int s = p.s;
    const int t = p.t;
    if (p.kind == Kind::kGrad) {
      const int64_t held = grad_in(t) + (p.top ? act_[t] : 0);
      if (s == t && (p.top || !c_.reads_output[t])) {
        Option o;
        o.peak = (needs_input(p) ? act_[t - 1] : 0) + held + grad_[t];
        o.energy_j = bwd_j_[t];
        f(o);
        return;
      }
      if (!p.top && c_.reads_output[t]) {
        // Recompute a[t] first, then solve with it resident. A kept a[s-1] is first's own
        // checkpoint, counted inside it.
        Option o;
        o.first = {Kind::kGrad, s, t, p.keep, 1};
        o.last = t;
        o.peak = sweep_peak(s, t, held, needs_input(o.first));
        o.energy_j = sweep_j(s, t);
        f(o);
      }
    } else {
      // Sweep to the last op, compute the loss, keep a[t] or not, then backward.
      for (int top = 0; top < 2; ++top) {
        if (!top_valid(t, top)) continue;
        Option o;
        o.first = {Kind::kGrad, s, t, p.keep, top};
        o.last = t;
        o.loss = true;
        const bool holds = needs_input(o.first);
        const int64_t input = holds ? (s > 0 ? act_[s - 1] : 0) : 0;
        o.peak = std::max(sweep_peak(s, t, 0, holds), input + act_[t] + loss_);
        o.energy_j = sweep_j(s, t) + loss_j_;
        f(o);
      }
    }
    const int64_t held = p.kind == Kind::kGrad ? grad_in(t) + (p.top ? act_[t] : 0) : 0;
    for (int next = s + 1; next <= t; ++next) {
      for (int keep_next = 0; keep_next < 2; ++keep_next) {
        if (!keep_valid(next, keep_next)) continue;
        Option o;
        o.first = p.kind == Kind::kGrad ? Sub{Kind::kGrad, next, t, keep_next, p.top}
                                        : Sub{Kind::kTurn, next, t, keep_next, 0};
        // A checkpoint nobody reads is never worth computing.
        if (!needs_input(o.first)) continue;
        o.second = Sub{Kind::kGrad, s, next - 1, p.keep, keep_next};
        o.last = next - 1;
        o.holds_input = needs_input(*o.second);
        o.peak = sweep_peak(s, next - 1, held, o.holds_input);
        o.energy_j = sweep_j(s, next - 1);
        f(o);
        if (offload_ && o.holds_input) {
          // Page a[s-1] out while s'..t runs: its bytes are free then, for its transfers' energy.
          o.holds_input = false;
          o.offloads_input = true;
          o.peak = sweep_peak(s, next - 1, held, false);
          o.energy_j += round_trip_j_[s - 1];
          f(o);
        }
      }
    }
  }

  /// What the option costs at memory m (infinity when it does not fit).
  [[nodiscard]] double value(const Sub& p, const Option& o, int64_t m) const {
    if (o.peak > m) return kInf;
    if (o.last < 0) return o.energy_j;
    const int64_t held = o.holds_input ? act_[p.s - 1] : 0;
    double v = o.energy_j + table(o.first)[m - held];
    if (o.second) v += table(*o.second)[m];
    return v;
  }

  void fill(const Sub& p) {
    auto& best = table(p);
    best.assign(static_cast<std::size_t>(m_ + 1), kInf);
    for_each_option(p, [&](const Option& o) {
      if (o.last < 0) {
        for (int64_t m = o.peak; m <= m_; ++m) best[m] = std::min(best[m], o.energy_j);
        return;
      }
      const auto& first = table(o.first);
      const int64_t held = o.holds_input ? act_[p.s - 1] : 0;
      if (!o.second) {
        for (int64_t m = o.peak; m <= m_; ++m)
          best[m] = std::min(best[m], o.energy_j + first[m - held]);
        return;
      }
      const auto& second = table(*o.second);
      for (int64_t m = o.peak; m <= m_; ++m)
        best[m] = std::min(best[m], o.energy_j + first[m - held] + second[m]);
    });
  }

  void emit(const Sub& p, int64_t m, Schedule& out) const {
    auto compute = [&](int node) { out.steps.push_back({StepKind::kCompute, node}); };
    auto free = [&](int node) { out.steps.push_back({StepKind::kFree, node}); };
    // The option the table's value came from (the same arithmetic, so the same minimum).
    std::optional<Option> chosen;
    double chosen_j = kInf;
    for_each_option(p, [&](const Option& o) {
      const double v = value(p, o, m);
      if (v < chosen_j) {
        chosen_j = v;
        chosen = o;
      }
    });
    const Option& o = *chosen;
    const int s = p.s;
    if (o.last < 0) {  // op s's backward alone
      compute(bwd(s));
      free(grad_node(s));
      if (p.top) free(s);
      if (needs_input(p) && !p.keep) free(s - 1);
      return;
    }
    // The sweep keeps a[s-1] while anything after it still reads it.
    const bool input_read_later = o.second ? needs_input(*o.second) : needs_input(o.first);
    compute(s);
    if (o.offloads_input) {
      out.steps.push_back({StepKind::kPageOut, s - 1});
      free(s - 1);
    } else if (s > 0 && !input_read_later) {
      free(s - 1);
    }
    for (int k = s + 1; k <= o.last; ++k) {
      compute(k);
      free(k - 1);
    }
    if (o.loss) {
      compute(n_);
      if (!o.first.top) free(o.last);
    }
    emit(o.first, m - (o.holds_input ? act_[s - 1] : 0), out);
    // The page-in's memory is within the limit: second's first compute adds to the same set.
    if (o.offloads_input) out.steps.push_back({StepKind::kPageIn, s - 1});
    if (o.second) emit(*o.second, m, out);
  }

  const Chain& c_;
  int n_;
  int64_t m_;
  bool offload_;
  std::vector<int64_t> act_, grad_;  // a[i] and op i's backward output, in slots
  int64_t loss_ = 0;
  std::vector<double> forward_j_before_, bwd_j_;  // forward energy of ops [0, i); backward
  std::vector<double> round_trip_j_;              // paging a[i] out and back in
  double loss_j_ = 0;
  std::vector<std::vector<int64_t>> pair_max_;
  std::vector<std::vector<double>> grad_table_, turn_table_;  // [sub-problem][m]
};

/// Bytes per slot: the sizes' common unit when the budget holds at most `slots` of them (the
/// DP is then exact), else budget / slots rounded up.
std::pair<uint64_t, bool> slot_size(const TrainingGraph& g, uint64_t budget_bytes, int slots) {
  uint64_t unit = 0;
  for (const auto& node : g.nodes) unit = std::gcd(unit, node.output_bytes);
  const auto max_slots = static_cast<uint64_t>(std::max(slots, 1));
  if (unit > 0 && budget_bytes / unit <= max_slots) return {unit, true};
  return {std::max<uint64_t>(1, (budget_bytes + max_slots - 1) / max_slots), false};
}

/// The slot count for a chain of `ops`: the DP takes O(ops^3 * slots) time and
/// O(ops^2 * slots) memory.
int auto_slots(int ops) {
  const double n = std::max(ops, 1);
  const double by_time = 2e8 / (n * n * n);
  const double by_memory = 1e7 / (n * n);
  return static_cast<int>(std::clamp(std::min(by_time, by_memory), 500.0, 100000.0));
}

}  // namespace

std::string rotor_chain_refusal(const TrainingGraph& graph) {
  return as_chain(graph, "rotor").second;
}

namespace {

PlanResult plan_chain(const std::string& name, Moves moves, const TrainingGraph& graph,
                      const PlanRequest& request, int memory_slots) {
  const auto start = std::chrono::steady_clock::now();
  auto finish = [&](PlanResult r) {
    r.planner = name;
    r.solve_time_s =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return r;
  };
  PlanResult result;
  const auto [chain, refusal] = as_chain(graph, name);
  if (!chain) {
    result.status = ModelStatus::kNoSolutionFound;
    result.why = refusal;
    return finish(result);
  }
  if (std::string why = infeasibility_reason(graph, request); !why.empty()) {
    result.status = ModelStatus::kInfeasible;
    result.why = std::move(why);
    return finish(result);
  }
  if (memory_slots == kRotorAutoSlots) memory_slots = auto_slots(chain->n);
  const auto [slot_bytes, exact] = slot_size(graph, request.budget_bytes, memory_slots);
  const auto budget_slots = static_cast<int64_t>(request.budget_bytes / slot_bytes);
  const RotorDp dp(graph, *chain, slot_bytes, budget_slots, Rounding::kUp, moves);
  if (dp.energy_j() == kInf) {
    // Store-all always fits its own peak, so a DP at that budget finds the least that works.
    const uint64_t roomy = std::max(graph.store_all_peak_bytes(), request.budget_bytes);
    const auto [roomy_slot, roomy_exact] = slot_size(graph, roomy, memory_slots);
    const RotorDp wide(graph, *chain, roomy_slot, static_cast<int64_t>(roomy / roomy_slot),
                       Rounding::kUp, moves);
    result.status = ModelStatus::kInfeasible;
    result.why = name + "'s schedules do not fit a budget of " + format_bytes(request.budget_bytes);
    if (const auto least = wide.least_memory())
      result.why += "; the least they need is " + std::string(roomy_exact ? "" : "about ") +
                    format_bytes(static_cast<uint64_t>(*least) * roomy_slot);
    return finish(result);
  }
  double bound_j = dp.energy_j();
  if ((request.objective == Objective::kTotal && moves != Moves::kRecompute) || !graph.late_costs.empty()) {
    // The DP minimizes POET's energy at each node's own cost: with overlapped transfers, or
    // recomputations charged at another (per-phase) mode's cost, its optimum bounds nothing.
    bound_j = graph.single_pass_energy_j();
  } else if (!exact) {
    // Rounding sizes down relaxes the budget, so this DP's optimum bounds the rounded-up one.
    bound_j = RotorDp(graph, *chain, slot_bytes, budget_slots, Rounding::kDown, moves).energy_j();
  }
  return finish(judge_schedule(name, graph, request, dp.schedule(), bound_j));
}

}  // namespace

PlanResult plan_rotor(const TrainingGraph& graph, const PlanRequest& request, int memory_slots) {
  return plan_chain("rotor", Moves::kRecompute, graph, request, memory_slots);
}

PlanResult plan_pofo(const TrainingGraph& graph, const PlanRequest& request, int memory_slots) {
  return plan_chain("pofo",
                    request.allowed.paging ? Moves::kRecomputeAndOffload : Moves::kRecompute, graph,
                    request, memory_slots);
}

}  // namespace ergon::planner
