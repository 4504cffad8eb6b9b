#include "costdb/cost_model.h"

#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "common/error.h"
#include "common/stats.h"
#include "costdb/database_impl.h"
#include "costdb/plans.h"
#include "profiler/op_runner.h"

namespace ergon::costdb {
namespace {

/// A board kind's derived per-board table about to be rewritten from its runs (paging_costs,
/// link_costs): the kind's boards, their old rows deleted, and its power modes' ids.
class DerivedRows {
 public:
  DerivedRows(Database& database, const std::string& board_kind, std::string_view table, std::string doing)
      : db_(database.impl()),
        board_kind_(board_kind),
        doing_(std::move(doing)),
        mode_id_(db_,
                 "SELECT m.id FROM power_modes m JOIN boards b ON b.id = m.board_id "
                 "WHERE b.kind = ?1 AND m.name = ?2 ORDER BY m.id LIMIT 1") {
    if (db_.read_only) throw DatabaseError("database " + db_.path.string() + " is open read-only");
    db_.ensure_batch();
    detail::Statement board_id(db_, "SELECT id FROM boards WHERE kind = ?1 ORDER BY id");
    board_id.bind(1, std::string_view(board_kind));
    while (board_id.step(doing_)) boards_.push_back(board_id.column_int64(0));
    detail::Statement clear(db_, "DELETE FROM " + std::string(table) + " WHERE board_id = ?1");
    for (int64_t id : boards_) {
      clear.bind(1, id);
      clear.run(doing_);
    }
  }
  /// No board of the kind: nothing to write.
  [[nodiscard]] bool empty() const { return boards_.empty(); }
  /// The rows go under the kind's first board.
  [[nodiscard]] int64_t board() const { return boards_.front(); }
  /// The mode's id under any board of the kind (modes are per board); none for an empty name.
  std::optional<int64_t> mode(const std::string& name) {
    std::optional<int64_t> id;
    if (name.empty()) return id;
    mode_id_.bind(1, std::string_view(board_kind_));
    mode_id_.bind(2, std::string_view(name));
    if (mode_id_.step(doing_)) id = mode_id_.column_int64(0);
    mode_id_.reset();
    return id;
  }
  detail::Statement insert(const char* sql) { return detail::Statement(db_, sql); }
  [[nodiscard]] const std::string& doing() const { return doing_; }

 private:
  Database::Impl& db_;
  std::string board_kind_;
  std::string doing_;
  std::vector<int64_t> boards_;
  detail::Statement mode_id_;
};

/// Exact NNLS for three unknowns: the best least-squares fit over every subset of columns
/// whose solution is non-negative (2^3 small solves).
std::optional<std::array<double, 3>> nnls3(std::span<const std::array<double, 3>> rows) {
  const auto n = static_cast<Eigen::Index>(rows.size());
  Eigen::MatrixXd a(n, 3);
  Eigen::VectorXd b(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    const auto& r = rows[static_cast<std::size_t>(i)];
    const double w = 1 / r[2];  // relative errors
    a(i, 0) = w;
    a(i, 1) = r[0] * w;
    a(i, 2) = r[1] * w;
    b(i) = 1;
  }
  // Columns in comparable units, so the solves are well conditioned.
  Eigen::Vector3d scale;
  for (int j = 0; j < 3; ++j) {
    const double m = a.col(j).cwiseAbs().maxCoeff();
    scale(j) = m > 0 ? m : 1;
    a.col(j) /= scale(j);
  }
  std::optional<std::array<double, 3>> best;
  double best_residual = std::numeric_limits<double>::infinity();
  for (int mask = 1; mask < 8; ++mask) {
    std::vector<int> cols;
    for (int j = 0; j < 3; ++j)
      if ((mask >> j & 1) != 0 && a.col(j).cwiseAbs().maxCoeff() > 0) cols.push_back(j);
    if (cols.empty() || static_cast<Eigen::Index>(cols.size()) > n) continue;
    Eigen::MatrixXd sub(n, static_cast<Eigen::Index>(cols.size()));
    for (std::size_t k = 0; k < cols.size(); ++k) sub.col(static_cast<Eigen::Index>(k)) = a.col(cols[k]);
    const Eigen::VectorXd x = sub.colPivHouseholderQr().solve(b);
    if ((x.array() < 0).any() || !x.allFinite()) continue;
    const double residual = (sub * x - b).squaredNorm();
    if (residual < best_residual) {
      best_residual = residual;
      std::array<double, 3> coef{};
      for (std::size_t k = 0; k < cols.size(); ++k)
        coef[static_cast<std::size_t>(cols[k])] = x(static_cast<Eigen::Index>(k)) / scale(cols[k]);
      best = coef;
    }
  }
  return best;
}

}  // namespace

namespace {

/// Coefficients of the chosen shape; the roofline starts from the linear fit.
std::optional<std::array<double, 3>> fit_coef(std::span<const std::array<double, 3>> rows,
                                              FitShape shape) {
  auto coef = nnls3(rows);
  if (!coef || shape == FitShape::kLinear) return coef;
  std::vector<char> bound_by_x1(rows.size(), 2);  // 2: not assigned yet
  for (int iteration = 0; iteration < 20; ++iteration) {
    bool changed = false;
    std::vector<std::array<double, 3>> split;
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const char by_x1 = (*coef)[1] * rows[i][0] >= (*coef)[2] * rows[i][1] ? 1 : 0;
      changed = changed || by_x1 != bound_by_x1[i];
      bound_by_x1[i] = by_x1;
      split.push_back({by_x1 ? rows[i][0] : 0, by_x1 ? 0 : rows[i][1], rows[i][2]});
    }
    if (!changed) break;
    auto next = nnls3(split);
    if (!next) break;
    coef = next;
  }
  return coef;
}

}  // namespace

