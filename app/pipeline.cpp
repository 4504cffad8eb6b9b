#include "app/pipeline.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <memory>
#include <string_view>
#include <tuple>

#include "app/board_costs.h"
#include "app/plan.h"
#include "app/quantities.h"
#include "common/error.h"
#include "costdb/cost_model.h"
#include "costdb/costs.h"
#include "costdb/database.h"
#include "devices/board_profile.h"
#include "devices/link_profile.h"
#include "planner/milp.h"
#include "planner/onnx_import.h"
#include "planner/planners.h"
#include "planner/zoo.h"
#include "runtime/executor.h"

namespace ergon::app {
namespace {

struct ResolvedLink {
  planner::LinkCost cost;
  PipelineLink link;
  std::string missing;  ///< why its energy is a lower bound; empty when it is not
};

/// Link s (boards[s] to boards[s + 1]) of `kind`: measured where --db holds link costs of
/// that kind for either board (ergon record --link-test), published figures otherwise. A
/// board-to-board link runs at the slower of what its ends measured against their hosts;
/// its energy per byte is each end's own (the mean of its send and receive fits), from the
/// published figure where an end was not measured, and named missing where neither says.
ResolvedLink resolve_link(const PipelineArgs& args, int s, const std::string& kind,
                          const std::vector<costdb::LinkCostFit>& measured) {
  ResolvedLink r;
  r.link.kind = kind;
  const std::string& a = args.boards[s];
  const std::string& b = args.boards[s + 1];
  std::vector<const costdb::LinkCostFit*> fits_a, fits_b;
  for (const auto& f : measured) {
    if (f.link != kind) continue;
    if (f.board_kind == a) fits_a.push_back(&f);
    if (f.board_kind == b) fits_b.push_back(&f);
  }
  const bool published = std::any_of(devices::link_profiles().begin(), devices::link_profiles().end(),
                                     [&](const devices::LinkProfile& p) { return p.name == kind; });
  if (fits_a.empty() && fits_b.empty() && !published)
    throw InputError("link '" + kind + "' is neither published (" + devices::link_names() +
                     ") nor measured for " + a + " or " + b + " in " +
                     (args.db.empty() ? std::string("a --db") : args.db) +
                     " (ergon record --link-test --link-kind " + kind + ")");
  const std::optional<devices::LinkProfile> p =
      published ? std::optional<devices::LinkProfile>(devices::link_named(kind)) : std::nullopt;
  planner::LinkCost& c = r.cost;
  if (fits_a.empty() && fits_b.empty()) {
    c = planner::LinkCost{p->bytes_per_s, p->latency_s, p->full_duplex, 0, 0};
    for (auto src : p->sources) r.link.sources.emplace_back(src);
  } else {
    c.bytes_per_s = std::numeric_limits<double>::infinity();
    c.latency_s = 0;
    c.full_duplex = p ? p->full_duplex : true;
    for (const auto& fits : {fits_a, a == b ? std::vector<const costdb::LinkCostFit*>{} : fits_b})
      for (const auto* f : fits) {
        c.bytes_per_s = std::min(c.bytes_per_s, f->bandwidth_bytes_per_s);
        c.latency_s = std::max(c.latency_s, f->latency_s);
        r.link.sources.push_back(fmt::format(
            "measured: {} {} over {} in {}{}: {:.4g} MB/s, {:.3g} ms one way, {} per byte above idle ({} sizes, "
            "{} run(s))",
            f->board_kind, f->direction, kind, args.db, f->power_mode.empty() ? "" : " (" + f->power_mode + ")",
            f->bandwidth_bytes_per_s / 1e6, f->latency_s * 1e3,
            f->energy_j_per_byte ? fmt::format("{:.3g} J", *f->energy_j_per_byte) : std::string("no energy"),
            f->sizes, f->runs));
      }
  }
  // Each end's energy per byte: measured, else published, else missing.
  auto end_energy = [&](const std::vector<const costdb::LinkCostFit*>& fits, const std::optional<double>& pub)
      -> std::optional<double> {
    double sum = 0;
    int n = 0;
    for (const auto* f : fits) {
      if (!f->energy_j_per_byte) return pub;  // measured without power samples: what is published, if anything
      sum += *f->energy_j_per_byte;
      ++n;
    }
    if (n > 0) return sum / n;
    return pub;
  };
  if (args.link_energy_j_per_byte) {
    c.tx_j_per_byte = c.rx_j_per_byte = *args.link_energy_j_per_byte;
    r.link.energy_j_per_byte = 2 * *args.link_energy_j_per_byte;
    r.link.sources.emplace_back(
        fmt::format("energy: {:.4g} J per byte each end, as given (--link-energy)", *args.link_energy_j_per_byte));
    return r;
  }
  const auto ea = end_energy(fits_a, p ? p->tx_j_per_byte : std::nullopt);
  const auto eb = end_energy(fits_b, p ? p->rx_j_per_byte : std::nullopt);
  c.tx_j_per_byte = ea.value_or(0);
  c.rx_j_per_byte = eb.value_or(0);
  if (ea && eb) {
    r.link.energy_j_per_byte = *ea + *eb;
  } else {
    // Only what is measured or published is counted; the rest is named as missing.
    std::string ends;
    if (!ea) ends += a;
    if (!eb) ends += (ends.empty() ? "" : " and ") + b;
    r.missing = fmt::format("link {} ({} to {}, {}): no published energy per byte (none measured either) for {}", s, a, b,
                            kind, ends);
  }
  return r;
}

using Clock = std::chrono::steady_clock;

/// How a stage left unplanned for want of time says so (never memoised: not a verdict).
constexpr std::string_view kNotPlanned = "not planned";

/// Everything a pipeline plan needs, built once: the model, each board's costs and budget,
/// the links, and the stages planned so far.
class Pipeline {
 public:
  explicit Pipeline(const PipelineArgs& args) : args_(args), start_(Clock::now()) {
    const int S = static_cast<int>(args.boards.size());
    if (S < 1) throw InputError("--boards needs at least one board (e.g. pi4,pi4)");
    if (args.microbatches < 1) throw InputError("--microbatches must be at least 1");
    if (args.batch < 1) throw InputError("--batch must be at least 1");
    if (!(args.time_limit_s > 0)) throw InputError("--time-limit must be positive");
    if (args.planner != "poet" && args.planner != "store-all")
      throw InputError("a stage's planner is poet or store-all, not '" + args.planner + "'");
    const auto order = planner::parse_pipeline_order(args.order);
    if ((args.model.empty()) == (args.onnx_file.empty()))
      throw InputError("give exactly one of --model NAME (see ergon models) or --onnx FILE");
    forward_ = args.model.empty() ? planner::import_onnx(args.onnx_file, args.batch, args.onnx_inputs)
                                  : planner::zoo_model(args.model, args.batch);
    if (!args.budgets.empty() && args.budgets.size() != 1 && static_cast<int>(args.budgets.size()) != S)
      throw InputError(fmt::format("--budget takes one budget for every board or one per board ({}), not {}", S,
                                   args.budgets.size()));
    const Deadline deadline = Deadline::parse(args.deadline);
    if (deadline.kind == Deadline::Kind::kFactor)
      throw InputError("a pipeline's deadline is in seconds per batch (e.g. 2.5s), not a factor");
    request_.deadline_s = deadline.seconds(0);
    for (int s = 0; s < S; ++s) {
      PlanArgs a;
      a.board = args.boards[s];
      a.db = args.db;
      a.objective = "total";
      if (!args.power_modes.empty() && args.power_modes.size() != 1 && static_cast<int>(args.power_modes.size()) != S)
        throw InputError(fmt::format("--power-mode takes one mode for every board or one per board ({}), not {}", S,
                                     args.power_modes.size()));
      const std::string mode = args.power_modes.empty()        ? std::string()
                               : args.power_modes.size() == 1 ? args.power_modes[0]
                                                              : args.power_modes[s];
      std::vector<std::pair<std::string, BoardCosts>> modes;
      for (const std::string& m : modes_of(a, mode)) {
        a.power_mode = m;
        modes.emplace_back(m, board_costs(a));
      }
      costs_.push_back(std::move(modes));
      // Power modes scale compute; idle power is the board's in every mode.
      request_.idle_w.push_back(costs_.back().front().second.model->idle_power_w());
      const auto profile = devices::find_board(a.board);
      const std::string text = args.budgets.empty() ? "100%" : args.budgets.size() == 1 ? args.budgets[0] : args.budgets[s];
      const Budget budget = Budget::parse(text);
      if (budget.percent() && !profile)
        throw InputError("board '" + a.board + "' has no published RAM size: give its --budget in bytes");
      budgets_.push_back(budget.bytes(profile ? profile->ram_bytes : 0));
    }
    if (!args.links.empty() && static_cast<int>(args.links.size()) != S - 1)
      throw InputError(fmt::format("{} boards need {} link(s) in --links, not {}", S, S - 1, args.links.size()));
    std::vector<costdb::LinkCostFit> measured;
    if (!args.db.empty() && costdb::database_exists(args.db)) {
      auto db = costdb::Database::open_read_only(args.db);
      measured = costdb::list_link_costs(db, std::nullopt);
    }
    for (int s = 0; s + 1 < S; ++s) {
      const auto kind = args.links.empty() ? std::string(devices::default_link(args.boards[s], args.boards[s + 1]))
                                           : args.links[s];
      auto [c, link, missing] = resolve_link(args, s, kind, measured);
      if (!missing.empty()) missing_.push_back(std::move(missing));
      request_.links.push_back(c);
      links_.push_back(std::move(link));
    }
    request_.ops = static_cast<int>(forward_.ops.size());
    request_.cuts = planner::cut_points(forward_);
    request_.microbatches = args.microbatches;
    request_.order = order;
    request_.throughput = args.throughput;
    request_.out_of_time = [this] { return elapsed_s() >= args_.time_limit_s; };
    solver_ = planner::make_cbc_solver();
  }

