#include "devices/board_profile.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <mutex>
#include <string>

#include "common/error.h"
#include "devices/board_file.h"

namespace ergon::devices {
namespace {

using profiler::OpKind;
using profiler::Phase;

/// The boards this process knows: the built-in descriptors, the user folders' files (one of
/// the same name replaces a built-in), and files named on the command line. Built once, then
/// grown by files loaded by path; guarded, since agents and recorders look boards up from
/// their threads.
class Registry {
 public:
  static Registry& get() {
    static Registry registry;
    return registry;
  }

  std::vector<BoardProfile> all() {
    std::lock_guard lock(mutex_);
    return boards_;
  }

  std::optional<BoardProfile> find(std::string_view name) {
    if (is_board_file(name)) return add(load_board_file(std::filesystem::path(std::string(name))));
    std::lock_guard lock(mutex_);
    for (const auto& b : boards_)
      if (b.name == name) return b;
    // A user file of that name that did not parse: its error is the answer.
    for (const auto& [stem, error] : problems_)
      if (stem == name) throw InputError(error);
    return std::nullopt;
  }

  BoardProfile add(BoardProfile board) {
    std::lock_guard lock(mutex_);
    for (auto& b : boards_)
      if (b.name == board.name) return b = std::move(board);
    boards_.push_back(board);
    return board;
  }

  std::vector<std::string> problems() {
    std::lock_guard lock(mutex_);
    std::vector<std::string> out;
    for (const auto& p : problems_) out.push_back(p.second);
    return out;
  }

 private:
  Registry() {
    boards_ = builtin_boards();
    // The first folder holding NAME.json wins; a later one's file of that name is shadowed.
    std::vector<std::string> seen;
    for (const auto& dir : board_search_dirs()) {
      std::error_code ec;
      std::vector<std::filesystem::path> files;
      for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
        if (it->path().extension() == ".json") files.push_back(it->path());
      std::sort(files.begin(), files.end());
      for (const auto& path : files) {
        const std::string stem = path.stem().string();
        if (std::find(seen.begin(), seen.end(), stem) != seen.end()) continue;
        seen.push_back(stem);
        try {
          BoardProfile b = load_board_file(path);
          if (b.name != stem)
            throw InputError(path.string() + ": name: expected \"" + stem + "\", the file's name, got \"" + b.name + "\"");
          replace_or_append(std::move(b));
        } catch (const InputError& e) {
          problems_.emplace_back(stem, e.what());
        }
      }
    }
  }

  void replace_or_append(BoardProfile board) {
    for (auto& b : boards_)
      if (b.name == board.name) {
        b = std::move(board);
        return;
      }
    boards_.push_back(std::move(board));
  }