std::optional<LinearFit> fit_non_negative(std::span<const std::array<double, 3>> rows,
                                          FitShape shape) {
  std::vector<std::array<double, 3>> usable;
  for (const auto& r : rows)
    if (r[2] > 0 && std::isfinite(r[2])) usable.push_back(r);
  if (usable.size() < 3) return std::nullopt;
  const auto coef = fit_coef(usable, shape);
  if (!coef) return std::nullopt;
  LinearFit fit;
  fit.coef = *coef;
  fit.roofline = shape == FitShape::kRoofline;
  fit.rows = static_cast<int>(usable.size());
  std::vector<double> errors;
  for (std::size_t i = 0; i < usable.size(); ++i) {
    std::vector<std::array<double, 3>> rest = usable;
    rest.erase(rest.begin() + static_cast<std::ptrdiff_t>(i));
    const auto c = fit_coef(rest, shape);
    if (!c) continue;
    LinearFit loo = fit;
    loo.coef = *c;
    const auto& r = usable[i];
    errors.push_back(std::abs(loo.predict(r[0], r[1]) - r[2]) / r[2]);
  }
  fit.cv_median = median(errors);
  fit.cv_max = errors.empty() ? 0 : *std::max_element(errors.begin(), errors.end());
  return fit;
}

MeasuredCosts MeasuredCosts::from_database(Database& db, const std::string& board,
                                           const std::optional<std::string>& power_mode, TimedIn source) {
  MeasuredCosts m;
  std::set<int64_t> runs;
  std::vector<double> idle;
  // (kind, phase, flops, bytes: read + written, or moved for paging)
  using ShapeKey = std::tuple<std::string, int, uint64_t, uint64_t>;
  // The same shape measured in several runs is averaged.
  std::map<ShapeKey, std::vector<const OpCostRow*>> by_shape;
  // TimedIn::kIteration: the same shape timed by executed store-all iterations' steps.
  std::map<ShapeKey, std::vector<const OpCostRow*>> in_iterations;
  const auto rows = list_op_costs(db, board, std::nullopt, power_mode);
  std::map<std::tuple<std::string, int, uint64_t, uint64_t, uint16_t>, std::vector<double>> cached;
  std::set<std::string> modes;
  for (const OpCostRow& r : rows) modes.insert(r.power_mode);
  if (!power_mode && modes.size() > 1) {
    std::string names;
    for (const auto& mode : modes) names += (names.empty() ? "" : ", ") + (mode.empty() ? "(none)" : mode);
    throw InputError("board " + board + " has costs measured in several power modes (" + names +
                     "): choose one with --power-mode");
  }
  if (!modes.empty()) m.power_mode_ = *modes.begin();
  // Executed schedules that recompute or page are what validations measure, never costs:
  // only the store-all schedule's iterations (every shape once, among its neighbours) are.
  std::set<int64_t> not_store_all;
  for (const OpCostRow& r : rows)
    if (r.run_plan && *r.run_plan == RunPlan::kExecute &&
        (r.phase == profiler::Phase::kRecompute || r.phase == profiler::Phase::kPageIn ||
         r.phase == profiler::Phase::kPageOut))
      not_store_all.insert(r.run_id);
  // The paging calibration: executions of the page-all schedule (planner::plan_page_all),
  // which pages every activation the backward pass reads, each transfer after the compute
  // that an iteration runs before it. Only their page-ins and page-outs count, as only the
  // store-all schedule's computes do.
  std::set<int64_t> page_all;
  if (source == TimedIn::kIteration)
    for (int64_t run : runs_validating_planner(db, "page-all")) page_all.insert(run);
  for (const OpCostRow& r : rows) {
    if (r.op_kind.empty() || r.op_kind == "idle" || r.op_kind == "transfer" || r.time_s <= 0) continue;
    const bool paging = r.op_kind == "paging";
    const uint64_t bytes = paging ? r.bytes_in : r.bytes_in + r.bytes_out;
    // A validation's schedule steps measure the schedule, not the shape: planning on them
    // would compare predictions with their own measurements. Only when asked for, the
    // executed store-all schedule's compute steps and the page-all schedule's transfers
    // (each the median of its iterations) stand for their shapes.
    if (r.run_plan && *r.run_plan == RunPlan::kExecute) {
      const bool calibration = paging ? page_all.contains(r.run_id) : !not_store_all.contains(r.run_id);
      if (source == TimedIn::kIteration && calibration && r.copies == 0)
        in_iterations[{r.op_kind, static_cast<int>(r.phase), r.flops, bytes}].push_back(&r);
      continue;
    }
    if (r.run_plan && *r.run_plan != RunPlan::kProfile) continue;
    // Windows of a profile plan span >= 50 samples; shorter ones (a schedule's steps, run
    // once each) are too noisy to stand for their shape. Without samples (a time cost only),
    // a profile plan's several windows per shape tell it from a schedule's single step (runs
    // recorded before schema version 9 do not say what they ran).
    if (r.gross_energy_j ? r.sample_count < kMinSamplesPerShape : !r.time_s_stddev) continue;
    if (runs.insert(r.run_id).second) {
      const auto a = find_attribution(db, r.run_id);
      if (a && a->idle_samples > 0) idle.push_back(a->idle_power_w);
    }
    // Timed warm or at a chosen reuse distance: the cache model's, not the planner's costs.
    if (r.copies != 0) {
      if (r.op_kind != "paging") cached[{r.op_kind, static_cast<int>(r.phase), r.flops, bytes, r.copies}].push_back(r.time_s);
      continue;
    }
    by_shape[{r.op_kind, static_cast<int>(r.phase), r.flops, bytes}].push_back(&r);
  }
  // A shape's time and energy, and its energy's 1 sigma, averaged over the rows that measured it.
  auto summarize = [](const std::vector<const OpCostRow*>& group) {
    Row row;
    double variance = 0, energy_j = 0;
    int with_energy = 0;
    for (const OpCostRow* r : group) {
      row.time_s += r->time_s / static_cast<double>(group.size());
      if (!r->gross_energy_j) continue;
      energy_j += *r->gross_energy_j;
      variance += std::pow(r->energy_j_stddev.value_or(0), 2);
      ++with_energy;
    }
    if (with_energy > 0) {
      row.energy_j = energy_j / with_energy;
      row.energy_sigma_j = std::sqrt(variance) / with_energy;
    }
    return row;
  };
  std::map<ShapeKey, Row> measured;
  for (const auto& [key, group] : by_shape) measured[key] = summarize(group);
  // A step runs once per iteration, too short for the samples a power reading needs: its
  // time is the iteration's, its power the profile's at the same shape (>= 50 samples),
  // else its class's (exact(), as for a time-only measurement).
  for (auto& [key, group] : in_iterations) {
    // Of the store-all executions that ran the shape, the latest (runs are numbered as they
    // are recorded): the machine as it runs now, not an average over hours in which its speed
    // moved by more than the error sought (docs/accuracy.md, "Costs measured inside an
    // iteration").
    const int64_t latest = (*std::max_element(group.begin(), group.end(), [](const OpCostRow* a, const OpCostRow* b) {
                             return a->run_id < b->run_id;
                           }))->run_id;
    std::erase_if(group, [&](const OpCostRow* r) { return r->run_id != latest; });
    runs.insert(latest);
    Row row = summarize(group);
    row.energy_j.reset();
    row.energy_sigma_j = 0;
    if (const auto p = measured.find(key); p != measured.end() && p->second.energy_j && p->second.time_s > 0) {
      const double scale = row.time_s / p->second.time_s;
      row.energy_j = *p->second.energy_j * scale;
      row.energy_sigma_j = p->second.energy_sigma_j * scale;
    }
    measured[key] = row;
    ++m.iteration_shapes_;
    if (std::get<0>(key) == "paging") ++m.iteration_paging_shapes_;
  }
  for (auto& [key, row] : measured) {
    row.kind = std::get<0>(key);
    row.phase = static_cast<profiler::Phase>(std::get<1>(key));
    row.flops = std::get<2>(key);
    row.bytes = std::get<3>(key);
    m.rows_.push_back(row);
  }
  m.runs_ = static_cast<int>(runs.size());
  m.idle_power_w_ = std::max(0.0, median(idle));
  m.keep_cache_entries(cached);

  std::vector<std::array<double, 3>> ct, it, ot;
  std::vector<const Row*> compute_rows, in_rows, out_rows;
  for (const Row& r : m.rows_) {
    const auto f = static_cast<double>(r.flops);
    const auto b = static_cast<double>(r.bytes);
    if (r.kind != "paging") {
      ct.push_back({f, b, r.time_s});
      compute_rows.push_back(&r);
    } else if (r.phase == profiler::Phase::kPageIn) {
      it.push_back({b, 0, r.time_s});
      in_rows.push_back(&r);
    } else if (r.phase == profiler::Phase::kPageOut) {
      ot.push_back({b, 0, r.time_s});
      out_rows.push_back(&r);
    }
  }
  auto fit = [&](const std::vector<std::array<double, 3>>& rows3, const char* what,
                 FitShape shape = FitShape::kLinear) {
    auto f = fit_non_negative(rows3, shape);
    if (!f)
      throw InputError("too few " + std::string(what) + " measurements of board " + board +
                       " in " + db.path().string() + " to fit a cost model (" +
                       std::to_string(rows3.size()) + "; attribute a profile run first)");
    return *f;
  };
  if (m.rows_.empty())
    throw InputError("no attributed costs of board " + board + " in " + db.path().string() +
                     " (ergon record, then ergon attribute)");
  m.compute_time_ = fit(ct, "compute", FitShape::kRoofline);
  // Paging fits take at least three sizes per direction (the default profile plan measures
  // three), so that the cross-validation has something to leave out.
  m.pagein_time_ = fit(it, "page-in");
  m.pageout_time_ = fit(ot, "page-out");

  // Power by bound: the time-weighted mean of energy / time over the rows of each class.
  const LinearFit& t = m.compute_time_;
  auto compute_bound = [&](const Row& r) {
    return t.coef[1] * static_cast<double>(r.flops) >= t.coef[2] * static_cast<double>(r.bytes);
  };
  auto mean_power = [](const std::vector<const Row*>& group, auto&& keep, const Row* skip) {
    double e = 0, s = 0;
    for (const Row* r : group) {
      if (r == skip || !r->energy_j || !keep(*r)) continue;
      e += *r->energy_j;
      s += r->time_s;
    }
    return s > 0 ? e / s : 0.0;
  };
  auto is_compute = [&](const Row& r) { return compute_bound(r); };
  auto is_memory = [&](const Row& r) { return !compute_bound(r); };
  auto any = [](const Row&) { return true; };
  PowerModel& p = m.compute_power_;
  p.compute_bound_w = mean_power(compute_rows, is_compute, nullptr);
  p.memory_bound_w = mean_power(compute_rows, is_memory, nullptr);
  // With one class unmeasured, it draws what the other does.
  if (p.compute_bound_w == 0) p.compute_bound_w = p.memory_bound_w;
  if (p.memory_bound_w == 0) p.memory_bound_w = p.compute_bound_w;
  m.pagein_power_w_ = mean_power(in_rows, any, nullptr);
  m.pageout_power_w_ = mean_power(out_rows, any, nullptr);
  // Energy is known when every kind of cost was measured with power samples; otherwise the
  // costs are times only, and energy must come from elsewhere (a board power model) or not at all.
  m.has_energy_ = p.compute_bound_w > 0 && m.pagein_power_w_ > 0 && m.pageout_power_w_ > 0;
  if (!m.has_energy_) {
    p = PowerModel{};
    m.pagein_power_w_ = m.pageout_power_w_ = 0;
    for (Row& r : m.rows_) r.energy_j.reset();
    return m;
  }
  // Leave-one-out over time and power together.
  std::vector<double> errors;
  for (std::size_t i = 0; i < compute_rows.size(); ++i) {
    const Row& r = *compute_rows[i];
    if (!r.energy_j) continue;
    std::vector<std::array<double, 3>> rest = ct;
    rest.erase(rest.begin() + static_cast<std::ptrdiff_t>(i));
    const auto loo = fit_non_negative(rest, FitShape::kRoofline);
    if (!loo) continue;
    const auto f = static_cast<double>(r.flops);
    const auto b = static_cast<double>(r.bytes);
    const bool by_compute = loo->coef[1] * f >= loo->coef[2] * b;
    double w = by_compute ? mean_power(compute_rows, is_compute, &r) : mean_power(compute_rows, is_memory, &r);
    if (w == 0) w = mean_power(compute_rows, any, &r);
    errors.push_back(std::abs(loo->predict(f, b) * w - *r.energy_j) / *r.energy_j);
  }
  p.cv_median = median(errors);
  p.cv_max = errors.empty() ? 0 : *std::max_element(errors.begin(), errors.end());
  return m;
}