  [[nodiscard]] double elapsed_s() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }
  planner::SplitRequest& request() { return request_; }

  planner::StageCost evaluate(int s, int first, int end) {
    const auto key = std::tuple{s, first, end};
    if (const auto it = memo_.find(key); it != memo_.end()) return it->second.first;
    auto [cost, stage] = plan_stage(s, first, end, /*bound_only=*/false);
    if (!cost.why.starts_with(kNotPlanned)) memo_[key] = {cost, stage};
    return cost;
  }
  /// The stage exactly where that is quick (store-all fits, or nothing can), else store-all's
  /// costs as a lower bound (planned only if a best split needs it).
  planner::StageCost bound(int s, int first, int end) {
    const auto key = std::tuple{s, first, end};
    if (const auto it = memo_.find(key); it != memo_.end()) return it->second.first;
    auto [cost, stage] = plan_stage(s, first, end, /*bound_only=*/true);
    if (cost.exact) memo_[key] = {cost, stage};
    return cost;
  }

  /// `modes`: each stage's mode (tune_modes()); empty: as the split search chose them.
  PipelineOutcome outcome(planner::SplitPrediction prediction, const std::vector<std::size_t>& modes = {}) {
    PipelineOutcome o;
    o.model = forward_.name;
    o.forward = std::make_shared<const planner::ForwardGraph>(forward_);
    o.ops = request_.ops;
    o.cuts = request_.cuts;
    o.order = planner::to_string(request_.order);
    o.microbatches = request_.microbatches;
    for (int s = 0; s + 1 < static_cast<int>(prediction.bounds.size()); ++s) {
      const auto key = std::tuple{s, prediction.bounds[s], prediction.bounds[s + 1]};
      const auto& stage = modes.empty() ? memo_.at(key).second
                                        : mode_memo_.at({s, prediction.bounds[s], prediction.bounds[s + 1],
                                                         modes[static_cast<std::size_t>(s)]})
                                              .second;
      if (!stage) throw Error("internal error: the chosen split's stage " + std::to_string(s) + " has no plan");
      o.stages.push_back(*stage);
    }
    for (std::size_t l = 0; l < links_.size(); ++l) {
      PipelineLink link = links_[l];
      for (const auto& c : request_.cuts)
        if (c.op == prediction.bounds[l + 1]) link.bytes = c.bytes;
      const auto& lc = request_.links[l];
      link.transfer_s = lc.latency_s + static_cast<double>(link.bytes) / lc.bytes_per_s;
      o.links.push_back(std::move(link));
    }
    o.prediction = std::move(prediction);
    o.missing_link_energy = missing_;
    o.wall_s = elapsed_s();
    return o;
  }

