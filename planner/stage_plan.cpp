#include "planner/stage_plan.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cassert>
#include <chrono>
#include <climits>
#include <exception>
#include <iterator>
#include <limits>
#include <memory>
#include <mutex>
#include <queue>
#include <random>
#include <thread>
#include <unordered_map>
#include <utility>

namespace ergon::planner {

StagePlan::StagePlan(int nodes)
    : n(nodes), compute(nodes), page_in(nodes), page_out(nodes), page_in_late(nodes), ram(nodes), ssd(nodes) {}

void StagePlan::clear() {
  for (StageGrid* grid : {&compute, &page_in, &page_out, &page_in_late}) grid->clear();
  ram.clear();
  ssd.clear();
}

std::string check_stage_plan(const TrainingGraph& graph, const StagePlan& p) {
  const int n = graph.size();
  if (p.n != n) return "plan has " + std::to_string(p.n) + " stages for " + std::to_string(n) + " nodes";
  const auto inputs = graph.inputs();
  auto where = [&](int t, int i) {
    return " (stage " + std::to_string(t) + ", " + graph.nodes[i].name + ")";
  };
  for (int t = 0; t < n; ++t) {
    if (!p.compute[t][t]) return "a stage does not compute its own node" + where(t, t);
    for (int i = t; i < n; ++i) {
      if (i > t && p.compute[t][i]) return "a stage computes a later node" + where(t, i);
      if (p.ram[t][i] || p.ssd[t][i] || p.page_in[t][i] || p.page_out[t][i] || p.page_in_late[t][i])
        return "a stage holds or pages a node not computed yet" + where(t, i);
    }
    for (int k = 0; k <= t; ++k) {
      if (!p.compute[t][k]) continue;
      for (int i : inputs[k])
        if (!p.compute[t][i] && !p.ram[t][i]) return "an input is missing" + where(t, i);
    }
    for (int i = 0; i < t; ++i) {
      if ((p.page_in[t][i] || p.page_in_late[t][i]) && !p.ssd[t][i])
        return "page-in of a tensor not on storage" + where(t, i);
      if (p.page_out[t][i] && !p.ram[t][i]) return "page-out of a tensor not in RAM" + where(t, i);
    }
    if (t + 1 < n) {
      for (int i = 0; i <= t; ++i) {
        if (p.ram[t + 1][i] && !p.ram[t][i] && !p.compute[t][i] && !p.page_in[t][i] &&
            !p.page_in_late[t][i])
          return "a tensor appears in RAM from nowhere" + where(t + 1, i);
        if (p.ssd[t + 1][i] && !p.ssd[t][i] && !p.page_out[t][i])
          return "a tensor appears on storage from nowhere" + where(t + 1, i);
      }
    }
  }
  return {};
}

bool frees_after(const StagePlan& p, const std::vector<std::vector<int>>& users, int t, int i,
                 int k, Objective objective) {
  if (!p.compute[t][k]) return false;
  if (t + 1 < p.n && p.ram[t + 1][i]) return false;
  if (objective == Objective::kTotal && i < t && p.page_out[t][i]) return false;
  for (int j : users[i])
    if (j > k && j <= t && p.compute[t][j]) return false;
  return true;
}

namespace {

/// Calls f(i), in order, for each i in [0, len) where any of `rows` is set. Plans are sparse
/// (a stage holds, computes and pages a few of the n nodes) and measured thousands of times
/// a second, so rows are scanned 64 flags at a time.
template <std::size_t K, class F>
void for_each_set(const StageGrid::ConstRow (&rows)[K], int len, F&& f) {
  const int words = (len + 63) / 64;
  for (int w = 0; w < words; ++w) {
    uint64_t any = 0;
    for (std::size_t r = 0; r < K; ++r) any |= rows[r].words()[w];
    if (w == words - 1 && (len & 63) != 0) any &= (uint64_t{1} << (len & 63)) - 1;
    while (any != 0) {
      f(w * 64 + std::countr_zero(any));
      any &= any - 1;
    }
  }
}

StagePlanCosts evaluate(const TrainingGraph& graph, const std::vector<std::vector<int>>& inputs,
                        const std::vector<std::vector<int>>& users, const StagePlan& p,
                        Objective objective) {
  const int n = graph.size();
  const bool total = objective == Objective::kTotal;
  // kPoet charges each activity's energy; kTotal its energy above idle, plus idle power over
  // the makespan.
  auto charge = [&](double energy_j, double time_s) {
    return total ? graph.dynamic_energy_j(energy_j, time_s) : energy_j;
  };
  const int late_from = graph.backward_phase_start();
  StagePlanCosts c;
  c.stage_peak_bytes.assign(n, 0);
  c.stage_time_s.assign(n, 0);
  // Under kTotal one storage channel carries the transfers in the order a stage issues them
  // (to_schedule: its page-ins, then its page-outs), each from when it is issued and the
  // channel is free. A page-out may run over consecutive stages (page_out set in each, the
  // tensor held in all of them); the stage where it ends waits for it, as a stage waits for
  // its page-ins, and late page-ins go after the stage's computes and transfers.
  double stage_start_s = 0;
  double channel_free_s = 0;  // when the channel has carried every transfer issued so far
  struct Transfer {
    int node;
    int last;  ///< the stage that waits for it to be done
    double from_s, to_s;  ///< when the channel carries it
  };
  std::vector<Transfer> under_way;  // page-outs not done with their span yet
  // What each stage holds from before it (ram[t][i], i < t), summed run by run: held[t].
  std::vector<int64_t> held(n + 1, 0);
  for (int i = 0; i < n; ++i) {
    const auto bytes = static_cast<int64_t>(graph.nodes[i].output_bytes);
    p.ram.for_each_run(i, i + 1, [&](int first, int last) {
      held[first] += bytes;
      held[last + 1] -= bytes;
    });
  }
  for (int t = 1; t < n; ++t) held[t] += held[t - 1];
  for (int t = 0; t < n; ++t) {
    int64_t u = 0;
    double stage_compute_s = 0, stage_transfer_s = 0, stage_late_s = 0;
    double wait_until_s = stage_start_s;  // transfers this stage must see done
    auto issue = [&](int node, int last, double time_s) {
      const double from_s = std::max(channel_free_s, stage_start_s);
      channel_free_s = from_s + time_s;
      if (last == t) wait_until_s = std::max(wait_until_s, channel_free_s);  // page-ins
      return Transfer{node, last, from_s, channel_free_s};
    };
    // What the stage holds (most of a plan's flags), then its page-ins, which are few.
    u += held[t];
    for_each_set({p.page_in[t], p.page_in_late[t]}, t, [&](int i) {
      const auto& node = graph.nodes[i];
      if (total && p.page_in[t][i] && !p.ram[t][i]) u += static_cast<int64_t>(node.output_bytes);
      if (p.page_in[t][i]) {
        c.energy_j += charge(node.pagein_energy_j, node.pagein_time_s);
        if (total) {
          issue(i, t, node.pagein_time_s);
        } else {
          stage_transfer_s += node.pagein_time_s;
        }
      }
      if (p.page_in_late[t][i]) {
        c.energy_j += charge(node.pagein_energy_j, node.pagein_time_s);
        stage_late_s += node.pagein_time_s;
      }
    });
    // Page-outs after the page-ins: those that end in this stage, then one that goes on
    // into the next (the model's rule; see StagePlan), so it takes what channel time the
    // stage has left.
    for (const bool going_on : {false, true}) {
      for_each_set({p.page_out[t]}, t, [&](int i) {
        const auto& node = graph.nodes[i];
        if (!total) {
          if (going_on) return;
          c.energy_j += charge(node.pageout_energy_j, node.pageout_time_s);
          stage_transfer_s += node.pageout_time_s;
        } else if (!p.page_out[t - 1][i]) {  // a span starts (i < t, so t >= 1)
          int last = t;
          while (last + 1 < n && p.page_out[last + 1][i]) ++last;
          if ((last > t) != going_on) return;
          c.energy_j += charge(node.pageout_energy_j, node.pageout_time_s);
          under_way.push_back(issue(i, last, node.pageout_time_s));
        }
      });
    }
    int64_t peak = u;
    for_each_set({p.compute[t]}, t + 1, [&](int k) {
      const NodeCost cost = graph.compute_cost(k, t >= late_from);
      c.energy_j += charge(cost.energy_j, cost.time_s);
      stage_compute_s += cost.time_s;
      u += static_cast<int64_t>(graph.nodes[k].output_bytes);
      peak = std::max(peak, u);
      for (int i : inputs[k])
        if (frees_after(p, users, t, i, k, objective))
          u -= static_cast<int64_t>(graph.nodes[i].output_bytes);
      if (frees_after(p, users, t, k, k, objective))
        u -= static_cast<int64_t>(graph.nodes[k].output_bytes);
    });
    c.compute_time_s += stage_compute_s;
    if (total) {
      // The stage lasts until its computes are done and the transfers it waits for; then
      // its late page-ins run, once the channel is free.
      for (const Transfer& x : under_way)
        if (x.last == t) wait_until_s = std::max(wait_until_s, x.to_s);
      double end_s = std::max(stage_start_s + stage_compute_s, wait_until_s);
      if (stage_late_s > 0) {
        end_s = std::max(end_s, channel_free_s) + stage_late_s;
        channel_free_s = end_s;
      }
      // Each page-out's channel time within the stage (the MILP's C grows by it).
      for (const Transfer& x : under_way) {
        const double share_s = std::min(x.to_s, end_s) - std::max(x.from_s, stage_start_s);
        if (share_s > 0) c.page_out_shares.push_back({t, x.node, share_s});
      }
      std::erase_if(under_way, [t](const Transfer& x) { return x.last <= t; });
      c.stage_time_s[t] = end_s - stage_start_s;
      stage_start_s = end_s;
    } else {
      c.stage_time_s[t] = std::max(stage_compute_s, stage_transfer_s) + stage_late_s;
    }
    c.makespan_s += c.stage_time_s[t];
    c.stage_peak_bytes[t] = static_cast<uint64_t>(peak);
    if (t == late_from)
      c.stash_bytes += static_cast<uint64_t>(held[t]);
    c.peak_bytes = std::max(c.peak_bytes, c.stage_peak_bytes[t]);
  }
  if (total) c.energy_j += graph.idle_power_w * c.makespan_s;
  c.deadline_time_s = total ? c.makespan_s : c.compute_time_s;
  return c;
}

}  // namespace

StagePlanCosts evaluate_stage_plan(const TrainingGraph& graph, const StagePlan& plan,
                                   Objective objective) {
  return evaluate(graph, graph.inputs(), graph.users(), plan, objective);
}

Schedule to_schedule(const TrainingGraph& graph, const StagePlan& p, Objective objective) {
  const int n = graph.size();
  const auto inputs = graph.inputs();
  const auto users = graph.users();
  Schedule s;
  std::vector<char> resident(n, 0);
  auto free_if = [&](bool cond, int i) {
    if (cond && resident[i]) {
      s.steps.push_back({StepKind::kFree, i});
      resident[i] = 0;
    }
  };
  const bool total = objective == Objective::kTotal;
  // Where each page-out starts, and whether it goes on into the next stage.
  auto page_out_starts = [&](int t, int i) { return p.page_out[t][i] && !(t > 0 && p.page_out[t - 1][i]); };
  auto goes_on = [&](int t, int i) { return t + 1 < n && p.page_out[t + 1][i]; };
  for (int t = 0; t < n; ++t) {
    if (total) {
      for (int i = 0; i < t; ++i) {
        if (!p.page_in[t][i]) continue;
        s.steps.push_back({StepKind::kPageIn, i});
        resident[i] = 1;
      }
      // After the page-ins: the page-outs that end in this stage, then one that goes on.
      for (const bool going_on : {false, true})
        for (int i = 0; i < t; ++i)
          if (page_out_starts(t, i) && goes_on(t, i) == going_on) s.steps.push_back({StepKind::kPageOut, i});
    } else {
      for (int i = 0; i < t; ++i)
        if (page_out_starts(t, i)) s.steps.push_back({StepKind::kPageOut, i});
    }
    for (int k = 0; k <= t; ++k) {
      if (!p.compute[t][k]) continue;
      s.steps.push_back({StepKind::kCompute, k});
      resident[k] = 1;
      for (int i : inputs[k]) free_if(frees_after(p, users, t, i, k, objective), i);
      free_if(frees_after(p, users, t, k, k, objective), k);
    }
    if (t + 1 == n) break;
    for (int i = 0; i <= t; ++i) free_if(!p.ram[t + 1][i], i);
    if (total) {
      for (int i = 0; i < t; ++i) {
        if (!p.page_in_late[t][i]) continue;
        s.steps.push_back({StepKind::kPageIn, i});
        resident[i] = 1;
        free_if(!p.ram[t + 1][i], i);
      }
      continue;
    }
    for (int i = 0; i < t; ++i) {
      if (!p.page_in[t][i]) continue;
      s.steps.push_back({StepKind::kPageIn, i});
      resident[i] = 1;
      free_if(!p.ram[t + 1][i], i);
    }
  }
  return s;
}

namespace {

/// How a tensor needed in a stage, and not there yet, gets there.
/// kPageLate (Objective::kTotal): paged back in after the previous stage's computes, holding
/// no memory there but not hidden behind them. kRecomputeEarly: recomputed in the stage
/// before and carried in, so its chain's transient outputs do not add to the peak of a stage
/// that recomputes much else (the stage MILP does this where backward stages recompute long
/// chains; see derive()). kPageEarly (Objective::kPoet): written out in the stage that last
/// reads it before the gap, where it is resident anyway, rather than in the stage after (which
/// holds it throughout): away for the whole gap, and a gap of one stage (read again two stages
/// on) can be paged at all.
enum Bridge : char { kUnset = 0, kCarry, kPage, kRecompute, kPageLate, kRecomputeEarly, kPageEarly };
constexpr bool recomputes(Bridge b) { return b == kRecompute || b == kRecomputeEarly; }
/// Each stage's bridge for each tensor ([stage][node], a Bridge per byte), in one block.
class Choices {
 public:
  Choices() = default;
  explicit Choices(int n) : n_(n), cells_(static_cast<std::size_t>(n) * n, kUnset) {}
  [[nodiscard]] char* operator[](int row) { return cells_.data() + static_cast<std::size_t>(row) * n_; }
  [[nodiscard]] const char* operator[](int row) const { return cells_.data() + static_cast<std::size_t>(row) * n_; }

