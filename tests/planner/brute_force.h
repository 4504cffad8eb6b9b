#pragma once

// An exhaustive search over POET-style schedules of tiny graphs, written from the schedule
// semantics, not from the MILP: per stage t (which ends by computing node t) choose the
// page-outs, the set of nodes to compute, what stays in RAM for the next stage and what is
// paged in at its end; memory frees a tensor right after its last use in the stage unless it
// is kept. Returns the minimum energy, or infinity when nothing fits.
//
// A stage may hold, page out and page in what a later stage reads and, up the graph, the
// inputs of those, for a later recomputation: on a 4-op graph with mixed saves at 19,456 B
// holding op3.backward's output to recompute op2.backward's costs 0.077 J, and a search that
// held only what a later stage reads found 0.103 J (docs/performance.md, thirty-second
// increment). What it leaves out is only what costs more in every way: recomputing a node no
// compute of the stage reads without keeping it (unless it frees an input being written
// out); writing out a tensor no later stage can page in; keeping more than the next stage
// can start with. Without a deadline it searches best first (A*), from the first stage,
// under one pass over the nodes left; with one, it keeps each point's Pareto front of time
// and energy to the end.
//
// Under Objective::kTotal a stage's page-ins run either during it (their memory counts from
// the stage start) or after its computes and drops (no memory in the stage, their time added
// to it); a tensor being paged out stays until the stage ends; a stage lasts the longer of
// its computes and its transfers, plus the late page-ins; energy is the energy above idle
// plus idle power over every stage's duration. A page-out may also go on into the next
// stage, the tensor held all the while: one storage channel carries it after the stage's other
// transfers, while the stages compute, and the stage where it ends waits for what is left. At
// most one goes on from a stage, none from a stage with a late page-in, and a stage one runs
// through carries no other transfer.

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <queue>
#include <tuple>
#include <vector>

#include "planner/graph.h"
#include "planner/schedule.h"

namespace ergon::planner::testing {

class BruteForce {
 public:
  BruteForce(const TrainingGraph& g, uint64_t budget, double deadline_s, Objective objective = Objective::kPoet)
      : g_(g), n_(g.size()), budget_(budget), deadline_(deadline_s), total_(objective == Objective::kTotal) {
    in_ = g.inputs();
    users_ = g.users();
    points_.resize(static_cast<std::size_t>(n_));
    future_.assign(static_cast<std::size_t>(n_) + 1, 0);
    for (int t = 0; t < n_; ++t) {
      uint32_t& future = future_[t];  // tensors someone after stage t still needs
      for (int i = 0; i <= t; ++i)
        if (needed_after(i, t)) future |= 1U << i;
      for (bool grew = true; grew;) {  // and what they are made from
        grew = false;
        for (int j = 0; j <= t; ++j)
          if (future >> j & 1U)
            for (int i : in_[j])
              if (!(future >> i & 1U)) {
                future |= 1U << i;
                grew = true;
              }
      }
    }
  }

  double min_energy() {
    // Under kTotal a page-out holds its tensor all stage and a page-in during a stage takes
    // memory from its start, so every schedule is one under kPoet's rules too (page in at the
    // stage's end, write out where it ends): where none is, the search need not run out of
    // points to say so under kTotal's larger state, where that takes minutes on 5-op graphs.
    if (total_ && std::isinf(BruteForce(g_, budget_, deadline_, Objective::kPoet).least_energy()))
      return std::numeric_limits<double>::infinity();
    if (std::isinf(deadline_)) return least_energy();
    double best = std::numeric_limits<double>::infinity();
    for (const auto& [time, energy] : frontier(key_of(0, 0, 0)))
      if (time <= deadline_ * (1 + 1e-9)) best = std::min(best, energy);
    return best;
  }

 private:
  using Front = std::vector<std::pair<double, double>>;  // (time, energy), Pareto-minimal

  bool needed_after(int i, int t) const {
    for (int j : users_[i])
      if (j > t) return true;
    return false;
  }

  static void add(Front& f, double time, double energy) {
    for (const auto& [t, e] : f)
      if (t <= time + 1e-15 && e <= energy + 1e-15) return;
    std::erase_if(f, [&](const auto& p) { return p.first >= time && p.second >= energy; });
    f.emplace_back(time, energy);
  }