  std::vector<int> equal() const { return planner::equal_split(request_); }

  /// With several modes per board: each board's mode tried in turn with the others fixed,
  /// every trial's timeline simulated exactly, kept while the batch gets cheaper (a stage off
  /// the critical path may run slower and draw less). Returns the prediction, improved or not.
  struct Tuned {
    planner::SplitPrediction prediction;
    std::vector<std::size_t> modes;  ///< per stage; empty with one mode per board
  };
  [[nodiscard]] bool timed_out() const { return timed_out_; }
  [[nodiscard]] bool several_modes() const {
    return std::any_of(costs_.begin(), costs_.end(), [](const auto& modes) { return modes.size() > 1; });
  }
  /// From here on the split search costs every board in its first mode only.
  void first_modes_only() {
    only_first_mode_ = true;
    memo_.clear();
  }
  Tuned tune_modes(planner::SplitPrediction best) {
    const int S = static_cast<int>(costs_.size());
    std::vector<std::size_t> mode(static_cast<std::size_t>(S), 0);
    if (!several_modes()) return {std::move(best), {}};
    for (int s = 0; s < S; ++s) {
      const std::string& chosen = memo_.at({s, best.bounds[s], best.bounds[s + 1]}).second->power_mode;
      for (std::size_t m = 0; m < costs_[s].size(); ++m)
        if (costs_[s][m].first == chosen) mode[s] = m;
    }
    const auto score = [&](const planner::SplitPrediction& p) {
      return request_.throughput ? p.makespan_s : p.energy_j();
    };
    for (bool improved = true; improved && !request_.out_of_time();) {
      improved = false;
      for (int s = 0; s < S; ++s)
        for (std::size_t m = 0; m < costs_[s].size(); ++m) {
          if (m == mode[s]) continue;
          std::vector<std::size_t> trial = mode;
          trial[s] = m;
          const auto p = planner::predict_split(request_, best.bounds, [&](int k, int first, int end) {
            return mode_cost(k, first, end, trial[k]);
          });
          if (!p || p->makespan_s > request_.deadline_s || score(*p) >= score(best) * (1 - 1e-12)) continue;
          best = *p;
          mode = trial;
          improved = true;
        }
    }
    for (int s = 0; s < S; ++s) mode_cost(s, best.bounds[s], best.bounds[s + 1], mode[s]);  // for outcome()
    return {std::move(best), std::move(mode)};
  }

