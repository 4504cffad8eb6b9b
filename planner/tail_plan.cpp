#include "planner/tail_plan.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <queue>
#include <unordered_map>
#include <utility>
#include <vector>

#include "planner/bounds.h"

namespace ergon::planner {
namespace {

using Mask = uint64_t;  // one bit per tensor of the tail (TailSearch::tensors_)

constexpr int kFirstTailStages = 8;
constexpr int kTailStep = 4;
/// States the search may hold (about 120 bytes each, with how each was reached): past it, the tail
/// is too wide for the time a plan has, and the last tail that finished stands.
constexpr std::size_t kMaxStates = 1'000'000;
/// The ways of making room the search tries for one action, fewest tensors dropped first: a
/// stage that holds many small tensors has more minimal sets than any time limit allows.
constexpr int kMaxDropSets = 32;
/// The same for a bound (whole_graph_bound_j()), which must try every way: past it, no bound.
constexpr int kMaxRelaxedDropSets = 1 << 14;
/// How far up the graph the inputs of a recomputation are followed at first; beyond, the
/// search may not recompute a tensor whose inputs are not resident. replan_tail() searches
/// the same tails again with kDeepInputs where time is left.
constexpr int kInputDepth = 2;
/// Every level of inputs, a whole level at a time, while the tensors fit a Mask. A chain of
/// cheap recomputations runs deeper than two levels: on the stem and layer1 of ResNet-18
/// CIFAR at 45 % of the Pi 4 the optimum recomputes batch norm, add, ReLU, the loss and two
/// gradients in one stage, six levels, and with two levels the tail from stage 23 cost 3.6 %
/// more than the plan's own. On whole graphs the deeper tails hold more tensors and end
/// later (ResNet-18 CIFAR at 30 %: 131,000 states for the last 8 stages, against 10,000),
/// so they come second.
constexpr int kDeepInputs = std::numeric_limits<int>::max();
/// The most tensors a Mask holds: its last bit marks an input the search does not follow.
constexpr std::size_t kMaxTensors = 63;

/// A point of the search: in `stage`, before its own node is computed, with `ram` resident,
/// `paged` already written out once, and `last` the latest node computed in the stage so
/// far (-1: none yet, page-ins may still come).
struct Key {
  int stage = 0;
  Mask ram = 0, paged = 0;
  int last = -1;
  bool operator==(const Key&) const = default;
};
struct KeyHash {
  std::size_t operator()(const Key& k) const {
    uint64_t h = k.ram * 0x9E3779B97F4A7C15ULL ^ (k.paged + 0x632BE59BD9B4E019ULL) * 0xC2B2AE3D27D4EB4FULL;
    h ^= static_cast<uint64_t>(k.stage) * 0x165667B19E3779F9ULL + static_cast<uint64_t>(k.last + 1);
    return static_cast<std::size_t>(h ^ (h >> 29));
  }
};

enum class Act : char { kCompute, kRecompute, kPageIn };

/// How the search reached a key: from `from` by `act` on `node`.
struct Parent {
  Key from;
  Act act = Act::kCompute;
  int node = 0;
};

/// The cheapest tail found: the state it starts from, and each key on its way with how it
/// was reached.
struct Tail {
  Key start;
  std::vector<std::pair<Key, Parent>> steps;
};

class TailSearch {
 public:
  /// `relaxed`: a relaxation of the stage model, for a bound: every way of making room is
  /// tried, and under kTotal a page-in costs its energy above idle alone (whether a stage
  /// hides it is not asked).
  TailSearch(const TrainingGraph& graph, int from, uint64_t budget_bytes, AllowedMoves allowed,
             Objective objective, bool relaxed = false, int input_depth = kInputDepth)
      : g_(graph), n_(graph.size()), from_(from), budget_bytes_(static_cast<double>(budget_bytes)),
        allowed_(allowed), total_(objective == Objective::kTotal), relaxed_(relaxed) {
    const auto inputs = graph.inputs();
    const auto users = graph.users();
    bit_.assign(static_cast<std::size_t>(n_), -1);
    auto add = [&](int x) {
      if (bit_[x] >= 0) return;
      bit_[x] = static_cast<int>(tensors_.size());
      tensors_.push_back(x);
    };
    for (int t = from; t < n_; ++t) add(t);
    for (int x = 0; x < from; ++x)
      if (!users[x].empty() && users[x].back() >= from) add(x);
    std::vector<int> reach(tensors_.begin(), tensors_.end());
    for (int depth = 0; depth < input_depth && allowed.recompute; ++depth) {
      std::vector<int> next;
      for (int x : reach)
        if (x < from)
          for (int y : inputs[x])
            if (bit_[y] < 0 && std::find(next.begin(), next.end(), y) == next.end()) next.push_back(y);
      // Past kInputDepth a level is taken whole or not at all.
      if (next.empty() || (depth >= kInputDepth && tensors_.size() + next.size() > kMaxTensors)) break;
      for (int y : next) add(y);
      reach = std::move(next);
    }
    if (!fits()) return;
    const int m = size();
    bytes_.resize(static_cast<std::size_t>(m));
    inputs_.assign(static_cast<std::size_t>(m), 0);
    recreate_j_.resize(static_cast<std::size_t>(m));
    for (int k = 0; k < m; ++k) {
      const int x = tensors_[k];
      bytes_[k] = static_cast<double>(graph.nodes[x].output_bytes);
      for (int y : inputs[x])
        if (bit_[y] >= 0) inputs_[k] |= Mask{1} << bit_[y];
        else if (x < from) inputs_[k] |= kUnreachable;
      recreate_j_[k] = recompute_j(x);
    }
    // Per stage: what a later stage reads (needed), what may still matter (useful: read
    // later, or an input of a useful tensor, which a recomputation may need), the stage's
    // working set and the tensors live across it (read after it).
    needed_.assign(static_cast<std::size_t>(n_) + 1, 0);
    useful_.assign(static_cast<std::size_t>(n_) + 1, 0);
    working_.assign(static_cast<std::size_t>(n_) + 1, 0);
    live_.assign(static_cast<std::size_t>(n_) + 1, 0);
    made_before_.assign(static_cast<std::size_t>(n_) + 1, 0);
    for (int t = from; t <= n_; ++t) {
      Mask needed = 0, useful = 0, made = 0;
      for (int k = 0; k < m; ++k) {
        const int x = tensors_[k];
        if (x >= t) {
          useful |= inputs_[k] & ~kUnreachable;
          continue;
        }
        if (x >= from) made |= Mask{1} << k;
        if (!users[x].empty() && users[x].back() >= t) needed |= Mask{1} << k;
      }
      useful |= needed;
      for (bool changed = true; changed;) {
        changed = false;
        for (int k = 0; k < m; ++k)
          if ((useful >> k & 1U) && tensors_[k] < t && (useful | (inputs_[k] & ~kUnreachable)) != useful) {
            useful |= inputs_[k] & ~kUnreachable;
            changed = true;
          }
      }
      needed_[t] = needed;
      useful_[t] = useful;
      made_before_[t] = made;
      if (t == n_) continue;
      const int own = bit_[t];
      working_[t] = (inputs_[own] & ~kUnreachable) | (Mask{1} << own);
      for (int k = 0; k < m; ++k)
        if (tensors_[k] < t && !(working_[t] >> k & 1U) && !users[tensors_[k]].empty() &&
            users[tensors_[k]].back() > t)
          live_[t] |= Mask{1} << k;
    }
  }

