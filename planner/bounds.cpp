#include "planner/bounds.h"

#include <algorithm>
#include <bit>
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

/// The cheapest way to free at least b bytes, convexified: from the option that frees the
/// fewest bytes at the least cost (every option to its left costs more and frees less), the
/// lower convex hull of the options, slopes ascending. `options` is left sorted and reused.
void lower_chain(std::vector<Point>& options, std::vector<Point>& chain) {
  std::sort(options.begin(), options.end(), [](const Point& a, const Point& b) {
    return a.bytes < b.bytes || (a.bytes == b.bytes && a.cost_j < b.cost_j);
  });
  chain.clear();
  auto cross = [](const Point& o, const Point& a, const Point& b) {
    return (a.bytes - o.bytes) * (b.cost_j - o.cost_j) - (a.cost_j - o.cost_j) * (b.bytes - o.bytes);
  };
  for (const Point& p : options) {
    if (!chain.empty() && p.bytes == chain.back().bytes) continue;  // same bytes, costlier (sorted)
    // Options that free fewer bytes and cost no less than this one are of no use.
    while (!chain.empty() && chain.back().cost_j >= p.cost_j) chain.pop_back();
    while (chain.size() >= 2 && cross(chain[chain.size() - 2], chain.back(), p) <= 0) chain.pop_back();
    chain.push_back(p);
  }
}

/// At most kMaxChainSegments segments, the function kept convex and never raised: a run of
/// segments becomes one of their length at the run's first (least) slope, so the chain may
/// only fall below the options it stands for, and the bound stays a bound. Long chains
/// arise where many dead outputs feed one another (DenseNet's concatenations).
constexpr std::size_t kMaxChainSegments = 8;
void coarsen(std::vector<Point>& chain) {
  const std::size_t segments = chain.size() - 1;
  if (chain.size() < 2 || segments <= kMaxChainSegments) return;
  std::vector<Point> out = {chain.front()};
  for (std::size_t g = 0; g < kMaxChainSegments; ++g) {
    const std::size_t first = g * segments / kMaxChainSegments;
    const std::size_t after = (g + 1) * segments / kMaxChainSegments;
    const double slope = (chain[first + 1].cost_j - chain[first].cost_j) / (chain[first + 1].bytes - chain[first].bytes);
    const double bytes = chain[after].bytes - chain[first].bytes;
    out.push_back({out.back().bytes + bytes, out.back().cost_j + slope * bytes});
  }
  chain = std::move(out);
}

/// The Minkowski sum of `start` and convex chains: the cheapest way to free bytes through
/// several independent choices at once, each taken along its chain.
void minkowski_sum(Point start, const std::vector<const std::vector<Point>*>& chains,
                   std::vector<Segment>& scratch, std::vector<Point>& out) {
  scratch.clear();
  for (const auto* chain : chains) {
    start.bytes += chain->front().bytes;
    start.cost_j += chain->front().cost_j;
    for (std::size_t k = 1; k < chain->size(); ++k)
      scratch.push_back({(*chain)[k].bytes - (*chain)[k - 1].bytes, (*chain)[k].cost_j - (*chain)[k - 1].cost_j});
  }
  std::sort(scratch.begin(), scratch.end(), [](const Segment& a, const Segment& b) {
    return a.cost_j * b.bytes < b.cost_j * a.bytes;
  });
  out.push_back(start);
  for (const Segment& s : scratch) {
    start.bytes += s.bytes;
    start.cost_j += s.cost_j;
    out.push_back(start);
  }
}

/// The largest of `values` over an index range, in O(1) per query (a sparse table).
class RangeMax {
 public:
  explicit RangeMax(const std::vector<double>& values) {
    const std::size_t n = values.size();
    levels_.push_back(values);
    for (std::size_t width = 2; width <= n; width *= 2) {
      const auto& prev = levels_.back();
      std::vector<double> next(n - width + 1);
      for (std::size_t i = 0; i < next.size(); ++i)
        next[i] = std::max(prev[i], prev[i + width / 2]);
      levels_.push_back(std::move(next));
    }
  }
  /// max of values[a..b]; 0 when the range is empty.
  [[nodiscard]] double operator()(int a, int b) const {
    if (a > b) return 0;
    const auto len = static_cast<std::size_t>(b - a + 1);
    const std::size_t k = std::bit_width(len) - 1;
    const std::size_t width = std::size_t{1} << k;
    return std::max(levels_[k][static_cast<std::size_t>(a)],
                    levels_[k][static_cast<std::size_t>(b) + 1 - width]);
  }