 private:
  /// The modes a board is planned in: `mode` itself, or with "auto" each mode measured in the
  /// database, else each of its profile's (as ergon plan --power-mode auto chooses).
  static std::vector<std::string> modes_of(const PlanArgs& a, const std::string& mode) {
    if (mode != "auto") return {mode};
    std::vector<std::string> modes;
    if (!a.db.empty() && costdb::database_exists(a.db)) {
      auto db = costdb::Database::open_read_only(a.db);
      modes = costdb::measured_power_modes(db, a.board);
    }
    if (modes.empty())
      if (const auto profile = devices::find_board(a.board))
        for (const auto& m : profile->power_modes) modes.emplace_back(m.name);
    if (modes.empty()) throw InputError("board " + a.board + " has no power modes to choose from");
    return modes;
  }

  /// What the split search weighs a stage by, locally: its energy above idle for the batch
  /// plus every board's idle power over its time (or its time alone, for --throughput).
  [[nodiscard]] double weight(const planner::StageCost& c) const {
    const double busy_s = c.times.forward_s + c.times.backward_s;
    if (request_.throughput) return busy_s;
    double idle_w = 0;
    for (double w : request_.idle_w) idle_w += w;
    return request_.microbatches * c.dynamic_j + idle_w * busy_s;
  }