  /// Each tensor has a bit of a Mask, and the last bit marks an input the search does not follow.
  [[nodiscard]] bool fits() const { return tensors_.size() <= kMaxTensors; }
  [[nodiscard]] int size() const { return static_cast<int>(tensors_.size()); }
  [[nodiscard]] int node(int k) const { return tensors_[k]; }
  [[nodiscard]] int bit(int x) const { return bit_[x]; }

  /// The cheapest tail from `plan`'s state as stage from_ starts, or nullopt where the state
  /// limit or `stop_at` came first.
  std::optional<Tail> solve(const StagePlan& plan, std::chrono::steady_clock::time_point stop_at) {
    Key start{from_, 0, 0, -1};
    for (int k = 0; k < size(); ++k) {
      const int x = tensors_[k];
      if (x >= from_) continue;
      if (plan.ram[from_][x]) start.ram |= Mask{1} << k;
      if (plan.ssd[from_][x]) start.paged |= Mask{1} << k;
    }
    start.ram &= useful_[from_];
    const std::optional<Outcome> end = search(start, stop_at, kMaxStates);
    if (!end || !end->done) return std::nullopt;
    return Tail{start, path(start, end->key)};
  }

  /// What the stages from from_ on cost at least, from nothing resident and nothing written
  /// out (from_ = 0: the whole graph), by a relaxed search (`relaxed`): the cost of the
  /// cheapest way through where the search ends, else the least estimated total of the
  /// states it has left open (the estimate never exceeds what is left). nullopt where a way
  /// of making room was left out, or where no way through exists (no schedule; the caller
  /// says why elsewhere). With it, the cheapest way through where the search ended.
  std::optional<std::pair<double, std::optional<Tail>>> solve_bound(std::chrono::steady_clock::time_point stop_at,
                                                                    std::size_t max_states) {
    const Key start{from_, 0, 0, -1};
    const std::optional<Outcome> end = search(start, stop_at, max_states);
    if (!end) return std::nullopt;
    std::optional<Tail> way;
    if (end->done) way = Tail{start, path(start, end->key)};
    return std::pair{end->total_j, std::move(way)};
  }

