// The probe spec parser alone (no drivers), so that the board descriptor reader and the fuzzer
// can link it without every probe's library.
#include <charconv>
#include <cmath>
#include <optional>

#include "common/error.h"
#include "common/text.h"
#include "probes/ina2xx.h"
#include "probes/nvml.h"
#include "probes/probe.h"

namespace ergon::probes {
namespace {

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

}  // namespace

ProbeSpec parse_probe_spec(std::string_view text) {
  ProbeSpec spec;
  spec.text = std::string(text);
  auto fail = [&](const std::string& why) -> InputError {
    // One line whatever the text holds, and short (a file pasted by mistake).
    return InputError("probe '" + printable(spec.text, 100) + "': " + printable(why) +
                      " (e.g. ina219:/dev/i2c-1@0x40,shunt=0.1,max=3.2 or sim:ina219)");
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

}  // namespace ergon::probes