  static std::vector<uint32_t> subsets(uint32_t mask) {
    std::vector<uint32_t> out;
    for (uint32_t s = mask;; s = (s - 1) & mask) {
      out.push_back(s);
      if (s == 0) break;
    }
    return out;
  }

  uint64_t mem_of(uint32_t mask) const {
    uint64_t m = 0;
    for (; mask != 0; mask &= mask - 1) m += g_.nodes[std::countr_zero(mask)].output_bytes;
    return m;
  }

  /// A point between stages: stage t starts with `ram` resident and `ssd` written out (only
  /// what a later stage may page in), and under kTotal `pending`, a page-out running since an
  /// earlier stage with `left_s` of its time still to go (its energy already charged), or -1.
  using Key = std::tuple<int, uint32_t, uint32_t, int, double>;

  Key key_of(int t, uint32_t ram, uint32_t ssd, int pending = -1, double left_s = 0) const {
    return {t, ram, ssd & future_[t], pending, left_s};  // what is written out matters where it may be paged in
  }

  /// The Pareto front of (time, energy) from `at` to the end.
  const Front& frontier(const Key& at) {
    if (auto it = memo_.find(at); it != memo_.end()) return it->second;
    Front result;
    if (std::get<0>(at) == n_) {
      result.emplace_back(0.0, 0.0);
    } else {
      stage(at, [&](const Key& next, double stage_s, double stage_e) {
        for (const auto& [rt, re] : frontier(next)) add(result, stage_s + rt, stage_e + re);
      });
    }
    return memo_[at] = std::move(result);
  }

  /// Without a deadline, energy alone: a best-first search (A*) from the first stage, which
  /// reaches only the points cheaper than the optimum. Every stage computes its own node at
  /// least, so one pass over the nodes left never overestimates what is left.
  double least_energy() {
    std::vector<double> rest_j(static_cast<std::size_t>(n_) + 1, 0.0);
    for (int t = n_ - 1; t >= 0; --t) {
      const NodeCost cost = g_.compute_cost(t, t >= g_.backward_phase_start());
      rest_j[t] = rest_j[t + 1] + (total_ ? g_.dynamic_energy_j(cost.energy_j, cost.time_s) +
                                                g_.idle_power_w * cost.time_s
                                          : cost.energy_j);
    }
    std::map<Key, double> best;
    using Entry = std::pair<double, Key>;
    std::priority_queue<Entry, std::vector<Entry>, std::greater<>> open;
    const Key start = key_of(0, 0, 0);
    best[start] = 0;
    open.emplace(rest_j[0], start);
    while (!open.empty()) {
      const auto [f, at] = open.top();
      open.pop();
      const double g = best.at(at);
      if (f > g + rest_j[std::get<0>(at)] + 1e-15) continue;  // reached more cheaply since
      if (std::get<0>(at) == n_) return g;
      stage(at, [&](const Key& next, double, double stage_e) {
        const double to_j = g + stage_e;
        auto [it, fresh] = best.try_emplace(next, to_j);
        if (!fresh && it->second <= to_j) return;
        it->second = to_j;
        open.emplace(to_j + rest_j[std::get<0>(next)], next);
      });
    }
    return std::numeric_limits<double>::infinity();
  }