 private:
  int n_ = 0;
  std::vector<char> cells_;
};

/// Consecutive stages a page-out runs over, first to last.
struct Span {
  int first = 0;
  int last = 0;
};

/// From stage `first`, as many stages as their computes (`stage_s`) take to hide a page-out
/// of `out_s`, but none past `limit`.
Span computing_span(int first, int limit, double out_s, const std::vector<double>& stage_s) {
  Span span{first, first};
  double hidden_s = stage_s[first];
  while (hidden_s < out_s && span.last + 1 <= limit) hidden_s += stage_s[++span.last];
  return span;
}

/// A page-out of `node` over `span`, the tensor held in RAM from `held_from` until it ends and
/// on storage after.
void mark_page_out(StagePlan& p, int node, int held_from, const Span& span) {
  p.ram.set_rows(node, held_from, span.last);
  for (int s = span.first; s <= span.last; ++s) p.page_out[s][node] = 1;
  p.ssd.set_rows(node, span.last + 1, p.n - 1);
}

/// Kept while the greedy search derives a plan under kTotal: the storage channel time already
/// placed in each stage, and where page-outs go on into the next stage or run through one,
/// so that a new transfer goes where the model's rules (see StagePlan) let compute hide it.
class Channel {
 public:
  explicit Channel(int stages) : load_s_(stages, 0.0), going_on_(stages, 0), through_(stages, 0), late_(stages, 0) {}

  /// What stage s still has for a transfer that ends in it: none where a page-out runs
  /// through it.
  [[nodiscard]] double free_s(int s, const std::vector<double>& stage_s) const {
    return through_[s] ? 0.0 : std::max(0.0, stage_s[s] - load_s_[s]);
  }
  void add(int s, double time_s) { load_s_[s] += time_s; }
  /// A late page-in after stage s's computes: no page-out may go on from s.
  void add_late(int s) { late_[s] = 1; }

  /// The earliest span within [from, to] that hides a page-out of `out_s` by the rules: it
  /// starts where it may go on (or ends there), takes what its first stage has left, runs
  /// through stages with no other transfer, and ends where the rest still fits. nullopt
  /// where none does. Linear: a span that meets another transfer cannot get past it, so
  /// the next start worth trying is there.
  [[nodiscard]] std::optional<Span> hiding_span(int from, int to, double out_s,
                                                const std::vector<double>& stage_s) const {
    for (int first = from; first <= to;) {
      if (through_[first]) {
        ++first;
        continue;
      }
      double got_s = free_s(first, stage_s);
      if (got_s >= out_s) return Span{first, first};
      int next = first + 1;
      if (!going_on_[first] && !late_[first]) {
        int last = first + 1;
        for (; last <= to && !through_[last]; ++last) {
          if (got_s + free_s(last, stage_s) >= out_s) return Span{first, last};
          if (load_s_[last] > 0 || going_on_[last] || late_[last]) break;  // ends here at the latest
          got_s += stage_s[last];
        }
        if (last > to) return std::nullopt;  // a later start hides no more
        next = std::max(next, last);
      }
      first = next;
    }
    return std::nullopt;
  }