std::optional<MeasuredCosts::Cost> MeasuredCosts::exact(bool paging, profiler::Phase phase,
                                                        uint64_t flops, uint64_t bytes) const {
  for (const Row& r : rows_) {
    if ((r.kind == "paging") != paging || r.bytes != bytes || r.phase != phase) continue;
    if (!paging && r.flops != flops) continue;
    if (!r.energy_j) {  // measured in time only: the energy of the fit's power (no energy: 0, unused)
      const double power_w = paging ? (phase == profiler::Phase::kPageIn ? pagein_power_w_ : pageout_power_w_)
                                    : (compute_time_.coef[1] * static_cast<double>(flops) >=
                                               compute_time_.coef[2] * static_cast<double>(bytes)
                                           ? compute_power_.compute_bound_w
                                           : compute_power_.memory_bound_w);
      return Cost{.time_s = r.time_s, .energy_j = r.time_s * power_w, .measured = true, .energy_sigma_j = 0};
    }
    return Cost{.time_s = r.time_s, .energy_j = *r.energy_j, .measured = true, .energy_sigma_j = r.energy_sigma_j};
  }
  return std::nullopt;
}

MeasuredCosts::Cost MeasuredCosts::compute(profiler::Phase phase, uint64_t flops, uint64_t bytes) const {
  if (auto c = exact(false, phase, flops, bytes)) return *c;
  const auto f = static_cast<double>(flops);
  const auto b = static_cast<double>(bytes);
  const double time_s = compute_time_.predict(f, b);
  const bool compute_bound = compute_time_.coef[1] * f >= compute_time_.coef[2] * b;
  const double energy_j = time_s * (compute_bound ? compute_power_.compute_bound_w : compute_power_.memory_bound_w);
  const double rel_error = std::hypot(compute_time_.cv_median, compute_power_.cv_median);
  return {.time_s = time_s, .energy_j = energy_j, .energy_sigma_j = rel_error * energy_j};
}