 private:
  static constexpr Mask kUnreachable = Mask{1} << 63;  // an input the search does not follow

  /// Where the best-first search from a start stopped: at the last stage (`done`, `key` the
  /// state reached, `total_j` its cost), or at the state or time limit (`total_j` the least
  /// estimated total of the states left open, which the cheapest way through reaches at least).
  struct Outcome {
    bool done = false;
    Key key;
    double total_j = 0;
  };
  /// nullopt where no way through exists, or (relaxed) a way of making room was left out.
  std::optional<Outcome> search(const Key& start, std::chrono::steady_clock::time_point stop_at,
                                std::size_t max_states) {
    reached_.clear();
    queue_ = {};
    reached_[start] = {0, {}};
    queue_.push({estimate_j(start), start});
    int pops = 0;
    while (!queue_.empty()) {
      const auto [f, key] = queue_.top();
      queue_.pop();
      const double cost_j = reached_.at(key).cost_j;
      if (f > cost_j + estimate_j(key) + 1e-15) continue;  // reached more cheaply since
      if (key.stage == n_) return Outcome{true, key, cost_j};
      if (reached_.size() > max_states || (++pops % 64 == 0 && std::chrono::steady_clock::now() >= stop_at))
        return Outcome{false, key, f};
      expand(key, cost_j);
      if (relaxed_ && left_out_) return std::nullopt;
    }
    return std::nullopt;
  }

  double recompute_j(int x) const {
    auto charge = [&](NodeCost c) {
      return total_ ? g_.dynamic_energy_j(c.energy_j, c.time_s) + g_.idle_power_w * c.time_s : c.energy_j;
    };
    return std::min(charge({g_.nodes[x].time_s, g_.nodes[x].energy_j}), charge(g_.compute_cost(x, true)));
  }
  /// A page-in, and its tensor's page-out where it is not written yet. Under kTotal with the
  /// idle power over the page-in's time too: the search cannot tell whether a stage hides
  /// it, and one overlapped with the stage before often breaks that stage's budget and runs
  /// late, the idle power over its time (resnet18-cifar at 30 % of the Pi 4: charged without
  /// it, the tails found cost 1.3 % more than the plan's own).
  double page_in_j(int k, Mask paged) const {
    const auto& node = g_.nodes[tensors_[k]];
    auto charge = [&](double energy_j, double time_s) {
      return total_ ? g_.dynamic_energy_j(energy_j, time_s) : energy_j;
    };
    return charge(node.pagein_energy_j, node.pagein_time_s) +
           (total_ && !relaxed_ ? g_.idle_power_w * node.pagein_time_s : 0.0) +
           ((paged >> k & 1U) ? 0.0 : charge(node.pageout_energy_j, node.pageout_time_s));
  }
  double cheapest_j(int k, Mask paged) const {
    double j = std::numeric_limits<double>::infinity();
    if (allowed_.recompute) j = recreate_j_[k];
    if (allowed_.paging) j = std::min(j, page_in_j(k, paged));
    return j;
  }
  double bytes(Mask set) const {
    double sum = 0;
    for (Mask x = set; x != 0; x &= x - 1) sum += bytes_[std::countr_zero(x)];
    return sum;
  }