  /// The stage in each of its board's modes: the one that weighs least. A bound stays a
  /// bound: each time and the energy at their least over the modes.
  std::pair<planner::StageCost, std::optional<PipelineStage>> plan_stage(int s, int first, int end, bool bound_only) {
    std::optional<std::pair<planner::StageCost, std::optional<PipelineStage>>> best;
    std::optional<planner::StageCost> lower;
    bool exact = true;
    std::string why;
    for (std::size_t m = 0; m < (only_first_mode_ ? 1 : costs_[s].size()); ++m) {
      // Each mode's exact plan is kept: tune_modes() and outcome() use these very plans.
      const auto key = std::tuple{s, first, end, m};
      const auto known = mode_memo_.find(key);
      auto candidate = known != mode_memo_.end() ? known->second : plan_stage_in_mode(s, first, end, bound_only, m);
      if (known == mode_memo_.end() && candidate.first.exact && !candidate.first.why.starts_with(kNotPlanned))
        mode_memo_[key] = candidate;
      const planner::StageCost& c = candidate.first;
      if (!c.feasible) {
        if (why.empty()) why = c.why;
        continue;
      }
      exact = exact && c.exact;
      if (!lower) {
        lower = c;
      } else {
        lower->times.forward_s = std::min(lower->times.forward_s, c.times.forward_s);
        lower->times.backward_s = std::min(lower->times.backward_s, c.times.backward_s);
        lower->dynamic_j = std::min(lower->dynamic_j, c.dynamic_j);
      }
      if (!best || weight(c) < weight(best->first)) best = std::move(candidate);
    }
    if (!best) return {planner::StageCost{false, why, {}, 0}, std::nullopt};
    if (!exact) {
      lower->exact = false;
      return {*lower, best->second};
    }
    return *best;
  }

  planner::StageCost mode_cost(int s, int first, int end, std::size_t mode) {
    const auto key = std::tuple{s, first, end, mode};
    if (const auto it = mode_memo_.find(key); it != mode_memo_.end()) return it->second.first;
    auto entry = plan_stage_in_mode(s, first, end, /*bound_only=*/false, mode);
    if (!entry.first.why.starts_with(kNotPlanned)) mode_memo_[key] = entry;
    return entry.first;
  }