MeasuredCosts::Cost MeasuredCosts::paging(profiler::Phase phase, uint64_t bytes,
                                          const LinearFit& time, double power_w) const {
  if (auto c = exact(true, phase, 0, bytes)) return *c;
  const double time_s = time.predict(static_cast<double>(bytes), 0);
  return {.time_s = time_s, .energy_j = time_s * power_w, .energy_sigma_j = time.cv_median * time_s * power_w};
}

MeasuredCosts::Cost MeasuredCosts::page_in(uint64_t bytes) const {
  return paging(profiler::Phase::kPageIn, bytes, pagein_time_, pagein_power_w_);
}

MeasuredCosts::Cost MeasuredCosts::page_out(uint64_t bytes) const {
  return paging(profiler::Phase::kPageOut, bytes, pageout_time_, pageout_power_w_);
}

int rebuild_paging_costs(Database& database, const std::string& board_kind) {
  // (power mode, direction, bytes) -> summed time and gross energy over the runs that
  // measured it, and how many.
  struct Sum {
    double time_s = 0;
    double energy_j = 0;
    int count = 0;
  };
  std::map<std::tuple<std::string, int, uint64_t>, Sum> sums;
  for (const OpCostRow& r : list_op_costs(database, board_kind, std::nullopt)) {
    if (r.op_kind != "paging" || r.time_s <= 0) continue;
    if (r.run_plan && *r.run_plan != RunPlan::kProfile) continue;  // a validation's steps
    if (!r.gross_energy_j || r.sample_count < MeasuredCosts::kMinSamplesPerShape) continue;
    Sum& s = sums[{r.power_mode, static_cast<int>(r.phase), r.bytes_in}];
    s.time_s += r.time_s;
    s.energy_j += *r.gross_energy_j;
    ++s.count;
  }
  DerivedRows out(database, board_kind, "paging_costs", "cannot store the paging costs of board " + board_kind);
  if (out.empty()) return 0;
  detail::Statement insert = out.insert(
      "INSERT INTO paging_costs (board_id, power_mode_id, storage, bytes, direction, latency_s, "
      "bandwidth_bytes_per_s, energy_j_per_byte) VALUES (?1, ?7, 'default', ?2, ?3, ?4, ?5, ?6)");
  std::set<std::string> modes;
  for (const auto& [key, sum] : sums) modes.insert(std::get<0>(key));
  int written = 0;
  for (const std::string& mode : modes) {
    const std::optional<int64_t> mode_row = out.mode(mode);
    for (const profiler::Phase phase : {profiler::Phase::kPageIn, profiler::Phase::kPageOut}) {
      auto in_group = [&](const auto& key) {
        return std::get<0>(key) == mode && std::get<1>(key) == static_cast<int>(phase);
      };
      std::vector<std::array<double, 3>> rows;
      for (const auto& [key, sum] : sums)
        if (in_group(key)) rows.push_back({static_cast<double>(std::get<2>(key)), 0, sum.time_s / sum.count});
      const auto fit = fit_non_negative(rows);
      if (!fit || fit->coef[1] <= 0) continue;
      for (const auto& [key, sum] : sums) {
        if (!in_group(key)) continue;
        const uint64_t bytes = std::get<2>(key);
        insert.bind(1, out.board());
        insert.bind(2, bytes);
        insert.bind(3, std::string_view(phase == profiler::Phase::kPageIn ? "in" : "out"));
        insert.bind(4, fit->coef[0]);
        insert.bind(5, 1 / fit->coef[1]);
        insert.bind(6, sum.energy_j / sum.count / static_cast<double>(bytes));
        if (mode_row) insert.bind(7, *mode_row);
        else insert.bind_null(7);
        insert.run(out.doing());
        ++written;
      }
    }
  }
  return written;
}

