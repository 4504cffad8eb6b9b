#include "cli/attribute_cmd.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>

#include "common/error.h"
#include "costdb/cost_model.h"
#include "devices/host/record_session.h"

namespace ergon::cli {

namespace {

void clock_summary(const app::AttributedRun& r, std::ostream& out) {
  auto clock_line = [&](const char* what, const profiler::ClockFit& fit) {
    if (fit.fitted) {
      out << fmt::format("  {}: drift {:+.1f} ppm from {} of {} sync exchanges (residual rms {:.0f} ns)\n",
                         what, fit.drift_ppm, fit.points_used, fit.points_total, fit.residual_rms_ns);
    } else {
      out << "  " << what << ": " << fit.note << "\n";
    }
  };
  clock_line("clock", r.attribution.clock);
  if (r.logger_clock) clock_line("logger clock", *r.logger_clock);
}

void print_summary(const app::AttributedRun& r, std::ostream& out) {
  const auto& a = r.attribution;
  uint32_t covered = 0, uncovered = 0;
  for (const auto& w : a.windows) (w.covered ? covered : uncovered) += 1;
  const std::string head = fmt::format("run {} ({} {}, {}): ", r.run.id, r.run.board_kind,
                                       r.run.board_name, costdb::to_string(r.run.status));
  if (r.samples == 0) {
    out << head << fmt::format("no power samples (recorded without a power probe): {} windows timed, "
                               "their energy unknown; {} time costs stored{}\n",
                               a.windows.size(), r.rows.size(),
                               r.link_rows > 0 ? fmt::format(", {} link costs of the board", r.link_rows)
                                               : std::string());
    clock_summary(r, out);
    return;
  }
  out << head << fmt::format("{} samples{} every {:.0f} us, {} windows attributed", r.samples,
                             r.run.power_run_id
                                 ? fmt::format(" from power logger run {}", *r.run.power_run_id)
                                 : std::string(),
                             a.sample_period_s * 1e6, covered);
  if (uncovered > 0)
    out << fmt::format(", {} timed only (their samples did not all arrive: energy unknown)", uncovered);
  out << "\n";
  clock_summary(r, out);
  const std::string idle =
      a.idle_samples == 0
          ? std::string("idle power not measured (no idle windows or gaps): net equals gross")
          : fmt::format("idle {:.6g} W (+- {:.2g} W) from {} samples", a.idle_power_w,
                        a.idle_power_sigma_w, a.idle_samples);
  out << fmt::format("  {}; {} flagged samples left out; {} op costs stored{}\n", idle,
                     a.samples_flagged, r.rows.size(),
                     (r.paging_rows > 0 ? fmt::format(", {} paging costs of the board", r.paging_rows)
                                        : std::string()) +
                         (r.link_rows > 0 ? fmt::format(", {} link costs of the board", r.link_rows)
                                          : std::string()));
}

nlohmann::json to_json(const app::AttributedRun& r) {
  const auto& a = r.attribution;
  nlohmann::json j;
  j["run"] = r.run.id;
  j["board"] = {{"kind", r.run.board_kind}, {"name", r.run.board_name}};
  auto clock = [](const profiler::ClockFit& c) {
    return nlohmann::json{{"fitted", c.fitted},         {"drift_ppm", c.drift_ppm},
                          {"points_used", c.points_used}, {"points_total", c.points_total},
                          {"residual_rms_ns", c.residual_rms_ns}, {"note", c.note}};
  };
  j["clock"] = clock(a.clock);
  j["samples"] = r.samples;
  if (r.run.power_run_id) {
    j["power_run"] = *r.run.power_run_id;
    j["logger_clock"] = clock(*r.logger_clock);
  }
  j["sample_period_s"] = r.samples > 0 ? nlohmann::json(a.sample_period_s) : nullptr;
  j["idle_power_w"] = a.idle_samples > 0 ? nlohmann::json(a.idle_power_w) : nullptr;
  j["idle_power_sigma_w"] = a.idle_samples > 0 ? nlohmann::json(a.idle_power_sigma_w) : nullptr;
  uint32_t uncovered = 0;
  for (const auto& w : a.windows) uncovered += w.covered ? 0 : 1;
  j["windows"] = a.windows.size();
  j["windows_not_covered"] = uncovered;
  j["op_costs"] = r.rows.size();
  return j;
}

std::string opt(const std::optional<double>& v) { return v ? fmt::format("{:.9g}", *v) : ""; }

nlohmann::json opt_json(const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); }

}  // namespace

int run_attribute(const std::string& db_path, const std::vector<int64_t>& runs, bool json,
                  std::ostream& out) {
  auto db = costdb::Database::open(db_path);
  const std::vector<int64_t> ids = runs.empty() ? app::attributable_runs(db) : runs;
  if (ids.empty()) throw InputError("no runs in " + db_path + " (record one with ergon record)");
  nlohmann::json all = nlohmann::json::array();
  for (int64_t id : ids) {
    const app::AttributedRun r = app::attribute_run(db, id);
    if (json) {
      all.push_back(to_json(r));
    } else {
      print_summary(r, out);
    }
  }
  if (json) out << all.dump(2) << "\n";
  return 0;
}