  std::pair<planner::StageCost, std::optional<PipelineStage>> plan_stage_in_mode(int s, int first, int end,
                                                                                bool bound_only, std::size_t mode) {
    const int S = static_cast<int>(args_.boards.size());
    const BoardCosts& costs = costs_[s][mode].second;
    const planner::TrainingGraph graph = planner::build_stage_graph(forward_, first, end, *costs.model);
    PipelineStage st;
    st.board = args_.boards[s];
    st.power_mode = costs_[s][mode].first;
    st.cost_source = costs.source;
    st.first_op = first;
    st.end_op = end;
    st.first_name = forward_.ops[first].name;
    st.last_name = forward_.ops[end - 1].name;
    st.in_flight = planner::in_flight(s, S, request_.microbatches, request_.order);
    st.budget_bytes = budgets_[s];
    st.fixed_bytes = graph.fixed_bytes;
    st.input_bytes = first > 0 ? forward_.ops[first - 1].output_bytes : 0;
    st.nodes = graph.size();
    st.graph = graph;
    st.idle_w = graph.idle_power_w;
    const uint64_t m = static_cast<uint64_t>(st.in_flight);
    const uint64_t extra = st.fixed_bytes + m * st.input_bytes;
    auto fail = [](std::string why) { return std::pair{planner::StageCost{false, std::move(why), {}, 0}, std::optional<PipelineStage>()}; };
    if (extra > st.budget_bytes)
      return fail(fmt::format("{}'s budget of {} B is less than the {} B of parameters, gradients and optimizer "
                              "state{}",
                              st.board, st.budget_bytes, extra,
                              st.input_bytes ? fmt::format(" with {} received activations", m) : ""));
    auto accept = [&](const planner::Schedule& schedule, const planner::ScheduleReport& rep, std::string planner_name,
                      double gap) {
      st.schedule = schedule;
      st.sim = rep;
      st.peak_bytes = rep.peak_bytes;
      st.stash_bytes = rep.stash_bytes;
      st.memory_bytes = extra + rep.peak_bytes + (m - 1) * rep.stash_bytes;
      st.planner = std::move(planner_name);
      st.gap = gap;
      planner::StageCost c;
      c.feasible = true;
      c.times = {rep.forward_end_s, rep.makespan_s - rep.forward_end_s};
      c.dynamic_j = std::max(0.0, rep.total_energy_j - graph.idle_power_w * rep.makespan_s);
      return std::pair{c, std::optional<PipelineStage>(st)};
    };
    const planner::Schedule all = planner::store_all_schedule(graph);
    const planner::ScheduleReport sa = planner::simulate(graph, all);
    const auto fits = [&](const planner::ScheduleReport& r) {
      return extra + r.peak_bytes + (m - 1) * r.stash_bytes <= st.budget_bytes;
    };
    // Store-all runs every node once and pages nothing: when it fits, nothing costs less.
    if (fits(sa)) return accept(all, sa, "store-all", 0);
    const uint64_t store_all_bytes = extra + sa.peak_bytes + (m - 1) * sa.stash_bytes;
    if (args_.planner == "store-all")
      return fail(fmt::format("store-all needs {} B with {} micro-batch(es) in flight, over {}'s budget of {} B",
                              store_all_bytes, m, st.board, st.budget_bytes));
    // Plan under what the stashes of the other micro-batches in flight leave. Several shares
    // are tried, from store-all's stash down to an eighth; each is also the most the plan may
    // stash itself (PlanRequest::stash_budget_bytes), and the cheapest schedule that fits
    // with its own stash is kept.
    const uint64_t min_ws = graph.min_working_set_bytes();
    if (bound_only && extra + min_ws <= st.budget_bytes) {
      // Every schedule runs each node once at least and pages on top: store-all's times and
      // energy bound this stage's from below.
      auto lower = accept(all, sa, "store-all", 0);
      lower.first.exact = false;
      return lower;
    }
    std::string why = fmt::format("needs more than {}'s budget of {} B with {} micro-batch(es) in flight "
                                  "(its weights and its largest node's working set alone need {} B)",
                                  st.board, st.budget_bytes, m, min_ws + extra);
    std::optional<std::pair<planner::StageCost, std::optional<PipelineStage>>> best;
    std::optional<uint64_t> tried_activations;
    for (const uint64_t stash : {sa.stash_bytes, sa.stash_bytes / 2, sa.stash_bytes / 4, sa.stash_bytes / 8,
                                 uint64_t{0}}) {
      if (extra + (m - 1) * stash >= st.budget_bytes) continue;
      const uint64_t activations = st.budget_bytes - extra - (m - 1) * stash;
      if (activations < min_ws || activations == tried_activations) continue;
      tried_activations = activations;
      if (request_.out_of_time && request_.out_of_time()) {
        timed_out_ = true;
        why = std::string(kNotPlanned) + ": --time-limit ran out before this stage was planned";
        break;
      }
      planner::PlanRequest req;
      req.objective = planner::Objective::kTotal;
      req.budget_bytes = activations;
      req.activations_only = true;
      // Fits with its own stash (and m - 1 others' in flight) when its stash is at most the
      // share. The last share (none) plans under the whole room, its stash left to fits().
      if (m > 1 && stash > 0) req.stash_budget_bytes = stash;
      req.deadline_s = std::numeric_limits<double>::infinity();
      req.relative_gap = kProfileGap;
      req.baseline_may_answer = false;  // a baseline's cheaper schedule may hold a larger stash
      req.threads = args_.threads;
      req.time_limit_s = std::clamp((args_.time_limit_s - elapsed_s()) / 40, 0.1, 5.0);
      const planner::PlanResult r = planner::run_planner(args_.planner, graph, req, *solver_);
      if (!r.schedule) {
        why = r.why;
        continue;
      }
      const planner::ScheduleReport rep = planner::simulate(graph, *r.schedule, activations);
      if (!rep.valid) throw Error("internal error: a stage's schedule fails the simulator: " + rep.error);
      if (!fits(rep)) continue;
      auto candidate = accept(*r.schedule, rep, args_.planner, r.gap);
      const auto total = [&](const planner::StageCost& c) {
        return c.dynamic_j + graph.idle_power_w * (c.times.forward_s + c.times.backward_s);
      };
      if (!best || total(candidate.first) < total(best->first)) best = std::move(candidate);
    }
    if (best) return *best;
    return fail(why);
  }

