#include "app/characterize.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <span>

#include "app/attribute.h"
#include "app/board_costs.h"
#include "app/record.h"
#include "app/step_plans.h"
#include "common/error.h"
#include "common/units.h"
#include "costdb/cost_model.h"
#include "costdb/costs.h"
#include "costdb/database.h"
#include "planner/graph.h"
#include "planner/zoo.h"

namespace ergon::app {
namespace {

using profiler::Phase;

constexpr uint32_t kIdleUs = 200'000;

uint64_t plan_windows(const devices::ProfilePlan& plan) {
  uint64_t n = 0;
  for (const auto& op : plan.ops) n += op.windows;
  return n;
}

/// The modes to measure, the descriptor's first one first.
std::vector<std::string> modes_to_measure(const CharacterizeRequest& request) {
  const auto& board = request.board;
  std::vector<std::string> modes = {board.power_modes.empty() ? board.power_mode : board.power_modes.front().name};
  for (const auto& m : request.modes) {
    (void)devices::board_in_mode(board, m);  // InputError naming the board's modes
    if (std::find(modes.begin(), modes.end(), m) == modes.end()) modes.push_back(m);
  }
  return modes;
}

/// A completed characterization run of this board in this mode already in the database.
std::optional<int64_t> finished_run(costdb::Database& db, const std::string& board, const std::string& mode,
                                    uint64_t windows) {
  std::optional<int64_t> found;
  for (const auto& run : costdb::list_runs(db)) {
    if (run.board_kind != board || run.power_mode != mode || run.status != costdb::RunStatus::kCompleted) continue;
    if (run.plan && *run.plan != costdb::RunPlan::kProfile) continue;
    if (run.spans >= windows) found = run.id;  // the latest
  }
  return found;
}

ModeCharacterization fit_mode(costdb::Database& db, const std::string& board, const std::string& mode,
                              int64_t run_id) {
  const auto costs = costdb::MeasuredCosts::from_database(db, board, mode);
  ModeCharacterization m;
  m.mode = mode;
  m.run_id = run_id;
  const auto& t = costs.compute_time_fit();
  m.op_overhead_s = t.coef[0];
  m.flops_per_s = t.coef[1] > 0 ? 1 / t.coef[1] : 0;
  m.mem_bytes_per_s = t.coef[2] > 0 ? 1 / t.coef[2] : 0;
  m.time_cv_median = t.cv_median;
  m.time_cv_max = t.cv_max;
  m.compute_shapes = t.rows;
  const auto& in = costs.pagein_time_fit();
  const auto& out = costs.pageout_time_fit();
  m.pagein_latency_s = in.coef[0];
  m.pagein_bytes_per_s = in.coef[1] > 0 ? 1 / in.coef[1] : 0;
  m.pageout_latency_s = out.coef[0];
  m.pageout_bytes_per_s = out.coef[1] > 0 ? 1 / out.coef[1] : 0;
  m.has_energy = costs.has_energy();
  if (m.has_energy) {
    m.idle_w = costs.idle_power_w();
    m.compute_w = std::max(0.0, costs.compute_power().compute_bound_w - m.idle_w);
    m.memory_bound_w = std::max(0.0, costs.compute_power().memory_bound_w - m.idle_w);
    m.energy_cv_median = costs.compute_power().cv_median;
    m.pagein_w = std::max(0.0, costs.pagein_power_w() - m.idle_w);
    m.pageout_w = std::max(0.0, costs.pageout_power_w() - m.idle_w);
  }
  for (const auto& row : costdb::list_op_costs(db, board, run_id)) {
    if (row.phase == Phase::kIdle || row.op_kind.empty()) continue;
    const bool paging = row.phase == Phase::kPageIn || row.phase == Phase::kPageOut;
    m.shapes.push_back({.kind = row.op_kind,
                        .phase = std::string(profiler::to_string(row.phase)),
                        .flops = row.flops,
                        .bytes = paging ? row.bytes_in : row.bytes_in + row.bytes_out,
                        .time_s = row.time_s,
                        .net_energy_j = row.net_energy_j,
                        .gross_energy_j = row.gross_energy_j});
  }
  return m;
}

/// The descriptor with what was measured in it: the first mode's figures, the others as
/// ratios to it (as a descriptor's modes are).
devices::BoardProfile measured_profile(const devices::BoardProfile& claimed,
                                       const std::vector<ModeCharacterization>& modes,
                                       std::vector<std::string>& not_measured) {
  devices::BoardProfile b = claimed;
  const ModeCharacterization& base = modes.front();
  b.origin = "ergon characterize";
  if (base.flops_per_s > 0) b.flops_per_s = base.flops_per_s;
  else not_measured.push_back("cpu.flops_per_s: the fit found no compute-bound term; kept the descriptor's");
  if (base.mem_bytes_per_s > 0) b.mem_bytes_per_s = base.mem_bytes_per_s;
  else not_measured.push_back("cpu.mem_bytes_per_s: the fit found no memory-bound term; kept the descriptor's");
  b.op_overhead_s = base.op_overhead_s;
  if (base.pagein_bytes_per_s > 0) {
    b.pagein_bytes_per_s = base.pagein_bytes_per_s;
    b.pagein_latency_s = base.pagein_latency_s;
  }
  if (base.pageout_bytes_per_s > 0) {
    b.pageout_bytes_per_s = base.pageout_bytes_per_s;
    b.pageout_latency_s = base.pageout_latency_s;
  }
  if (base.has_energy) {
    b.idle_w = base.idle_w;
    b.compute_w = base.compute_w;
    b.storage_w = (base.pagein_w + base.pageout_w) / 2;
  } else {
    not_measured.push_back("power.idle_w, power.compute_w, storage.power_w: no power samples (a board without a "
                           "power probe); kept the descriptor's");
  }
  for (auto& mode : b.power_modes) {
    const auto it = std::find_if(modes.begin(), modes.end(), [&](const auto& m) { return m.mode == mode.name; });
    if (it == modes.end()) {
      not_measured.push_back("power mode " + mode.name + ": not measured (--modes all measures it); kept the descriptor's ratios");
      continue;
    }
    if (base.flops_per_s > 0 && it->flops_per_s > 0) mode.speed = it->flops_per_s / base.flops_per_s;
    if (base.has_energy && it->has_energy && base.compute_w > 0) mode.dynamic_power = it->compute_w / base.compute_w;
  }
  return b;
}

std::string pct(double measured, double claimed) {
  if (claimed == 0) return "";
  return fmt::format("{:+.1f} %", 100 * (measured / claimed - 1));
}

}  // namespace

namespace {

/// A microcontroller's grid: each op kind its firmware has a kernel for (conv2d, linear, relu,
/// max pool, add) at three sizes, forward and backward, each sized so its tensors (and, going
/// backward, their gradients) fit the firmware's arena: 16 KB on a 32 KB board, 224 KB on a
/// 256 KB one. 30 entries, 10 of paging and an idle one: within the firmware's 64.
std::vector<std::pair<profiler::OpShape, Phase>> microcontroller_grid(const devices::BoardProfile& board) {
  const bool tiny = board.ram_bytes <= 32 * 1024;
  std::vector<std::pair<profiler::OpShape, Phase>> ops;
  for (Phase phase : {Phase::kForward, Phase::kBackward}) {
    for (uint32_t hw : tiny ? std::vector<uint32_t>{4, 6, 8} : std::vector<uint32_t>{8, 16, 24})
      ops.emplace_back(profiler::conv2d(1, 3, 8, hw, hw, 3, phase), phase);
    for (uint32_t in : tiny ? std::vector<uint32_t>{32, 64, 128} : std::vector<uint32_t>{128, 512, 2048})
      ops.emplace_back(profiler::linear(1, in, 10, phase), phase);
    for (uint32_t n : tiny ? std::vector<uint32_t>{128, 512, 1024} : std::vector<uint32_t>{512, 2048, 8192}) {
      ops.emplace_back(profiler::relu(n, phase), phase);
      ops.emplace_back(profiler::add(n, phase), phase);
    }
    for (uint32_t hw : tiny ? std::vector<uint32_t>{4, 8, 12} : std::vector<uint32_t>{8, 16, 32})
      ops.emplace_back(profiler::max_pool(1, 8, hw, hw, 2, phase), phase);
  }
  for (uint32_t bytes : tiny ? std::vector<uint32_t>{256, 512, 1024, 2048, 4096}
                             : std::vector<uint32_t>{512, 2048, 8192, 16384, 32768})
    for (Phase phase : {Phase::kPageOut, Phase::kPageIn}) ops.emplace_back(profiler::paging(bytes), phase);
  return ops;
}

}  // namespace

devices::ProfilePlan characterization_plan(const devices::BoardProfile& board, uint32_t seed) {
  devices::ProfilePlan plan;
  uint32_t next_id = 1;
  if (devices::is_microcontroller(board)) {
    for (const auto& [shape, phase] : microcontroller_grid(board))
      plan.ops.push_back({.op_id = next_id++, .shape = shape, .phase = phase});
    devices::shuffle_between_idle(plan, seed, next_id, 100'000, 1);
    return plan;
  }

  // Every (kind, phase) of the zoo's layers: its smallest, median and largest shape by FLOPs.
  const BoardProfileCosts costs(board);
  std::map<std::pair<std::string, Phase>, std::vector<profiler::OpShape>> groups;
  for (const char* model : {"mlp", "vgg16-cifar", "resnet18-cifar", "mobilenetv2-cifar", "bert-tiny"}) {
    const auto graph = planner::build_training_graph(planner::zoo_model(model, 4), costs);
    for (const auto& node : graph.nodes) {
      if (node.flops == 0 && node.bytes_touched == 0) continue;
      const profiler::OpShape shape = node_shape(graph, node.id);
      const Phase phase = node.phase == planner::NodePhase::kForward ? Phase::kForward : Phase::kBackward;
      auto& group = groups[{std::string(profiler::to_string(shape.kind)), phase}];
      if (std::find(group.begin(), group.end(), shape) == group.end()) group.push_back(shape);
    }
  }
  for (auto& [key, shapes] : groups) {
    std::sort(shapes.begin(), shapes.end(), [](const auto& a, const auto& b) {
      return a.flops != b.flops ? a.flops < b.flops : a.bytes_in + a.bytes_out < b.bytes_in + b.bytes_out;
    });
    std::vector<std::size_t> picks = {0, shapes.size() / 2, shapes.size() - 1};
    picks.erase(std::unique(picks.begin(), picks.end()), picks.end());
    for (std::size_t i : picks) plan.ops.push_back({.op_id = next_id++, .shape = shapes[i], .phase = key.second});
  }
  for (uint32_t bytes : {64U << 10, 256U << 10, 1U << 20, 4U << 20, 16U << 20})
    for (Phase phase : {Phase::kPageOut, Phase::kPageIn})
      plan.ops.push_back({.op_id = next_id++, .shape = profiler::paging(bytes), .phase = phase});
  // Each window follows an idle gap: one untimed run takes the cold start.
  devices::shuffle_between_idle(plan, seed, next_id, kIdleUs, 1);
  return plan;
}

CharacterizeResult characterize(const CharacterizeRequest& request, const CharacterizeProgressFn& progress,
                                const std::atomic<int>& interrupts) {
  const auto modes = modes_to_measure(request);
  const devices::ProfilePlan plan = characterization_plan(request.board, request.seed);
  const uint64_t windows = plan_windows(plan);
  CharacterizeResult result;
  result.claimed = request.board;

  for (std::size_t i = 0; i < modes.size(); ++i) {
    CharacterizeProgress p{.mode = modes[i],
                           .mode_index = static_cast<int>(i),
                           .modes = static_cast<int>(modes.size()),
                           .windows_total = windows};
    std::optional<int64_t> run_id;
    {
      auto db = costdb::Database::open(request.db_path);
      run_id = finished_run(db, request.board.name, modes[i], windows);
    }
    const bool resumed = run_id.has_value();
    if (resumed) {
      p.step = CharacterizeProgress::Step::kResumed;
      p.windows_done = windows;
      if (progress) progress(p);
    } else {
      RecordRequest rec;
      rec.ports = {request.port};
      rec.baud = request.baud;
      rec.db_path = request.db_path;
      rec.options.plan = plan;
      rec.options.expected_board = request.board;
      rec.options.power_mode = modes[i];
      rec.options.seed = request.seed;
      rec.host_probe = request.host_probe;
      const auto outcomes = record_boards(
          rec,
          [&](std::span<const BoardStatus> boards, int64_t) {
            if (!progress || boards.empty()) return;
            p.windows_done = std::min<uint64_t>(boards.front().stats.spans, windows);
            progress(p);
          },
          interrupts);
      const auto& outcome = outcomes.front();
      if (outcome.state != devices::SessionState::kCompleted || !outcome.run_id) {
        std::string done;
        for (std::size_t j = 0; j < i; ++j) done += (done.empty() ? "" : ", ") + modes[j];
        throw DeviceError(fmt::format("{}: mode {} did not finish ({}); run the same command again to resume{}",
                                      request.port, modes[i],
                                      outcome.error.empty() ? std::string(devices::to_string(outcome.state))
                                                            : outcome.error,
                                      done.empty() ? std::string() : " (done: " + done + ")"));
      }
      run_id = outcome.run_id;
    }
    auto db = costdb::Database::open(request.db_path);
    if (!resumed) {
      p.step = CharacterizeProgress::Step::kAttributing;
      if (progress) progress(p);
      (void)attribute_run(db, *run_id);
    }
    p.step = CharacterizeProgress::Step::kFitting;
    if (progress) progress(p);
    ModeCharacterization m = fit_mode(db, request.board.name, modes[i], *run_id);
    m.resumed = resumed;
    result.modes.push_back(std::move(m));
  }
  result.measured = measured_profile(request.board, result.modes, result.not_measured);
  return result;
}

std::string board_card_markdown(const CharacterizeResult& r, const std::vector<std::string>& plots) {
  const auto& c = r.claimed;
  const auto& m = r.measured;
  const ModeCharacterization& base = r.modes.front();
  std::string md = fmt::format("# Board card: {}\n\n{}\n\n", c.name, c.description);
  md += fmt::format("Descriptor: `{}`. Measured by `ergon characterize` in {} mode(s); runs {}.\n\n", c.origin,
                    r.modes.size(), [&] {
                      std::string ids;
                      for (const auto& mode : r.modes)
                        ids += (ids.empty() ? "" : ", ") + std::to_string(mode.run_id) + (mode.resumed ? " (earlier)" : "");
                      return ids;
                    }());
  md += fmt::format("## Figures in mode {}\n\n| figure | descriptor | measured | difference |\n|---|---|---|---|\n",
                    base.mode);
  auto row = [&](const std::string& name, double claimed, double measured, const std::string& shown_claimed,
                 const std::string& shown_measured) {
    md += fmt::format("| {} | {} | {} | {} |\n", name, shown_claimed, shown_measured, pct(measured, claimed));
  };
  auto rate = [](double v, const char* unit) { return fmt::format("{:.4g} {}", v, unit); };
  row("compute rate (one core)", c.flops_per_s, m.flops_per_s, rate(c.flops_per_s / 1e9, "GFLOP/s"),
      rate(m.flops_per_s / 1e9, "GFLOP/s"));
  row("memory rate", c.mem_bytes_per_s, m.mem_bytes_per_s, rate(c.mem_bytes_per_s / 1e9, "GB/s"),
      rate(m.mem_bytes_per_s / 1e9, "GB/s"));
  row("op overhead", c.op_overhead_s, m.op_overhead_s, format_duration(c.op_overhead_s), format_duration(m.op_overhead_s));
  if (base.has_energy) {
    row("idle power", c.idle_w, m.idle_w, format_power(c.idle_w), format_power(m.idle_w));
    row("compute power above idle", c.compute_w, m.compute_w, format_power(c.compute_w), format_power(m.compute_w));
    row("storage power above idle", c.storage_w, m.storage_w, format_power(c.storage_w), format_power(m.storage_w));
  }
  row("page-in rate", c.pagein_bytes_per_s, m.pagein_bytes_per_s, rate(c.pagein_bytes_per_s / 1e6, "MB/s"),
      rate(m.pagein_bytes_per_s / 1e6, "MB/s"));
  row("page-in latency", c.pagein_latency_s, m.pagein_latency_s, format_duration(c.pagein_latency_s),
      format_duration(m.pagein_latency_s));
  row("page-out rate", c.pageout_bytes_per_s, m.pageout_bytes_per_s, rate(c.pageout_bytes_per_s / 1e6, "MB/s"),
      rate(m.pageout_bytes_per_s / 1e6, "MB/s"));
  row("page-out latency", c.pageout_latency_s, m.pageout_latency_s, format_duration(c.pageout_latency_s),
      format_duration(m.pageout_latency_s));
  md += fmt::format(
      "\nCompute time fit: {} shapes, cross-validated error median {:.1f} %, max {:.1f} %.{}\n",
      base.compute_shapes, 100 * base.time_cv_median, 100 * base.time_cv_max,
      base.has_energy ? fmt::format(" Energy: median {:.1f} %. Memory-bound ops draw {} above idle.",
                                    100 * base.energy_cv_median, format_power(base.memory_bound_w))
                      : std::string(" No power samples: energies not measured."));
  md += "The memory rate is the rate of the plan's memory-bound ops, whose working sets pass the board's "
        "caches: below a cache-resident rate on a board with a cache.\n";

  md += "\n## Power modes\n\nEnergy per GFLOP is the whole board's (idle included) while compute-bound: where it is "
        "lowest, a capped mode saves energy.\n\n| mode | compute rate | speed | power above idle | dynamic power | "
        "energy per GFLOP | run |\n|---|---|---|---|---|---|---|\n";
  for (const auto& mode : r.modes) {
    const auto* desc = [&]() -> const devices::PowerMode* {
      for (const auto& pm : m.power_modes)
        if (pm.name == mode.mode) return &pm;
      return nullptr;
    }();
    md += fmt::format("| {} | {:.4g} GFLOP/s | {:.3f} | {} | {} | {} | {} |\n", mode.mode, mode.flops_per_s / 1e9,
                      desc ? desc->speed : 0.0, mode.has_energy ? format_power(mode.compute_w) : "-",
                      desc && mode.has_energy ? fmt::format("{:.3f}", desc->dynamic_power) : "-",
                      mode.has_energy && mode.flops_per_s > 0
                          ? format_energy((mode.idle_w + mode.compute_w) / mode.flops_per_s * 1e9)
                          : "-",
                      mode.run_id);
  }

  md += fmt::format("\n## Ops measured in mode {}\n\n| kind | phase | FLOPs | bytes | time | GFLOP/s | net energy | nJ/FLOP |\n|---|---|---|---|---|---|---|---|\n",
                    base.mode);
  auto shapes = base.shapes;
  std::sort(shapes.begin(), shapes.end(), [](const auto& a, const auto& b) {
    return std::tie(a.kind, a.phase, a.flops, a.bytes) < std::tie(b.kind, b.phase, b.flops, b.bytes);
  });
  for (const auto& s : shapes) {
    const bool paging = s.phase == "page-in" || s.phase == "page-out";
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} |\n", s.kind, s.phase, paging ? "-" : std::to_string(s.flops),
                      format_bytes(s.bytes), format_duration(s.time_s),
                      paging || s.flops == 0 ? "-" : fmt::format("{:.3g}", static_cast<double>(s.flops) / s.time_s / 1e9),
                      s.net_energy_j ? format_energy(*s.net_energy_j) : "-",
                      s.net_energy_j && s.flops > 0 && !paging ? fmt::format("{:.3g}", *s.net_energy_j / static_cast<double>(s.flops) * 1e9) : "-");
  }
  if (!plots.empty()) {
    md += "\n## Plots\n\n";
    for (const auto& p : plots) md += fmt::format("![{}]({})\n\n", p, p);
  }
  if (!r.not_measured.empty()) {
    md += "\n## Not measured\n\n";
    for (const auto& line : r.not_measured) md += "- " + line + "\n";
  }
  return md;
}

}  // namespace ergon::app