  /// Records a page-out over `span`: all its first stage has left, all of the stages it runs
  /// through, and the rest in its last stage.
  void place(const Span& span, double out_s, const std::vector<double>& stage_s) {
    if (span.first == span.last) {
      add(span.first, out_s);
      return;
    }
    double got_s = free_s(span.first, stage_s);
    load_s_[span.first] += got_s;
    going_on_[span.first] = 1;
    for (int s = span.first + 1; s < span.last; ++s) {
      through_[s] = going_on_[s] = 1;
      got_s += stage_s[s];
      load_s_[s] = std::max(load_s_[s], stage_s[s]);
    }
    add(span.last, std::max(0.0, out_s - got_s));
  }

 private:
  std::vector<double> load_s_;
  std::vector<char> going_on_, through_, late_;
};

struct Gap {
  int node = 0;
  int from = 0;  ///< the last stage the tensor was present in before
  int to = 0;    ///< the stage that needs it
  Bridge used = kCarry;
};

struct State {
  Choices choices;
  StagePlan plan{0};
  std::vector<Gap> gaps;
  StagePlanCosts costs;
  double excess = 0;  ///< sum over stages of bytes above the budget
};

/// Tells the caller of each cheaper plan the search finds, whichever of its threads finds it:
/// one call at a time, each cheaper than the last. How often to show them is the caller's.
class BetterPlans {
 public:
  explicit BetterPlans(std::function<void(double)> on_better) : on_better_(std::move(on_better)) {}
  void found(double energy_j) {
    if (!on_better_) return;
    const std::scoped_lock lock(mutex_);
    if (!(energy_j < best_j_)) return;
    best_j_ = energy_j;
    on_better_(energy_j);
  }

 private:
  std::function<void(double)> on_better_;
  std::mutex mutex_;
  double best_j_ = std::numeric_limits<double>::infinity();
};

class Greedy {
 public:
  Greedy(const TrainingGraph& g, MemoryBudget budget, double deadline_s, AllowedMoves allowed,
         double search_time_s, Objective objective, double good_enough_j, double give_up_s,
         std::function<void(double)> on_better = {})
      : better_(std::make_shared<BetterPlans>(std::move(on_better))),
        g_(g), n_(g.size()), inputs_(g.inputs()), users_(g.users()), budget_(budget.bytes),
        stash_budget_(budget.stash_bytes), deadline_(deadline_s), objective_(objective), good_enough_j_(good_enough_j),
        allowed_(allowed), late_from_(g.backward_phase_start()), stop_at_(after(search_time_s)),
        give_up_at_(after(give_up_s)) {
    if (allowed.recompute) bridges_.push_back(kRecompute);
    if (allowed.paging && objective == Objective::kTotal) bridges_.push_back(kPageLate);
    if (allowed.paging) bridges_.push_back(kPage);
    bridges_early_ = bridges_;
    if (allowed.paging && objective == Objective::kPoet) bridges_early_.push_back(kPageEarly);
    dear_chains_ = allowed.recompute && n_ <= kDearChainsUpTo;
  }

  /// Under kTotal with paging the search runs twice, each way of placing page-outs (see
  /// derive(): `hidden_`), and the cheaper plan stands. Holding a tensor until a run of
  /// stages free of other transfers hides its page-out is what lets BERT-tiny on a Pi 4 page
  /// instead of recompute (3.55 % to 1.65 % gap at 50 %), and what costs ResNet-18 CIFAR at
  /// 30 % the memory it needs (9.6 % to 13.6 %).
  ///
  /// With `threads` >= 2 the two run at once, each on its own thread with all of the time,
  /// and each then searches its other starts (see search()) in the time it has left. With
  /// one thread the second search runs only where the first took under a tenth of the time
  /// to give up, its local search in what time is left, and each search's other starts are
  /// searched only after both searches' first. On graphs past a few hundred nodes the first
  /// search alone takes all of the time, and the second was never run: on DenseNet-121 at
  /// 30 % of the Pi 4 it is the better one (a 1.46 % gap in 10 s against 3.4 to 7.4 %).
  std::optional<StagePlan> run(const std::vector<Schedule>& seeds, int threads) {
    const bool both = objective_ == Objective::kTotal && allowed_.paging;
    if (both && threads >= 2) return run_both_at_once(seeds);
    if (threads >= 2) return run_starts_at_once(seeds);
    const auto now = std::chrono::steady_clock::now();
    Searched plain = search(seeds);
    const auto first_took = std::chrono::steady_clock::now() - now;
    std::optional<Searched> hidden;
    if (both && (give_up_at_ == std::chrono::steady_clock::time_point::max() ||
                 first_took * 10 < give_up_at_ - now)) {
      hidden_ = true;
      hidden = search(seeds);
      hidden_ = false;
    }
    // The other starts, each with its own way of placing page-outs, in the time left.
    search_rest(plain);
    if (hidden) {
      hidden_ = true;
      search_rest(*hidden);
      hidden_ = false;
    }
    // Then the kicks, as two threads run them: each way's plan with its own seed, or without
    // a second way the one plan with both seeds; so that where time is ample the plan is the
    // same to the joule on one thread as on two.
    std::optional<State> other;
    if (plain.best) {
      if (!both) {
        other = *plain.best;
        kick(*plain.best, kFirstSeed);
        kick(*other, kSecondSeed);
      } else {
        kick(*plain.best, kFirstSeed);
      }
    }
    if (hidden && hidden->best) {
      hidden_ = true;
      kick(*hidden->best, kSecondSeed);
      hidden_ = false;
      other = std::move(hidden->best);
    }
    std::optional<State> best = std::move(plain.best);
    if (other && (!best || other->costs.energy_j < best->costs.energy_j)) best = std::move(other);
    if (!best) return std::nullopt;
    return std::move(best->plan);
  }

 private:
  /// A search's outcome: its cheapest start searched locally, and the other starts, cheaper
  /// first, not yet.
  struct Searched {
    std::optional<State> best;
    std::vector<State> rest;
  };

  /// `theirs` on a second thread while `mine` runs on this one. An exception from either is
  /// rethrown here, after both have stopped.
  template <class Theirs, class Mine>
  static void at_once(Theirs&& theirs, Mine&& mine) {
    std::exception_ptr theirs_failed;
    std::thread worker([&] {
      try {
        theirs();
      } catch (...) {
        theirs_failed = std::current_exception();
      }
    });
    try {
      mine();
    } catch (...) {
      worker.join();
      throw;
    }
    worker.join();
    if (theirs_failed) std::rethrow_exception(theirs_failed);
  }

  /// The two ways of placing page-outs searched on two threads: this one's, and a copy's
  /// (its own spare states) with `hidden_` set. Nothing else is shared but the graph, read
  /// only.
  std::optional<StagePlan> run_both_at_once(const std::vector<Schedule>& seeds) {
    Greedy other = *this;
    other.hidden_ = true;
    std::optional<State> best, other_best;
    at_once(
        [&] {
          Searched r = other.search(seeds);
          other.search_rest(r);
          if (r.best) other.kick(*r.best, kSecondSeed);
          other_best = std::move(r.best);
        },
        [&] {
          Searched r = search(seeds);
          search_rest(r);
          if (r.best) kick(*r.best, kFirstSeed);
          best = std::move(r.best);
        });
    if (other_best && (!best || other_best->costs.energy_j < best->costs.energy_j)) best = std::move(other_best);
    if (!best) return std::nullopt;
    return std::move(best->plan);
  }

  /// One way of placing page-outs (all that kPoet, or a search without paging, has): its
  /// starts searched on two threads, this one and a copy (its own spare states) each taking
  /// the next start not yet taken, cheapest first, while time is left and neither has found
  /// a plan good enough; rather than the second in the time the first leaves.
  std::optional<StagePlan> run_starts_at_once(const std::vector<Schedule>& seeds) {
    std::vector<State> starts = sorted_starts(seeds);
    if (starts.empty()) return std::nullopt;
    if (starts.size() > 1 && starts[0].costs.energy_j > good_enough_j_) {
      Greedy other = *this;
      std::atomic<std::size_t> next{0};
      std::atomic<bool> done{false};  // a plan good enough is found
      auto take_starts = [&](const Greedy& g) {
        for (std::size_t k = next++; k < starts.size(); k = next++) {
          if (k >= 2 && (done || std::chrono::steady_clock::now() >= stop_at_)) return;
          g.improve(starts[k]);
          if (starts[k].costs.energy_j <= good_enough_j_) done = true;
        }
      };
      at_once([&] { take_starts(other); }, [&] { take_starts(*this); });
    } else {
      improve(starts[0]);
    }
    auto cheapest = std::min_element(starts.begin(), starts.end(), [](const State& a, const State& b) {
      return a.costs.energy_j < b.costs.energy_j;
    });
    // The cheapest plan kicked on both threads, each its own way (seed).
    if (cheapest->costs.energy_j > good_enough_j_ && std::chrono::steady_clock::now() < stop_at_) {
      const Greedy other = *this;
      State theirs = *cheapest;
      at_once([&] { other.kick(theirs, kSecondSeed); }, [&] { kick(*cheapest, kFirstSeed); });
      if (theirs.costs.energy_j < cheapest->costs.energy_j) return std::move(theirs.plan);
    }
    return std::move(cheapest->plan);
  }

