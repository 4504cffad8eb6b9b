#include "planner/pipeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "common/error.h"

namespace ergon::planner {

std::string to_string(PipelineOrder order) { return order == PipelineOrder::kGPipe ? "gpipe" : "1f1b"; }

PipelineOrder parse_pipeline_order(const std::string& text) {
  if (text == "1f1b") return PipelineOrder::k1F1B;
  if (text == "gpipe") return PipelineOrder::kGPipe;
  throw InputError("pipeline schedule '" + text + "' is unknown (known: 1f1b, gpipe)");
}

int in_flight(int stage, int stages, int microbatches, PipelineOrder order) {
  return order == PipelineOrder::kGPipe ? microbatches : std::min(microbatches, stages - stage);
}

std::string to_string(PipelineTask::Kind kind) {
  switch (kind) {
    case PipelineTask::Kind::kForward: return "forward";
    case PipelineTask::Kind::kBackward: return "backward";
    case PipelineTask::Kind::kActivation: return "activation";
    case PipelineTask::Kind::kGradient: return "gradient";
  }
  return "unknown";
}

PipelineTimeline simulate_pipeline(const std::vector<StageTimes>& stages, const std::vector<LinkModel>& links,
                                   int microbatches, PipelineOrder order) {
  const int S = static_cast<int>(stages.size());
  const int K = microbatches;
  if (S < 1 || K < 1) throw InputError("a pipeline needs at least one stage and one micro-batch");
  if (static_cast<int>(links.size()) != S - 1)
    throw InputError(fmt::format("{} stages need {} links, not {}", S, S - 1, links.size()));
  using Kind = PipelineTask::Kind;
  // Each board's order of (kind, micro-batch).
  std::vector<std::vector<std::pair<Kind, int>>> plan(static_cast<std::size_t>(S));
  for (int s = 0; s < S; ++s) {
    auto& p = plan[static_cast<std::size_t>(s)];
    if (order == PipelineOrder::kGPipe) {
      for (int j = 0; j < K; ++j) p.emplace_back(Kind::kForward, j);
      for (int j = K - 1; j >= 0; --j) p.emplace_back(Kind::kBackward, j);
    } else {
      const int warmup = std::min(K, S - 1 - s);
      int f = 0;
      for (; f < warmup; ++f) p.emplace_back(Kind::kForward, f);
      for (int b = 0; b < K; ++b) {
        if (f < K) p.emplace_back(Kind::kForward, f++);
        p.emplace_back(Kind::kBackward, b);
      }
    }
  }
  constexpr double kUnknown = -1;
  // Arrival of micro-batch j's activation at stage s (from link s - 1) and of its gradient at
  // stage s (from link s).
  std::vector<std::vector<double>> activation_in(static_cast<std::size_t>(S), std::vector<double>(K, kUnknown));
  std::vector<std::vector<double>> gradient_in(static_cast<std::size_t>(S), std::vector<double>(K, kUnknown));
  std::vector<std::size_t> next(static_cast<std::size_t>(S), 0);
  std::vector<double> board_free(static_cast<std::size_t>(S), 0);
  // Channels: per link, [0] activations (and gradients when half duplex), [1] gradients.
  std::vector<std::array<double, 2>> channel_free(links.size(), {0, 0});
  struct Pending {
    Kind kind;
    int link, microbatch;
    double ready_s;
  };
  std::vector<Pending> pending;
  PipelineTimeline t;
  t.busy_s.assign(static_cast<std::size_t>(S), 0);
  const std::size_t total = static_cast<std::size_t>(S) * 2 * K + (links.size()) * 2 * K;
  while (t.tasks.size() < total) {
    // The placeable item that can start first: a board's next task whose inputs have arrived,
    // or a pending transfer.
    double best_start = std::numeric_limits<double>::infinity();
    int best_board = -1;
    std::size_t best_pending = pending.size();
    for (int s = 0; s < S; ++s) {
      const auto& p = plan[static_cast<std::size_t>(s)];
      if (next[s] >= p.size()) continue;
      const auto [kind, j] = p[next[s]];
      double ready = board_free[s];
      if (kind == Kind::kForward && s > 0) {
        if (activation_in[s][j] == kUnknown) continue;
        ready = std::max(ready, activation_in[s][j]);
      }
      if (kind == Kind::kBackward && s < S - 1) {
        if (gradient_in[s][j] == kUnknown) continue;
        ready = std::max(ready, gradient_in[s][j]);
      }
      if (ready < best_start) {
        best_start = ready;
        best_board = s;
      }
    }
    for (std::size_t q = 0; q < pending.size(); ++q) {
      const Pending& x = pending[q];
      const auto& link = links[static_cast<std::size_t>(x.link)];
      const int ch = link.full_duplex && x.kind == Kind::kGradient ? 1 : 0;
      const double start = std::max(x.ready_s, channel_free[x.link][ch]);
      if (start < best_start) {
        best_start = start;
        best_board = -1;
        best_pending = q;
      }
    }
    if (best_board < 0 && best_pending == pending.size())
      throw Error("internal error: the pipeline timeline is stuck");  // a bug: the orders are acyclic
    if (best_board >= 0) {
      const int s = best_board;
      const auto [kind, j] = plan[static_cast<std::size_t>(s)][next[s]++];
      const double d = kind == Kind::kForward ? stages[s].forward_s : stages[s].backward_s;
      const double end = best_start + d;
      board_free[s] = end;
      t.busy_s[s] += d;
      t.tasks.push_back({kind, s, j, best_start, end});
      if (kind == Kind::kForward && s < S - 1) pending.push_back({Kind::kActivation, s, j, end});
      if (kind == Kind::kBackward && s > 0) pending.push_back({Kind::kGradient, s - 1, j, end});
      t.makespan_s = std::max(t.makespan_s, end);
    } else {
      const Pending x = pending[best_pending];
      pending.erase(pending.begin() + static_cast<std::ptrdiff_t>(best_pending));
      const auto& link = links[static_cast<std::size_t>(x.link)];
      const int ch = link.full_duplex && x.kind == Kind::kGradient ? 1 : 0;
      const double end = best_start + link.transfer_s();
      channel_free[x.link][ch] = end;
      if (x.kind == Kind::kActivation)
        activation_in[x.link + 1][x.microbatch] = end;
      else
        gradient_in[x.link][x.microbatch] = end;
      t.tasks.push_back({x.kind, x.link, x.microbatch, best_start, end});
      t.makespan_s = std::max(t.makespan_s, end);
    }
  }
  return t;
}

namespace {

uint64_t cut_bytes(const SplitRequest& r, int op) {
  for (const CutPoint& c : r.cuts)
    if (c.op == op) return c.bytes;
  throw InputError(fmt::format("the model cannot be cut before op {}: more than one tensor crosses there", op));
}

std::vector<LinkModel> link_models(const SplitRequest& r, const std::vector<int>& bounds) {
  std::vector<LinkModel> links;
  for (int s = 0; s + 1 < r.stages(); ++s) {
    const LinkCost& c = r.links[static_cast<std::size_t>(s)];
    links.push_back({cut_bytes(r, bounds[s + 1]), c.bytes_per_s, c.latency_s, c.full_duplex});
  }
  return links;
}

/// The objective a split is chosen by.
double score(const SplitRequest& r, const SplitPrediction& p) {
  return r.throughput ? p.makespan_s : p.energy_j();
}

}  // namespace

std::optional<SplitPrediction> predict_split(const SplitRequest& request, const std::vector<int>& bounds,
                                             const StageEvaluator& evaluate, std::string* why) {
  const int S = request.stages();
  if (static_cast<int>(bounds.size()) != S + 1 || bounds.front() != 0 || bounds.back() != request.ops)
    throw InputError(fmt::format("a split of {} ops over {} boards has {} bounds from 0 to {}", request.ops, S, S + 1,
                                 request.ops));
  if (static_cast<int>(request.links.size()) != S - 1)
    throw InputError(fmt::format("{} boards need {} links, not {}", S, S - 1, request.links.size()));
  SplitPrediction p;
  p.bounds = bounds;
  std::vector<StageTimes> times;
  for (int s = 0; s < S; ++s) {
    if (bounds[s] >= bounds[s + 1])
      throw InputError(fmt::format("stage {} of the split is empty (ops {}..{})", s, bounds[s], bounds[s + 1] - 1));
    StageCost c = evaluate(s, bounds[s], bounds[s + 1]);
    if (!c.feasible) {
      if (why) *why = fmt::format("stage {} (ops {}..{}): {}", s, bounds[s], bounds[s + 1] - 1, c.why);
      return std::nullopt;
    }
    times.push_back(c.times);
    p.stages.push_back(std::move(c));
  }
  const auto links = link_models(request, bounds);
  p.timeline = simulate_pipeline(times, links, request.microbatches, request.order);
  p.makespan_s = p.timeline.makespan_s;
  const double K = request.microbatches;
  for (int s = 0; s < S; ++s) {
    p.compute_j += K * p.stages[s].dynamic_j;
    p.idle_j += request.idle_w[s] * p.makespan_s;
  }
  for (std::size_t l = 0; l < links.size(); ++l) {
    const LinkCost& c = request.links[l];
    p.link_j += K * 2 * static_cast<double>(links[l].bytes) * (c.tx_j_per_byte + c.rx_j_per_byte);
  }
  return p;
}

std::vector<int> equal_split(const SplitRequest& request) {
  const int S = request.stages();
  std::vector<int> positions{0};
  for (const CutPoint& c : request.cuts) positions.push_back(c.op);
  positions.push_back(request.ops);
  if (static_cast<int>(positions.size()) - 1 < S) return {};
  std::vector<int> bounds{0};
  int at = 0;  // index into positions
  for (int s = 1; s < S; ++s) {
    const double target = static_cast<double>(request.ops) * s / S;
    // The nearest position past the last bound that leaves one position per stage to come.
    int best = at + 1;
    const int last = static_cast<int>(positions.size()) - 1 - (S - s);
    for (int i = at + 1; i <= last; ++i)
      if (std::abs(positions[i] - target) < std::abs(positions[best] - target)) best = i;
    bounds.push_back(positions[best]);
    at = best;
  }
  bounds.push_back(request.ops);
  return bounds;
}

SplitResult best_split(const SplitRequest& request, const StageEvaluator& evaluate, const StageEvaluator& bound) {
  SplitResult result;
  const int S = request.stages();
  const int K = request.microbatches;
  if (S < 1) throw InputError("a pipeline needs at least one board");
  if (K < 1) throw InputError("--microbatches must be at least 1");
  if (static_cast<int>(request.links.size()) != S - 1)
    throw InputError(fmt::format("{} boards need {} links, not {}", S, S - 1, request.links.size()));
  std::vector<int> P{0};
  for (const CutPoint& c : request.cuts) P.push_back(c.op);
  P.push_back(request.ops);
  const int C = static_cast<int>(P.size());  // positions; C - 1 minimal segments
  if (C - 1 < S) {
    result.why = fmt::format("the model can be cut in only {} place(s) where one tensor crosses, so it spreads over "
                             "at most {} board(s), not {}",
                             C - 2, C - 1, S);
    return result;
  }
  // Every stage s over positions [i, j) it can take, leaving one segment per other stage.
  std::map<std::tuple<int, int, int>, StageCost> cost;
  // Stage s may begin at positions [first_lo, first_hi] and end at [i + 1, end_hi]: the
  // first stage begins at 0, the last ends at the model's end, and every stage gets one
  // segment at least.
  auto first_lo = [&](int s) { return s; };
  auto first_hi = [&](int s) { return s == 0 ? 0 : C - 1 - (S - s); };
  auto end_lo = [&](int s, int i) { return s == S - 1 ? C - 1 : i + 1; };
  auto end_hi = [&](int s) { return C - 1 - (S - s - 1); };
  std::size_t total = 0;
  for (int s = 0; s < S; ++s)
    for (int i = first_lo(s); i <= first_hi(s); ++i)
      total += static_cast<std::size_t>(std::max(0, end_hi(s) - end_lo(s, i) + 1));
  for (int s = 0; s < S; ++s)
    for (int i = first_lo(s); i <= first_hi(s); ++i)
      for (int j = end_lo(s, i); j <= end_hi(s); ++j) {
        if (request.out_of_time && request.out_of_time()) {
          result.stopped_early = true;
          cost[{s, i, j}] = StageCost{false, "not evaluated: the time limit ran out", {}, 0};
          continue;
        }
        cost[{s, i, j}] = bound ? bound(s, P[i], P[j]) : evaluate(s, P[i], P[j]);
        ++result.stages_evaluated;
        if (request.progress) request.progress(result.stages_evaluated, total);
      }
  auto stage_eval = [&](int s, int first, int end) {
    const int i = static_cast<int>(std::lower_bound(P.begin(), P.end(), first) - P.begin());
    const int j = static_cast<int>(std::lower_bound(P.begin(), P.end(), end) - P.begin());
    const auto it = cost.find({s, i, j});
    if (it != cost.end()) return it->second;
    return evaluate(s, first, end);
  };
  // Per-micro-batch link time and the cap it must respect.
  auto link_s = [&](int s, int pos) {  // link after stage s, cut at position index pos
    const LinkCost& c = request.links[static_cast<std::size_t>(s)];
    const double one = c.latency_s + static_cast<double>(request.cuts[static_cast<std::size_t>(pos - 1)].bytes) / c.bytes_per_s;
    return std::pair{2 * one, c.full_duplex ? one : 2 * one};  // time added to the sum, and its cycle
  };
  double idle_all_w = 0;
  for (double w : request.idle_w) idle_all_w += w;
  const double weight = request.throughput ? 1.0 : idle_all_w;
  // Each split's timeline, simulated once on the costs known then: a stage costed again
  // drops the splits that use it (`users`), and only those are simulated again.
  std::map<std::vector<int>, std::optional<SplitPrediction>> simulated;
  std::map<std::tuple<int, int, int>, std::vector<std::vector<int>>> users;
  auto position = [&](int op) { return static_cast<int>(std::lower_bound(P.begin(), P.end(), op) - P.begin()); };
  auto predict_cached = [&](const std::vector<int>& bounds) -> const std::optional<SplitPrediction>& {
    if (const auto it = simulated.find(bounds); it != simulated.end()) return it->second;
    ++result.splits_simulated;
    for (int s = 0; s < S; ++s) users[{s, position(bounds[s]), position(bounds[s + 1])}].push_back(bounds);
    return simulated.emplace(bounds, predict_split(request, bounds, stage_eval)).first->second;
  };
  // Searches the splits on the costs known so far.
  auto search = [&]() -> std::optional<SplitPrediction> {
    std::set<double> caps;
    for (const auto& [key, c] : cost)
      if (c.feasible) caps.insert(c.times.forward_s + c.times.backward_s);
    for (int s = 0; s + 1 < S; ++s)
      for (int pos = 1; pos < C - 1; ++pos) caps.insert(link_s(s, pos).second);
    std::set<std::vector<int>> candidates;
    constexpr double kInf = std::numeric_limits<double>::infinity();
    // Splits: S - 1 of the C - 2 inner positions, counted without overflow.
    double splits = 1;
    for (int k = 0; k < S - 1; ++k) splits = splits * (C - 2 - k) / (k + 1);
    result.exhaustive = splits <= static_cast<double>(request.exhaustive_limit);
    if (result.exhaustive) {
      std::vector<int> bounds(static_cast<std::size_t>(S) + 1, 0);
      bounds[S] = request.ops;
      std::function<void(int, int)> choose = [&](int s, int from) {  // bounds[s] from positions >= from
        if (s == S) {
          bool feasible = true;
          for (int k = 0; k < S && feasible; ++k) {
            const int i = static_cast<int>(std::lower_bound(P.begin(), P.end(), bounds[k]) - P.begin());
            const int j = static_cast<int>(std::lower_bound(P.begin(), P.end(), bounds[k + 1]) - P.begin());
            feasible = cost.at({k, i, j}).feasible;
          }
          if (feasible) candidates.insert(bounds);
          return;
        }
        for (int i = from; i <= C - 1 - (S - s); ++i) {
          bounds[s] = P[i];
          choose(s + 1, i + 1);
        }
      };
      choose(1, 1);
      caps.clear();
    }
    for (const double cap : caps) {
      // best[s][j]: stages 0..s-1 cover positions [0, j), least estimated objective.
      std::vector<std::vector<double>> best(static_cast<std::size_t>(S) + 1, std::vector<double>(C, kInf));
      std::vector<std::vector<int>> from(static_cast<std::size_t>(S) + 1, std::vector<int>(C, -1));
      best[0][0] = 0;
      for (int s = 0; s < S; ++s)
        for (int i = first_lo(s); i <= first_hi(s); ++i) {
          if (best[s][i] == kInf) continue;
          double in_link = 0;
          if (s > 0) {
            const auto [sum_s, cycle_s] = link_s(s - 1, i);
            if (cycle_s > cap) continue;
            const LinkCost& lc = request.links[static_cast<std::size_t>(s - 1)];
            in_link = request.throughput
                          ? sum_s
                          : weight * sum_s + K * 2 * static_cast<double>(request.cuts[i - 1].bytes) *
                                                 (lc.tx_j_per_byte + lc.rx_j_per_byte);
          }
          for (int j = end_lo(s, i); j <= end_hi(s); ++j) {
            const StageCost& c = cost.at({s, i, j});
            if (!c.feasible) continue;
            const double busy = c.times.forward_s + c.times.backward_s;
            if (busy > cap) continue;
            const double v = best[s][i] + in_link + (request.throughput ? busy : K * c.dynamic_j + weight * busy);
            if (v < best[s + 1][j]) {
              best[s + 1][j] = v;
              from[s + 1][j] = i;
            }
          }
        }
      if (best[S][C - 1] == kInf) continue;
      std::vector<int> bounds(static_cast<std::size_t>(S) + 1);
      for (int s = S, j = C - 1; s >= 0; --s) {
        bounds[s] = P[j];
        if (s > 0) j = from[s][j];
      }
      candidates.insert(bounds);
    }
    if (candidates.empty()) {
      // Why: the first minimal segment that no board placed to run it can hold, with the
      // smallest stage around it each such board could take.
      for (int i = 0; i + 1 < C; ++i) {
        std::string first_why;
        bool fits = false;
        for (int s = 0; s < S && !fits; ++s) {
          const int from = std::max(first_lo(s), std::min(i, first_hi(s)));
          if (from > i) continue;
          const int to = std::max(i + 1, end_lo(s, from));
          if (to > end_hi(s)) continue;
          const StageCost& c = cost.at({s, from, to});
          fits = c.feasible;
          // The clearest reason is that of a board that would run these ops alone.
          if (!fits && (first_why.empty() || (from == i && to == i + 1)))
            first_why = fmt::format("board {} would run ops {}..{}: {}", s, P[from], P[to] - 1, c.why);
        }
        if (!fits) {
          result.why = fmt::format("no board placed to run ops {}..{} can hold them ({})", P[i], P[i + 1] - 1,
                                   first_why.empty() ? std::string("none is placed to") : first_why);
          return std::optional<SplitPrediction>();
        }
      }
      result.why = "every part of the model fits some board, but no split over these boards in this order fits "
                   "them all: more boards or larger budgets are needed";
      return std::optional<SplitPrediction>();
    }
    std::optional<SplitPrediction> best;
    std::optional<SplitPrediction> fastest;  // for the deadline's message
    auto consider = [&](const std::vector<int>& bounds) {
      const std::optional<SplitPrediction>& p = predict_cached(bounds);
      if (!p) return false;
      if (!fastest || p->makespan_s < fastest->makespan_s) fastest = *p;
      if (p->makespan_s > request.deadline_s) return false;
      if (best && score(request, *p) >= score(request, *best)) return false;
      best = p;
      return true;
    };
    for (const auto& bounds : candidates) consider(bounds);
    // Local search: move one cut to a neighbouring position while that helps.
    for (bool improved = best.has_value() && !result.exhaustive; improved;) {
      improved = false;
      const std::vector<int> current = best->bounds;
      for (int s = 1; s < S && !improved; ++s) {
        const int at = static_cast<int>(std::lower_bound(P.begin(), P.end(), current[s]) - P.begin());
        for (int d : {-1, 1}) {
          const int to = at + d;
          if (to < 1 || to > C - 2 || P[to] <= current[s - 1] || P[to] >= current[s + 1]) continue;
          std::vector<int> moved = current;
          moved[s] = P[to];
          if (consider(moved)) {
            improved = true;
            break;
          }
        }
      }
    }
    if (!best) {
      result.why = fastest ? fmt::format("no split meets the deadline of {:.6g} s per batch: the fastest found takes at "
                                         "least {:.6g} s",
                                         request.deadline_s, fastest->makespan_s)
                           : "no split fits";
      return std::optional<SplitPrediction>();
    }
  return best;
  };
  // Stages known only by a lower bound are costed exactly where the best split uses them,
  // until the best split uses exact costs only: every other split costs at least its bound.
  for (;;) {
    std::optional<SplitPrediction> best = search();
    if (!best) return result;
    bool exact = true;
    for (int s = 0; s < S; ++s) {
      const int i = static_cast<int>(std::lower_bound(P.begin(), P.end(), best->bounds[s]) - P.begin());
      const int j = static_cast<int>(std::lower_bound(P.begin(), P.end(), best->bounds[s + 1]) - P.begin());
      StageCost& c = cost.at({s, i, j});
      if (c.exact) continue;
      exact = false;
      c = evaluate(s, P[i], P[j]);
      c.exact = true;
      ++result.stages_refined;
      if (const auto u = users.find({s, i, j}); u != users.end()) {
        for (const auto& bounds : u->second) simulated.erase(bounds);
        users.erase(u);
      }
    }
    if (exact) {
      result.best = std::move(best);
      return result;
    }
  }
}

}  // namespace ergon::planner