  /// Calls `emit(next, stage_s, stage_e)` for each way through the stage `at` starts: the
  /// point the next stage starts at, the stage's time and its energy.
  template <class Emit>
  void stage(const Key& at, Emit&& emit) {
    // Named, not bound: lambdas below capture them (clang before 16 cannot capture a binding).
    const int t = std::get<0>(at);
    const uint32_t ram = std::get<1>(at), ssd = std::get<2>(at);
    const int pending = std::get<3>(at);
    const double left_s = std::get<4>(at);
    if (mem_of(ram) > budget_) return;  // no stage starts over the budget
    const uint32_t future = future_[t];
    const uint32_t below_t = (1U << t) - 1;
    const bool backward = t >= g_.backward_phase_start();
    auto charge = [&](double energy_j, double time_s) {
      return total_ ? g_.dynamic_energy_j(energy_j, time_s) : energy_j;
    };
    // Each choice of page-outs: those that end in this stage (a pending one among them), and
    // under kTotal perhaps one more that starts here and goes on into the next stage; or the
    // pending one running through the stage alone.
    struct Outs {
      uint32_t out;    ///< page-outs that end in this stage
      bool through;    ///< the pending page-out runs through the stage
      int goes_on;     ///< a page-out that starts here and goes on, or -1
    };
    std::vector<Outs> outs;
    const uint32_t pending_bit = pending >= 0 ? 1U << pending : 0U;
    // A tensor written out is of use only where a later stage may page it in: one that ends
    // here is on storage from the next stage on, one that goes on from the stage after.
    const uint32_t writable = ram & ~ssd & ~pending_bit;
    for (uint32_t out : subsets(writable & future_at(t + 1))) {
      outs.push_back({out | pending_bit, false, -1});
      if (!total_) continue;
      for (int i = 0; i < n_; ++i)
        if ((writable & future_at(t + 2) & ~out) >> i & 1U) outs.push_back({out | pending_bit, false, i});
    }
    if (pending >= 0) outs.push_back({pending_bit, true, -1});
    for (const Outs& choice : outs) {
      const uint32_t out = choice.out;  // captured below
      const bool through = choice.through;
      const int goes_on = choice.goes_on;
      double page_out_e = 0, page_out_s = 0;
      for (int i = 0; i < n_; ++i) {
        if (!(out >> i & 1U)) continue;
        if (i == pending) {
          page_out_s += left_s;
          continue;
        }
        page_out_e += charge(g_.nodes[i].pageout_energy_j, g_.nodes[i].pageout_time_s);
        page_out_s += g_.nodes[i].pageout_time_s;
      }
      // kTotal: what is paged in during this stage; kPoet pages in after the replay. A stage
      // a page-out runs through carries no other transfer.
      const std::vector<uint32_t> during = total_ && !through ? subsets(ssd & future & ~ram)
                                                              : std::vector<uint32_t>{0};
      for (uint32_t extra : subsets(below_t & ~ram)) {
        const uint32_t compute = extra | (1U << t);
        uint32_t unread_extra = extra;  // computed again, and read by no compute of the stage
        for (int k = 0; k <= t; ++k)
          if (compute >> k & 1U)
            for (int i : in_[k]) unread_extra &= ~(1U << i);
        for (uint32_t in_during : during) {
          uint32_t unread = unread_extra;
          double in_during_e = 0, in_during_s = 0;
          for (int i = 0; i < n_; ++i) {
            if (!(in_during >> i & 1U)) continue;
            in_during_e += charge(g_.nodes[i].pagein_energy_j, g_.nodes[i].pagein_time_s);
            in_during_s += g_.nodes[i].pagein_time_s;
          }
          // Replay the stage once, keeping nothing: which tensors each compute drops after
          // it, and the memory when each output is made. Keeping a tensor leaves the inputs
          // of later computes as they are (a tensor is dropped only when no later compute of
          // the stage reads it), and adds its bytes from where it would have been dropped on.
          uint32_t resident = ram, dropped = 0;
          uint64_t mem = mem_of(ram) + mem_of(in_during);
          bool ok = mem <= budget_;
          double compute_s = 0, compute_e = page_out_e + in_during_e;
          auto& points = points_[t];  // one per stage: the stages after this one recurse
          points.clear();
          for (int k = 0; k <= t && ok; ++k) {
            if (!(compute >> k & 1U)) continue;
            for (int i : in_[k]) ok = ok && (resident >> i & 1U);
            if (!ok) break;
            resident |= 1U << k;
            mem += g_.nodes[k].output_bytes;
            points.emplace_back(dropped, mem);
            const NodeCost cost = g_.compute_cost(k, backward);
            compute_s += cost.time_s;
            compute_e += charge(cost.energy_j, cost.time_s);
            auto drop = [&](int i) {
              if (!(resident >> i & 1U)) return;
              if (total_ && (out >> i & 1U)) return;  // held until its page-out is done
              for (int j : users_[i])
                if (j > k && (compute >> j & 1U)) return;
              resident &= ~(1U << i);
              dropped |= 1U << i;
              mem -= g_.nodes[i].output_bytes;
            };
            const uint32_t before_k = dropped;
            for (int i : in_[k]) drop(i);
            // A node computed again that no compute reads must be kept: else leaving it out
            // costs less in every way. Unless it frees an input the stage writes out (under
            // poet, where a page-out does not hold its tensor), lowering what the stage holds
            // after it. An input it frees that the stage neither reads nor keeps nor writes out
            // was held for nothing: leaving it out of the stage before costs less.
            if ((unread >> k & 1U) && ((dropped & ~before_k) & out) != 0) unread &= ~(1U << k);
            drop(k);
          }
          if (!ok || (unread & future) != unread) continue;
          for (uint32_t kept : subsets((ram | compute) & future & ~unread)) {
            const uint32_t keep = kept | unread;
            const double energy = compute_e;
            bool fits = mem_of(keep) <= budget_;  // the next stage starts with it
            for (const auto& [before, made_bytes] : points)
              if (made_bytes + mem_of(keep & before) > budget_) {
                fits = false;
                break;
              }
            if (!fits) continue;
            if (through) {
              // The page-out goes on into the next stage, the tensor still held; the stage
              // waits for nothing.
              if ((keep & out) != out) continue;
              const double left_next_s = page_out_s - compute_s;
              if (left_next_s <= 0) continue;  // done here: ending here costs no more
              const int node = std::countr_zero(out);
              emit(key_of(t + 1, keep, ssd, node, left_next_s), compute_s, energy + g_.idle_power_w * compute_s);
              continue;
            }
            const uint32_t next_ssd = ssd | out;
            if (goes_on >= 0) {
              // After the stage's other transfers, which it waits for, the page-out that goes
              // on takes what channel time the stage has left; no late page-in follows it.
              if (!(keep >> goes_on & 1U)) continue;
              const auto& node = g_.nodes[goes_on];
              const double others_s = page_out_s + in_during_s;
              const double stage_s = std::max(compute_s, others_s);
              const double left_next_s = node.pageout_time_s - (stage_s - others_s);
              if (left_next_s <= 0) continue;  // done here: ending here costs no more
              const double stage_e = energy + charge(node.pageout_energy_j, node.pageout_time_s) +
                                     g_.idle_power_w * stage_s;
              emit(key_of(t + 1, keep | in_during, next_ssd, goes_on, left_next_s), stage_s, stage_e);
              continue;
            }
            if (total_) {
              // Late page-ins: after the computes and drops, taking no memory in this stage.
              for (uint32_t late : subsets(ssd & future & ~keep & ~in_during)) {
                if (mem_of(keep | in_during | late) > budget_) continue;
                double late_e = 0, late_s = 0;
                for (int i = 0; i < n_; ++i) {
                  if (!(late >> i & 1U)) continue;
                  late_e += charge(g_.nodes[i].pagein_energy_j, g_.nodes[i].pagein_time_s);
                  late_s += g_.nodes[i].pagein_time_s;
                }
                const double stage_s = std::max(compute_s, page_out_s + in_during_s) + late_s;
                const double stage_e = energy + late_e + g_.idle_power_w * stage_s;
                emit(key_of(t + 1, keep | in_during | late, next_ssd), stage_s, stage_e);
              }
              continue;
            }
            for (uint32_t in : subsets(ssd & future & ~keep)) {
              if (mem_of(keep | in) > budget_) continue;
              double in_e = 0;
              for (int i = 0; i < n_; ++i)
                if (in >> i & 1U) in_e += g_.nodes[i].pagein_energy_j;
              emit(key_of(t + 1, keep | in, next_ssd), compute_s, energy + in_e);
            }
          }
        }
      }
    }
  }

  const TrainingGraph& g_;
  int n_;
  uint64_t budget_;
  double deadline_;
  bool total_;
  std::vector<std::vector<int>> in_, users_;
  std::vector<uint32_t> future_;  ///< per stage: what a later stage may still read (none after the last)
  [[nodiscard]] uint32_t future_at(int t) const { return future_[std::min(t, n_)]; }
  std::map<Key, Front> memo_;
  /// Per stage, its replay: for each compute, what was dropped before it and the memory then.
  std::vector<std::vector<std::pair<uint32_t, uint64_t>>> points_;
};

}  // namespace ergon::planner::testing