  /// A lower estimate of what is left: each tensor a later stage reads and that is not
  /// resident is re-created once, and at the stage where memory is shortest the tensors
  /// live across it that are resident now (or made before it) free the shortfall, each at
  /// its cheapest re-creation per byte.
  double estimate_j(const Key& key) const {
    double sum_j = 0;
    for (Mask x = needed_[key.stage] & ~key.ram; x != 0; x &= x - 1)
      sum_j += cheapest_j(std::countr_zero(x), key.paged);
    double worst_j = 0;
    for (int u = key.stage; u < n_; ++u) {
      const Mask candidates = live_[u] & (key.ram | (made_before_[u] & ~made_before_[key.stage]));
      double short_bytes = bytes(working_[u]) + bytes(candidates) - budget_bytes_;
      if (short_bytes <= 0) continue;
      items_.clear();
      for (Mask x = candidates; x != 0; x &= x - 1) {
        const int k = std::countr_zero(x);
        items_.emplace_back(cheapest_j(k, key.paged) / bytes_[k], bytes_[k]);
      }
      std::sort(items_.begin(), items_.end());
      double j = 0;
      for (const auto& [per_byte_j, b] : items_) {
        const double take = std::min(b, short_bytes);
        j += per_byte_j * take;
        short_bytes -= take;
        if (short_bytes <= 0) break;
      }
      if (short_bytes > 0) return std::numeric_limits<double>::infinity();
      worst_j = std::max(worst_j, j);
    }
    return sum_j + worst_j;
  }

  void push(const Key& from, Key to, Act act, int node, double cost_j) {
    to.ram &= useful_[to.stage];
    auto it = reached_.find(to);
    if (it != reached_.end() && it->second.cost_j <= cost_j) return;
    const double estimate = estimate_j(to);
    if (estimate == std::numeric_limits<double>::infinity()) return;
    reached_[to] = {cost_j, {from, act, node}};
    queue_.push({cost_j + estimate, to});
  }

  /// Calls `go` with each way of making room for `extra` bytes beside `ram`: as it is, or
  /// with a minimal set of tensors outside `keep` dropped.
  template <class Go>
  void with_room(Mask ram, Mask keep, double extra, Go&& go) {
    const double over = bytes(ram) + extra - budget_bytes_;
    if (over <= 1e-9) {
      go(ram);
      return;
    }
    std::vector<int> candidates;
    for (Mask x = ram & ~keep; x != 0; x &= x - 1) candidates.push_back(std::countr_zero(x));
    std::sort(candidates.begin(), candidates.end(), [&](int a, int b) { return bytes_[a] > bytes_[b]; });
    const int c = static_cast<int>(candidates.size());
    std::vector<double> suffix(static_cast<std::size_t>(c) + 1, 0);
    for (int i = c - 1; i >= 0; --i) suffix[i] = suffix[i + 1] + bytes_[candidates[i]];
    // Largest first; a set is minimal when its last (smallest) tensor is what makes it enough.
    int sets = 0;
    const int max_sets = relaxed_ ? kMaxRelaxedDropSets : kMaxDropSets;
    std::function<void(int, double, Mask)> drop = [&](int i, double freed, Mask dropped) {
      for (int j = i; j < c; ++j) {
        if (sets >= max_sets) {
          left_out_ = true;
          return;
        }
        if (freed + suffix[j] + 1e-9 < over) return;
        const double now = freed + bytes_[candidates[j]];
        const Mask set = dropped | Mask{1} << candidates[j];
        if (now + 1e-9 >= over) {
          ++sets;
          go(ram & ~set);
        } else {
          drop(j + 1, now, set);
        }
      }
    };
    drop(0, 0, 0);
  }

