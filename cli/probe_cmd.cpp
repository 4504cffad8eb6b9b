#include "cli/probe_cmd.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <iostream>
#include <ostream>
#include <vector>

#include "app/quantities.h"
#include "common/clock.h"
#include "common/error.h"
#include "costdb/database.h"
#include "probes/i2c.h"
#include "probes/ina2xx.h"
#include "probes/mcp2221.h"
#include "probes/nvml.h"
#include "probes/probe.h"
#include "probes/sysfs_probes.h"
#include "probes/tegrastats.h"

namespace ergon::cli {
namespace {

double parse_rate(const std::string& text) {
  if (text == "max") return 0;
  try {
    std::size_t used = 0;
    const double v = std::stod(text, &used);
    if (used == text.size() && v > 0) return v;
  } catch (const std::exception&) {
  }
  throw InputError("--rate must be 'max' or samples a second (e.g. 500), not '" + text + "'");
}


}  // namespace

int run_probe_read(const ProbeReadArgs& args, std::ostream& out,
                   const std::atomic<int>& interrupts) {
  const SteadyClock clock;
  app::Duration::parse(args.duration, "--duration").seconds;  // a typo fails before the probe is touched
  const probes::ProbeSpec spec = probes::parse_probe_spec(args.probe);
  auto probe = probes::open_probe(spec, parse_rate(args.rate), clock);
  const probes::ProbeInfo& info = probe->info();

  std::optional<costdb::Database> db;
  std::optional<costdb::RunWriter> run;
  const int64_t start_ns = clock.now_ns();
  if (!args.db.empty()) {
    db.emplace(costdb::Database::open(args.db));
    costdb::BoardInfo board;
    board.kind = "probe";
    board.name = info.kind + " " + info.location;
    board.tick_hz = 1'000'000'000;  // samples carry the host clock's ns
    board.rails = info.channels;
    run.emplace(*db, board, spec.text, wall_time_ns());
    run->add_event(wall_time_ns(), "info",
                   fmt::format("{} at {}, {:.1f} samples/s", info.kind, info.location, info.max_rate_hz));
  }

  probe->start();
  const bool tty = ::isatty(STDOUT_FILENO) == 1 && &out == &std::cout;
  std::vector<probes::PowerSample> samples, batch;
  uint64_t count = 0, overflows = 0;
  double power_sum_w = 0;
  std::vector<double> rail_sum_w;  // without a total rail: each rail's, never their sum
  std::vector<uint64_t> rail_count;
  int64_t last_line_ns = start_ns;
  auto line = [&](int64_t now) {
    const double elapsed_s = static_cast<double>(now - start_ns) * 1e-9;
    const double rate = elapsed_s > 0 ? static_cast<double>(count) / elapsed_s : 0;
    std::string mean = fmt::format("{:.4f} W", count > 0 ? power_sum_w / static_cast<double>(count) : 0.0);
    if (!info.total_known) {
      mean = "unknown (no rail measures the board's input; rails:";
      for (std::size_t ch = 0; ch < info.channels.size() && ch < rail_sum_w.size(); ++ch)
        mean += fmt::format(" {} {:.4f} W", info.channels[ch].name,
                            rail_count[ch] > 0 ? rail_sum_w[ch] / static_cast<double>(rail_count[ch]) : 0.0);
      mean += ")";
    }
    return fmt::format("{} at {}: {} samples, {:.1f}/s ({:.1f} % of the probe's {:.1f}/s), mean "
                       "{}, {} overflows, {} read errors",
                       info.kind, info.location, count, rate, 100 * rate / info.max_rate_hz,
                       info.max_rate_hz, mean, overflows, probe->read_errors());
  };
  const auto end_ns = start_ns + static_cast<int64_t>(app::Duration::parse(args.duration, "--duration").seconds * 1e9);
  while (clock.now_ns() < end_ns && interrupts.load() == 0) {
    samples.clear();
    probe->read(samples);
    // Channel 0 is the whole reading (tegrastats: the module's input rail; its other rails
    // are parts of it and are never added to it).
    for (const auto& s : samples) {
      if (!info.total_known && s.rail < info.channels.size()) {
        rail_sum_w.resize(info.channels.size());
        rail_count.resize(info.channels.size());
        rail_sum_w[s.rail] += s.power_uw * 1e-6;
        ++rail_count[s.rail];
      }
      if (s.rail != 0) continue;
      ++count;
      power_sum_w += s.power_uw * 1e-6;
      overflows += (s.flags & probes::kSampleOverflow) != 0 ? 1 : 0;
    }
    if (run) batch.insert(batch.end(), samples.begin(), samples.end());
    const int64_t now = clock.now_ns();
    if (now - last_line_ns >= 250'000'000) {
      if (run) {
        run->add_samples(batch);
        batch.clear();
        db->commit_batch();
      }
      if (tty) out << '\r' << line(now) << std::flush;
      last_line_ns = now;
    }
  }
  probe->stop();
  if (run) {
    run->add_samples(batch);
    costdb::LinkCounters counters;
    run->update(interrupts.load() == 0 ? costdb::RunStatus::kCompleted : costdb::RunStatus::kStopped,
                counters, wall_time_ns());
    db->commit_batch();
  }
  if (tty) out << '\r';
  out << line(clock.now_ns()) << "\n";
  if (run) out << fmt::format("stored as run {} in {}\n", run->run_id(), args.db);
  return 0;
}

int run_probe_list(std::ostream& out) {
  namespace fs = std::filesystem;
  std::vector<std::string> buses;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/dev", ec))
    if (entry.path().filename().string().rfind("i2c-", 0) == 0) buses.push_back(entry.path().string());
  std::sort(buses.begin(), buses.end());
  if (buses.empty())
    out << "i2c: no /dev/i2c-* buses (load i2c-dev: modprobe i2c-dev; on a Raspberry Pi, enable "
           "I2C with raspi-config)\n";
  for (const auto& path : buses) {
    std::unique_ptr<probes::I2cBus> bus;
    try {
      bus = probes::open_linux_i2c(path);
    } catch (const DeviceError& e) {
      out << "i2c: " << e.what() << "\n";
      continue;
    }
    int found = 0;
    for (uint8_t address = 0x40; address <= 0x4F; ++address) {
      try {
        const uint16_t config = probes::read_register(*bus, address, probes::ina2xx_reg::kConfig);
        std::string kind = "a device (an INA219 keeps no ID register)";
        bool identified = false;
        try {
          const uint16_t maker = probes::read_register(*bus, address, probes::ina2xx_reg::kManufacturerId);
          const uint16_t die = probes::read_register(*bus, address, probes::ina2xx_reg::kDieId);
          if (maker == 0x5449 && (die == 0x2260 || die == 0x2270)) {
            kind = die == 0x2260 ? "ina226" : "ina260";
            identified = true;
          }
        } catch (const DeviceError&) {
        }
        if (!identified && config == probes::ina2xx_reset_config(probes::Ina2xxChip::kIna219))
          kind = "ina219 (power-on configuration)";
        out << fmt::format("{}: {}@0x{:02X}, configuration 0x{:04X}  ->  --probe {}:{}@0x{:02X}\n",
                           kind, path, address, config,
                           kind.rfind("ina", 0) == 0 ? kind.substr(0, 6) : "ina219", path, address);
        ++found;
      } catch (const DeviceError&) {
        // nothing at this address
      }
    }
    if (found == 0) out << "i2c: " << path << ": nothing answers at 0x40..0x4F (INA2xx addresses)\n";
  }
  const auto bridges = probes::find_mcp2221();
  if (bridges.empty()) out << "mcp2221: no USB-I2C bridge (04d8:00dd) plugged in\n";
  for (std::size_t i = 0; i < bridges.size(); ++i)
    out << fmt::format("mcp2221: {}  ->  --probe ina219:mcp2221{}@0x40 (the chip's address)\n",
                       bridges[i], i == 0 ? std::string() : ":" + std::to_string(i));
  const auto ina3221 = probes::find_ina3221("/");
  if (ina3221.empty())
    out << "ina3221: none (Jetson modules expose them under /sys/class/hwmon or "
           "/sys/bus/i2c/drivers/ina3221x)\n";
  for (const auto& f : ina3221) {
    const bool has_input = std::any_of(f.channels.begin(), f.channels.end(), [](const std::string& c) {
      return probes::tegrastats_total_rail(c) != nullptr;
    });
    out << fmt::format("ina3221: {} ({}): {}{}  ->  --probe ina3221:{}\n", f.dir.string(), f.kind,
                       fmt::join(f.channels, ", "),
                       has_input ? "" : " (parts only: no rail measures the module's input)", f.dir.string());
  }
  const auto rapl = probes::find_rapl("/");
  if (rapl.empty()) out << "rapl: none (/sys/class/powercap/intel-rapl:*: x86 CPUs only)\n";
  for (const auto& f : rapl)
    out << fmt::format("rapl: {} ({})  ->  --probe rapl\n", f.dir.string(), f.channels.front());
  try {
    auto nvml = probes::Nvml::open();
    const unsigned n = nvml->device_count();
    for (unsigned gpu = 0; gpu < n; ++gpu) {
      const auto [lo, hi] = nvml->power_limit_range_w(gpu);
      // The instant reading where the driver has it: on Ampere and newer the plain one is a
      // one-second average (docs/boards.md, "NVML on an H100").
      std::string now;
      try {
        now = fmt::format("{:.0f} W now", nvml->instant_power_w(gpu));
      } catch (const DeviceError&) {
        now = fmt::format("{:.0f} W (the driver's average)", nvml->power_w(gpu));
      }
      out << fmt::format("nvml: GPU {} {}: {}, limit {:.0f} W ({:.0f}..{:.0f})  ->  --probe nvml\n", gpu,
                         nvml->name(gpu), now, nvml->power_limit_w(gpu), lo, hi);
    }
  } catch (const DeviceError& e) {
    out << "nvml: " << e.what() << "\n";
  }
  // tegrastats: on a Jetson, in PATH (L4T puts it in /usr/bin).
  std::string tegrastats;
  const char* path_env = std::getenv("PATH");
  std::string path = path_env != nullptr ? path_env : "/usr/bin:/bin";
  for (std::size_t start = 0; start <= path.size() && tegrastats.empty();) {
    const std::size_t end = std::min(path.find(':', start), path.size());
    const fs::path candidate = fs::path(path.substr(start, end - start)) / "tegrastats";
    if (::access(candidate.c_str(), X_OK) == 0) tegrastats = candidate.string();
    start = end + 1;
  }
  if (tegrastats.empty())
    out << "tegrastats: not in PATH (it ships with L4T on Jetson boards)\n";
  else
    out << "tegrastats: " << tegrastats << "  ->  --probe tegrastats,interval=100\n";
  out << "sim: sim:ina219, sim:ina226, sim:ina260 (simulated chips on a simulated bus; "
         "current=A, bus=V, noise=V)\n";
  return 0;
}

}  // namespace ergon::cli