int rebuild_link_costs(Database& database, const std::string& board_kind) {
  // (link, power mode, phase, bytes) -> summed time and net energy per transfer over the runs
  // that measured it, and how many; energy only while every run of the size had samples.
  struct Sum {
    double time_s = 0;
    double net_j = 0;
    int count = 0;
    int with_energy = 0;
  };
  std::map<std::tuple<std::string, std::string, int, uint64_t>, Sum> sums;
  for (const OpCostRow& r : list_op_costs(database, board_kind, std::nullopt)) {
    if (r.op_kind != "transfer" || r.time_s <= 0 || r.bytes_in == 0) continue;
    if (r.phase != profiler::Phase::kLinkSend && r.phase != profiler::Phase::kLinkReceive) continue;
    if (r.run_plan && *r.run_plan != RunPlan::kProfile) continue;  // a pipeline's relayed transfers wait
    Sum& s = sums[{r.link, r.power_mode, static_cast<int>(r.phase), r.bytes_in}];
    s.time_s += r.time_s;
    ++s.count;
    if (r.net_energy_j && r.sample_count >= MeasuredCosts::kMinSamplesPerShape) {
      s.net_j += *r.net_energy_j;
      ++s.with_energy;
    }
  }
  DerivedRows out(database, board_kind, "link_costs", "cannot store the link costs of board " + board_kind);
  if (out.empty()) return 0;
  detail::Statement insert = out.insert(
      "INSERT INTO link_costs (board_id, power_mode_id, link, direction, bytes, time_s, latency_s, "
      "bandwidth_bytes_per_s, net_energy_j, energy_j_per_byte, runs) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)");
  std::set<std::tuple<std::string, std::string, int>> groups;
  for (const auto& [key, sum] : sums) groups.insert({std::get<0>(key), std::get<1>(key), std::get<2>(key)});
  int written = 0;
  for (const auto& [link, mode, phase] : groups) {
    auto in_group = [&](const auto& key) {
      return std::get<0>(key) == link && std::get<1>(key) == mode && std::get<2>(key) == phase;
    };
    std::vector<std::array<double, 3>> times, energies;
    bool all_energy = true;
    for (const auto& [key, sum] : sums) {
      if (!in_group(key)) continue;
      const auto bytes = static_cast<double>(std::get<3>(key));
      times.push_back({bytes, 0, sum.time_s / sum.count});
      all_energy = all_energy && sum.with_energy == sum.count;
      if (sum.with_energy > 0) energies.push_back({bytes, 0, sum.net_j / sum.with_energy});
    }
    const auto time_fit = fit_non_negative(times);
    if (!time_fit || time_fit->coef[1] <= 0) continue;
    const auto energy_fit = all_energy ? fit_non_negative(energies) : std::nullopt;
    const std::optional<int64_t> mode_row = out.mode(mode);
    for (const auto& [key, sum] : sums) {
      if (!in_group(key)) continue;
      insert.bind(1, out.board());
      if (mode_row) insert.bind(2, *mode_row);
      else insert.bind_null(2);
      insert.bind(3, std::string_view(link));
      insert.bind(4, std::string_view(phase == static_cast<int>(profiler::Phase::kLinkSend) ? "send" : "receive"));
      insert.bind(5, std::get<3>(key));
      insert.bind(6, sum.time_s / sum.count);
      insert.bind(7, time_fit->coef[0] / 2);
      insert.bind(8, 1 / time_fit->coef[1]);
      if (energy_fit) {
        insert.bind(9, sum.net_j / sum.with_energy);
        insert.bind(10, energy_fit->coef[1]);
      } else {
        insert.bind_null(9);
        insert.bind_null(10);
      }
      insert.bind(11, static_cast<int64_t>(sum.count));
      insert.run(out.doing());
      ++written;
    }
  }
  return written;
}