  PipelineArgs args_;
  Clock::time_point start_;
  planner::ForwardGraph forward_;
  std::vector<std::vector<std::pair<std::string, BoardCosts>>> costs_;  ///< per board, per mode
  std::vector<uint64_t> budgets_;
  std::vector<PipelineLink> links_;
  std::vector<std::string> missing_;
  planner::SplitRequest request_;
  std::unique_ptr<planner::MilpSolver> solver_;
  std::map<std::tuple<int, int, int>, std::pair<planner::StageCost, std::optional<PipelineStage>>> memo_;
  std::map<std::tuple<int, int, int, std::size_t>, std::pair<planner::StageCost, std::optional<PipelineStage>>>
      mode_memo_;
  bool only_first_mode_ = false;
  bool timed_out_ = false;  ///< a stage went unplanned for want of time
};

}  // namespace

PipelineOutcome plan_pipeline(const PipelineArgs& args, const PipelineProgress& progress) {
  Pipeline p(args);
  p.request().progress = progress.on_stage;
  auto search = [&] {
    return planner::best_split(p.request(), [&](int s, int first, int end) { return p.evaluate(s, first, end); },
                               [&](int s, int first, int end) { return p.bound(s, first, end); });
  };
  const planner::SplitResult r = search();
  if (!r.best) throw InputError("no pipeline of " + args.model + args.onnx_file + " over these boards: " + r.why);
  std::size_t evaluated = r.stages_evaluated, simulated = r.splits_simulated, refined = r.stages_refined;
  Pipeline::Tuned best = p.tune_modes(*r.best);
  bool stopped_second = false;
  if (p.several_modes()) {
    // The search weighs each stage's mode locally; the split found with every board in its
    // first (fastest) mode, then tuned, may cost less. The cheaper of the two stands.
    p.first_modes_only();
    const planner::SplitResult d = search();
    evaluated += d.stages_evaluated;
    simulated += d.splits_simulated;
    refined += d.stages_refined;
    stopped_second = d.stopped_early;
    if (d.best) {
      Pipeline::Tuned other = p.tune_modes(*d.best);
      const auto score = [&](const planner::SplitPrediction& x) { return args.throughput ? x.makespan_s : x.energy_j(); };
      if (score(other.prediction) < score(best.prediction)) best = std::move(other);
    }
  }
  PipelineOutcome o = p.outcome(std::move(best.prediction), best.modes);
  o.stages_evaluated = evaluated;
  o.splits_simulated = simulated;
  o.stages_refined = refined;
  o.stopped_early = r.stopped_early || stopped_second || p.timed_out();
  return o;
}

PipelineOutcome predict_pipeline(const PipelineArgs& args, const std::vector<int>& starts) {
  Pipeline p(args);
  if (starts.size() + 1 != args.boards.size())
    throw InputError(fmt::format("a split over {} boards begins {} stages after the first, not {}", args.boards.size(),
                                 args.boards.size() - 1, starts.size()));
  std::vector<int> bounds{0};
  for (int op : starts) {
    if (op <= bounds.back() || op >= p.request().ops)
      throw InputError(fmt::format("stages begin at rising ops between 1 and {}", p.request().ops - 1));
    bounds.push_back(op);
  }
  bounds.push_back(p.request().ops);
  std::string why;
  const auto prediction =
      planner::predict_split(p.request(), bounds, [&](int s, int first, int end) { return p.evaluate(s, first, end); },
                             &why);
  if (!prediction) throw InputError("this split does not fit: " + why);
  Pipeline::Tuned tuned = p.tune_modes(*prediction);
  return p.outcome(std::move(tuned.prediction), tuned.modes);
}