  /// The other starts of `r` searched locally in turn, the way `hidden_` places page-outs,
  /// while time is left and none has reached good_enough_j_; the cheapest result stands.
  void search_rest(Searched& r) const {
    for (State& start : r.rest) {
      if (std::chrono::steady_clock::now() >= stop_at_ || (r.best && r.best->costs.energy_j <= good_enough_j_))
        return;
      improve(start);
      if (!r.best || start.costs.energy_j < r.best->costs.energy_j) r.best = std::move(start);
    }
  }

  /// The starts (sorted_starts()): the cheapest is searched locally; run() searches the
  /// others, cheaper first, in what time is left, and the cheapest result stands: the
  /// cheapest start does not always lead to the cheapest plan (ResNet-50 on the nRF52840 at
  /// 30 %: +7.3 % over one pass from a baseline's start, +5.8 % from the greedy's own;
  /// docs/performance.md). Where the first start uses all the time, the answer is what it
  /// was with one start.
  Searched search(const std::vector<Schedule>& seeds) const {
    std::vector<State> starts = sorted_starts(seeds);
    Searched r;
    if (starts.empty()) return r;
    improve(starts[0]);
    r.best = std::move(starts[0]);
    std::move(starts.begin() + 1, starts.end(), std::back_inserter(r.rest));
    return r;
  }

  /// The cheapest seed's start, the selective start and the greedy's own, each repaired to
  /// fit, cheapest first; any may be missing.
  std::vector<State> sorted_starts(const std::vector<Schedule>& seeds) const {
    // Seeds first: one measure each where they fit, so a large graph whose own greedy start
    // gives up still gets a plan to search from.
    std::optional<State> cheapest_seed;
    for (const Schedule& seed : seeds) {
      if (given_up()) break;
      std::optional<Choices> c = seed_choices(seed);
      if (!c) continue;
      State s = measure(std::move(*c));
      if (fits_deadline(s) && repair(s) && (!cheapest_seed || s.costs.energy_j < cheapest_seed->costs.energy_j))
        cheapest_seed = std::move(s);
    }
    std::vector<State> starts;
    if (cheapest_seed) starts.push_back(std::move(*cheapest_seed));
    if (allowed_.recompute && !given_up())
      if (std::optional<State> selective = selective_start()) starts.push_back(std::move(*selective));
    if (std::optional<State> own = start())
      starts.push_back(std::move(*own));
    std::stable_sort(starts.begin(), starts.end(),
                     [](const State& a, const State& b) { return a.costs.energy_j < b.costs.energy_j; });
    return starts;
  }

  /// A schedule as choices: for each compute, stage by stage (a stage ends with the first
  /// compute of its node), each input not computed earlier in the stage is recomputed there,
  /// paged in for it, or carried. nullopt when first computes are out of node order or the
  /// schedule uses a move this search may not.
  std::optional<Choices> seed_choices(const Schedule& seed) const {
    Choices c(n_);  // kUnset
    std::vector<int> computed_in(n_, -1);  // the last stage that computed each node
    std::vector<char> paged_in(n_, 0);     // paged in since its last read
    // Where each node is first computed: in node order, or the seed is not in stage form.
    std::vector<std::size_t> first(n_, seed.steps.size());
    int fresh = 0;
    for (std::size_t k = 0; k < seed.steps.size(); ++k) {
      const Step& step = seed.steps[k];
      if (step.node < 0 || step.node >= n_) return std::nullopt;
      if (step.kind != StepKind::kCompute || step.node < fresh) continue;
      if (step.node != fresh) return std::nullopt;
      first[fresh++] = k;
    }
    if (fresh != n_) return std::nullopt;
    // A compute step belongs to the stage of the next first compute at or after it.
    std::vector<int> stage_of(seed.steps.size(), n_ - 1);
    for (std::size_t k = 0, t = 0; k < seed.steps.size(); ++k) {
      while (t + 1 < first.size() && first[t] < k) ++t;
      if (first[t] < k && seed.steps[k].kind == StepKind::kCompute)
        return std::nullopt;  // a compute after the last node's: no stage holds it
      stage_of[k] = static_cast<int>(t);
    }
    for (std::size_t k = 0; k < seed.steps.size(); ++k) {
      const Step& step = seed.steps[k];
      const int i = step.node;
      if (step.kind == StepKind::kPageIn) {
        if (!allowed_.paging) return std::nullopt;
        paged_in[i] = 1;
        continue;
      }
      if (step.kind != StepKind::kCompute) continue;
      const int t = stage_of[k];
      if (i != t) {
        if (!allowed_.recompute) return std::nullopt;
        c[t][i] = kRecompute;
      }
      for (int in : inputs_[i]) {
        if (computed_in[in] == t) continue;  // made earlier in this stage
        // Recomputed in the stage before and read here: recomputed early.
        const bool early = computed_in[in] == t - 1 && in != t - 1 && allowed_.recompute;
        if (c[t][in] == kUnset) c[t][in] = paged_in[in] ? kPage : early ? kRecomputeEarly : kCarry;
        paged_in[in] = 0;
      }
      computed_in[i] = t;
    }
    return c;
  }

  /// An op that does at most this many FLOPs per byte it writes is cheap to recompute:
  /// element-wise ops, normalizations and small pooling windows do a few per element (ReLU 1,
  /// batch norm 7, a 3x3 max pool 9: at most about 2 per fp32 byte), concatenations and
  /// copies none; a convolution or a projection does 2 * C_in * kernel per element, hundreds
  /// per byte.
  static constexpr double kCheapFlopsPerByte = 8;

  /// The selective start (memory-efficient DenseNet's, Pleiss et al. 2017, and selective
  /// recomputation's): every forward output cheap to recompute (kCheapFlopsPerByte) is
  /// recomputed wherever it waits, every other one carried, also to where a recomputation
  /// reads it; then repaired. A dense block's concatenations are the case: each is as large
  /// as all the features before it, and recomputing one is free only with those features
  /// kept. The greedy's own start bridges one tensor at a time, and recomputing a
  /// concatenation alone recomputes every convolution that made its inputs, so it paged them
  /// instead: DenseNet-121 at 30 % of the nRF52840 ended 9.6 % over the memory bound, and
  /// 0.07 % from this start (docs/performance.md, seventeenth increment). nullopt on graphs
  /// without FLOPs (graph JSON files), or where the repair finds no plan.
  std::optional<State> selective_start() const {
    if (std::none_of(g_.nodes.begin(), g_.nodes.end(), [](const TrainingNode& node) { return node.flops > 0; }))
      return std::nullopt;
    Choices c(n_);  // kUnset
    for (int j = 0; j < late_from_; ++j) {
      const TrainingNode& node = g_.nodes[j];
      if (static_cast<double>(node.flops) <= kCheapFlopsPerByte * static_cast<double>(node.output_bytes)) {
        for (int u : users_[j])
          if (u - j >= 2) c[u][j] = kRecompute;
      } else {
        for (int t = j + 2; t < n_; ++t) c[t][j] = kCarry;
      }
    }
    State s = measure(std::move(c));
    if (!fits_deadline(s) || !repair(s)) return std::nullopt;
    return s;
  }

  /// The greedy's own start: everything carried, then repaired; or, when no single bridge
  /// helps, every tensor bridged and carried back where it fits. nullopt when neither fits.
  std::optional<State> start() const {
    State s = measure(Choices(n_));  // kUnset
    if (!fits_deadline(s)) return std::nullopt;
    if (!repair(s)) {
      // Stuck: no single bridge helps (deep recomputation chains need several at once).
      // Start over from the other end, every tensor bridged wherever it waits, and let the
      // local search carry tensors again while the plan still fits. Paging everything is
      // tried first; where page-ins hold memory while they run (Objective::kTotal) it may
      // not fit where recomputing everything does.
      bool restarted = false;
      for (auto b = bridges_.rbegin(); b != bridges_.rend() && !restarted && !given_up(); ++b) {
        Choices all(n_);  // kUnset
        for (int j = 0; j < n_; ++j)
          for (int u : users_[j])
            if (u - j >= 2) all[u][j] = *b;
        s = measure(std::move(all));
        restarted = fits_deadline(s) && repair(s);
      }
      if (!restarted) return std::nullopt;
    }
    return s;
  }