std::vector<LinkCostFit> list_link_costs(Database& database, const std::optional<std::string>& board_kind) {
  auto& db = database.impl();
  detail::Statement q(db,
                      // One row per (kind, link, mode, direction): the fit, which every size's
                      // row repeats, taken from the row with the most runs.
                      "SELECT kind, link, mode, direction, latency_s, bandwidth_bytes_per_s, "
                      "energy_j_per_byte, sizes, runs FROM ("
                      "SELECT b.kind AS kind, c.link AS link, COALESCE(m.name, '') AS mode, "
                      "c.direction AS direction, c.latency_s AS latency_s, "
                      "c.bandwidth_bytes_per_s AS bandwidth_bytes_per_s, "
                      "c.energy_j_per_byte AS energy_j_per_byte, "
                      "COUNT(*) OVER cell AS sizes, MAX(c.runs) OVER cell AS runs, "
                      "ROW_NUMBER() OVER (PARTITION BY b.kind, c.link, m.name, c.direction "
                      "ORDER BY c.runs DESC, c.bytes) AS pick "
                      "FROM link_costs c JOIN boards b ON b.id = c.board_id "
                      "LEFT JOIN power_modes m ON m.id = c.power_mode_id "
                      "WHERE (CAST(?1 AS TEXT) IS NULL OR b.kind = ?1) "
                      "WINDOW cell AS (PARTITION BY b.kind, c.link, m.name, c.direction)) fits "
                      "WHERE pick = 1 ORDER BY kind, link, mode, direction");
  if (board_kind) q.bind(1, std::string_view(*board_kind));
  else q.bind_null(1);
  std::vector<LinkCostFit> out;
  while (q.step("cannot read link costs")) {
    LinkCostFit f;
    f.board_kind = q.column_text(0);
    f.link = q.column_text(1);
    f.power_mode = q.column_text(2);
    f.direction = q.column_text(3);
    f.latency_s = q.column_double(4);
    f.bandwidth_bytes_per_s = q.column_double(5);
    if (!q.column_is_null(6)) f.energy_j_per_byte = q.column_double(6);
    f.sizes = static_cast<int>(q.column_int64(7));
    f.runs = static_cast<int>(q.column_int64(8));
    out.push_back(std::move(f));
  }
  return out;
}