GradientCheck check_gradients(const PipelineOutcome& o, const std::string& scratch) {
  const auto start = Clock::now();
  GradientCheck check;
  check.microbatches = o.microbatches;
  check.stages = static_cast<int>(o.stages.size());
  const planner::ForwardGraph& forward = *o.forward;
  const planner::TrainingGraph whole = runtime::structure_of(forward);
  const std::filesystem::path root(scratch);
  // Micro-batch j is the whole model's iteration with seed j + 1: its data, labels and
  // parameters (the parameters are the first micro-batch's for all, as in one batch).
  const auto params = runtime::initial_parameters(forward, whole, 1);
  std::vector<planner::ForwardGraph> stage_forward;
  std::vector<std::size_t> split;
  for (const PipelineStage& st : o.stages) {
    stage_forward.push_back(planner::stage_forward(forward, st.first_op, st.end_op));
    split.push_back(planner::backward_part_begins(st.graph, st.schedule));
  }
  const int S = check.stages;
  std::vector<std::vector<std::unique_ptr<runtime::TrainingIteration>>> it(static_cast<std::size_t>(S));
  for (int s = 0; s < S; ++s)
    for (int j = 0; j < o.microbatches; ++j) {
      const PipelineStage& st = o.stages[s];
      auto x = std::make_unique<runtime::TrainingIteration>(
          stage_forward[s], st.graph, root / fmt::format("stage{}-mb{}", s, j), static_cast<uint32_t>(j + 1));
      x->set_parameters({params.begin() + st.first_op, params.begin() + st.end_op});
      it[s].push_back(std::move(x));
    }
  // The timeline's order: each board's forwards and backwards as the pipeline runs them.
  std::vector<planner::PipelineTask> tasks;
  for (const auto& t : o.prediction.timeline.tasks)
    if (t.kind == planner::PipelineTask::Kind::kForward || t.kind == planner::PipelineTask::Kind::kBackward)
      tasks.push_back(t);
  std::stable_sort(tasks.begin(), tasks.end(),
                   [](const planner::PipelineTask& a, const planner::PipelineTask& b) { return a.start_s < b.start_s; });
  for (const auto& t : tasks) {
    const auto s = static_cast<std::size_t>(t.stage);
    const auto j = static_cast<std::size_t>(t.microbatch);
    runtime::TrainingIteration& x = *it[s][j];
    const auto& steps = o.stages[s].schedule.steps;
    if (t.kind == planner::PipelineTask::Kind::kForward) {
      if (s > 0) x.set_input(it[s - 1][j]->output());
      for (std::size_t k = 0; k < split[s]; ++k) x.run(steps[k]);
    } else {
      if (s + 1 < it.size()) x.set_output_gradient(it[s + 1][j]->input_gradient());
      for (std::size_t k = split[s]; k < steps.size(); ++k) x.run(steps[k]);
    }
  }
  for (int j = 0; j < o.microbatches; ++j) {
    const runtime::ExecutionResult expected =
        runtime::execute(forward, whole, planner::store_all_schedule(whole), root / fmt::format("whole-mb{}", j),
                         static_cast<uint32_t>(j + 1), &params);
    for (int s = 0; s < S; ++s) {
      const runtime::ExecutionResult got = it[s][j]->finish();
      const PipelineStage& st = o.stages[s];
      for (int op = st.first_op; op < st.end_op; ++op) {
        if (expected.parameter_grads[op].empty()) continue;  // an op without parameters
        ++check.parameter_tensors;
        if (got.parameter_grads[static_cast<std::size_t>(op - st.first_op)] != expected.parameter_grads[op]) {
          if (check.mismatches++ == 0)
            check.first_mismatch = fmt::format("micro-batch {}, op {}", j, forward.ops[op].name);
        }
      }
    }
  }
  std::error_code ignored;
  std::filesystem::remove_all(root, ignored);
  check.wall_s = std::chrono::duration<double>(Clock::now() - start).count();
  return check;
}

std::vector<int> equal_starts(const PipelineArgs& args) {
  const auto bounds = Pipeline(args).equal();
  if (bounds.empty()) throw InputError("the model has too few places to cut for that many boards");
  return {bounds.begin() + 1, bounds.end() - 1};
}

}  // namespace ergon::app
