#include "planner/baselines.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <limits>
#include <optional>

#include "common/units.h"
#include "common/error.h"
#include "planner/rotor.h"

namespace ergon::planner {
namespace {

std::string seconds(double s) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g s", s);
  return buf;
}

class Stopwatch {
 public:
  [[nodiscard]] double elapsed_s() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

/// What `plan()` returns, with how long it took as its solve time.
template <class Plan>
PlanResult timed(Plan&& plan) {
  const Stopwatch clock;
  PlanResult r = plan();
  r.solve_time_s = clock.elapsed_s();
  return r;
}

PlanResult refused(const std::string& planner, ModelStatus status, std::string why) {
  PlanResult r;
  r.planner = planner;
  r.status = status;
  r.why = std::move(why);
  return r;
}

bool meets_deadline(double compute_time_s, const PlanRequest& request) {
  return compute_time_s <= request.deadline_s * (1 + 1e-9);
}

/// A schedule without its frees: computes, page-outs and page-ins in order. A compute or
/// page-in of a tensor materializes a new copy; each copy lives from there to its last read
/// (a compute that consumes it, or its page-out) before the tensor's next materialization.
/// Planners that think in "recompute here" or "page in there" write these; with_frees() then
/// frees everything as early as possible.
using Program = std::vector<Step>;

struct Freed {
  Schedule schedule;
  std::vector<std::size_t> origin;  ///< per step: the program step it is or follows
};

Freed with_frees(const TrainingGraph& g, const std::vector<std::vector<int>>& inputs,
                 const Program& program) {
  std::vector<long> last_touch(g.nodes.size(), -1);  // of the live copy; -1: none
  std::vector<std::vector<int>> frees_after(program.size());
  auto materialize = [&](int k, std::size_t j) {
    if (last_touch[k] >= 0) frees_after[last_touch[k]].push_back(k);
    last_touch[k] = static_cast<long>(j);
  };
  for (std::size_t j = 0; j < program.size(); ++j) {
    const Step& s = program[j];
    switch (s.kind) {
      case StepKind::kCompute:
        // A read of something never materialized is left for the simulator to reject.
        for (int i : inputs[s.node])
          if (last_touch[i] >= 0) last_touch[i] = static_cast<long>(j);
        materialize(s.node, j);
        break;
      case StepKind::kPageIn: materialize(s.node, j); break;
      case StepKind::kPageOut:
        if (last_touch[s.node] >= 0) last_touch[s.node] = static_cast<long>(j);
        break;
      case StepKind::kFree: break;
    }
  }
  for (std::size_t k = 0; k < last_touch.size(); ++k)
    if (last_touch[k] >= 0) frees_after[last_touch[k]].push_back(static_cast<int>(k));
  Freed out;
  for (std::size_t j = 0; j < program.size(); ++j) {
    out.schedule.steps.push_back(program[j]);
    out.origin.push_back(j);
    for (int k : frees_after[j]) {
      out.schedule.steps.push_back({StepKind::kFree, k});
      out.origin.push_back(j);
    }
  }
  return out;
}

Program store_all_program(const TrainingGraph& g) {
  Program p;
  for (int k = 0; k < g.size(); ++k) p.push_back({StepKind::kCompute, k});
  return p;
}

// ---------------------------------------------------------------------------------------
// Chen et al. 2016

/// Chen's schedule with the forward nodes cut into `segments` segments (see baselines.h).
Program chen_program(const TrainingGraph& g, const std::vector<std::vector<int>>& inputs,
                     const std::vector<std::vector<int>>& users, const std::vector<int>& forward,
                     int segments) {
  const int n = g.size();
  const auto nf = static_cast<long>(forward.size());
  std::vector<int> segment(n, -1);
  for (long pos = 0; pos < nf; ++pos) segment[forward[pos]] = static_cast<int>(pos * segments / nf);
  // What stays resident across the forward pass: checkpoints and the last segment.
  std::vector<char> kept(n, 0);
  for (int v : forward) {
    kept[v] = static_cast<char>(segment[v] == segments - 1);
    for (int u : users[v])
      if (segment[u] >= 0 && segment[u] != segment[v]) kept[v] = 1;
  }
  const int last_forward = forward.back();
  Program p;
  std::vector<char> available(n, 0);
  std::function<void(int)> ensure = [&](int v) {
    if (available[v]) return;
    for (int u : inputs[v]) ensure(u);
    p.push_back({StepKind::kCompute, v});
    available[v] = 1;
  };
  for (int k = 0; k < n; ++k) {
    ensure(k);
    if (k == last_forward)
      for (int v : forward) available[v] = kept[v];
  }
  return p;
}

// ---------------------------------------------------------------------------------------
// Capuchin

class Capuchin {
 public:
  Capuchin(const TrainingGraph& g, const PlanRequest& request)
      : g_(g), req_(request), inputs_(g.inputs()) {}