double MeasuredCosts::CacheCurve::hit(double distance_bytes, double size_bytes) const {
  if (effective_bytes <= 0) return 0;
  // The mean of 1 / (1 + (u / C)^g) over u in [d, d + s]: the buffer's bytes were touched in
  // order, so its last byte is d bytes back and its first d + s.
  constexpr int kSteps = 32;
  const double s = std::max(size_bytes, 1.0);
  double sum = 0;
  for (int i = 0; i < kSteps; ++i) {
    const double u = std::max(distance_bytes, 0.0) + s * (i + 0.5) / kSteps;
    sum += 1 / (1 + std::pow(u / effective_bytes, steepness));
  }
  return sum / kSteps;
}

namespace {

/// The hit fraction of an op of `bytes` timed from memory (copies 0: the rotation's other
/// copies between two runs on one) and warm (copies 1). The rotation is OpRunner's for the
/// shape's counted bytes, which stand for the buffers the board allocated for it.
std::pair<double, double> anchors(const MeasuredCosts::CacheCurve& c, double bytes) {
  const auto rotation = static_cast<double>(profiler::OpRunner::rotation_copies(static_cast<std::size_t>(bytes)));
  return {c.hit((rotation - 1) * bytes, bytes), c.hit(0, bytes)};
}

/// Time at hit fraction `hit`, linear between the op's two measurements.
double interpolate(double cold_s, double warm_s, std::pair<double, double> h, double hit) {
  const auto [h0, h1] = h;
  if (h1 - h0 < 1e-6) return cold_s;  // the curve cannot tell the two measurements apart
  return cold_s + (warm_s - cold_s) * std::clamp((hit - h0) / (h1 - h0), 0.0, 1.0);
}

}  // namespace

