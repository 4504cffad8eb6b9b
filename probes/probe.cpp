#include "probes/probe.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "common/error.h"
#include "probes/i2c.h"
#include "probes/ina2xx.h"
#include "probes/mcp2221.h"
#include "probes/nvml.h"
#include "probes/ppk2.h"
#include "probes/sigrok_probe.h"
#include "probes/sim_ina2xx.h"
#include "probes/sysfs_probes.h"
#include "probes/tegrastats_probe.h"

namespace ergon::probes {
namespace {

constexpr int kMaxConsecutiveErrors = 10;

class Ina2xxProbe final : public Probe {
 public:
  Ina2xxProbe(std::unique_ptr<I2cBus> bus, std::unique_ptr<SimIna2xx> sim,
              const Ina2xxConfig& config, const Clock& clock, std::string location)
      : bus_(std::move(bus)), sim_(std::move(sim)), driver_(*bus_, config, clock) {
    info_.kind = std::string(to_string(config.chip));
    info_.location = std::move(location);
    info_.channels = {{0, "shunt"}};
    info_.max_rate_hz = 1.0 / driver_.setup().sample_period_s;
    info_.voltage = info_.current = info_.power = true;
  }

  [[nodiscard]] const ProbeInfo& info() const override { return info_; }
  void start() override { driver_.configure(); }
  void stop() override {
    // Power-down mode: the chip stops converting until configured again.
    write_register(*bus_, driver_.config().address, ina2xx_reg::kConfig,
                   static_cast<uint16_t>(driver_.setup().config & ~0b111U));
  }
  std::size_t read(std::vector<PowerSample>& out) override {
    for (int failures = 0;; ++failures) {
      try {
        if (driver_.config().triggered) driver_.trigger();
        out.push_back(driver_.read_next(0));
        return 1;
      } catch (const DeviceError&) {
        ++errors_;
        if (failures + 1 >= kMaxConsecutiveErrors) throw;
      }
    }
  }
  [[nodiscard]] uint64_t read_errors() const override { return errors_; }

 private:
  std::unique_ptr<I2cBus> bus_;
  std::unique_ptr<SimIna2xx> sim_;  ///< the chip on a simulated bus, when there is one
  Ina2xx driver_;
  ProbeInfo info_;
  uint64_t errors_ = 0;
};

}  // namespace

std::unique_ptr<Probe> open_probe(const ProbeSpec& spec, double rate_hz, const Clock& clock) {
  const bool sim = spec.kind == "sim";
  auto option = [&](const char* key, double fallback) {
    const auto it = spec.options.find(key);
    // A number: parse_probe_spec checked it.
    return it == spec.options.end() ? fallback : std::strtod(it->second.c_str(), nullptr);
  };
  if (spec.kind == "nvml") {
    const double interval_s = rate_hz > 0 ? 1 / rate_hz : option("interval", 50) / 1000;
    const auto source = spec.options.find("source");
    return open_nvml_probe(Nvml::open(spec.bus.empty() ? "libnvidia-ml.so.1" : spec.bus), interval_s, clock,
                           source == spec.options.end() ? NvmlSource::kAuto : parse_nvml_source(source->second));
  }
  if (spec.kind == "ina3221" || spec.kind == "rapl") {
    const double interval_s = rate_hz > 0 ? 1 / rate_hz : option("interval", 0) / 1000;
    const bool ina = spec.kind == "ina3221";
    auto found = ina ? find_ina3221("/") : find_rapl("/");
    if (!spec.bus.empty())
      std::erase_if(found, [&](const SysfsProbeFound& f) { return f.dir != spec.bus; });
    if (found.empty())
      throw DeviceError(ina ? "no INA3221 under /sys/class/hwmon (name ina3221) or "
                              "/sys/bus/i2c/drivers/ina3221x" +
                                  (spec.bus.empty() ? std::string() : " at " + spec.bus)
                            : "no RAPL zones under /sys/class/powercap" +
                                  (spec.bus.empty() ? std::string() : " at " + spec.bus));
    if (ina) return open_ina3221(found.front(), interval_s, clock);
    return open_rapl(found, interval_s > 0 ? interval_s : 0.1, clock);
  }
  if (spec.kind == "sigrok") return open_sigrok_probe(spec, rate_hz, clock);
  if (spec.kind == "ppk2") return open_ppk2_probe(spec, rate_hz, clock);
  if (spec.kind == "tegrastats") {
    // tegrastats prints a line per interval; --rate sets it (default: 100 ms).
    const double interval_ms = rate_hz > 0 ? 1000.0 / rate_hz : option("interval", 100);
    return open_tegrastats(spec.bus, static_cast<int>(std::max(1.0, std::round(interval_ms))), clock);
  }
  Ina2xxConfig c;
  c.chip = *ina2xx_chip_from_name(sim ? spec.options.at("chip") : spec.kind);
  c.address = spec.address;
  c.shunt_ohm = option("shunt", 0.1);
  c.shunt_range_v = option("range", 0.32);
  c.bus_range_v = static_cast<int>(option("brng", 32));
  const double full_scale_a = c.chip == Ina2xxChip::kIna219   ? c.shunt_range_v / c.shunt_ohm
                              : c.chip == Ina2xxChip::kIna226 ? 0.08192 / c.shunt_ohm
                                                              : 15.0;
  c.max_current_a = option("max", full_scale_a);
  c.current_lsb_a = option("lsb", 0);
  c = with_rate(c, rate_hz);
  ina2xx_setup(c);  // a bad setting fails here, before any I/O
  char address[8];
  std::snprintf(address, sizeof address, "0x%02X", c.address);
  if (!sim && spec.bus.rfind("mcp2221", 0) == 0) {
    // A USB-I2C bridge: "mcp2221" (the first) or "mcp2221:N".
    const int index = spec.bus.size() > 8 ? std::atoi(spec.bus.c_str() + 8) : 0;
    auto bus = std::make_unique<Mcp2221Bus>(open_mcp2221_usb(index));
    const std::string where = bus->name() + "@" + address;
    return std::make_unique<Ina2xxProbe>(std::move(bus), nullptr, c, clock, where);
  }
  if (!sim)
    return std::make_unique<Ina2xxProbe>(open_linux_i2c(spec.bus), nullptr, c, clock,
                                         spec.bus + "@" + address);
  const SupplyState supply{option("bus", 5.0), option("current", 0.5)};
  auto chip = std::make_unique<SimIna2xx>(
      c.chip, c.shunt_ohm, [supply](int64_t) { return supply; }, option("noise", 10e-6));
  auto bus = std::make_unique<SimI2cBus>(clock);
  bus->attach(c.address, *chip);
  return std::make_unique<Ina2xxProbe>(std::move(bus), std::move(chip), c, clock,
                                       std::string("sim-i2c@") + address);
}

}  // namespace ergon::probes
