#pragma once

#include <cstdint>
#include <string>

namespace ergon::probes {

/// Flags a power monitor reports with a conversion; stored as a bit set.
enum SampleFlag : uint8_t {
  kSampleOk = 0,
  kSampleOverflow = 1U << 0,  ///< INA219 OVF: current or power out of range; values clipped
  kSampleNotReady = 1U << 1,  ///< read before the conversion finished (CNVR clear): stale
};

/// One conversion of one rail, as the monitor measured it. Power is the chip's own power
/// register, never recomputed from voltage x current, so its rounding is the chip's.
struct PowerSample {
  uint8_t rail = 0;
  uint64_t t_ticks = 0;  ///< timestamp in the clock of whoever read the probe (device ticks)
  int32_t bus_uv = 0;
  int32_t current_ua = 0;
  int32_t power_uw = 0;
  uint8_t flags = kSampleOk;

  friend bool operator==(const PowerSample&, const PowerSample&) = default;
};

/// A named supply rail a board declares in its Hello (e.g. "VDD_IN", "5V").
struct Rail {
  uint8_t id = 0;
  std::string name;
};

}  // namespace ergon::probes