void MeasuredCosts::keep_cache_entries(
    const std::map<std::tuple<std::string, int, uint64_t, uint64_t, uint16_t>, std::vector<double>>& cached) {
  // Warm times, and per shape its ladder (copies >= 2).
  std::map<std::tuple<std::string, int, uint64_t, uint64_t>, std::vector<std::pair<double, double>>> ladders;
  for (const auto& [key, times] : cached) {
    const auto& [kind, phase, flops, bytes, copies] = key;
    const double t = median(times);
    if (copies == 1) warm_[{phase, flops, bytes}] = t;
    else ladders[{kind, phase, flops, bytes}].emplace_back(static_cast<double>(copies), t);
  }
  // The shape with the longest ladder that was also timed warm and from memory.
  const std::vector<std::pair<double, double>>* ladder = nullptr;
  std::tuple<std::string, int, uint64_t, uint64_t> shape;
  for (const auto& [key, points] : ladders) {
    const auto& [kind, phase, flops, bytes] = key;
    const bool warm = warm_.count({phase, flops, bytes}) > 0;
    const bool cold = exact(false, static_cast<profiler::Phase>(phase), flops, bytes).has_value();
    if (points.size() < 4 || !warm || !cold || (ladder && ladder->size() >= points.size())) continue;
    ladder = &points;
    shape = key;
  }
  if (!ladder) return;
  const auto& [kind, phase, flops, bytes_count] = shape;
  const auto bytes = static_cast<double>(bytes_count);
  // Every point of the ladder as (bytes touched since, time): the default rotation's, the
  // warm one and the ladder's.
  Ladder l{.points = {}, .bytes = bytes, .entries = static_cast<int>(ladder->size()),
           .shape = kind + " of " + std::to_string(bytes_count) + " bytes"};
  const auto rotation = static_cast<double>(profiler::OpRunner::rotation_copies(bytes_count));
  l.points.emplace_back((rotation - 1) * bytes,
                        exact(false, static_cast<profiler::Phase>(phase), flops, bytes_count)->time_s);
  l.points.emplace_back(0, warm_.at({phase, flops, bytes_count}));
  for (const auto& [copies, t] : *ladder) l.points.emplace_back((copies - 1) * bytes, t);
  ladder_ = std::move(l);
}

std::optional<MeasuredCosts::CacheCurve> MeasuredCosts::cache() const {
  if (!ladder_) return std::nullopt;
  auto curve = fit_cache_curve(ladder_->points, ladder_->bytes);
  if (!curve) return std::nullopt;
  curve->points = ladder_->entries;
  curve->shape = ladder_->shape;
  return curve;
}

std::optional<MeasuredCosts::CacheCurve> fit_cache_curve(std::span<const std::pair<double, double>> points,
                                                         double bytes) {
  if (points.size() < 3) return std::nullopt;
  // For each curve on a grid (C from an eighth of the op to 4 GiB, steepness from a soft edge
  // to an LRU cache's step), time = a + b x hit fraction by least squares in relative error;
  // the curve that fits best stands. (A ladder's point from the default rotation need not be
  // all from memory: on a cache larger than the rotation it is warm, and a and b come from
  // the other points.)
  MeasuredCosts::CacheCurve best;
  double best_err = std::numeric_limits<double>::infinity();
  constexpr int kSizes = 240;
  const double lo = std::log(bytes / 8), hi = std::log(4.0 * (1ULL << 30));
  std::vector<double> h(points.size());
  for (const double steepness : {1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 8.0, 12.0, 16.0, 24.0, 32.0}) {
    for (int i = 0; i <= kSizes; ++i) {
      const MeasuredCosts::CacheCurve c{.effective_bytes = std::exp(lo + (hi - lo) * i / kSizes),
                                        .steepness = steepness};
      // Weighted normal equations of t / t = (a + b h) / t.
      double s00 = 0, s01 = 0, s11 = 0, r0 = 0, r1 = 0;
      for (std::size_t k = 0; k < points.size(); ++k) {
        const auto [distance, t] = points[k];
        h[k] = c.hit(distance, bytes);
        const double w = 1 / (t * t);
        s00 += w;
        s01 += w * h[k];
        s11 += w * h[k] * h[k];
        r0 += w * t;
        r1 += w * t * h[k];
      }
      const double det = s00 * s11 - s01 * s01;
      if (det <= 1e-12 * s00 * s11) continue;  // every point equally cached: no edge to see
      const double a = (s11 * r0 - s01 * r1) / det;
      const double b = (s00 * r1 - s01 * r0) / det;
      double err = 0;
      for (std::size_t k = 0; k < points.size(); ++k) {
        const double e = (a + b * h[k]) / points[k].second - 1;
        err += e * e;
      }
      if (err < best_err) {
        best_err = err;
        best = c;
      }
    }
  }
  if (!std::isfinite(best_err)) return std::nullopt;
  best.points = static_cast<int>(points.size());
  best.rms_rel_error = std::sqrt(best_err / static_cast<double>(points.size()));
  return best;
}

std::optional<double> MeasuredCosts::time_at_hit(const CacheCurve& curve, profiler::Phase phase, uint64_t flops,
                                                 uint64_t bytes, double hit) const {
  const auto warm = warm_.find({static_cast<int>(phase), flops, bytes});
  const auto cold = exact(false, phase, flops, bytes);
  if (warm == warm_.end() || !cold) return std::nullopt;
  return interpolate(cold->time_s, warm->second, anchors(curve, static_cast<double>(bytes)), hit);
}

}  // namespace ergon::costdb
