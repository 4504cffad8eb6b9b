#include "cli/sweep_cmd.h"

#include <fmt/format.h>

#include <atomic>
#include <iostream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli/attribute_cmd.h"
#include "cli/record.h"
#include "common/error.h"
#include "devices/board_profile.h"
#include "devices/profile_plan.h"
#include "devices/sim_server.h"

namespace ergon::cli {
namespace {

std::vector<std::string> wanted_modes(const devices::BoardProfile& board, const std::string& list) {
  std::vector<std::string> all;
  for (const auto& m : board.power_modes) all.emplace_back(m.name);
  if (list == "all") return all;
  std::vector<std::string> out;
  std::stringstream ss(list);
  for (std::string m; std::getline(ss, m, ',');) {
    if (std::find(all.begin(), all.end(), m) == all.end())
      throw InputError("board " + std::string(board.name) + " has no power mode '" + m + "' (it has " +
                       devices::power_mode_names(board) + ")");
    out.push_back(m);
  }
  if (out.empty()) throw InputError("--modes: all, or a comma-separated list of modes");
  return out;
}

}  // namespace

std::vector<ModeCost> sweep_modes(const SweepArgs& args, std::ostream& progress) {
  const auto board = devices::board_named(args.board);
  if (args.sim == !args.port.empty()) throw InputError("sweep --sim, or a board on --port");
  if (board.power_modes.size() < 2)
    throw InputError(args.board + " has one power mode (" + devices::power_mode_names(board) +
                     "): nothing to sweep; ergon record measures it");
  const auto modes = wanted_modes(board, args.modes);
  const devices::ProfilePlan plan = devices::default_profile_plan(board, 1);
  std::map<uint32_t, std::string> kind_of;
  for (const auto& op : plan.ops)
    kind_of[op.op_id] = fmt::format("{} {}", profiler::to_string(op.shape.kind), profiler::to_string(op.phase));
  // One board for the whole sweep: each run asks it to switch first (SetPowerMode), the
  // simulated board the same way as a real one.
  std::unique_ptr<devices::SimServer> sim;
  if (args.sim) {
    sim = devices::SimServer::open_pty(board, devices::SimServerOptions{.speed = 0, .seed = 1, .threads = args.threads});
    sim->start();
  }
  const std::string port = sim ? sim->link_name() : args.port;
  std::vector<ModeCost> out;
  for (const auto& mode : modes) {
    progress << fmt::format("{} in mode {}: recording the profile plan\n", args.board, mode);
    RecordRequest rec;
    rec.db_path = args.db;
    rec.options.expected_board = board;
    rec.options.power_mode = mode;
    rec.ports = {port};
    std::atomic<int> interrupts{0};
    std::ostringstream log;
    const auto outcomes = record_boards(rec, log, interrupts);
    if (outcomes.empty() || !outcomes[0].run_id || outcomes[0].state != devices::SessionState::kCompleted)
      throw DeviceError("the run in mode " + mode + " failed: " + (outcomes.empty() ? "no outcome" : outcomes[0].error));
    auto db = costdb::Database::open(args.db);
    const AttributedRun a = attribute_run(db, *outcomes[0].run_id);
    if (!a.run.power_mode.empty() && a.run.power_mode != mode)
      throw DeviceError("the board says it runs in mode " + a.run.power_mode + ", not " + mode);
    ModeCost c{mode, *outcomes[0].run_id, 0, 0, {}, false, outcomes[0].mode_switch_s};
    std::map<std::string, std::pair<double, double>> kinds;
    for (const auto& op : a.attribution.ops) {
      if (op.phase == profiler::Phase::kIdle) continue;
      c.time_s += op.time_s;
      c.energy_j += op.gross_energy_j;
      auto& k = kinds[kind_of[op.op_id]];
      k.first += op.time_s;
      k.second += op.gross_energy_j;
    }
    c.by_kind.assign(kinds.begin(), kinds.end());
    out.push_back(std::move(c));
  }
  for (auto& c : out)
    c.on_front = std::none_of(out.begin(), out.end(), [&](const ModeCost& o) {
      return &o != &c && o.time_s <= c.time_s && o.energy_j <= c.energy_j && (o.time_s < c.time_s || o.energy_j < c.energy_j);
    });
  return out;
}

int run_sweep(const SweepArgs& args, std::ostream& out) {
  const auto modes = sweep_modes(args, std::cerr);
  if (args.json) {
    nlohmann::json j = nlohmann::json::array();
    for (const auto& m : modes) {
      nlohmann::json kinds = nlohmann::json::object();
      for (const auto& [k, v] : m.by_kind) kinds[k] = {{"time_s", v.first}, {"energy_j", v.second}};
      j.push_back({{"mode", m.mode}, {"run_id", m.run_id}, {"time_s", m.time_s}, {"energy_j", m.energy_j},
                   {"on_front", m.on_front}, {"by_kind", kinds},
                   {"switch_s", m.switch_s ? nlohmann::json(*m.switch_s) : nlohmann::json(nullptr)}});
    }
    out << j.dump(2) << "\n";
    return 0;
  }
  const ModeCost& ref = modes.front();
  out << fmt::format("{}: one pass of the profile plan per mode, against {} (* on the energy/time front)\n",
                     args.board, ref.mode);
  out << fmt::format("  {:<16} {:>6} {:>12} {:>8} {:>12} {:>8} {:>12}\n", "mode", "run", "time (s)", "time",
                     "energy (J)", "energy", "switch (ms)");
  for (const auto& m : modes)
    out << fmt::format("  {:<16} {:>6} {:>12.5g} {:>7.3f}x {:>12.5g} {:>7.3f}x {:>12} {}\n", m.mode, m.run_id,
                       m.time_s, m.time_s / ref.time_s, m.energy_j, m.energy_j / ref.energy_j,
                       m.switch_s ? fmt::format("{:.3f}", *m.switch_s * 1e3) : "-", m.on_front ? "*" : "");
  out << "\nby op kind (time x, energy x against " << ref.mode << "):\n";
  for (std::size_t k = 0; k < ref.by_kind.size(); ++k) {
    out << fmt::format("  {:<22}", ref.by_kind[k].first);
    for (const auto& m : modes) {
      const auto it = std::find_if(m.by_kind.begin(), m.by_kind.end(),
                                   [&](const auto& e) { return e.first == ref.by_kind[k].first; });
      if (it == m.by_kind.end() || ref.by_kind[k].second.first <= 0) continue;
      out << fmt::format("  {}: {:.2f}x {:.2f}x", m.mode, it->second.first / ref.by_kind[k].second.first,
                         it->second.second / ref.by_kind[k].second.second);
    }
    out << "\n";
  }
  out << "\nplan with a mode's costs: ergon plan --db " << args.db << " --board " << args.board
      << " --power-mode MODE (or auto)\n";
  return 0;
}

}  // namespace ergon::cli