  void expand(const Key& key, double cost_j) {
    const int t = key.stage;
    const int own = bit_[t];
    const Mask own_inputs = inputs_[own] & ~kUnreachable;
    if ((own_inputs & key.ram) == own_inputs && !(inputs_[own] & kUnreachable))
      with_room(key.ram, own_inputs, bytes_[own], [&](Mask ram) {
        push(key, {t + 1, ram | Mask{1} << own, key.paged, -1}, Act::kCompute, t, cost_j);
      });
    for (int k = 0; k < size(); ++k) {
      const int x = tensors_[k];
      if (x >= t || (key.ram >> k & 1U) || !(useful_[t] >> k & 1U)) continue;
      const Mask needs = inputs_[k];
      if (allowed_.recompute && x > key.last && !(needs & kUnreachable) && (needs & key.ram) == needs)
        with_room(key.ram, needs, bytes_[k], [&](Mask ram) {
          push(key, {t, ram | Mask{1} << k, key.paged, x}, Act::kRecompute, x, cost_j + recreate_j_[k]);
        });
      if (allowed_.paging && key.last < 0) {
        const double j = page_in_j(k, key.paged);
        with_room(key.ram, 0, bytes_[k], [&](Mask ram) {
          push(key, {t, ram | Mask{1} << k, key.paged | Mask{1} << k, -1}, Act::kPageIn, x, cost_j + j);
        });
      }
    }
  }

  std::vector<std::pair<Key, Parent>> path(const Key& start, Key key) const {
    std::vector<std::pair<Key, Parent>> steps;
    while (!(key == start)) {
      const Parent& p = reached_.at(key).parent;
      steps.emplace_back(key, p);
      key = p.from;
    }
    std::reverse(steps.begin(), steps.end());
    return steps;
  }