  static std::chrono::steady_clock::time_point after(double seconds) {
    const auto now = std::chrono::steady_clock::now();
    if (!(seconds < 1e9)) return std::chrono::steady_clock::time_point::max();
    return now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                     std::chrono::duration<double>(seconds));
  }

  [[nodiscard]] bool given_up() const { return std::chrono::steady_clock::now() >= give_up_at_; }

  bool fits_deadline(const State& s) const {
    return s.costs.deadline_time_s <= deadline_ * (1 + 1e-9);
  }

  bool covers_excess(const State& s, const Gap& gap) const {
    for (int t = gap.from + 1; t < gap.to; ++t)
      if (s.costs.stage_peak_bytes[t] > budget_) return true;
    // A recomputation in stage `to` frees the tensor there too.
    return s.costs.stash_bytes > stash_budget_ && gap.from < late_from_ && late_from_ <= gap.to;
  }

  State with_choice(const State& s, const Gap& gap, Bridge b) const {
    State next = blank();
    next.choices = s.choices;  // into the spare's tables: no allocation
    next.choices[gap.to][gap.node] = b;
    remeasure(next);
    return next;
  }

  /// A recomputation costs at least ten times more than the one it feeds (kDearFactor): it
  /// is a convolution or a projection under a chain of element-wise ops.
  static constexpr double kDearFactor = 10;
  /// Graphs up to this many nodes (those the stage MILP follows) measure recomputations
  /// both ways. Past it the searches rarely end before the limit, how far they get decides
  /// the plan, and the second measure slows them; on DenseNet-121 it was not seen to help
  /// (docs/performance.md, fourteenth increment).
  static constexpr int kDearChainsUpTo = 400;

  /// `recomputed` (a state with `gap` recomputed) with each recomputation of the same stage
  /// that the chain runs and that costs kDearFactor times the gap's own bridged by `keep`
  /// instead. A recomputed tensor's inputs are recomputed by default where nothing carries
  /// them on, so a cheap output whose chain reaches a dear one (a ResNet block's residual
  /// gradient, a transformer's slice) cost the dear one's energy too. Carrying the dear one,
  /// often still present a few stages back, makes the cheap chain worth it; where it is on
  /// storage for a later read, paging it in for the recomputation as well (kPage) does: at
  /// 30 % of the Pi 4, ResNet-18 CIFAR's layer1 paged its ReLU outputs at 100 times the
  /// energy of recomputing them, since recomputing one recomputed the convolution under it
  /// too (docs/performance.md, eighteenth increment). None when the chain has no dear
  /// recomputation (then nothing is measured).
  std::optional<State> keeping_dear(const State& recomputed, const Gap& gap, Bridge b, Bridge keep = kCarry) const {
    const int in_stage = b == kRecomputeEarly ? gap.to - 1 : gap.to;
    const double own_j = g_.compute_cost(gap.node, in_stage >= late_from_).energy_j;
    auto dear = [&](const Gap& inner) {
      return inner.to == in_stage && inner.used == kRecompute && inner.node != gap.node &&
             g_.compute_cost(inner.node, in_stage >= late_from_).energy_j >= kDearFactor * own_j;
    };
    if (std::none_of(recomputed.gaps.begin(), recomputed.gaps.end(), dear)) return std::nullopt;
    if (keep == kPageEarly && std::none_of(recomputed.gaps.begin(), recomputed.gaps.end(), [&](const Gap& inner) {
          return dear(inner) && pages_out_early(recomputed, inner);
        }))
      return std::nullopt;  // the same plan as paged in by kPage
    State next = blank();
    next.choices = recomputed.choices;
    for (const Gap& inner : recomputed.gaps)
      if (dear(inner)) next.choices[in_stage][inner.node] = keep;
    remeasure(next);
    return next;
  }

  /// keeping_dear() of `recomputed` both ways, carried and (where paging is allowed) paged
  /// in, appended to `out`; nothing past kDearChainsUpTo nodes.
  void dear_kept_or_paged(const State& recomputed, const Gap& gap, Bridge b, std::vector<State>& out) const {
    if (!dear_chains_) return;
    if (std::optional<State> kept = keeping_dear(recomputed, gap, b)) out.push_back(std::move(*kept));
    if (allowed_.paging)
      if (std::optional<State> paged = keeping_dear(recomputed, gap, b, kPage)) out.push_back(std::move(*paged));
    if (page_early_ && pages_early())
      if (std::optional<State> paged = keeping_dear(recomputed, gap, b, kPageEarly)) out.push_back(std::move(*paged));
  }

  /// The ways of bridging `gap` by `b` the searches measure, appended to `out`, the plain one
  /// (with_choice) last. A recomputation also: with its chain's dear recomputations carried,
  /// and paged in where paging is allowed (keeping_dear); and in the local search's second
  /// part (improve()), recomputed in the stage before instead (kRecomputeEarly), that too
  /// with its dear ones carried.
  void variants(const State& s, const Gap& gap, Bridge b, std::vector<State>& out) const {
    State plain = with_choice(s, gap, b);
    if (b == kRecompute) {
      dear_kept_or_paged(plain, gap, b, out);
      if (early_moves_ && gap.to - 1 > gap.from) {
        State early = with_choice(s, gap, kRecomputeEarly);
        if (dear_chains_)
          if (std::optional<State> kept = keeping_dear(early, gap, kRecomputeEarly)) out.push_back(std::move(*kept));
        out.push_back(std::move(early));
      }
    }
    out.push_back(std::move(plain));
  }

  /// Bridges gaps until every stage fits: each time the one that costs the least energy per
  /// byte of excess it removes. False when no bridge removes any.
  ///
  /// Measuring a candidate re-derives and re-evaluates the whole plan (O(n^2)), so on graphs
  /// of more than kMeasureAllUpTo nodes candidates are measured lazily: in the order of
  /// estimate(), which is meant never to exceed their measured score, until the best measured
  /// score is no worse than the next estimate. (The estimate is not exact everywhere, so lazy
  /// choices may differ from the full scan's; on bert-base and EfficientNet-B0 they gave the
  /// same plans 5 times faster: bench_planner's greedy/ cases. Small graphs keep the full scan.)
  ///
  /// A candidate measured in an earlier round is ordered by the larger of its estimate and
  /// that score (lazy greedy): a bridge's energy changes little from round to round while the
  /// excess it can remove only shrinks, so its score mostly rises. The estimate alone, which
  /// cannot see that a recomputation's inputs take memory back, let DenseNet-121 at 30 % of
  /// the Pi 4 measure about 200 candidates a round; its greedy start took 31 s, and 1.3 s
  /// with the scores, to the same plan (docs/performance.md, twelfth increment).
  bool repair(State& s) const {
    constexpr int kMeasureAllUpTo = 160;
    const bool lazy = n_ > kMeasureAllUpTo;
    struct Candidate {
      std::size_t gap;
      Bridge alt;
      double estimate;
    };
    std::vector<Candidate> candidates;
    std::vector<State> ways;
    std::unordered_map<uint64_t, double> scored;  // lazy: each candidate's last measured score
    auto key = [&](const Gap& gap, Bridge alt) {
      return (static_cast<uint64_t>(gap.node) * static_cast<uint64_t>(n_) + static_cast<uint64_t>(gap.to)) * 8 +
             static_cast<uint64_t>(alt);
    };
    while (s.excess > 0) {
      candidates.clear();
      for (std::size_t k = 0; k < s.gaps.size(); ++k) {
        const Gap& gap = s.gaps[k];
        if (gap.used != kCarry || gap.to - gap.from < 2 || !covers_excess(s, gap)) continue;
        for (Bridge alt : moves()) {
          if (alt == kPageEarly && !pages_out_early(s, gap)) continue;
          double order = 0;
          if (lazy) {
            order = estimate(s, gap, alt);
            if (auto it = scored.find(key(gap, alt)); it != scored.end()) order = std::max(order, it->second);
          }
          candidates.push_back({k, alt, order});
        }
      }
      if (lazy)
        std::stable_sort(candidates.begin(), candidates.end(),
                         [](const Candidate& a, const Candidate& b) { return a.estimate < b.estimate; });
      std::optional<State> best;
      double best_score = 0;
      for (const Candidate& c : candidates) {
        if (lazy && best && best_score <= c.estimate) break;
        if (given_up()) return false;
        const uint64_t id = key(s.gaps[c.gap], c.alt);
        // A recomputation is measured in several ways (variants()); the candidate scores the
        // best of them.
        auto score_of = [&](const State& t) {
          const double relief = s.excess - t.excess;
          if (relief <= 0 || !fits_deadline(t)) return std::numeric_limits<double>::infinity();
          return (t.costs.energy_j - s.costs.energy_j) / relief;
        };
        variants(s, s.gaps[c.gap], c.alt, ways);
        State next = std::move(ways.back());
        ways.pop_back();
        double score = score_of(next);
        for (std::size_t w = 0; w < ways.size(); ++w) {
          if (const double way_score = score_of(ways[w]); way_score < score) {
            score = way_score;
            recycle(std::exchange(next, std::move(ways[w])));
          } else {
            recycle(std::move(ways[w]));
          }
        }
        ways.clear();
        if (lazy) scored[id] = score;
        if (!(score < std::numeric_limits<double>::infinity())) {
          recycle(std::move(next));
          continue;
        }
        if (!best || score < best_score) {
          best_score = score;
          if (best) recycle(std::move(*best));
          best = std::move(next);
        } else {
          recycle(std::move(next));
        }
      }
      if (!best) return false;
      recycle(std::exchange(s, std::move(*best)));
    }
    return true;
  }

