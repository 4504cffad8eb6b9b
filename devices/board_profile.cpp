#include "devices/board_profile.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "common/error.h"

namespace ergon::devices {
namespace {

using profiler::OpKind;
using profiler::Phase;

std::vector<BoardProfile> make_profiles() {
  std::vector<BoardProfile> boards;

  BoardProfile tx2;
  tx2.kind = BoardKind::kJetsonTx2;
  tx2.name = "tx2";
  tx2.description = "NVIDIA Jetson TX2 (Cortex-A57 CPU, 8 GB), Linux agent";
  tx2.tick_hz = 1'000'000'000;
  tx2.ram_bytes = 8ULL << 30;
  tx2.firmware_version = 0x000100;
  tx2.flops_per_s = 4.0e9;
  tx2.mem_bytes_per_s = 10e9;
  tx2.op_overhead_s = 20e-6;
  tx2.bus_v = 19.0;
  tx2.idle_w = 1.9;
  tx2.compute_w = 0.77 + 0.31;  // single-core CPU dynamic + memory
  tx2.cores = 4;                // the Cortex-A57 cluster (the Denver pair is off in MAXQ)
  tx2.storage_w = 0.35;
  tx2.pagein_bytes_per_s = 108.5e6;
  tx2.pagein_latency_s = 0.54e-3;
  tx2.pageout_bytes_per_s = 94.4e6;
  tx2.pageout_latency_s = 2.4e-3;
  tx2.cold_start_penalty = 0.30;
  tx2.clock_drift_ppm = 18;
  tx2.power_jitter = 0.03;
  tx2.shunt_noise_v = 20e-6;
  tx2.ina219 = {.shunt_ohm = 0.02, .current_lsb_a = 100e-6};
  tx2.rail_name = "VDD_IN";
  // nvpmodel: MAXN (all cores at 2.0 GHz), MAXP_CORE_ARM (1.4 GHz), MAXQ (1.2 GHz, lower
  // voltage). The profile's figures are MAXN's.
  tx2.power_modes = {{"MAXN", "nvpmodel 0: CPU at 2.0 GHz", 1.0, 1.0},
                     {"MAXP_CORE_ARM", "nvpmodel 3: CPU at 1.4 GHz", 0.7, 0.5},
                     {"MAXQ", "nvpmodel 1: CPU at 1.2 GHz, lower voltage", 0.6, 0.35}};
  tx2.power_mode = tx2.power_modes.front().name;
  tx2.mode_switch_s = 0.2;  // nvpmodel: a process that hot-plugs cores and sets clocks
  // The simulator's truth model (docs/accuracy.md, "Simulator truth model"): Linux on an
  // A57 core, eMMC storage, the module's heat sink with the fan off. Thermal figures are
  // illustrative: four busy cores tend to 96 C and throttle at 90 C to 1.4 GHz
  // (MAXP_CORE_ARM's clock and power) after about a minute; one core settles at 54 C.
  tx2.sim_truth = {.time_jitter = 0.010,
                   .idle_temp_c = 40,
                   .temp_rise_c_per_w = 13,
                   .thermal_tau_s = 30,
                   .throttle_c = 90,
                   .release_c = 87,
                   .throttle_speed = 0.7,
                   .throttle_dynamic_power = 0.5,
                   .cache_bytes = 2 << 20,  // the A57 cluster's shared L2
                   .spill_slowdown = 0.25,
                   .storage_latency_jitter = 0.2};
  boards.push_back(tx2);

  BoardProfile pi4;
  pi4.kind = BoardKind::kRaspberryPi4;
  pi4.name = "pi4";
  pi4.description = "Raspberry Pi 4 Model B (Cortex-A72, 4 GB), Linux agent";
  pi4.tick_hz = 1'000'000'000;
  pi4.ram_bytes = 4ULL << 30;
  pi4.firmware_version = 0x000100;
  pi4.flops_per_s = 3.0e9;
  pi4.mem_bytes_per_s = 4e9;
  pi4.op_overhead_s = 15e-6;
  pi4.bus_v = 5.1;
  pi4.idle_w = 2.2;
  pi4.compute_w = 0.8;  // ~0.6 A at 5 V while active
  pi4.cores = 4;
  pi4.storage_w = 0.15;  // ~30 mA at 5 V
  pi4.pagein_bytes_per_s = 45.5e6;
  pi4.pagein_latency_s = 0.2e-3;
  pi4.pageout_bytes_per_s = 24.5e6;
  pi4.pageout_latency_s = 0.3e-3;
  pi4.cold_start_penalty = 0.25;
  pi4.clock_drift_ppm = -32;
  pi4.power_jitter = 0.03;
  pi4.shunt_noise_v = 20e-6;
  pi4.ina219 = {.shunt_ohm = 0.1, .current_lsb_a = 100e-6};
  pi4.rail_name = "5V";
  // cpufreq: the A72's default 1.5 GHz, and lower fixed frequencies (voltage follows).
  pi4.power_modes = {{"1500MHz", "cpufreq 1.5 GHz (default)", 1.0, 1.0},
                     {"1000MHz", "cpufreq 1.0 GHz", 0.667, 0.42},
                     {"600MHz", "cpufreq 600 MHz", 0.4, 0.2}};
  pi4.power_mode = pi4.power_modes.front().name;
  pi4.mode_switch_s = 355e-6;  // the A72's cpuinfo_transition_latency
  // Truth model: Linux on an A72 core, a microSD card, a bare board in free air. The
  // firmware throttles the ARM cores from 80 C (Raspberry Pi documentation, "Frequency
  // management and thermal control"); here to 1.0 GHz (the 1000MHz mode's clock and power)
  // until 78 C. Rise and time constant are illustrative: four busy cores tend to 88 C and
  // throttle after about a minute, one core settles at 60 C.
  pi4.sim_truth = {.time_jitter = 0.015,
                   .idle_temp_c = 50,
                   .temp_rise_c_per_w = 12,
                   .thermal_tau_s = 40,
                   .throttle_c = 80,
                   .release_c = 78,
                   .throttle_speed = 0.667,
                   .throttle_dynamic_power = 0.42,
                   .cache_bytes = 1 << 20,  // the A72 cluster's shared L2
                   .spill_slowdown = 0.35,
                   .storage_latency_jitter = 0.3};
  boards.push_back(pi4);

  BoardProfile nrf;
  nrf.kind = BoardKind::kNrf52840;
  nrf.name = "nrf52840";
  nrf.description = "Nordic nRF52840 (Cortex-M4F 64 MHz, 256 KB RAM), Ergon firmware";
  nrf.tick_hz = 64'000'000;
  nrf.ram_bytes = 256 * 1024;
  nrf.firmware_version = 0x000100;
  nrf.flops_per_s = 6.4e6;
  nrf.mem_bytes_per_s = 60e6;
  nrf.op_overhead_s = 5e-6;
  nrf.bus_v = 3.3;
  nrf.idle_w = 3.3 * 0.6e-3;
  nrf.compute_w = 3.3 * 3.3e-3;
  nrf.storage_w = 3.3 * 0.1;  // SD card, ~100 mA
  nrf.pagein_bytes_per_s = 4.6e6;
  nrf.pagein_latency_s = 0.109e-3;
  nrf.pageout_bytes_per_s = 4.4e6;
  nrf.pageout_latency_s = 0.113e-3;
  nrf.cold_start_penalty = 0.05;
  nrf.clock_drift_ppm = 40;
  nrf.power_jitter = 0.02;
  nrf.shunt_noise_v = 10e-6;
  nrf.ina219 = {.shunt_ohm = 1.0, .current_lsb_a = 10e-6};
  nrf.rail_name = "VDD";
  nrf.power_modes = {{"64MHz", "the M4F's only clock", 1.0, 1.0}};
  nrf.power_mode = nrf.power_modes.front().name;
  // Truth model: bare-metal firmware (interrupts are the only jitter), no data cache, an SD
  // card over SPI; a few milliwatts never heat it enough to matter.
  nrf.sim_truth = {.time_jitter = 0.003, .storage_latency_jitter = 0.3};
  boards.push_back(nrf);

  BoardProfile mkr;
  mkr.kind = BoardKind::kMkr1000;
  mkr.name = "mkr1000";
  mkr.description = "Arduino MKR1000 (SAMD21 Cortex-M0+ 48 MHz, 32 KB RAM), Ergon firmware";
  mkr.tick_hz = 1'000'000;
  mkr.ram_bytes = 32 * 1024;
  mkr.firmware_version = 0x000100;
  mkr.flops_per_s = 0.17e6;
  mkr.mem_bytes_per_s = 8e6;
  mkr.op_overhead_s = 20e-6;
  mkr.bus_v = 3.3;
  mkr.idle_w = 3.3 * 8e-3;
  mkr.compute_w = 3.3 * 12e-3;  // 20 mA total while active
  mkr.storage_w = 3.3 * 0.1;
  mkr.pagein_bytes_per_s = 4.6e6;
  mkr.pagein_latency_s = 0.109e-3;
  mkr.pageout_bytes_per_s = 4.4e6;
  mkr.pageout_latency_s = 0.113e-3;
  mkr.cold_start_penalty = 0.05;
  mkr.clock_drift_ppm = -55;
  mkr.power_jitter = 0.02;
  mkr.shunt_noise_v = 10e-6;
  mkr.ina219 = {.shunt_ohm = 1.0, .current_lsb_a = 10e-6};
  mkr.rail_name = "VIN";
  mkr.power_modes = {{"48MHz", "the M0+'s only clock", 1.0, 1.0}};
  mkr.power_mode = mkr.power_modes.front().name;
  mkr.sim_truth = {.time_jitter = 0.003, .storage_latency_jitter = 0.3};
  boards.push_back(mkr);

  return boards;
}

}  // namespace

const std::vector<BoardProfile>& board_profiles() {
  static const std::vector<BoardProfile> boards = make_profiles();
  return boards;
}

std::optional<BoardProfile> find_board(std::string_view name) {
  for (const auto& b : board_profiles())
    if (b.name == name) return b;
  return std::nullopt;
}

std::optional<BoardProfile> find_board(BoardKind kind) {
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
    throw InputError("unknown board '" + std::string(name) + "' (known: " + board_names() + ")");
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