  const TrainingGraph& g_;
  int n_;
  int from_;
  double budget_bytes_;
  AllowedMoves allowed_;
  bool total_;
  bool relaxed_;
  bool left_out_ = false;  ///< with_room() left a way of making room out
  std::vector<int> tensors_, bit_;
  std::vector<double> bytes_, recreate_j_;
  std::vector<Mask> inputs_, needed_, useful_, working_, live_, made_before_;
  /// Each key reached: the least cost found to it, and how.
  struct Reached {
    double cost_j = 0;
    Parent parent;
  };
  std::unordered_map<Key, Reached, KeyHash> reached_;
  using Entry = std::pair<double, Key>;
  struct Later {
    bool operator()(const Entry& a, const Entry& b) const { return a.first > b.first; }
  };
  std::priority_queue<Entry, std::vector<Entry>, Later> queue_;
  mutable std::vector<std::pair<double, double>> items_;
};

/// Whether a page-out of `plan` runs through stage s, from the stage before to the stage
/// after: such a stage carries no other transfer.
bool runs_through(const StagePlan& plan, int s) {
  if (s == 0 || s + 1 >= plan.n) return false;
  for (int i = 0; i < s; ++i)
    if (plan.page_out[s - 1][i] && plan.page_out[s][i] && plan.page_out[s + 1][i]) return true;
  return false;
}

/// `plan` with its stages from `from` on replaced by the search's `steps`: each stage holds
/// what it starts with and uses or keeps, and what it pages in (paged in in the stage
/// before), and a tensor paged in that was never written out is written out in the first
/// stage of the tail that holds it, before the stage that pages it in (storage holds what a
/// stage wrote out from the next stage on), or else in the last stage before the tail that
/// holds it (resnet18-cifar's stem convolution, recomputed by the plan in the backward pass,
/// is held in the tail by no stage before the one that pages it in).
std::optional<StagePlan> splice(const TrainingGraph& graph, const StagePlan& plan, int from, const TailSearch& search,
                                const Tail& tail) {
  const int n = graph.size();
  const auto inputs = graph.inputs();
  StagePlan out = plan;
  for (int t = from; t < n; ++t)
    for (int i = 0; i < n; ++i) {
      out.compute[t][i] = false;
      out.page_in[t][i] = false;
      out.page_out[t][i] = false;
      out.page_in_late[t][i] = false;
      out.ram[t][i] = false;
      out.ssd[t][i] = false;
    }
  std::vector<Mask> first(static_cast<std::size_t>(n) + 1, 0), used(first), paged_in(first), kept(first);
  std::vector<char> started(static_cast<std::size_t>(n) + 1, 0);
  Key at = tail.start;
  for (const auto& [key, how] : tail.steps) {
    const int t = at.stage;
    if (!started[t]) {
      first[t] = at.ram;
      started[t] = 1;
    }
    if (how.act == Act::kPageIn) {
      first[t] &= key.ram;  // what it dropped to make room, it did not start with
      paged_in[t] |= Mask{1} << search.bit(how.node);
    } else {
      for (int i : inputs[how.node])
        if (search.bit(i) >= 0) used[t] |= Mask{1} << search.bit(i);
      out.compute[t][how.node] = true;
    }
    if (how.act == Act::kCompute) kept[t] = key.ram;
    at = key;
  }
  Mask written = tail.start.paged;
  std::vector<int> write_at(static_cast<std::size_t>(search.size()), -1);
  for (int t = from; t < n; ++t) {
    const Mask ram = (first[t] & (used[t] | kept[t])) | paged_in[t];
    for (Mask x = ram; x != 0; x &= x - 1) out.ram[t][search.node(std::countr_zero(x))] = true;
    for (Mask x = paged_in[t]; x != 0; x &= x - 1) {
      const int k = std::countr_zero(x);
      out.page_in[t - 1][search.node(k)] = true;
      if (!(written >> k & 1U)) {
        written |= Mask{1} << k;
        for (int s = from; s + 1 < t && write_at[k] < 0; ++s)
          if (out.ram[s][search.node(k)]) write_at[k] = s;
        // Not held in the tail before its page-in: written out where the plan last held
        // it before the tail, in a stage no page-out runs through (the model's rule).
        for (int s = std::min(from, t - 1) - 1; s >= 0 && write_at[k] < 0; --s)
          if (plan.ram[s][search.node(k)] && !runs_through(out, s)) write_at[k] = s;
        if (write_at[k] < 0) return std::nullopt;  // nowhere to write it out
      }
    }
  }
  // The stage before the tail pages in only what the tail starts with.
  for (int i = 0; i < n && from > 0; ++i)
    if ((out.page_in[from - 1][i] || out.page_in_late[from - 1][i]) && !out.ram[from][i]) {
      out.page_in[from - 1][i] = false;
      out.page_in_late[from - 1][i] = false;
    }
  for (int k = 0; k < search.size(); ++k)
    if (write_at[k] >= 0) out.page_out[write_at[k]][search.node(k)] = true;
  for (int k = 0; k < search.size(); ++k)
    for (int t = write_at[k] + 1; t < from && write_at[k] >= 0; ++t) out.ssd[t][search.node(k)] = true;
  for (int t = from; t < n; ++t)
    for (int i = 0; i < t; ++i) {
      const int k = search.bit(i);
      out.ssd[t][i] = plan.ssd[from][i] || (k >= 0 && write_at[k] >= 0 && t > write_at[k]);
    }
  if (!check_stage_plan(graph, out).empty()) return std::nullopt;
  return out;
}

/// Under kTotal a page-in overlaps the stage before it and holds its tensor there: in each
/// stage from `from - 1` on that breaks the budget, the page-ins go late instead (after the
/// stage's computes, the idle power over their time). `costs` is `plan`'s, and is kept so.
void late_where_over(const TrainingGraph& graph, StagePlan& plan, int from, uint64_t budget_bytes,
                     StagePlanCosts& costs) {
  for (bool moved = true; moved && costs.peak_bytes > budget_bytes;) {
    moved = false;
    for (int t = from - 1; t < plan.n; ++t) {
      if (costs.stage_peak_bytes[t] <= budget_bytes) continue;
      for (int i = 0; i < t; ++i)
        if (plan.page_in[t][i]) {
          plan.page_in[t][i] = false;
          plan.page_in_late[t][i] = true;
          moved = true;
        }
    }
    if (moved) costs = evaluate_stage_plan(graph, plan, Objective::kTotal);
  }
}

}  // namespace

std::optional<StagePlan> replan_tail(const TrainingGraph& graph, const StagePlan& plan, MemoryBudget budget,
                                     double deadline_s, AllowedMoves allowed, Objective objective,
                                     std::chrono::steady_clock::time_point stop_at) {
  const int n = graph.size();
  const int earliest = graph.backward_phase_start() + 1;  // the stash, held as it starts, stays
  auto fits = [&](const StagePlanCosts& c) {
    return c.peak_bytes <= budget.bytes && c.stash_bytes <= budget.stash_bytes &&
           c.deadline_time_s <= deadline_s * (1 + 1e-9);
  };
  std::optional<StagePlan> best;
  double best_j = evaluate_stage_plan(graph, plan, objective).energy_j;
  // The tails with two levels of a recomputation's inputs, then, while time is left, again
  // with every level that fits: those that hold more tensors than the first time.
  std::vector<int> shallow_tensors(static_cast<std::size_t>(n), -1);
  for (const int depth : {kInputDepth, kDeepInputs}) {
    for (int from = n - kFirstTailStages; from >= earliest && std::chrono::steady_clock::now() < stop_at;
         from -= kTailStep) {
      TailSearch search(graph, from, budget.bytes, allowed, objective, false, depth);
      if (!search.fits()) break;
      if (depth == kInputDepth) shallow_tensors[from] = search.size();
      else if (search.size() == shallow_tensors[from]) continue;  // the same search again
      const StagePlan& base = best ? *best : plan;
      const std::optional<Tail> tail = search.solve(base, stop_at);
      if (!tail) break;
      auto spliced = splice(graph, base, from, search, *tail);
      if (!spliced) continue;
      StagePlanCosts costs = evaluate_stage_plan(graph, *spliced, objective);
      if (objective == Objective::kTotal) late_where_over(graph, *spliced, from, budget.bytes, costs);
      if (fits(costs) && costs.energy_j < best_j * (1 - 1e-12)) {
        best_j = costs.energy_j;
        best = std::move(spliced);
      }
    }
  }
  return best;
}

std::optional<WholeGraphSearch> whole_graph_search(const TrainingGraph& graph, uint64_t budget_bytes,
                                                   AllowedMoves allowed, Objective objective,
                                                   std::chrono::steady_clock::time_point stop_at,
                                                   std::size_t max_states) {
  TailSearch search(graph, 0, budget_bytes, allowed, objective, true);
  if (!search.fits()) return std::nullopt;
  const auto found = search.solve_bound(stop_at, max_states);
  if (!found) return std::nullopt;
  WholeGraphSearch out;
  out.ended = found->second.has_value();
  out.bound_j = one_pass_j(graph, objective) + found->first;  // the search leaves each stage's own node uncharged
  if (found->second) {
    // The relaxation is looser than the stage model and the replay: its way through is kept
    // only where both take it within the budget (on random graphs under total a page-out
    // held through its stage breaks it).
    auto plan = splice(graph, StagePlan(graph.size()), 0, search, *found->second);
    if (plan && evaluate_stage_plan(graph, *plan, objective).peak_bytes <= budget_bytes &&
        simulate(graph, to_schedule(graph, *plan, objective), budget_bytes).valid)
      out.plan = std::move(plan);
  }
  return out;
}

std::optional<double> whole_graph_bound_j(const TrainingGraph& graph, uint64_t budget_bytes, AllowedMoves allowed,
                                          Objective objective, std::chrono::steady_clock::time_point stop_at,
                                          std::size_t max_states) {
  const auto found = whole_graph_search(graph, budget_bytes, allowed, objective, stop_at, max_states);
  if (!found) return std::nullopt;
  return found->bound_j;
}

}  // namespace ergon::planner