  /// What bridging `gap` by `b` costs per byte of excess it removes, at the least, without
  /// re-deriving the plan: the bridge's own energy (under kTotal: a recomputation's time at
  /// idle power, a transfer's only beyond what its stage's present duration hides) over the
  /// tensor's bytes in the stages it leaves that are over the budget. A recomputation's inputs
  /// only add cost, and the stages it leaves are the most it can relieve.
  double estimate(const State& s, const Gap& gap, Bridge b) const {
    const auto& node = g_.nodes[gap.node];
    const bool total = objective_ == Objective::kTotal;
    auto charge = [&](double energy_j, double time_s) {
      return total ? g_.dynamic_energy_j(energy_j, time_s) : energy_j;
    };
    auto unhidden_j = [&](double time_s, int stage) {
      return g_.idle_power_w * std::max(0.0, time_s - s.costs.stage_time_s[stage]);
    };
    double cost_j = 0;
    int leaves_from = gap.from + 1, leaves_to = gap.to - 1;  // stages the tensor no longer holds
    if (b == kRecompute) {
      const NodeCost c = g_.compute_cost(gap.node, gap.to >= late_from_);
      cost_j = charge(c.energy_j, c.time_s) + (total ? unhidden_j(c.time_s, gap.to) : 0.0);
    } else {
      if (b != kPageEarly) ++leaves_from;  // it stays through the stage that pages it out
      cost_j = charge(node.pageout_energy_j, node.pageout_time_s) +
               charge(node.pagein_energy_j, node.pagein_time_s);
      if (total) cost_j += unhidden_j(node.pageout_time_s, gap.from + 1);
    }
    double relief_bytes = 0;
    for (int t = leaves_from; t <= leaves_to; ++t) {
      const uint64_t peak = s.costs.stage_peak_bytes[t];
      if (peak > budget_)
        relief_bytes += static_cast<double>(std::min<uint64_t>(peak - budget_, node.output_bytes));
    }
    if (s.costs.stash_bytes > stash_budget_ && leaves_from <= late_from_ &&
        late_from_ <= (b == kRecompute ? gap.to : leaves_to))
      relief_bytes += static_cast<double>(std::min<uint64_t>(s.costs.stash_bytes - stash_budget_, node.output_bytes));
    if (relief_bytes <= 0) return std::numeric_limits<double>::infinity();
    return cost_j / relief_bytes;
  }

  /// Local search from a plan that fits. Each bridged gap in turn is tried with the other
  /// bridges, and undone (carried again) with the excess that brings repaired greedily; the
  /// first change that lowers the energy and still fits is kept, until none does or the
  /// time is up. Undo-and-repair escapes the greedy's early, myopic choices.
  ///
  /// Where the search ends with time left, it goes on with the early recomputations
  /// (kRecomputeEarly, variants()) and the early page-outs (kPageEarly) among its moves too,
  /// until a whole round of those changes nothing. They come second so that the first
  /// search, and what it finds, is what it was without them; a search from the start with
  /// them ends elsewhere, as often worse as better (docs/performance.md, fifteenth and
  /// thirty-third increments).
  void improve(State& s) const {
    better_->found(s.costs.energy_j);
    search_locally(s);
    if ((!allowed_.recompute && !pages_early()) || std::chrono::steady_clock::now() >= stop_at_) return;
    early_moves_ = allowed_.recompute;
    page_early_ = true;
    search_locally(s);
    early_moves_ = page_early_ = false;
  }

  /// Whether kPageEarly is a way this search may bridge by (kPoet, paging allowed).
  [[nodiscard]] bool pages_early() const { return bridges_early_.size() > bridges_.size(); }

  /// Whether kPageEarly may bridge `gap` of `s` otherwise than kPage: the tensor is resident
  /// as the stage that last reads it starts, so that stage may write it out. Where it was
  /// computed in that stage, the two derive the same plan, which need not be measured twice.
  /// (Leaving out also the gaps where it is on storage already, or has no stage to leave,
  /// saves more measurements but moved resnet50-cifar at 30 % of the nRF52840 from 2.308 %
  /// back to 2.389 %: the lazy repair's order then differs. docs/performance.md,
  /// thirty-third increment.)
  [[nodiscard]] static bool pages_out_early(const State& s, const Gap& gap) {
    return s.plan.ram[gap.from][gap.node];
  }

  /// One local search (see improve()); with `only`, over the gaps it marks alone
  /// ([stage * n + node], kick_and_search()).
  void search_locally(State& s, const std::vector<char>* only = nullptr) const {
    // Gaps are tried in turn, going on after a change from where it was found rather than
    // from the first gap again: the gaps before it were tried a moment ago and most still
    // cannot improve, so restarting spent the time limit re-trying them. The search ends
    // after a whole round of the gaps without a change.
    std::size_t next_gap = 0;
    std::size_t unchanged = 0;  // gaps tried in a row without a change
    while (std::chrono::steady_clock::now() < stop_at_ && s.costs.energy_j > good_enough_j_) {
      if (s.gaps.empty() || unchanged >= s.gaps.size()) return;
      if (next_gap >= s.gaps.size()) next_gap = 0;
      const Gap gap = s.gaps[next_gap];
      bool improved = false;
      if (gap.used != kCarry && (!only || (*only)[static_cast<std::size_t>(gap.to) * n_ + gap.node])) {
        auto better = [&](State& next, bool may_repair) {
          return fits_deadline(next) && (next.excess <= 0 || (may_repair && repair(next))) &&
                 next.costs.energy_j < s.costs.energy_j * (1 - 1e-12);
        };
        // A recomputation's other ways (variants()) are tried after every bridge's plain one,
        // and may be repaired: from the plan as it is where the gap is recomputed already.
        std::vector<State> later;
        if (recomputes(gap.used)) dear_kept_or_paged(s, gap, gap.used, later);
        for (Bridge alt : bridges_with_carry()) {
          if (alt == gap.used || (alt == kPageEarly && !pages_out_early(s, gap))) continue;
          variants(s, gap, alt, later);
          State next = std::move(later.back());  // the plain way is last in
          later.pop_back();
          if (better(next, alt == kCarry)) {
            recycle(std::exchange(s, std::move(next)));
            better_->found(s.costs.energy_j);
            improved = true;
            break;
          }
          recycle(std::move(next));
          if (std::chrono::steady_clock::now() >= stop_at_) break;
        }
        for (State& k : later) {
          if (!improved && better(k, true)) {
            recycle(std::exchange(s, std::move(k)));
            better_->found(s.costs.energy_j);
            improved = true;
          } else {
            recycle(std::move(k));
          }
        }
        if (std::chrono::steady_clock::now() >= stop_at_ && !improved) return;
      }
      if (improved) {
        unchanged = 0;  // the same position holds the next gap of the changed plan
      } else {
        ++unchanged;
        ++next_gap;
      }
    }
  }

  /// kick_and_search() with the early recomputations and page-outs among the local search's
  /// moves, as improve() ends with them.
  void kick(State& s, uint64_t seed) const {
    early_moves_ = allowed_.recompute;
    page_early_ = true;
    kick_and_search(s, seed);
    early_moves_ = page_early_ = false;
  }
  static constexpr uint64_t kFirstSeed = 1, kSecondSeed = 2;

  /// Kicks in a row without a cheaper plan after which kick_and_search() ends: a count, not
  /// the clock, so that an unlimited search still ends, the same way on any machine. The cut
  /// ResNet layer of tests/data/graphs (35 nodes) reaches its optimum within 80 kicks, and
  /// bert-tiny its plan within 0.005 % of the memory bound at the 31st. 32, 64, 128 and
  /// unlimited gave the same plans on ResNet-18 and ResNet-50 CIFAR at 30 % of the Pi 4; a
  /// kick of ResNet-18 CIFAR takes about 17 ms, and the time a search does not take goes to
  /// the phases after it.
  static constexpr long kIdleKicks = 64;
  /// A kick changes 1 to this many gaps.
  static constexpr int kMaxKickedGaps = 4;

