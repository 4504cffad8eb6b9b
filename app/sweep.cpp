#include "app/sweep.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <map>
#include <memory>
#include <sstream>

#include "app/attribute.h"
#include "app/record.h"
#include "common/error.h"
#include "devices/board_profile.h"
#include "devices/profile_plan.h"
#include "devices/sim_server.h"

namespace ergon::app {
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

std::vector<ModeCost> sweep_modes(const SweepRequest& args, const SweepProgress& progress) {
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
    if (progress) progress(mode, out.size() + 1, modes.size());
    RecordRequest rec;
    rec.db_path = args.db;
    rec.options.expected_board = board;
    rec.options.power_mode = mode;
    rec.ports = {port};
    std::atomic<int> interrupts{0};
    const auto outcomes = record_boards(rec, {}, interrupts);
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
      if (!op.energy_known())
        throw DeviceError("the run in mode " + mode + " (run " + std::to_string(*outcomes[0].run_id) +
                          ") has no power samples for op " + std::to_string(op.op_id) +
                          ": a mode sweep compares energies and needs the board's power probe");
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

}  // namespace ergon::app