  /// A schedule under the budget, or nullopt; `lowest_peak_bytes` is the least peak reached,
  /// and `out_of_time` whether the request's time limit ended the search. Where recomputation
  /// alone cannot meet the budget the evictions go on to their cap: resnet18-cifar at 30 % of
  /// the Pi 4 took 1.1 s to give up, longer than POET's whole limit in `--power-mode auto`'s
  /// first share.
  std::optional<Schedule> run(uint64_t& lowest_peak_bytes, bool& out_of_time) {
    const Stopwatch clock;
    Program program = store_all_program(g_);
    lowest_peak_bytes = std::numeric_limits<uint64_t>::max();
    out_of_time = false;
    const int max_evictions = 20 * g_.size() + 100;
    for (int round = 0; round <= max_evictions; ++round) {
      Freed freed = with_frees(g_, inputs_, program);
      const Peak peak = find_peak(freed.schedule);
      lowest_peak_bytes = std::min(lowest_peak_bytes, peak.bytes);
      if (peak.bytes <= req_.budget_bytes) return std::move(freed.schedule);
      if (clock.elapsed_s() > req_.time_limit_s) {
        out_of_time = true;
        return std::nullopt;
      }
      if (!evict_one(program, freed.origin[peak.step], peak.resident)) return std::nullopt;
    }
    return std::nullopt;
  }

 private:
  struct Peak {
    uint64_t bytes = 0;
    std::size_t step = 0;
    std::vector<int> resident;
  };

  [[nodiscard]] Peak find_peak(const Schedule& s) const {
    std::vector<char> resident(g_.nodes.size(), 0);
    uint64_t memory = 0;
    Peak peak;
    for (std::size_t j = 0; j < s.steps.size(); ++j) {
      const Step& step = s.steps[j];
      const uint64_t bytes = g_.nodes[step.node].output_bytes;
      if (step.kind == StepKind::kFree) {
        resident[step.node] = 0;
        memory -= bytes;
      } else if (step.kind != StepKind::kPageOut && !resident[step.node]) {
        resident[step.node] = 1;
        memory += bytes;
        if (memory > peak.bytes) {
          peak.bytes = memory;
          peak.step = j;
          peak.resident.clear();
          for (int k = 0; k < g_.size(); ++k)
            if (resident[k]) peak.resident.push_back(k);
        }
      }
    }
    return peak;
  }

  enum class Touch : char { kMaterialize, kRead, kPageOut };
  struct TouchAt {
    std::size_t index;
    Touch touch;
  };

  /// Per node, every step of the program that materializes or reads it, in order.
  [[nodiscard]] std::vector<std::vector<TouchAt>> touches(const Program& p) const {
    std::vector<std::vector<TouchAt>> t(g_.nodes.size());
    for (std::size_t j = 0; j < p.size(); ++j) {
      const Step& s = p[j];
      if (s.kind == StepKind::kCompute) {
        for (int i : inputs_[s.node]) t[i].push_back({j, Touch::kRead});
        t[s.node].push_back({j, Touch::kMaterialize});
      } else if (s.kind == StepKind::kPageIn) {
        t[s.node].push_back({j, Touch::kMaterialize});
      } else if (s.kind == StepKind::kPageOut) {
        t[s.node].push_back({j, Touch::kPageOut});
      }
    }
    return t;
  }

  /// Whether a copy of `touches`' tensor is resident just before step j runs: one was
  /// materialized before and the first touch from j on reads it.
  static bool resident_before(const std::vector<TouchAt>& touches, std::size_t j) {
    auto it = std::lower_bound(touches.begin(), touches.end(), j,
                               [](const TouchAt& t, std::size_t v) { return t.index < v; });
    return it != touches.begin() && it != touches.end() && it->touch != Touch::kMaterialize;
  }

  struct Eviction {
    enum class Kind { kSwap, kRecompute } kind = Kind::kSwap;
    int node = 0;
    bool hidden = false;
    double energy_j = 0;
    std::size_t page_out_at = 0;  ///< 0: the tensor is on storage already
    std::size_t page_in_at = 0;
    std::size_t recompute_at = 0;
    std::vector<int> chain;  ///< recomputed in this order
  };