 private:
  std::vector<std::vector<double>> levels_;
};

/// How many tensors a moment's knapsack bounds both ways (kept, or freed whole) where its
/// fractional answer frees part of one: at most 2^depth fractional knapsacks a moment.
constexpr int kWholeTensorDepth = 4;

/// One live output in a moment's knapsack. Its hull segments (`hull`, a range of
/// Knapsack::hull) are the fractional relaxation the bound has always used. A tensor is
/// either there or not, so freeing any of it frees at least `whole_bytes` (the least option
/// no option freeing more bytes beats on cost) at `whole_j`, and more along the lower convex
/// chain of the options from there on (`after`, made when first needed).
struct Item {
  double whole_bytes = 0;
  double whole_j = 0;
  std::size_t hull_from = 0, hull_to = 0;
  std::size_t options_from = 0, options_to = 0;  ///< in Knapsack::options_, sorted by bytes
  std::size_t after_from = 0, after_to = 0;
  bool after_made = false;
};

/// A segment of an item's chain, and which item.
struct Piece {
  double bytes = 0;
  double cost_j = 0;
  int item = 0;
  bool first = false;  ///< the first segment of the item's hull, from freeing nothing
};

/// The cheapest way to free a moment's shortfall over its live outputs. Fractionally, each
/// output along its hull, as the bound always did; but an output is in memory or not, and
/// where the fractional answer frees part of an output's least option (a 3 MiB stem
/// convolution output when 2.6 MiB are short), the output is bounded both ways, freed whole
/// or kept, to kWholeTensorDepth outputs deep: the lesser branch is a bound on every
/// schedule (one that frees a dominated option's bytes does no better than with the option
/// that dominates it), and never below the fractional one.
class Knapsack {
 public:
  enum Status : char { kFree = 0, kIn, kOut };
  std::vector<Segment> hull;  ///< every item's hull segments, by item

  void clear() {
    items_.clear();
    hull.clear();
    options_.clear();
    after_.clear();
  }

  /// Adds an item from its options (sorted by bytes, then cost, none freeing nothing, as
  /// append_hull_segments() leaves them) and the hull segments just appended to `hull`.
  /// `whole`: the options are every way there is (paging or recomputing the tensor alone),
  /// so the item is bounded both ways where it is split. Options made from dead inputs'
  /// convex chains stand for ways between their points too, some freeing fewer bytes at
  /// less cost than any option: such an item stays fractional.
  void add(const std::vector<Point>& options, std::size_t hull_from, bool whole) {
    if (options.empty() || hull_from == hull.size()) return;
    Item item;
    item.hull_from = hull_from;
    item.hull_to = hull.size();
    if (!whole) {
      items_.push_back(item);  // whole_bytes 0: never split
      return;
    }
    item.options_from = options_.size();
    options_.insert(options_.end(), options.begin(), options.end());
    item.options_to = options_.size();
    double cheapest_j = std::numeric_limits<double>::infinity();
    for (auto p = options.rbegin(); p != options.rend(); ++p)
      if (p->cost_j < cheapest_j) {
        cheapest_j = p->cost_j;
        item.whole_bytes = p->bytes;
        item.whole_j = p->cost_j;
      }
    items_.push_back(item);
  }

  /// The least cost of freeing `shortfall` bytes (infinity where the items cannot). Outputs
  /// are bounded both ways only where that could take the answer above `worth_above`.
  double least_j(double shortfall, double worth_above) {
    shortfall_ = shortfall;
    worth_above_ = worth_above;
    status_.assign(items_.size(), kFree);
    return solve(kWholeTensorDepth);
  }

 private:
  /// The chain past an item's least option, made once.
  void make_after(Item& item) {
    if (item.after_made) return;
    item.after_made = true;
    front_.clear();
    for (std::size_t k = item.options_from; k < item.options_to; ++k)
      if (options_[k].bytes >= item.whole_bytes) front_.push_back(options_[k]);
    lower_chain(front_, chain_);
    item.after_from = after_.size();
    for (std::size_t k = 1; k < chain_.size(); ++k)
      after_.push_back({chain_[k].bytes - chain_[k - 1].bytes, chain_[k].cost_j - chain_[k - 1].cost_j});
    item.after_to = after_.size();
  }