  /// Iterated local search, once the local search has ended: each kick changes a few gaps at
  /// random (a bridge undone, or a carried gap bridged by a random way), repairs what that
  /// breaks, searches locally over the gaps the kick and the repair changed, and keeps the
  /// result where it is cheaper. A single change undone and repaired greedily, the local search's own
  /// move, cannot leave a plan whose better neighbours all take two changes: on the stem and
  /// layer1 of ResNet-18 CIFAR (Pi 4, 50 %) the search ended 3.4 % above the optimum CBC
  /// proves, paging two tensors where the optimum pages another one and recomputes a chain
  /// of gradients; the kicks find the optimum in 0.3 s. Ends at the time limit, at
  /// good_enough_j_, or after kIdleKicks kicks in a row that found nothing cheaper; `seed`
  /// makes it repeatable.
  void kick_and_search(State& s, uint64_t seed) const {
    if (bridges_.empty()) return;
    std::mt19937_64 rng(seed);
    std::vector<std::size_t> bridged;
    std::vector<char> changed(static_cast<std::size_t>(n_) * n_);
    for (long idle = 0; idle < kIdleKicks; ++idle) {
      if (std::chrono::steady_clock::now() >= stop_at_ || s.costs.energy_j <= good_enough_j_) return;
      bridged.clear();
      for (std::size_t k = 0; k < s.gaps.size(); ++k)
        if (s.gaps[k].used != kCarry) bridged.push_back(k);
      State t = blank();
      t.choices = s.choices;
      bool any = false;
      const int kicked = 1 + static_cast<int>(rng() % kMaxKickedGaps);
      for (int j = 0; j < kicked; ++j) {
        const bool undo = !bridged.empty() && rng() % 2 == 0;
        const Gap& gap = undo ? s.gaps[bridged[rng() % bridged.size()]] : s.gaps[rng() % s.gaps.size()];
        if (!undo && gap.to - gap.from < 2) continue;  // nothing to bridge
        // Drawn from the first search's bridges, kPageEarly left to the search after the
        // kick: drawn too, it changes which kicks a seed makes, and the cut ResNet layer's
        // optimum was no longer found within kIdleKicks.
        t.choices[gap.to][gap.node] = undo ? kCarry : bridges_[rng() % bridges_.size()];
        any = true;
      }
      if (!any) {
        recycle(std::move(t));
        continue;
      }
      remeasure(t);
      if (!fits_deadline(t) || (t.excess > 0 && !repair(t))) {
        recycle(std::move(t));
        continue;
      }
      // The local search tries again only what the kick and the repair changed: the rest was
      // tried on the plan kicked, and a whole round of it took half a second on ResNet-18
      // CIFAR.
      for (int st = 0; st < n_; ++st)
        for (int i = 0; i < n_; ++i)
          changed[static_cast<std::size_t>(st) * n_ + i] = t.choices[st][i] != s.choices[st][i];
      search_locally(t, &changed);
      if (fits_deadline(t) && t.excess <= 0 && t.costs.energy_j < s.costs.energy_j * (1 - 1e-12)) {
        recycle(std::exchange(s, std::move(t)));
        better_->found(s.costs.energy_j);
        idle = -1;
      } else {
        recycle(std::move(t));
      }
    }
  }

  State measure(Choices c) const {
    State s = blank();
    s.choices = std::move(c);
    remeasure(s);
    return s;
  }

  /// Derives and evaluates the plan of `s.choices` into `s`, reusing its tables.
  void remeasure(State& s) const {
    s.plan.clear();
    derive(s.choices, s.plan, s.gaps);
    s.costs = evaluate(g_, inputs_, users_, s.plan, objective_);
    s.excess = 0;
    for (uint64_t peak : s.costs.stage_peak_bytes)
      if (peak > budget_) s.excess += static_cast<double>(peak - budget_);
    if (s.costs.stash_bytes > stash_budget_) s.excess += static_cast<double>(s.costs.stash_bytes - stash_budget_);
  }

  /// A state whose tables (a plan and the choices, seven n x n tables) are a spare's where
  /// there is one: the local search measures thousands of states and drops most, and fresh
  /// tables for each cost more in page faults than the measure itself (ResNet-50: half the
  /// search's time was the kernel's).
  State blank() const {
    if (spare_.empty()) {
      State s;
      s.plan = StagePlan(n_);
      s.choices = Choices(n_);
      return s;
    }
    State s = std::move(spare_.back());
    spare_.pop_back();
    return s;
  }

  /// Keeps a state no longer needed as a spare (a few at most).
  void recycle(State&& s) const {
    constexpr std::size_t kSpares = 4;
    if (spare_.size() < kSpares) spare_.push_back(std::move(s));
  }

  /// The plan the choices describe. Each stage needs its node's inputs; a tensor not
  /// computed in the stage and not resident is bridged from the last stage it was present
  /// in: carried, paged out (in the stage after that) and back in (in the stage before), or
  /// recomputed in the stage, which needs its own inputs in turn. Unset choices carry what
  /// a stage's node reads directly; what only a recomputation reads is carried when it is
  /// carried to a later stage anyway, and recomputed otherwise.
  void derive(const Choices& c, StagePlan& p, std::vector<Gap>& gaps) const {
    gaps.clear();
    std::vector<int> carry_until(n_, -1);
    for (int j = 0; j < n_; ++j)
      for (int u : users_[j])
        if (c[u][j] == kUnset || c[u][j] == kCarry) carry_until[j] = std::max(carry_until[j], u);
    std::vector<int> last(n_, -1);
    std::vector<int> ssd_from(n_, INT_MAX);
    std::vector<int> queued(n_, -1);
    Channel channel(n_);
    std::vector<PageOutRequest> chain;
    std::vector<double> stage_s(n_, 0.0);  // each stage's compute time so far (final before t)
    for (int t = 0; t < n_; ++t) {
      p.compute[t][t] = 1;
      std::priority_queue<int> need;
      for (int i : inputs_[t]) {
        need.push(i);
        queued[i] = t;
      }
      const auto& direct = inputs_[t];
      while (!need.empty()) {
        const int i = need.top();
        need.pop();
        if (p.compute[t][i] || p.ram[t][i]) continue;
        const int a = last[i];
        assert(a >= i && a < t);
        auto b = static_cast<Bridge>(c[t][i]);
        if (b == kUnset) {
          const bool is_direct = std::find(direct.begin(), direct.end(), i) != direct.end();
          b = is_direct || carry_until[i] > t ? kCarry : kRecompute;
        }
        if (b == kPage || b == kPageLate || b == kPageEarly) {
          bool on_ssd = ssd_from[i] <= t - 1;
          const bool chained = !on_ssd && a + 1 <= t - 2 && objective_ == Objective::kTotal && hidden_;
          bool early = false;
          if (b == kPageEarly && !on_ssd && p.ram[a][i] && a + 1 <= t - 1) {
            // A page-out holds no memory under kPoet: the tensor is dropped after its reads
            // in stage a.
            p.page_out[a][i] = 1;
            p.ssd.set_rows(i, a + 1, p.n - 1);
            ssd_from[i] = a + 1;
            on_ssd = early = true;
          } else if (chained) {
            // Placed once every page-in is (chain_page_outs), by when the tensor was made.
            chain.push_back({i, a + 1, t - 2});
            ssd_from[i] = a + 2;
            on_ssd = true;
          } else if (!on_ssd && a + 1 <= t - 2) {
            // Under kTotal the page-out runs from a + 1 for as many stages as they compute to
            // hide it; or, where a span the model's rules allow (see StagePlan) hides it and
            // ends no later, through the earliest such span. Either leaves a stage to page it
            // back in, and the tensor is held until the page-out ends.
            Span span{a + 1, a + 1};
            if (objective_ == Objective::kTotal) {
              const double out_s = g_.nodes[i].pageout_time_s;
              span = computing_span(a + 1, t - 2, out_s, stage_s);
              if (auto found = channel.hiding_span(a + 1, span.last, out_s, stage_s)) span = *found;
              channel.place(span, out_s, stage_s);
            }
            mark_page_out(p, i, a + 1, span);
            ssd_from[i] = span.last + 1;
            on_ssd = true;
          }
          if (on_ssd && b == kPageLate) {
            p.page_in_late[t - 1][i] = 1;
            channel.add_late(t - 1);
            p.ram[t][i] = 1;
            last[i] = t;
            gaps.push_back({i, a, t, kPageLate});
            continue;
          }
          if (on_ssd && a + 1 <= t - 1) {
            // POET's model: page in during the stage before the read. Under kTotal a transfer
            // is free only while compute hides it: take the latest stage with that much
            // compute time the channel does not use yet (and no page-out running through
            // it), and hold the tensor from there (never in a stage that still has it: a
            // page-in of a resident tensor would make its readers wait for the transfer).
            int in_stage = t - 1;
            const double in_s = g_.nodes[i].pagein_time_s;
            if (objective_ == Objective::kTotal) {
              for (int s = t - 1; s >= std::max(ssd_from[i], a + 1); --s) {
                if (channel.free_s(s, stage_s) >= in_s) {
                  in_stage = s;
                  break;
                }
              }
              channel.add(in_stage, in_s);
            }
            p.page_in[in_stage][i] = 1;
            if (chained) chain.back().last = in_stage - 1;
            p.ram.set_rows(i, in_stage + 1, t);
            last[i] = t;
            gaps.push_back({i, a, t, early ? kPageEarly : kPage});
            continue;
          }
          b = kCarry;
        }
        if (b == kRecomputeEarly) {
          if (a < t - 1) recompute_before(t - 1, i, c, carry_until, p, last, gaps, stage_s);
          p.ram[t][i] = 1;
          last[i] = t;
          gaps.push_back({i, a, t, a < t - 1 ? kRecomputeEarly : kCarry});
          continue;
        }
        if (b == kRecompute) {
          p.compute[t][i] = 1;
          for (int j : inputs_[i]) {
            if (queued[j] == t) continue;
            queued[j] = t;
            need.push(j);
          }
          gaps.push_back({i, a, t, kRecompute});
          continue;
        }
        p.ram.set_rows(i, a + 1, t);
        last[i] = t;
        gaps.push_back({i, a, t, kCarry});
      }
      for_each_set({p.compute[t]}, t + 1, [&](int i) {
        last[i] = t;
        stage_s[t] += g_.compute_cost(i, t >= late_from_).time_s;
      });
    }
    chain_page_outs(p, chain, channel, stage_s);
    obey_span_rules(p);
  }