  std::mutex mutex_;
  std::vector<BoardProfile> boards_;
  std::vector<std::pair<std::string, std::string>> problems_;  ///< file stem, its error
};

}  // namespace

bool is_board_file(std::string_view name) {
  return name.find('/') != std::string_view::npos || name.ends_with(".json");
}

std::vector<BoardProfile> board_profiles() { return Registry::get().all(); }

std::vector<BoardProfile> builtin_boards() {
  std::vector<BoardProfile> boards;
  for (const BuiltinBoardFile& f : builtin_board_files())
    boards.push_back(parse_board_descriptor(f.text, "built-in boards/" + std::string(f.file)));
  return boards;
}

std::vector<std::string> board_file_problems() { return Registry::get().problems(); }

std::optional<BoardProfile> find_board(std::string_view name) { return Registry::get().find(name); }

std::optional<BoardProfile> find_board(BoardKind kind) {
  if (kind == BoardKind::kUnknown || kind == BoardKind::kDescribed) return std::nullopt;
  for (const auto& b : board_profiles())
    if (b.kind == kind) return b;
  return std::nullopt;
}

std::string board_names() {
  std::string out;
  for (const auto& b : board_profiles()) {
    if (!out.empty()) out += ", ";
    out += b.name;
  }
  return out;
}

ProfileCost profile_compute_cost(const BoardProfile& board, uint64_t flops, uint64_t bytes) {
  // Roofline: compute- or memory-bound, plus a fixed invocation overhead. Memory-bound ops
  // draw a little less than compute-bound ones.
  const double compute_s = static_cast<double>(flops) / board.flops_per_s;
  const double memory_s = static_cast<double>(bytes) / board.mem_bytes_per_s;
  ProfileCost t;
  t.time_s = board.op_overhead_s + std::max(compute_s, memory_s);
  const double activity = compute_s >= memory_s ? 1.0 : 0.7;
  t.power_w = board.idle_w + activity * board.compute_w;
  return t;
}

ProfileCost profile_paging_cost(const BoardProfile& board, uint64_t bytes, Phase direction) {
  const bool in = direction == Phase::kPageIn;
  const double bw = in ? board.pagein_bytes_per_s : board.pageout_bytes_per_s;
  const double latency = in ? board.pagein_latency_s : board.pageout_latency_s;
  return {.time_s = latency + static_cast<double>(bytes) / bw,
          .power_w = board.idle_w + board.storage_w};
}

std::optional<BoardProfile> in_mode(const BoardProfile& board, std::string_view mode) {
  for (const PowerMode& m : board.power_modes) {
    if (m.name != mode) continue;
    // The figures are the current mode's: scale from it.
    const PowerMode* base = &board.power_modes.front();
    for (const PowerMode& c : board.power_modes)
      if (c.name == board.power_mode) base = &c;
    BoardProfile b = board;
    const double speed = m.speed / base->speed;
    b.flops_per_s *= speed;
    b.mem_bytes_per_s *= speed;
    b.op_overhead_s /= speed;
    b.compute_w *= m.dynamic_power / base->dynamic_power;
    b.power_mode = m.name;
    return b;
  }
  return std::nullopt;
}

BoardProfile with_threads(const BoardProfile& board, int threads) {
  if (threads < 1) throw InputError("threads: at least 1, not " + std::to_string(threads));
  BoardProfile b = board;
  const int n = std::min(threads, std::max(board.cores, 1));
  b.flops_per_s *= n;
  b.compute_w *= n;
  return b;
}

std::string power_mode_names(const BoardProfile& board) {
  std::string names;
  for (const PowerMode& m : board.power_modes) {
    if (!names.empty()) names += ", ";
    names += m.name;
  }
  return names;
}

probes::PowerSample monitor_sample(const BoardProfile& board, const probes::Ina219Model& ina,
                                   double power_w, double shunt_noise_v, uint64_t ticks) {
  const SupplyReading supply = supply_reading(board, power_w);
  return ina.decode(ina.convert(supply.bus_v, supply.current_a, shunt_noise_v), 0, ticks);
}

uint64_t simulated_ticks(int64_t true_ns, double drift_ppm, int64_t offset_ns, uint64_t tick_hz) {
  const long double device_ns = static_cast<long double>(true_ns) * (1.0L + drift_ppm * 1e-6L) +
                                static_cast<long double>(offset_ns);
  return static_cast<uint64_t>(device_ns * static_cast<long double>(tick_hz) / 1e9L);
}

SupplyReading supply_reading(const BoardProfile& board, double power_w) {
  constexpr double kSourceResistanceOhm = 0.05;
  const double v = board.bus_v;
  const double r = kSourceResistanceOhm;
  const double current_a = (v - std::sqrt(std::max(0.0, v * v - 4 * r * power_w))) / (2 * r);
  return {.bus_v = v - r * current_a, .current_a = current_a};
}

ProfileCost profile_op_cost(const BoardProfile& board, const profiler::OpShape& shape, Phase phase) {
  switch (shape.kind) {
    case OpKind::kPaging: return profile_paging_cost(board, shape.bytes_in, phase);
    case OpKind::kIdle: return {.time_s = shape.dims[0] * 1e-6, .power_w = board.idle_w};
    default: return profile_compute_cost(board, shape.flops, shape.bytes_in + shape.bytes_out);
  }
}

BoardProfile board_named(std::string_view name) {
  auto board = find_board(name);
  if (!board)
    throw InputError("unknown board '" + std::string(name) + "' (known: " + board_names() +
                     "; or a descriptor file, docs/boards.md)");
  return *board;
}

BoardProfile board_in_mode(const BoardProfile& board, std::string_view mode) {
  if (mode.empty()) return board;
  auto b = in_mode(board, mode);
  if (!b)
    throw InputError("board " + std::string(board.name) + " has no power mode '" + std::string(mode) +
                     "' (it has " + power_mode_names(board) + ")");
  return *b;
}

}  // namespace ergon::devices