  /// Picks and applies one eviction at the peak step `p`; false when there is none.
  bool evict_one(Program& program, std::size_t p, const std::vector<int>& resident) {
    const auto t = touches(program);
    std::vector<double> before(program.size() + 1, 0);  // compute time of steps [0, j)
    for (std::size_t j = 0; j < program.size(); ++j)
      before[j + 1] =
          before[j] +
          (program[j].kind == StepKind::kCompute ? g_.nodes[program[j].node].time_s : 0);
    const double total_time_s = before.back();
    const Step& at_peak = program[p];

    std::optional<Eviction> hidden_swap, recompute, open_swap;
    double recompute_j_per_byte = 0;
    for (int x : resident) {
      const auto& node = g_.nodes[x];
      if (x == at_peak.node || node.output_bytes == 0) continue;
      const auto& tx = t[x];
      auto next = std::upper_bound(tx.begin(), tx.end(), p,
                                   [](std::size_t v, const TouchAt& a) { return v < a.index; });
      if (next == tx.end() || next == tx.begin() || next->touch == Touch::kMaterialize) continue;
      const std::size_t b = next->index;
      const std::size_t a = std::prev(next)->index;
      if (a == p) continue;  // the peak's own step reads it

      if (req_.allowed.paging) {
        bool stored = false;
        for (auto it = tx.begin(); it != next; ++it)
          stored = stored || it->touch == Touch::kPageOut;
        Eviction e;
        e.kind = Eviction::Kind::kSwap;
        e.node = x;
        e.energy_j = node.pagein_energy_j + (stored ? 0 : node.pageout_energy_j);
        e.page_out_at = stored ? 0 : a + 1;
        // The latest page-in that still finishes behind compute before the read at b.
        std::size_t c = b;
        while (c > p + 1 && before[b] - before[c] < node.pagein_time_s) --c;
        const bool in_hidden = before[b] - before[c] >= node.pagein_time_s;
        const bool out_hidden = before[p] - before[a + 1] >= (stored ? 0 : node.pageout_time_s);
        e.hidden = in_hidden && out_hidden;
        e.page_in_at = e.hidden ? c : b;
        auto& slot = e.hidden ? hidden_swap : open_swap;
        if (!slot || node.output_bytes > g_.nodes[slot->node].output_bytes) slot = e;
      }
      if (req_.allowed.recompute) {
        Eviction e;
        e.kind = Eviction::Kind::kRecompute;
        e.node = x;
        e.recompute_at = b;
        e.chain = recompute_chain(t, x, b);
        double time_s = 0;
        for (int v : e.chain) {
          time_s += g_.nodes[v].time_s;
          e.energy_j += g_.nodes[v].energy_j;
        }
        if (!meets_deadline(total_time_s + time_s, req_)) continue;
        const double per_byte = e.energy_j / static_cast<double>(node.output_bytes);
        if (!recompute || per_byte < recompute_j_per_byte) {
          recompute = e;
          recompute_j_per_byte = per_byte;
        }
      }
    }
    const std::optional<Eviction>& chosen = hidden_swap ? hidden_swap
                                            : recompute ? recompute
                                                        : open_swap;
    if (!chosen) return false;
    apply(program, *chosen);
    return true;
  }

  /// What recomputing x just before step b takes: x and, recursively, each input not resident
  /// then, in id (topological) order.
  [[nodiscard]] std::vector<int> recompute_chain(const std::vector<std::vector<TouchAt>>& t, int x,
                                                 std::size_t b) const {
    std::vector<char> planned(g_.nodes.size(), 0);
    std::vector<int> chain;
    std::function<void(int)> need = [&](int v) {
      planned[v] = 1;
      for (int u : inputs_[v])
        if (!planned[u] && !resident_before(t[u], b)) need(u);
      chain.push_back(v);
    };
    need(x);
    std::sort(chain.begin(), chain.end());
    return chain;
  }

  static void apply(Program& program, const Eviction& e) {
    auto at = [&](std::size_t j) { return program.begin() + static_cast<long>(j); };
    if (e.kind == Eviction::Kind::kRecompute) {
      std::vector<Step> steps;
      for (int v : e.chain) steps.push_back({StepKind::kCompute, v});
      program.insert(at(e.recompute_at), steps.begin(), steps.end());
      return;
    }
    // The later insertion first, so the earlier index still holds.
    program.insert(at(e.page_in_at), {StepKind::kPageIn, e.node});
    if (e.page_out_at > 0) program.insert(at(e.page_out_at), {StepKind::kPageOut, e.node});
  }

