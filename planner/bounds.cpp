#include "planner/bounds.h"

#include <algorithm>
#include <limits>
#include <utility>

namespace ergon::planner {
namespace {

/// A way to free `bytes` of one output at `cost_j`; a hull segment is the increment from the
/// previous point.
struct Point {
  double bytes = 0;
  double cost_j = 0;
};
using Segment = Point;

/// Appends the segments of the lower convex hull, from freeing nothing at no cost, through
/// the options that free a positive number of bytes. Segments come out with slopes
/// ascending, as the fractional knapsack takes them.
void append_hull_segments(std::vector<Point>& options, std::vector<Segment>& segments) {
  std::erase_if(options, [](const Point& p) { return p.bytes <= 0; });
  std::sort(options.begin(), options.end(), [](const Point& a, const Point& b) {
    return a.bytes < b.bytes || (a.bytes == b.bytes && a.cost_j < b.cost_j);
  });
  std::vector<Point> hull = {{0, 0}};
  auto cross = [](const Point& o, const Point& a, const Point& b) {
    return (a.bytes - o.bytes) * (b.cost_j - o.cost_j) - (a.cost_j - o.cost_j) * (b.bytes - o.bytes);
  };
  for (const Point& p : options) {
    if (p.bytes == hull.back().bytes) continue;  // same bytes, costlier (sorted)
    while (hull.size() >= 2 && cross(hull[hull.size() - 2], hull.back(), p) <= 0)
      hull.pop_back();
    hull.push_back(p);
  }
  for (std::size_t k = 1; k < hull.size(); ++k)
    segments.push_back({hull[k].bytes - hull[k - 1].bytes, hull[k].cost_j - hull[k - 1].cost_j});
}

}  // namespace

double memory_lower_bound_j(const TrainingGraph& graph, uint64_t budget_bytes,
                            Objective objective, AllowedMoves allowed) {
  const int n = graph.size();
  const auto inputs = graph.inputs();
  const auto users = graph.users();
  const bool total = objective == Objective::kTotal;
  // What computing a node costs in any schedule under the objective: under kTotal its energy
  // above idle plus idle power over its time (the makespan holds every compute), which is
  // never below its energy.
  auto compute_j = [&](const TrainingNode& node) {
    return total ? graph.dynamic_energy_j(node.energy_j, node.time_s) +
                       graph.idle_power_w * node.time_s
                 : node.energy_j;
  };
  // A recomputation may fall in either phase (per-phase power modes): the cheaper counts.
  auto recompute_j = [&](int i) {
    TrainingNode late = graph.nodes[i];
    const NodeCost c = graph.compute_cost(i, true);
    late.time_s = c.time_s;
    late.energy_j = c.energy_j;
    return std::min(compute_j(graph.nodes[i]), compute_j(late));
  };
  // Transfers may overlap compute under kTotal: only their energy above idle is certain.
  auto transfer_j = [&](double energy_j, double time_s) {
    return total ? graph.dynamic_energy_j(energy_j, time_s) : energy_j;
  };
  // Recreating a tensor after it was dropped, at the least: paging it out and back in, or
  // computing it again (without whatever its own inputs cost).
  constexpr double kNever = std::numeric_limits<double>::infinity();
  std::vector<double> page_j(static_cast<std::size_t>(n), kNever);
  std::vector<double> recreate_j(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    const auto& node = graph.nodes[i];
    if (allowed.paging)
      page_j[i] = transfer_j(node.pageout_energy_j, node.pageout_time_s) +
                  transfer_j(node.pagein_energy_j, node.pagein_time_s);
    recreate_j[i] = std::min(page_j[i], allowed.recompute ? recompute_j(i) : kNever);
  }
  double one_pass_j = 0;
  for (const auto& node : graph.nodes) one_pass_j += compute_j(node);

  // last_use[i]: the last consumer of i's output (i itself when nothing consumes it).
  std::vector<int> last_use(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) last_use[i] = users[i].empty() ? i : users[i].back();

  // At the moment node t is computed, each earlier output falls in one of three groups:
  // `kNeeded` (t's inputs and output: in memory), `kLive` (a later node consumes it: in
  // memory, or re-created later at a cost) and dead (no later consumer: in memory only if
  // kept, for a later recomputation of a live output that needs it).
  enum : char { kDead = 0, kNeeded = 1, kLive = 2 };
  std::vector<char> group(static_cast<std::size_t>(n));
  std::vector<int> sharers(static_cast<std::size_t>(n));  // live outputs a dead one feeds
  std::vector<Segment> segments;
  std::vector<Point> options;
  double worst_extra_j = 0;
  for (int t = 0; t < n; ++t) {
    std::fill(group.begin(), group.begin() + t + 1, kDead);
    group[t] = kNeeded;
    uint64_t needed_bytes = graph.nodes[t].output_bytes;
    for (int i : inputs[t]) {
      group[i] = kNeeded;
      needed_bytes += graph.nodes[i].output_bytes;
    }
    uint64_t live_bytes = 0;
    for (int i = 0; i < t; ++i) {
      if (group[i] == kNeeded || last_use[i] <= t) continue;
      group[i] = kLive;
      live_bytes += graph.nodes[i].output_bytes;
    }
    if (needed_bytes + live_bytes <= budget_bytes) continue;
    // The working set alone over the budget means no schedule exists; the caller reports
    // that separately, so the bound stays finite.
    if (needed_bytes > budget_bytes) continue;
    std::fill(sharers.begin(), sharers.begin() + t + 1, 0);
    for (int i = 0; i < t; ++i)
      if (group[i] == kLive)
        for (int j : inputs[i])
          if (group[j] == kDead) ++sharers[j];

    // Each live output offers ways to free its bytes at a cost: page it (its bytes, the
    // transfers' energy) or recompute it later, which needs each dead input either kept
    // (its bytes back, shared among the live outputs it feeds) or re-created (its cost,
    // shared likewise). Sharing divides so that a kept or re-created input is never charged
    // more than once. The cheapest cost of freeing b bytes of one output is the lower convex
    // hull of those options; a fractional knapsack over all hull segments bounds the total.
    segments.clear();
    for (int i = 0; i < t; ++i) {
      if (group[i] != kLive) continue;
      const double bytes = static_cast<double>(graph.nodes[i].output_bytes);
      options.clear();
      if (page_j[i] < kNever) options.push_back({bytes, page_j[i]});
      if (allowed.recompute) {
        Point p{bytes, recompute_j(i)};
        std::vector<Point> extra;  // re-creating a dead input instead of keeping it
        for (int j : inputs[i]) {
          if (group[j] != kDead) continue;
          const double share = 1.0 / sharers[j];
          const double input_bytes = static_cast<double>(graph.nodes[j].output_bytes) * share;
          p.bytes -= input_bytes;
          extra.push_back({input_bytes, recreate_j[j] * share});
        }
        std::sort(extra.begin(), extra.end(), [](const Point& a, const Point& b) {
          return a.cost_j * b.bytes < b.cost_j * a.bytes;
        });
        options.push_back(p);
        for (const Point& e : extra) {
          if (!(e.cost_j < kNever)) break;
          p.bytes += e.bytes;
          p.cost_j += e.cost_j;
          options.push_back(p);
        }
      }
      append_hull_segments(options, segments);
    }
    double shortfall = static_cast<double>(needed_bytes + live_bytes - budget_bytes);
    std::sort(segments.begin(), segments.end(), [](const Segment& a, const Segment& b) {
      return a.cost_j * b.bytes < b.cost_j * a.bytes;
    });
    double extra_j = 0;
    for (const Segment& seg : segments) {
      if (shortfall <= 0) break;
      const double take = std::min(shortfall, seg.bytes);
      extra_j += seg.cost_j * (take / seg.bytes);
      shortfall -= take;
    }
    // Bytes left over when every option is used: no schedule exists (reported elsewhere).
    if (shortfall <= 0) worst_extra_j = std::max(worst_extra_j, extra_j);
  }
  return one_pass_j + worst_extra_j;
}

}  // namespace ergon::planner