  /// kRecomputeEarly: recomputes `i` in stage `s`, whose own needs are bridged already. Its
  /// inputs not there are carried to `s` where they are carried on anyway (or chosen so), and
  /// recomputed there otherwise, in turn. One still on its way in from storage is recomputed.
  void recompute_before(int s, int i, const Choices& c, const std::vector<int>& carry_until, StagePlan& p,
                        std::vector<int>& last, std::vector<Gap>& gaps, std::vector<double>& stage_s) const {
    p.compute[s][i] = 1;
    last[i] = std::max(last[i], s);
    stage_s[s] += g_.compute_cost(i, s >= late_from_).time_s;
    for (int j : inputs_[i]) {
      if (p.compute[s][j] || p.ram[s][j]) continue;
      const int a = last[j];
      const auto b = static_cast<Bridge>(c[s][j]);
      if (a > s || b == kRecompute || (b == kUnset && carry_until[j] <= s)) {
        if (a < s) gaps.push_back({j, a, s, kRecompute});
        recompute_before(s, j, c, carry_until, p, last, gaps, stage_s);
        continue;
      }
      p.ram.set_rows(j, a + 1, s);
      last[j] = s;
      gaps.push_back({j, a, s, kCarry});
    }
  }

  /// A page-out the `hidden_` derivation places after the page-ins: of `node`, in stages
  /// first to last, held in RAM from first.
  struct PageOutRequest {
    int node = 0;
    int first = 0;
    int last = 0;
  };

  /// kTotal, `hidden_`: places the page-outs in the order their tensors can start (one
  /// channel carries them in that order), each through the earliest span the model's rules
  /// allow that hides it, holding the tensor until it ends. So page-outs chain, one starting
  /// where the one before ends, rather than wait for runs of stages free of transfers; and
  /// those of tensors needed late go no later than those needed early. Where nothing hides
  /// one before its page-in, it runs from its first stage and the stage it ends in waits.
  void chain_page_outs(StagePlan& p, std::vector<PageOutRequest>& requests, Channel& channel,
                       const std::vector<double>& stage_s) const {
    std::sort(requests.begin(), requests.end(), [](const PageOutRequest& x, const PageOutRequest& y) {
      return x.first < y.first || (x.first == y.first && x.node < y.node);
    });
    for (const PageOutRequest& r : requests) {
      const double out_s = g_.nodes[r.node].pageout_time_s;
      const Span span = channel.hiding_span(r.first, r.last, out_s, stage_s)
                            .value_or(computing_span(r.first, r.last, out_s, stage_s));
      channel.place(span, out_s, stage_s);
      mark_page_out(p, r.node, r.first, span);
    }
  }

  /// The model's rules for spans (see StagePlan): at most one page-out goes on from a stage
  /// into the next, and none from a stage with a late page-in; a stage a page-out runs
  /// through carries no other transfer. A page-out that breaks them ends in the stage
  /// instead (the stage waits for it), and the tensor is on storage, not in RAM, from the
  /// next stage until its page-in.
  void obey_span_rules(StagePlan& p) const {
    if (objective_ != Objective::kTotal) return;
    auto end_here = [&](int t, int i) {
      for (int s = t + 1; s < n_ && p.page_out[s][i]; ++s) {
        p.page_out[s][i] = 0;
        p.ram[s][i] = 0;
        p.ssd[s][i] = 1;
      }
    };
    for (int t = 0; t + 1 < n_; ++t) {
      int transfers = 0;
      bool late = false;
      for_each_set({p.page_in[t], p.page_in_late[t], p.page_out[t]}, t, [&](int i) {
        transfers += p.page_in[t][i] + p.page_in_late[t][i] + p.page_out[t][i];
        late = late || p.page_in_late[t][i];
      });
      bool one_goes_on = false;
      // Page-outs running through the stage first (they were under way before), then those
      // starting in it.
      for (const bool through : {true, false}) {
        for_each_set({p.page_out[t]}, t, [&](int i) {
          if (!p.page_out[t + 1][i]) return;
          if ((t > 0 && p.page_out[t - 1][i]) != through) return;
          if (late || one_goes_on || (through && transfers > 1)) {
            end_here(t, i);
          } else {
            one_goes_on = true;
          }
        });
      }
    }
  }

  /// The bridges the search tries now: kPageEarly too where page_early_ is set.
  [[nodiscard]] const std::vector<Bridge>& moves() const { return page_early_ ? bridges_early_ : bridges_; }

  std::vector<Bridge> bridges_with_carry() const {
    std::vector<Bridge> all = {kCarry};
    all.insert(all.end(), moves().begin(), moves().end());
    return all;
  }

  /// Shared by the copy that searches on a second thread (run_both_at_once()).
  std::shared_ptr<BetterPlans> better_;
  const TrainingGraph& g_;
  int n_;
  std::vector<std::vector<int>> inputs_, users_;
  uint64_t budget_;
  uint64_t stash_budget_;  ///< what stage late_from_ may hold as it starts
  double deadline_;
  Objective objective_;
  double good_enough_j_;  ///< local search stops at or below this energy
  AllowedMoves allowed_;
  int late_from_;  ///< stages from here on run in the backward phase's mode
  std::vector<Bridge> bridges_;  ///< what may replace carrying a tensor
  std::vector<Bridge> bridges_early_;  ///< bridges_ and, under kPoet with paging, kPageEarly
  /// kPageEarly among the moves: in the phases after the first local search (improve(),
  /// kick()), so that the first search and what it finds are what they were without it.
  mutable bool page_early_ = false;
  bool dear_chains_ = false;     ///< recomputations measured both ways (kDearChainsUpTo)
  mutable bool early_moves_ = false;  ///< kRecomputeEarly among the moves (improve())
  std::chrono::steady_clock::time_point stop_at_;  ///< when local search gives up
  /// kTotal: page-outs chain in the order their tensors can start, each through the
  /// earliest span that hides it, even where that holds the tensor longer (see derive()).
  bool hidden_ = false;
  std::chrono::steady_clock::time_point give_up_at_;  ///< when finding any plan gives up
  mutable std::vector<State> spare_;  ///< states to measure into (see blank())
};

}  // namespace

std::optional<StagePlan> greedy_stage_plan(const TrainingGraph& graph, MemoryBudget budget,
                                           double deadline_s, AllowedMoves allowed,
                                           double search_time_s, Objective objective,
                                           double good_enough_j, double give_up_s,
                                           const std::vector<Schedule>& seeds, int threads,
                                           std::function<void(double)> on_better) {
  if (graph.size() == 0) return std::nullopt;
  std::optional<StagePlan> plan = Greedy(graph, budget, deadline_s, allowed, search_time_s,
                                         objective, good_enough_j, give_up_s, std::move(on_better))
                                       .run(seeds, threads);
  assert(!plan || check_stage_plan(graph, *plan).empty());
  return plan;
}

}  // namespace ergon::planner