  const TrainingGraph& g_;
  const PlanRequest& req_;
  std::vector<std::vector<int>> inputs_;
};

}  // namespace

PlanResult judge_schedule(const std::string& planner, const TrainingGraph& graph,
                          const PlanRequest& request, Schedule schedule, double bound_j) {
  const ScheduleReport sim = simulate(graph, schedule, request.budget_bytes);
  if (!sim.valid)
    return refused(planner, ModelStatus::kNoSolutionFound,
                   planner + "'s schedule fails the simulator: " + sim.error);
  const double time_s = deadline_time_s(sim, request.objective);
  if (!meets_deadline(time_s, request))
    return refused(planner, ModelStatus::kNoSolutionFound,
                   planner + "'s schedule takes " + seconds(time_s) + ", over the deadline of " +
                       seconds(request.deadline_s));
  PlanResult r;
  r.planner = planner;
  r.objective_j = objective_energy_j(sim, request.objective);
  r.claimed_peak_bytes = sim.peak_bytes;
  r.bound_j = std::min(bound_j, r.objective_j);
  r.gap = (r.objective_j - r.bound_j) / std::max(r.objective_j, 1e-300);
  r.status = r.gap <= request.relative_gap ? ModelStatus::kOptimal : ModelStatus::kFeasible;
  r.schedule = std::move(schedule);
  return r;
}

PlanResult plan_store_all(const TrainingGraph& graph, const PlanRequest& request) {
  return timed([&] {
    const std::string name = "store-all";
    Schedule schedule = store_all_schedule(graph);
    const ScheduleReport sim = simulate(graph, schedule);
    if (sim.peak_bytes > request.budget_bytes)
      return refused(name, ModelStatus::kInfeasible,
                     "store-all needs " + format_bytes(sim.peak_bytes) + ", over the budget of " +
                         format_bytes(request.budget_bytes));
    if (!meets_deadline(deadline_time_s(sim, request.objective), request))
      return refused(name, ModelStatus::kInfeasible,
                     "deadline " + seconds(request.deadline_s) + " is shorter than one pass over the graph (" +
                         seconds(sim.compute_time_s) + ")");
    return judge_schedule(name, graph, request, std::move(schedule), graph.single_pass_energy_j());
  });
}

PlanResult plan_chen_sqrt(const TrainingGraph& graph, const PlanRequest& request) {
  return timed([&] {
    const std::string name = "chen";
    if (std::string why = infeasibility_reason(graph, request); !why.empty())
      return refused(name, ModelStatus::kInfeasible, std::move(why));
    std::vector<int> forward;
    for (const auto& node : graph.nodes)
      if (node.phase == NodePhase::kForward) forward.push_back(node.id);
    if (forward.empty())
      return refused(name, ModelStatus::kNoSolutionFound,
                     "chen needs forward nodes to checkpoint; " + graph.name + " has none");
    const auto inputs = graph.inputs();
    const auto users = graph.users();

    std::optional<Schedule> best;
    double best_j = 0;
    uint64_t least_peak = std::numeric_limits<uint64_t>::max();
    int least_peak_segments = 0;
    for (int segments = 1; segments <= static_cast<int>(forward.size()); ++segments) {
      Schedule s =
          with_frees(graph, inputs, chen_program(graph, inputs, users, forward, segments)).schedule;
      const ScheduleReport sim = simulate(graph, s);
      if (!sim.valid || !meets_deadline(deadline_time_s(sim, request.objective), request)) continue;
      if (sim.peak_bytes < least_peak) {
        least_peak = sim.peak_bytes;
        least_peak_segments = segments;
      }
      if (sim.peak_bytes > request.budget_bytes) continue;
      if (!best || objective_energy_j(sim, request.objective) < best_j) {
        best = std::move(s);
        best_j = objective_energy_j(sim, request.objective);
      }
    }
    if (!best) {
      if (least_peak_segments == 0)
        return refused(name, ModelStatus::kInfeasible,
                       "every segment count recomputes past the deadline of " + seconds(request.deadline_s));
      return refused(name, ModelStatus::kInfeasible,
                     "no segment count fits a budget of " + format_bytes(request.budget_bytes) +
                         "; the least chen needs is " + format_bytes(least_peak) + " (" +
                         std::to_string(least_peak_segments) + " segments)");
    }
    return judge_schedule(name, graph, request, std::move(*best), graph.single_pass_energy_j());
  });
}

PlanResult plan_capuchin(const TrainingGraph& graph, const PlanRequest& request) {
  return timed([&] {
    const std::string name = "capuchin";
    if (std::string why = infeasibility_reason(graph, request); !why.empty())
      return refused(name, ModelStatus::kInfeasible, std::move(why));
    uint64_t lowest_peak = 0;
    bool out_of_time = false;
    std::optional<Schedule> schedule = Capuchin(graph, request).run(lowest_peak, out_of_time);
    if (!schedule && out_of_time)
      return refused(name, ModelStatus::kNoSolutionFound,
                     "capuchin reached its time limit (" + seconds(request.time_limit_s) + ") at a peak of " +
                         format_bytes(lowest_peak) + ", over the budget of " + format_bytes(request.budget_bytes));
    if (!schedule)
      return refused(name, ModelStatus::kNoSolutionFound,
                     "capuchin found nothing left to evict at " + format_bytes(lowest_peak) +
                         ", over the budget of " + format_bytes(request.budget_bytes));
    return judge_schedule(name, graph, request, std::move(*schedule), graph.single_pass_energy_j());
  });
}

PlanResult plan_page_all(const TrainingGraph& graph, const PlanRequest& request) {
  return timed([&] {
    const std::string name = "page-all";
    if (!request.allowed.paging)
      return refused(name, ModelStatus::kInfeasible, "page-all pages, and this request allows no paging");
    const auto inputs = graph.inputs();
    const auto users = graph.users();
    const int turn = graph.backward_phase_start();
    // page_in_before[k]: tensors paged in just before node k is computed; page_out_after[k]:
    // tensors paged out just after it.
    std::vector<std::vector<int>> page_in_before(graph.nodes.size()), page_out_after(graph.nodes.size());
    for (int i = 0; i < turn; ++i) {
      const auto& u = users[static_cast<std::size_t>(i)];
      const auto late = std::lower_bound(u.begin(), u.end(), turn);
      if (late == u.end()) continue;
      const int last_early = late == u.begin() ? i : *std::prev(late);
      // Read again by the very next node: there is no compute to free its memory for.
      if (*late - last_early <= 1) continue;
      page_out_after[static_cast<std::size_t>(last_early)].push_back(i);
      // Prefetched one node ahead (vDNN's), so that the transfer overlaps that node's compute.
      page_in_before[static_cast<std::size_t>(std::max(*late - 1, last_early + 1))].push_back(i);
    }
    Program program;
    for (int k = 0; k < graph.size(); ++k) {
      for (int i : page_in_before[static_cast<std::size_t>(k)]) program.push_back({StepKind::kPageIn, i});
      program.push_back({StepKind::kCompute, k});
      for (int i : page_out_after[static_cast<std::size_t>(k)]) program.push_back({StepKind::kPageOut, i});
    }
    Schedule schedule = with_frees(graph, inputs, program).schedule;
    const ScheduleReport sim = simulate(graph, schedule);
    if (sim.valid && sim.peak_bytes > request.budget_bytes)
      return refused(name, ModelStatus::kInfeasible,
                     "page-all needs " + format_bytes(sim.peak_bytes) + ", over the budget of " +
                         format_bytes(request.budget_bytes));
    return judge_schedule(name, graph, request, std::move(schedule), graph.single_pass_energy_j());
  });
}

const std::vector<std::string>& baseline_names() {
  static const std::vector<std::string> names = {"store-all", "chen", "capuchin", "rotor", "pofo", "page-all"};
  return names;
}

PlanResult plan_baseline(const std::string& name, const TrainingGraph& graph,
                         const PlanRequest& request) {
  if (std::string why = infeasibility_reason(graph, request); !why.empty())
    return refused(name, ModelStatus::kInfeasible, std::move(why));
  const PlanRequest req = for_activations(graph, request);
  if (name == "store-all") return plan_store_all(graph, req);
  if (name == "chen") return plan_chen_sqrt(graph, req);
  if (name == "capuchin") return plan_capuchin(graph, req);
  if (name == "rotor") return plan_rotor(graph, req);
  if (name == "pofo") return plan_pofo(graph, req);
  if (name == "page-all") return plan_page_all(graph, req);
  std::string known;
  for (const auto& n : baseline_names()) known += (known.empty() ? "" : ", ") + n;
  throw InputError("unknown baseline planner '" + name + "' (known: " + known + ")");
}

}  // namespace ergon::planner