int run_costs(const CostsArgs& args, std::ostream& out) {
  auto db = costdb::Database::open_read_only(args.db);
  if (args.fit) {
    if (!args.board) throw InputError("--fit needs --board (the model is per board)");
    const auto m = costdb::MeasuredCosts::from_database(db, *args.board, args.power_mode);
    auto line = [&](const char* what, const costdb::LinearFit& f, const char* x1, const char* x2,
                    const char* unit) {
      out << fmt::format("  {:<15} = {:.4g} {} + {}({:.4g} {}/{} x {}s, {:.4g} {}/{} x {}s)   "
                         "(cross-validated error: median {:.1f} %, max {:.1f} %, {} shapes)\n",
                         what, f.coef[0], unit, f.roofline ? "max" : "sum", f.coef[1], unit, x1,
                         x1, f.coef[2], unit, x2, x2, 100 * f.cv_median, 100 * f.cv_max, f.rows);
    };
    out << fmt::format("cost model of {}{} from {} op shapes in {} run(s); idle {:.4g} W\n",
                       *args.board, m.power_mode().empty() ? "" : " in mode " + m.power_mode(),
                       m.measured_ops(), m.runs(), m.idle_power_w());
    line("compute time", m.compute_time_fit(), "FLOP", "byte", "s");
    const auto& p = m.compute_power();
    out << fmt::format("  compute energy  = time x {:.4g} W (compute-bound) or {:.4g} W (memory-bound)   "
                       "(cross-validated error: median {:.1f} %, max {:.1f} %)\n",
                       p.compute_bound_w, p.memory_bound_w, 100 * p.cv_median, 100 * p.cv_max);
    auto paging = [&](const char* what, const costdb::LinearFit& f, double power_w) {
      out << fmt::format("  {:<15} = {:.4g} s + bytes / {:.4g} MB/s at {:.4g} W   (cross-validated "
                         "error: median {:.1f} %, max {:.1f} %, {} sizes)\n",
                         what, f.coef[0], f.coef[1] > 0 ? 1e-6 / f.coef[1] : 0.0, power_w,
                         100 * f.cv_median, 100 * f.cv_max, f.rows);
    };
    paging("page-in time", m.pagein_time_fit(), m.pagein_power_w());
    paging("page-out time", m.pageout_time_fit(), m.pageout_power_w());
    out << "  measured shapes are used as measured; the fit serves every other shape\n";
    if (const auto c = m.cache()) {
      out << fmt::format("  cache           = a byte last touched u bytes ago is still cached with probability "
                         "1 / (1 + (u / {:.3g} MiB)^{:g})   (fitted to {} ladder entries of {}: rms error {:.1f} %); "
                         "{} shapes measured warm too (ergon validate times steps by it)\n",
                         c->effective_bytes / (1 << 20), c->steepness, c->points, c->shape, 100 * c->rms_rel_error,
                         m.warm_ops());
    } else {
      out << "  cache           = not measured (record with --model for the cache ladder and warm shapes)\n";
    }
    return 0;
  }
  if (args.links) {
    const auto fits = costdb::list_link_costs(db, args.board);
    if (args.json) {
      nlohmann::json all = nlohmann::json::array();
      for (const auto& f : fits)
        all.push_back({{"board_kind", f.board_kind}, {"link", f.link},
                       {"power_mode", f.power_mode.empty() ? nlohmann::json(nullptr) : nlohmann::json(f.power_mode)},
                       {"direction", f.direction}, {"bandwidth_bytes_per_s", f.bandwidth_bytes_per_s},
                       {"latency_s", f.latency_s}, {"energy_j_per_byte", opt_json(f.energy_j_per_byte)},
                       {"sizes", f.sizes}, {"runs", f.runs}});
      out << all.dump(2) << "\n";
      return 0;
    }
    if (fits.empty()) {
      out << "no link costs" << (args.board ? " for board " + *args.board : std::string()) << " in " << args.db
          << " (measure a link: ergon record --link-test --link-kind K, then ergon attribute)\n";
      return 0;
    }
    out << fmt::format("{:<9} {:<13} {:<12} {:<8} {:>10} {:>10} {:>14} {:>5} {:>4}\n", "board", "mode", "link",
                       "way", "MB/s", "ms", "J/byte", "sizes", "runs");
    for (const auto& f : fits)
      out << fmt::format("{:<9} {:<13} {:<12} {:<8} {:>10.4g} {:>10.3g} {:>14} {:>5} {:>4}\n", f.board_kind,
                         f.power_mode.empty() ? "-" : f.power_mode, f.link, f.direction,
                         f.bandwidth_bytes_per_s / 1e6, f.latency_s * 1e3,
                         f.energy_j_per_byte ? fmt::format("{:.3g}", *f.energy_j_per_byte) : "unknown", f.sizes,
                         f.runs);
    out << "MB/s: payload; ms: one way (half a transfer's fitted fixed cost); J/byte: above idle, this end only\n";
    return 0;
  }
  const auto rows = costdb::list_op_costs(db, args.board, args.run, args.power_mode);
  if (args.json) {
    nlohmann::json all = nlohmann::json::array();
    for (const auto& r : rows) {
      all.push_back({{"run", r.run_id}, {"board_kind", r.board_kind}, {"board_name", r.board_name},
                     {"op_id", r.op_id}, {"phase", std::string(profiler::to_string(r.phase))},
                     {"kind", r.op_kind}, {"dims", r.dims}, {"flops", r.flops},
                     {"bytes_in", r.bytes_in}, {"bytes_out", r.bytes_out}, {"time_s", r.time_s},
                     {"time_s_stddev", opt_json(r.time_s_stddev)},
                     {"energy_known", r.gross_energy_j.has_value()},
                     {"gross_energy_j", opt_json(r.gross_energy_j)}, {"net_energy_j", opt_json(r.net_energy_j)},
                     {"energy_j_stddev", opt_json(r.energy_j_stddev)},
                     {"sample_count", r.sample_count}, {"copies", r.copies},
                     {"power_mode", r.power_mode.empty() ? nlohmann::json(nullptr)
                                                         : nlohmann::json(r.power_mode)}});
    }
    out << all.dump(2) << "\n";
    return 0;
  }
  if (!args.csv.empty()) {
    std::ofstream file;
    std::ostream* csv = &out;
    if (args.csv != "-") {
      file.open(args.csv);
      if (!file) throw InputError("cannot write " + args.csv);
      csv = &file;
    }
    *csv << "run,board_kind,board_name,op_id,phase,kind,dims,flops,bytes_in,bytes_out,time_s,"
            "time_s_stddev,gross_energy_j,net_energy_j,energy_j_stddev,sample_count,power_mode,copies\n";
    for (const auto& r : rows) {
      *csv << fmt::format("{},{},{},{},{},{},{},{},{},{},{:.9g},{},{},{},{},{},{},{}\n",
                          r.run_id, r.board_kind, r.board_name, r.op_id,
                          profiler::to_string(r.phase), r.op_kind, r.dims, r.flops, r.bytes_in,
                          r.bytes_out, r.time_s, opt(r.time_s_stddev), opt(r.gross_energy_j),
                          opt(r.net_energy_j), opt(r.energy_j_stddev), r.sample_count, r.power_mode, r.copies);
    }
    if (file.is_open() && !file) throw InputError("cannot write " + args.csv);
    return 0;
  }
  if (rows.empty()) {
    out << "no op costs" << (args.board ? " for board " + *args.board : std::string())
        << " in " << args.db << " (attribute a run first: ergon attribute --run N)\n";
    return 0;
  }
  out << fmt::format("{:>4}  {:<9} {:<13} {:>3}  {:<9} {:<8} {:<18} {:>12} {:>12} {:>12} {:>10} {:>7}\n",
                     "run", "board", "mode", "op", "phase", "kind", "dims", "time/rep",
                     "net J/rep", "+- J (1 sd)", "gross J/rep", "samples");
  std::size_t time_only = 0;
  for (const auto& r : rows) {
    auto energy = [&](const std::optional<double>& v, const char* spec) {
      return v ? fmt::format(fmt::runtime(spec), *v) : std::string("unknown");
    };
    time_only += r.gross_energy_j ? 0 : 1;
    out << fmt::format("{:>4}  {:<9} {:<13} {:>3}  {:<9} {:<8} {:<18} {:>10.4g} s {:>12} {:>12} {:>10} {:>7}\n",
                       r.run_id, r.board_kind, r.power_mode.empty() ? "-" : r.power_mode, r.op_id,
                       profiler::to_string(r.phase), r.op_kind,
                       r.dims + (r.copies == 1  ? " warm"
                                 : r.copies > 1 ? fmt::format(" x{}", r.copies)
                                                : std::string()),
                       r.time_s, energy(r.net_energy_j, "{:.5g}"),
                       r.gross_energy_j ? energy(r.energy_j_stddev.value_or(0), "{:.2g}") : "",
                       energy(r.gross_energy_j, "{:.5g}"), r.sample_count);
  }
  if (time_only > 0)
    out << fmt::format("{} of {} costs have no energy (no power samples covered them: recorded without "
                       "a power probe, or samples lost): their time is measured, their energy unknown\n",
                       time_only, rows.size());
  return 0;
}

}  // namespace ergon::cli
