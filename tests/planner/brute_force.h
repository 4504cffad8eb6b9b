#pragma once

// An exhaustive search over POET-style schedules of tiny graphs, written from the schedule
// semantics, not from the MILP: per stage t (which ends by computing node t) choose the
// page-outs, the set of nodes to compute, what stays in RAM for the next stage and what is
// paged in at its end; memory frees a tensor right after its last use in the stage unless it
// is kept. Returns the minimum energy, or infinity when nothing fits.
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
#include <cstdint>
#include <limits>
#include <map>
#include <tuple>
#include <vector>

#include "planner/graph.h"
#include "planner/schedule.h"

namespace ergon::planner::testing {

/// What a schedule may hold, page out and page in across a stage: what a later stage reads;
/// or that and, up the graph, the inputs of those, for a later recomputation of them. The
/// wider search finds schedules the narrower one misses (a 4-op graph with mixed saves at
/// 19,456 B: 0.077 J against 0.103 J, holding an input to recompute a gradient), and takes
/// 100 times longer on those graphs.
enum class Holds { kWhatALaterStageReads, kAlsoTheirInputs };

class BruteForce {
 public:
  BruteForce(const TrainingGraph& g, uint64_t budget, double deadline_s,
             Objective objective = Objective::kPoet, Holds holds = Holds::kWhatALaterStageReads)
      : g_(g), n_(g.size()), budget_(budget), deadline_(deadline_s),
        total_(objective == Objective::kTotal), holds_(holds) {
    in_ = g.inputs();
    users_ = g.users();
  }

  double min_energy() {
    double best = std::numeric_limits<double>::infinity();
    for (const auto& [time, energy] : frontier(0, 0, 0))
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
    for (int i = 0; i < n_; ++i)
      if (mask >> i & 1U) m += g_.nodes[i].output_bytes;
    return m;
  }

  /// `pending` (kTotal): a page-out running since an earlier stage, with `left_s` of its time
  /// still to go (its energy already charged), or -1.
  const Front& frontier(int t, uint32_t ram, uint32_t ssd, int pending = -1, double left_s = 0) {
    const auto key = std::make_tuple(t, ram, ssd, pending, left_s);
    if (auto it = memo_.find(key); it != memo_.end()) return it->second;
    Front result;
    if (t == n_) {
      result.emplace_back(0.0, 0.0);
      return memo_[key] = result;
    }
    uint32_t future = 0;  // tensors someone after stage t still needs
    for (int i = 0; i <= t; ++i)
      if (needed_after(i, t)) future |= 1U << i;
    for (bool grew = holds_ == Holds::kAlsoTheirInputs; grew;) {  // and what they are made from
      grew = false;
      for (int j = 0; j <= t; ++j)
        if (future >> j & 1U)
          for (int i : in_[j])
            if (!(future >> i & 1U)) {
              future |= 1U << i;
              grew = true;
            }
    }
    const uint32_t below_t = (1U << t) - 1;
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
    for (uint32_t out : subsets(ram & ~ssd & future & ~pending_bit)) {
      outs.push_back({out | pending_bit, false, -1});
      if (!total_) continue;
      for (int i = 0; i < n_; ++i)
        if ((ram & ~ssd & future & ~pending_bit & ~out) >> i & 1U) outs.push_back({out | pending_bit, false, i});
    }
    if (pending >= 0) outs.push_back({pending_bit, true, -1});
    for (const auto& [out, through, goes_on] : outs) {
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
        for (uint32_t in_during : during) {
          double in_during_e = 0, in_during_s = 0;
          for (int i = 0; i < n_; ++i) {
            if (!(in_during >> i & 1U)) continue;
            in_during_e += charge(g_.nodes[i].pagein_energy_j, g_.nodes[i].pagein_time_s);
            in_during_s += g_.nodes[i].pagein_time_s;
          }
          for (uint32_t keep : subsets((ram | compute) & future)) {
            // Replay the stage.
            uint32_t resident = ram;
            uint64_t mem = mem_of(ram) + mem_of(in_during);
            bool ok = mem <= budget_;
            double compute_s = 0, energy = page_out_e + in_during_e;
            for (int k = 0; k <= t && ok; ++k) {
              if (!(compute >> k & 1U)) continue;
              for (int i : in_[k]) ok = ok && (resident >> i & 1U);
              if (!ok) break;
              resident |= 1U << k;
              mem += g_.nodes[k].output_bytes;
              ok = mem <= budget_;
              const NodeCost cost = g_.compute_cost(k, t >= g_.backward_phase_start());
              compute_s += cost.time_s;
              energy += charge(cost.energy_j, cost.time_s);
              std::vector<int> candidates = in_[k];
              candidates.push_back(k);
              for (int i : candidates) {
                if (!(resident >> i & 1U) || (keep >> i & 1U)) continue;
                if (total_ && (out >> i & 1U)) continue;  // held until its page-out is done
                bool later_use = false;
                for (int j : users_[i]) later_use = later_use || (j > k && (compute >> j & 1U));
                if (later_use) continue;
                resident &= ~(1U << i);
                mem -= g_.nodes[i].output_bytes;
              }
            }
            if (!ok) continue;
            if ((keep & resident) != keep) continue;
            if (through) {
              // The page-out goes on into the next stage, the tensor still held; the stage
              // waits for nothing.
              if ((keep & out) != out) continue;
              const double left_next_s = page_out_s - compute_s;
              if (left_next_s <= 0) continue;  // done here: ending here costs no more
              const int node = std::countr_zero(out);
              for (const auto& [rt, re] : frontier(t + 1, keep, ssd, node, left_next_s))
                add(result, compute_s + rt, energy + g_.idle_power_w * compute_s + re);
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
              for (const auto& [rt, re] : frontier(t + 1, keep | in_during, next_ssd, goes_on, left_next_s))
                add(result, stage_s + rt, stage_e + re);
              continue;
            }
            if (total_) {
              // Late page-ins: after the computes and drops, taking no memory in this stage.
              for (uint32_t late : subsets(ssd & future & ~keep & ~in_during)) {
                double late_e = 0, late_s = 0;
                for (int i = 0; i < n_; ++i) {
                  if (!(late >> i & 1U)) continue;
                  late_e += charge(g_.nodes[i].pagein_energy_j, g_.nodes[i].pagein_time_s);
                  late_s += g_.nodes[i].pagein_time_s;
                }
                const double stage_s = std::max(compute_s, page_out_s + in_during_s) + late_s;
                const double stage_e = energy + late_e + g_.idle_power_w * stage_s;
                for (const auto& [rt, re] : frontier(t + 1, keep | in_during | late, next_ssd))
                  add(result, stage_s + rt, stage_e + re);
              }
              continue;
            }
            for (uint32_t in : subsets(ssd & future & ~keep)) {
              double in_e = 0;
              for (int i = 0; i < n_; ++i)
                if (in >> i & 1U) in_e += g_.nodes[i].pagein_energy_j;
              for (const auto& [rt, re] : frontier(t + 1, keep | in, next_ssd))
                add(result, compute_s + rt, energy + in_e + re);
            }
          }
        }
      }
    }
    return memo_[key] = result;
  }

  const TrainingGraph& g_;
  int n_;
  uint64_t budget_;
  double deadline_;
  bool total_;
  Holds holds_;
  std::vector<std::vector<int>> in_, users_;
  std::map<std::tuple<int, uint32_t, uint32_t, int, double>, Front> memo_;
};

}  // namespace ergon::planner::testing