  double solve(int depth) {
    pieces_.clear();
    double short_bytes = shortfall_;
    double cost_j = 0;
    for (std::size_t k = 0; k < items_.size(); ++k) {
      Item& item = items_[k];
      if (status_[k] == kOut) continue;
      if (status_[k] == kIn) {
        make_after(item);
        cost_j += item.whole_j;
        short_bytes -= item.whole_bytes;
        for (std::size_t a = item.after_from; a < item.after_to; ++a)
          pieces_.push_back({after_[a].bytes, after_[a].cost_j, static_cast<int>(k), false});
        continue;
      }
      for (std::size_t h = item.hull_from; h < item.hull_to; ++h)
        pieces_.push_back({hull[h].bytes, hull[h].cost_j, static_cast<int>(k), h == item.hull_from});
    }
    std::sort(pieces_.begin(), pieces_.end(), [](const Piece& a, const Piece& b) {
      return a.cost_j * b.bytes < b.cost_j * a.bytes;
    });
    int split = -1;  // an item of which the answer frees less than its least option
    for (const Piece& piece : pieces_) {
      if (short_bytes <= 0) break;
      const double take = std::min(short_bytes, piece.bytes);
      cost_j += piece.cost_j * (take / piece.bytes);
      short_bytes -= take;
      if (piece.first && take < items_[static_cast<std::size_t>(piece.item)].whole_bytes * (1 - 1e-9))
        split = piece.item;
    }
    if (short_bytes > 0) return std::numeric_limits<double>::infinity();
    // Freeing the split item whole is a way within its branch: no branch bounds above that.
    if (split < 0 || depth <= 0 || cost_j + items_[static_cast<std::size_t>(split)].whole_j <= worth_above_)
      return cost_j;
    double branches_j = std::numeric_limits<double>::infinity();
    for (const Status way : {kIn, kOut}) {
      status_[static_cast<std::size_t>(split)] = way;
      branches_j = std::min(branches_j, solve(depth - 1));
    }
    status_[static_cast<std::size_t>(split)] = kFree;
    return std::max(cost_j, branches_j);  // the branches' answers are tighter, up to rounding
  }

  std::vector<Item> items_;
  std::vector<Point> options_;
  std::vector<Segment> after_;
  double shortfall_ = 0;
  double worth_above_ = 0;
  std::vector<Status> status_;
  std::vector<Piece> pieces_;
  std::vector<Point> front_, chain_;
};

}  // namespace

double one_pass_j(const TrainingGraph& graph, Objective objective) {
  double sum_j = 0;
  for (const auto& node : graph.nodes)
    sum_j += objective == Objective::kTotal
                 ? graph.dynamic_energy_j(node.energy_j, node.time_s) + graph.idle_power_w * node.time_s
                 : node.energy_j;
  return sum_j;
}

