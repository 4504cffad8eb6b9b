#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/clock.h"
#include "probes/power.h"

namespace ergon::probes {

/// What a probe is and can do.
struct ProbeInfo {
  std::string kind;      ///< "ina219", "ina226", "ina260", ...
  std::string location;  ///< "/dev/i2c-1@0x40", "sim-i2c@0x40"
  std::vector<Rail> channels;
  /// Whether channel 0 measures the board's whole input (the other channels being parts of
  /// it). False for a monitor with no such rail (an AGX Xavier's or AGX Orin's tegrastats):
  /// the board's power is then unknown, and no sum of its channels stands in for it.
  bool total_known = true;
  double max_rate_hz = 0;  ///< complete samples per second at the chosen settings
  bool voltage = false;
  bool current = false;
  bool power = false;  ///< the chip computes power itself
};

/// A power monitor, whatever its kind: start it, take samples as they complete, stop it.
/// Sample times are the host clock's (ns) at the read; a sample that is a mean over an
/// interval (RAPL's, NVML's energy counter) is stamped at the interval's middle.
class Probe {
 public:
  virtual ~Probe() = default;
  [[nodiscard]] virtual const ProbeInfo& info() const = 0;
  virtual void start() = 0;
  virtual void stop() = 0;
  /// Blocks until the next sample(s) complete and appends them; returns how many. Transient
  /// read errors are retried and counted; a probe that keeps failing throws DeviceError.
  virtual std::size_t read(std::vector<PowerSample>& out) = 0;
  /// Reads that failed and were retried.
  [[nodiscard]] virtual uint64_t read_errors() const = 0;
};

/// Paces a probe that reads on its own schedule (files, a library): each wait() returns at the
/// next tick, never earlier than the last plus the interval, and never piles up ticks it
/// missed. Returns the time it woke (ns).
class Pacer {
 public:
  Pacer(const Clock& clock, int64_t interval_ns) : clock_(clock), interval_ns_(interval_ns) {}
  void start() { next_ns_ = clock_.now_ns(); }
  int64_t wait() {
    clock_.sleep_until_ns(next_ns_);
    const int64_t now = clock_.now_ns();
    next_ns_ = std::max(next_ns_ + interval_ns_, now);
    return now;
  }
  [[nodiscard]] int64_t interval_ns() const { return interval_ns_; }

 private:
  const Clock& clock_;
  int64_t interval_ns_;
  int64_t next_ns_ = 0;
};

/// A probe named on the command line: `KIND:LOCATION,key=value,...`, e.g.
/// `ina219:/dev/i2c-1@0x40,shunt=0.1,max=3.2`, `ina219:mcp2221@0x40` (a USB-I2C bridge;
/// `mcp2221:N` for the N-th), `sim:ina226,current=0.5,bus=5`, or
/// `tegrastats[:PROGRAM],interval=100` (the program in `bus`).
struct ProbeSpec {
  std::string kind;
  std::string bus;          ///< "/dev/i2c-1"; empty for a simulated chip
  uint8_t address = 0x40;
  std::map<std::string, std::string> options;
  std::string text;         ///< as given
};
/// Throws InputError naming what is wrong with the text.
ProbeSpec parse_probe_spec(std::string_view text);

/// Opens the probe a spec names (sim: a simulated chip on a simulated bus, converting a
/// constant supply given by current= and bus=, with sensor noise). `rate_hz` <= 0: the chip's
/// fastest conversion; otherwise the slowest setting that still reaches that rate (more
/// averaging, less noise). Throws InputError for a bad spec, DeviceError for a bus or chip
/// that is not there.
std::unique_ptr<Probe> open_probe(const ProbeSpec& spec, double rate_hz, const Clock& clock);

}  // namespace ergon::probes
