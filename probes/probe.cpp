#include "probes/probe.h"

#include <algorithm>
#include <charconv>
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

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

std::optional<double> to_number(std::string_view s) {
  double v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

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

ProbeSpec parse_probe_spec(std::string_view text) {
  ProbeSpec spec;
  spec.text = std::string(text);
  auto fail = [&](const std::string& why) -> InputError {
    const std::string message = "probe '" + spec.text + "': " + why +
                                " (e.g. ina219:/dev/i2c-1@0x40,shunt=0.1,max=3.2 or sim:ina219)";
    // One line whatever the text holds: control and non-ASCII bytes as \xNN.
    std::string shown;
    for (const char c : message) {
      const auto u = static_cast<unsigned char>(c);
      if (u >= 0x20 && u < 0x7f) {
        shown += c;
      } else {
        static constexpr char kHex[] = "0123456789abcdef";
        shown += {'\\', 'x', kHex[u >> 4], kHex[u & 15]};
      }
    }
    return InputError(shown);
  };
  const auto colon = text.find(':');
  const auto comma0 = text.find(',');
  // Kinds whose location is optional: the program, or the sysfs directory.
  const std::string_view head = trim(text.substr(0, std::min(colon, comma0)));
  const bool bare_tegrastats =
      head == "tegrastats" || head == "ina3221" || head == "rapl" || head == "nvml";
  if (colon == std::string_view::npos && !bare_tegrastats) throw fail("no KIND: prefix");
  const std::size_t kind_end = bare_tegrastats ? std::min(colon, comma0) : colon;
  spec.kind = std::string(trim(text.substr(0, kind_end)));
  std::string_view rest = kind_end == std::string_view::npos ? std::string_view()
                                                              : text.substr(kind_end + 1);
  if (bare_tegrastats && comma0 != std::string_view::npos && kind_end == comma0)
    rest = text.substr(comma0);  // options, no location
  const bool sim = spec.kind == "sim";
  const bool tegrastats = spec.kind == "tegrastats" || spec.kind == "ina3221" ||
                          spec.kind == "rapl" || spec.kind == "nvml";
  const bool sigrok = spec.kind == "sigrok";
  const bool ppk2 = spec.kind == "ppk2";
  if (!sim && !tegrastats && !sigrok && !ppk2 && !ina2xx_chip_from_name(spec.kind))
    throw fail("unknown kind '" + spec.kind +
               "' (ina219, ina226, ina260, ina3221, tegrastats, rapl, nvml, sigrok, ppk2, sim)");
  bool first = true;
  while (!rest.empty() || first) {
    const auto comma = rest.find(',');
    const std::string_view item = trim(rest.substr(0, comma));
    rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    if (first) {
      first = false;
      if (tegrastats) {
        // tegrastats: the program; ina3221, rapl: a sysfs directory (default: the first found).
        spec.bus = !item.empty() ? std::string(item) : spec.kind == "tegrastats" ? "tegrastats" : "";
        continue;
      }
      if (ppk2) {
        spec.bus = std::string(item);
        if (spec.bus.empty()) throw fail("ppk2: needs its serial port (ppk2:/dev/ttyACM0)");
        continue;
      }
      if (sigrok) {
        // DRIVER[@CONN]: the connection may hold anything but a comma (/dev/ttyUSB0, a USB address).
        const auto at = item.find('@');
        spec.bus = std::string(item.substr(0, at));
        if (spec.bus.empty()) throw fail("sigrok: needs a libsigrok driver (sigrok:demo, sigrok:rdtech-um@/dev/ttyUSB0)");
        if (at != std::string_view::npos) spec.options["conn"] = std::string(item.substr(at + 1));
        continue;
      }
      if (sim) {
        if (!ina2xx_chip_from_name(item)) throw fail("sim: needs a chip (ina219, ina226, ina260)");
        spec.options["chip"] = std::string(item);
        continue;
      }
      const auto at = item.find('@');
      spec.bus = std::string(item.substr(0, at));
      if (spec.bus.empty()) throw fail("no I2C bus (/dev/i2c-N)");
      if (at != std::string_view::npos) {
        const std::string_view a = item.substr(at + 1);
        unsigned value = 0;
        const bool hex = a.size() > 2 && a[0] == '0' && (a[1] == 'x' || a[1] == 'X');
        const std::string_view digits = hex ? a.substr(2) : a;
        const auto [end, ec] =
            std::from_chars(digits.data(), digits.data() + digits.size(), value, hex ? 16 : 10);
        if (ec != std::errc() || end != digits.data() + digits.size() || value < 0x03 || value > 0x77)
          throw fail("address '" + std::string(a) + "' is not a 7-bit I2C address (0x03..0x77)");
        spec.address = static_cast<uint8_t>(value);
      }
      continue;
    }
    if (item.empty()) continue;
    const auto eq = item.find('=');
    if (eq == std::string_view::npos) throw fail("'" + std::string(item) + "' is not key=value");
    const std::string key(trim(item.substr(0, eq)));
    if (ppk2) {
      static const char* const kPpk2Keys[] = {"mode", "vdd", "rate"};
      bool known = false;
      for (const char* k : kPpk2Keys) known = known || key == k;
      if (!known) throw fail("unknown option '" + key + "' (ppk2: mode, vdd, rate)");
      const std::string value(trim(item.substr(eq + 1)));
      if (key == "mode" ? value != "source" && value != "ampere" : !to_number(value))
        throw fail("option " + key + ": " + (key == "mode" ? "source or ampere" : "a number") + ", not '" + value + "'");
      spec.options[key] = value;
      continue;
    }
    if (spec.kind == "nvml" && key == "source") {
      const std::string value(trim(item.substr(eq + 1)));
      try {
        (void)parse_nvml_source(value);
      } catch (const InputError&) {
        throw fail("option source: energy, instant, average or auto, not '" + value + "'");
      }
      spec.options[key] = value;
      continue;
    }
    if (sigrok) {
      // Channel names and the rail's name are text; the rest numbers.
      static const char* const kSigrokKeys[] = {"voltage", "current", "power", "rail", "rate", "bus"};
      bool known = false;
      for (const char* k : kSigrokKeys) known = known || key == k;
      if (!known) throw fail("unknown option '" + key + "' (sigrok: voltage, current, power, rail, rate, bus)");
      const std::string value(trim(item.substr(eq + 1)));
      if ((key == "rate" || key == "bus") && !to_number(value))
        throw fail("option " + key + " needs a number, not '" + value + "'");
      if (value.empty()) throw fail("option " + key + " needs a value");
      spec.options[key] = value;
      continue;
    }
    static const char* const kKeys[] = {"shunt",   "max", "lsb",   "range",   "brng",
                                        "current", "bus", "noise", "interval"};
    bool known = false;
    for (const char* k : kKeys) known = known || key == k;
    if (!known)
      throw fail("unknown option '" + key +
                 "' (shunt, max, lsb, range, brng; sim: current, bus, noise; tegrastats: interval; nvml: interval, source)");
    if (!to_number(trim(item.substr(eq + 1))))
      throw fail("option " + key + " needs a number, not '" + std::string(item.substr(eq + 1)) + "'");
    spec.options[key] = std::string(trim(item.substr(eq + 1)));
  }
  return spec;
}

std::unique_ptr<Probe> open_probe(const ProbeSpec& spec, double rate_hz, const Clock& clock) {
  const bool sim = spec.kind == "sim";
  auto option = [&](const char* key, double fallback) {
    const auto it = spec.options.find(key);
    return it == spec.options.end() ? fallback : *to_number(it->second);
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