double memory_lower_bound_j(const TrainingGraph& graph, uint64_t budget_bytes,
                            Objective objective, AllowedMoves allowed, bool stage_overlap) {
  const int n = graph.size();
  const auto inputs = graph.inputs();
  const auto users = graph.users();
  const bool total = objective == Objective::kTotal;
  // Under kTotal a stage lasts max(C, X) (its computes C, recomputations R included, and
  // its transfers X), and one pass's nodes are in every schedule. For any lambda in [0, 1],
  //   max(C, X) - own node's time >= lambda R + (1 - lambda) sum_k max(0, x_k - own time),
  // so idle power may be charged on a share lambda of each recomputation's time and on the
  // share 1 - lambda of each transfer's time that its stage's own node cannot hide: every
  // lambda gives a bound, and each moment takes the best of a grid. lambda = 1 is the
  // bound that ignores transfer time (all of it hidden behind compute); the others see that
  // a page-in of a tensor larger than any node's compute in its window stalls.
  // A page-out may span the stages of its window, their own nodes hiding it together: it is
  // charged only beyond their sum. (Transfers share one channel, so a stage's own node hides
  // at most its time of all of them together: charging each transfer alone beyond what its
  // window could hide never exceeds what the stages stall in all.)
  const double idle_w = total ? graph.idle_power_w : 0.0;
  auto compute_j = [&](const NodeCost& c, double lambda) {
    return total ? graph.dynamic_energy_j(c.energy_j, c.time_s) + lambda * idle_w * c.time_s
                 : c.energy_j;
  };
  // A recomputation may fall in either phase (per-phase power modes): the cheaper counts.
  auto recompute_j = [&](int i, double lambda) {
    const NodeCost early{graph.nodes[i].time_s, graph.nodes[i].energy_j};
    return std::min(compute_j(early, lambda), compute_j(graph.compute_cost(i, true), lambda));
  };
  // Transfers may overlap compute under kTotal: their energy above idle is certain, their
  // time only beyond what the stage's own node hides (see above).
  auto transfer_j = [&](double energy_j, double time_s) {
    return total ? graph.dynamic_energy_j(energy_j, time_s) : energy_j;
  };
  // The model's compute time of each stage's own node, and its largest over a window.
  const int late_from = graph.backward_phase_start();
  std::vector<double> own_s(static_cast<std::size_t>(n));
  for (int s = 0; s < n; ++s) own_s[s] = graph.compute_cost(s, s >= late_from).time_s;
  const RangeMax longest(own_s);
  // A page-out may span stages: what their own nodes compute together may hide it.
  std::vector<double> own_before_s(static_cast<std::size_t>(n) + 1, 0.0);
  for (int s = 0; s < n; ++s) own_before_s[s + 1] = own_before_s[s] + own_s[s];
  auto own_sum_s = [&](int a, int b) { return a > b ? 0.0 : own_before_s[b + 1] - own_before_s[a]; };

  constexpr double kNever = std::numeric_limits<double>::infinity();
  std::vector<double> page_j(static_cast<std::size_t>(n), kNever);  // energy above idle
  // A page-in alone: a tensor paged in twice is paged out once.
  std::vector<double> page_in_j(static_cast<std::size_t>(n), kNever);
  for (int i = 0; i < n; ++i) {
    const auto& node = graph.nodes[i];
    if (allowed.paging) {
      page_in_j[i] = transfer_j(node.pagein_energy_j, node.pagein_time_s);
      page_j[i] = transfer_j(node.pageout_energy_j, node.pageout_time_s) + page_in_j[i];
    }
  }
  const double one_pass = one_pass_j(graph, objective);

  // last_use[i]: the last consumer of i's output (i itself when nothing consumes it).
  std::vector<int> last_use(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) last_use[i] = users[i].empty() ? i : users[i].back();
  // working_bytes[u]: node u's inputs and output, in memory whenever it is computed (edges
  // are unique, so each input once).
  std::vector<uint64_t> working_bytes(static_cast<std::size_t>(n));
  for (int u = 0; u < n; ++u) {
    working_bytes[u] = graph.nodes[u].output_bytes;
    for (int k : inputs[u]) working_bytes[u] += graph.nodes[k].output_bytes;
  }

  // The share of idle power on transfers is tried at these lambdas (only 1 without idle).
  // A second family sees that page-outs share one channel. Every tensor paged out and
  // missing when node t runs was written out in stages before t, one after another, so
  // those stages last at least the sum of their page-out times; the one-pass compute of
  // stages 1 to t - 1 (the first output exists only after stage 0) hides no more than
  // its own length of it. The rest is time at idle power at least:
  //   idle x max(0, sum of page-outs - hidden) >= mu x idle x (sum of page-outs - hidden)
  // for every mu in [0, 1], so each mu gives a bound: a page-out costs mu x idle x its time
  // more, and mu x idle x hidden comes off. This family charges recomputations their whole
  // time (lambda = 1) and no stall per transfer.
  //
  // A recomputation's dead inputs are followed up the graph (`deep`, below) at lambda = 1
  // and mu = 0 only, where the bound is usually decided: on DenseNet-121 that alone takes
  // 60 ms. The same weights are also taken with the inputs' own inputs left out, as before,
  // since a share spread over more paths can free a few bytes more elsewhere.
  struct Weights {
    double lambda = 1.0;
    double mu = 0.0;
    bool deep = false;
  };
  std::vector<Weights> weights = {{1.0, 0.0, true}};
  if (allowed.recompute) weights.push_back({1.0, 0.0, false});
  if (total && idle_w > 0 && allowed.paging && stage_overlap) {
    for (int k = 0; k < 20; ++k) weights.push_back({k / 20.0, 0.0});
    for (int k = 1; k <= 20; ++k) weights.push_back({1.0, k / 20.0});
  }

  // At the moment node t is computed, each earlier output falls in one of three groups:
  // `kNeeded` (t's inputs and output: in memory), `kLive` (a later node consumes it: in
  // memory, or re-created later at a cost) and dead (no later consumer: in memory only if
  // kept, for a later recomputation of a live output that needs it).
  enum : char { kDead = 0, kNeeded = 1, kLive = 2 };
  std::vector<char> group(static_cast<std::size_t>(n));
  // paths[d]: how many ways a dead output is reached from the live outputs, up through dead
  // ones (each live consumer is one; a dead consumer passes on its own count).
  std::vector<double> paths(static_cast<std::size_t>(n));
  std::vector<double> sharers(static_cast<std::size_t>(n));  // the live outputs alone
  // dead_chain[d]: the cheapest ways of having dead output d again after the moment, in
  // bytes freed against keeping it, and energy; its share 1 / paths[d] of both.
  std::vector<std::vector<Point>> dead_chain(static_cast<std::size_t>(n));
  std::vector<const std::vector<Point>*> parts;
  Knapsack knapsack;
  std::vector<Segment> scratch;
  std::vector<Point> options;
  // What paging output i out before moment t and back in before its next read `read_by`
  // costs at least at weights lambda and mu (kNever where paging is not allowed). Under kTotal
  // the page-out runs in stages from i + 1 to t - 1 (a tensor being paged out stays all
  // stage), and the page-in in a stage from t + 1 to read_by - 1 (or late, hidden by
  // nothing); at the share 1 - lambda what those stages' own nodes cannot hide is charged.
  // A page-in among a stage's transfers holds its tensor all stage, and stage read_by - 1
  // holds it whichever stage pages it in: where there is none (read_by = t + 1), or node
  // read_by - 1's own inputs and output leave less room than the tensor, the page-in runs
  // late (after a stage's computes), overlapping nothing (a stage lasts max(C, X) and then
  // its late page-ins), and its whole time is at idle power, at every lambda and mu.
  auto paged_j = [&](int i, int t, int read_by, double lambda, double mu) {
    if (page_j[i] >= kNever) return kNever;
    const auto& node = graph.nodes[i];
    double cost_j = page_j[i] + mu * idle_w * node.pageout_time_s;
    const bool late =
        stage_overlap && (read_by <= t + 1 || working_bytes[read_by - 1] + node.output_bytes > budget_bytes);
    if (late) cost_j += idle_w * node.pagein_time_s;
    if (lambda < 1) {
      if (t - 1 < i + 1) return kNever;
      cost_j += (1 - lambda) * idle_w *
                (std::max(0.0, node.pageout_time_s - own_sum_s(i + 1, t - 1)) +
                 (late ? 0.0 : std::max(0.0, node.pagein_time_s - longest(t + 1, read_by - 1))));
    }
    return cost_j;
  };
  // The first read of output i after moment t.
  auto next_read = [&](int i, int t) {
    const auto it = std::upper_bound(users[i].begin(), users[i].end(), t);
    return it == users[i].end() ? last_use[i] : *it;
  };
  // A tensor may be certain to be away at a moment: the other live outputs there are fewer
  // bytes than the shortfall. It is then re-created once after that moment, before its next
  // read (`until`), whatever else the schedule does, at no less than its cheapest way alone
  // (paged, or recomputed with its inputs at hand). A re-creation is one action for one
  // tensor, so a moment's knapsack may add that certain cost to its own: the outputs it
  // frees are other tensors, or the same one in another window between reads, each
  // re-created by an action of its own. And at a moment of the same window the tensor's
  // absence costs nothing more: it may stay away until the one re-creation. ResNet-18's stem
  // convolution output (3.2 MB) is the case: certain to be away during the stem's backward
  // pass, where it is the only live output, it is free to be away at every moment since the
  // forward pass, and the moments there that were short of other bytes add theirs.
  struct Forced {
    int node = 0;
    int moment = 0;
    int last_moment = 0;  ///< the last moment of the window at which it is certain to be away
    int after = 0;  ///< the last read before the moment (or the tensor's own stage)
    int until = 0;  ///< the next read after it
  };
  std::vector<Forced> forced;
  // A forced tensor and the live output taken with it (paired[] each other's, -1 none), the
  // paths to the forced one through dead outputs, and the dead outputs' chains with it away.
  std::vector<int> paired(static_cast<std::size_t>(n), -1);
  std::vector<int> pair_k;
  std::vector<double> via(static_cast<std::size_t>(n));
  std::vector<std::vector<Point>> without_k(static_cast<std::size_t>(n));
  std::vector<Point> both, exact;
  // via[d]: the paths from output d to output k through dead outputs, at moment t.
  auto paths_to = [&](int k, int t) {
    for (int d = 0; d < t; ++d) {
      via[d] = 0;
      if (d == k || (group[d] != kDead && group[d] != kLive)) continue;
      for (int j : inputs[d]) via[d] += j == k ? 1.0 : group[j] == kDead ? via[j] : 0.0;
    }
  };
  // What a forced re-creation costs at least at a weight lambda (mu = 0): paged (paged_j)
  // or recomputed.
  auto forced_j = [&](const Forced& f, double lambda) {
    const double recomputed_j = allowed.recompute ? recompute_j(f.node, lambda) : kNever;
    return std::min(recomputed_j, paged_j(f.node, f.moment, f.until, lambda, 0.0));
  };
  // The window between reads holding moment t in which output i is certain to be away at
  // some moment (its absence at t then costs nothing more), or none.
  auto window_of = [&](int i, int t) -> const Forced* {
    for (const Forced& f : forced)
      if (f.node == i && f.after < t && t < f.until) return &f;
    return nullptr;
  };
  // What the forced re-creations cost at least, all together.
  auto certain_at = [&](double lambda) {
    double sum_j = 0;
    for (const Forced& f : forced) sum_j += forced_j(f, lambda);
    return sum_j;
  };
  // The largest extra energy over the moments and `worst_extra_j`, each weight of `weights` in
  // turn; with `with_forced`, those with mu = 0 (mu prices page-outs before the moment, and a
  // forced one may come after it), each moment's knapsack plus certain_at() with the forced
  // absences free. Records the forced absences when asked.
  auto scan = [&](bool with_forced, bool find_forced, double worst_extra_j) {
    for (int t = 0; t < n; ++t) {
      std::fill(group.begin(), group.begin() + t + 1, kDead);
      group[t] = kNeeded;
      const uint64_t needed_bytes = working_bytes[t];
      for (int i : inputs[t]) group[i] = kNeeded;
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
      for (int d = t - 1; d >= 0; --d) {
        paths[d] = sharers[d] = 0;
        if (group[d] != kDead || !allowed.recompute) continue;
        for (int u : users[d]) {
          if (u >= t) continue;
          if (group[u] == kLive) ++sharers[d];
          paths[d] += group[u] == kLive ? 1.0 : group[u] == kDead ? paths[u] : 0.0;
        }
      }

      const double shortfall = static_cast<double>(needed_bytes + live_bytes - budget_bytes);
      if (find_forced) {
        for (int j = 0; j < t; ++j) {
          if (group[j] != kLive) continue;
          const double others = static_cast<double>(live_bytes - graph.nodes[j].output_bytes);
          if (others >= shortfall) continue;
          int after = j, until = last_use[j];
          for (int u : users[j]) {
            if (u < t) after = std::max(after, u);
            if (u > t) until = std::min(until, u);
          }
          if (page_j[j] >= kNever && !allowed.recompute) continue;
          const auto same = std::find_if(forced.begin(), forced.end(),
                                         [&](const Forced& f) { return f.node == j && f.until == until; });
          if (same == forced.end()) forced.push_back({j, t, t, after, until});
          else same->last_moment = t;
        }
      }
      for (const auto [lambda, mu, deep] : weights) {
        if (with_forced && mu != 0.0) continue;
        const double certain_j = with_forced ? certain_at(lambda) : 0.0;
        // Each live output offers ways to free its bytes at a cost: page it (its bytes, the
        // transfers' energy) or recompute it later. A recomputation needs each dead input
        // either kept (its bytes back) or had again: paged, or recomputed in turn, which needs
        // that one's dead inputs, and so on up the graph. A dead output reached by several
        // paths is charged a share 1 / paths on each, so that keeping or re-creating it is
        // never charged more than once. The cheapest cost of freeing b bytes of one output is
        // the lower convex hull of those options; a fractional knapsack over all hull segments
        // bounds the total.
        if (allowed.recompute) {
          for (int d = 0; d < t; ++d) {
            if ((deep ? paths[d] : sharers[d]) == 0) continue;
            const double share = 1.0 / (deep ? paths[d] : sharers[d]);
            const auto& node = graph.nodes[d];
            options.clear();
            options.push_back({-static_cast<double>(node.output_bytes) * share, 0.0});
            if (page_j[d] < kNever) options.push_back({0.0, (page_j[d] + mu * idle_w * node.pageout_time_s) * share});
            parts.clear();
            if (deep)
              for (int k : inputs[d])
                if (group[k] == kDead) parts.push_back(&dead_chain[k]);
            minkowski_sum({0.0, recompute_j(d, lambda) * share}, parts, scratch, options);
            lower_chain(options, dead_chain[d]);
            coarsen(dead_chain[d]);
          }
        }
        knapsack.clear();
        // A tensor certain to be away at a later moment m of its window (`Forced`) and away
        // now too is present before m only if re-created once more: its certain
        // re-creation comes after m. A live output whose next read is by m and whose
        // recomputation needs that tensor (directly or through dead outputs) is taken with it
        // as one item: freeing both costs the extra re-creation, or the output's page.
        // ResNet-18's stem: the convolution output is away during the stem's backward pass,
        // and the ReLU output read there is recomputed from it through the dead batch-norm
        // output; the two cannot both be away in the forward pass for the ReLU's cost alone.
        std::fill(paired.begin(), paired.begin() + t, -1);
        pair_k.clear();
        if (with_forced && deep && allowed.recompute) {
          for (const Forced& f : forced) {
            const int k = f.node;
            if (group[k] != kLive || paired[k] >= 0 || !(f.after < t && t < f.last_moment)) continue;
            paths_to(k, t);
            int partner = -1, count = 0;
            for (int x = 0; x < t; ++x)
              if (x != k && group[x] == kLive && paired[x] < 0 && via[x] > 0 && next_read(x, t) <= f.last_moment) {
                partner = x;
                ++count;
              }
            if (count != 1) continue;
            paired[k] = partner;
            paired[partner] = k;
            pair_k.push_back(k);
          }
        }
        // The first pair whose output is recomputed from one dead output that only it reads,
        // itself recomputed from the certain tensor alone (conv, batch norm, ReLU), has few
        // ways, all known: each is tried in turn below (`exact`) rather than taken in part
        // along a hull, where freeing the certain tensor at no cost and both at the extra
        // re-creation would blend into a cheap fraction of the ReLU output.
        exact.clear();
        for (int k : pair_k) {
          const int x = paired[k];
          const double k_bytes = static_cast<double>(graph.nodes[k].output_bytes);
          const double x_bytes = static_cast<double>(graph.nodes[x].output_bytes);
          const int dead = inputs[x].size() == 1 ? inputs[x][0] : -1;
          if (exact.empty() && dead >= 0 && group[dead] == kDead && paths[dead] == 1 && inputs[dead].size() == 1 &&
              inputs[dead][0] == k) {
            const double d_bytes = static_cast<double>(graph.nodes[dead].output_bytes);
            const double again_j = std::min(page_in_j[k], recompute_j(k, lambda));
            const Forced* x_window = window_of(x, t);
            const double certain_x_j = x_window ? forced_j(*x_window, lambda) : 0.0;
            const double paged_x_j = paged_j(x, t, next_read(x, t), lambda, mu);
            const double x_j = recompute_j(x, lambda);
            exact.push_back({0.0, 0.0});
            exact.push_back({k_bytes, 0.0});  // k alone: away now at no cost (its one re-creation is certain)
            // x away (with k kept, or both away): paged; or recomputed with the dead input kept,
            // paged, or recomputed from k (kept, or had again).
            for (const double k_away : {0.0, k_bytes}) {
              if (paged_x_j < kNever) exact.push_back({x_bytes + k_away, paged_x_j});
              exact.push_back({x_bytes + k_away - d_bytes, x_j});
              if (page_j[dead] < kNever) exact.push_back({x_bytes + k_away, x_j + page_j[dead]});
              exact.push_back({x_bytes + k_away, x_j + recompute_j(dead, lambda) + (k_away > 0 ? again_j : 0.0)});
            }
            // x certain to be away itself: its one re-creation is charged already.
            for (std::size_t w = 2; w < exact.size(); ++w)
              exact[w].cost_j = std::max(0.0, exact[w].cost_j - certain_x_j);
            continue;
          }
          paths_to(k, t);
          // k had again before the moment it is away at: paged, or recomputed (its own
          // inputs taken as at hand), a share on each path to it.
          const double again_j = std::min(page_in_j[k], recompute_j(k, lambda)) / via[x];
          for (int d = 0; d < x; ++d) {
            if (group[d] != kDead || via[d] == 0) continue;
            const double share = 1.0 / paths[d];
            const auto& node = graph.nodes[d];
            options.clear();
            options.push_back({-static_cast<double>(node.output_bytes) * share, 0.0});
            if (page_j[d] < kNever) options.push_back({0.0, (page_j[d] + mu * idle_w * node.pageout_time_s) * share});
            parts.clear();
            bool direct = false;
            for (int j : inputs[d]) {
              if (j == k) direct = true;
              else if (group[j] == kDead) parts.push_back(via[j] > 0 ? &without_k[j] : &dead_chain[j]);
            }
            minkowski_sum({0.0, recompute_j(d, lambda) * share + (direct ? again_j : 0.0)}, parts, scratch, options);
            lower_chain(options, without_k[d]);
            coarsen(without_k[d]);
          }
          options.clear();
          options.push_back({k_bytes, 0.0});  // k alone: away now at no cost (its one re-creation is certain)
          // x alone, k kept for its recomputation.
          const double paged_x_j = paged_j(x, t, next_read(x, t), lambda, mu);
          if (paged_x_j < kNever) options.push_back({x_bytes, paged_x_j});
          parts.clear();
          for (int j : inputs[x])
            if (group[j] == kDead) parts.push_back(&dead_chain[j]);
          minkowski_sum({x_bytes, recompute_j(x, lambda)}, parts, scratch, options);
          // Both away: x paged, or recomputed with k had again.
          both.clear();
          if (paged_x_j < kNever) both.push_back({x_bytes + k_bytes, paged_x_j});
          parts.clear();
          bool direct = false;
          for (int j : inputs[x]) {
            if (j == k) direct = true;
            else if (group[j] == kDead) parts.push_back(via[j] > 0 ? &without_k[j] : &dead_chain[j]);
          }
          minkowski_sum({x_bytes + k_bytes, recompute_j(x, lambda) + (direct ? again_j : 0.0)}, parts, scratch, both);
          // x certain to be away itself: its one re-creation (the cheaper of its page and its
          // recomputation alone) is charged already, so that much comes off each way, and x
          // alone costs nothing more.
          if (const Forced* x_window = window_of(x, t)) {
            const double certain_x_j = forced_j(*x_window, lambda);
            options.push_back({x_bytes, 0.0});
            for (Point& p : both) p.cost_j = std::max(0.0, p.cost_j - certain_x_j);
          }
          options.insert(options.end(), both.begin(), both.end());
          const std::size_t hull_from = knapsack.hull.size();
          append_hull_segments(options, knapsack.hull);
          knapsack.add(options, hull_from, false);
        }
        for (int i = 0; i < t; ++i) {
          if (group[i] != kLive || paired[i] >= 0) continue;
          const auto& node = graph.nodes[i];
          const double bytes = static_cast<double>(node.output_bytes);
          options.clear();
          if (with_forced && window_of(i, t)) options.push_back({bytes, 0.0});
          if (const double cost_j = paged_j(i, t, next_read(i, t), lambda, mu); cost_j < kNever)
            options.push_back({bytes, cost_j});
          if (allowed.recompute) {
            parts.clear();
            for (int j : inputs[i])
              if (group[j] == kDead) parts.push_back(&dead_chain[j]);
            minkowski_sum({bytes, recompute_j(i, lambda)}, parts, scratch, options);
          }
          const std::size_t hull_from = knapsack.hull.size();
          append_hull_segments(options, knapsack.hull);
          knapsack.add(options, hull_from, !allowed.recompute || parts.empty());
        }
        const double hidden_j = mu * idle_w * own_sum_s(1, t - 1);
        double least_j = kNever;
        if (exact.empty()) {
          least_j = knapsack.least_j(shortfall, worst_extra_j + hidden_j - certain_j);
        } else {
          for (const Point& way : exact)
            least_j = std::min(least_j, way.cost_j + (shortfall - way.bytes <= 0
                                                          ? 0.0
                                                          : knapsack.least_j(shortfall - way.bytes,
                                                                             worst_extra_j + hidden_j - certain_j -
                                                                                 way.cost_j)));
        }
        // Bytes left over when every option is used: no schedule exists (reported elsewhere),
        // or, at lambda < 1, paging is impossible here, which lambda = 1 does not assume.
        if (least_j < kNever) worst_extra_j = std::max(worst_extra_j, certain_j + least_j - hidden_j);
      }
    }
    return worst_extra_j;
  };
  double worst_extra_j = scan(false, allowed.recompute || allowed.paging, 0.0);
  // Starting from what the first scan found, a moment's knapsack is bounded both ways only
  // where that could raise the answer.
  if (!forced.empty()) worst_extra_j = scan(true, false, worst_extra_j);
  return one_pass + worst_extra_j;
}

}  // namespace ergon::planner
