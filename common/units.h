#pragma once

// One way to show each quantity to people: bytes, durations, energies and powers. Machine
// outputs (JSON, CSV) carry plain numbers in the unit their name says instead.

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <string>

namespace ergon {

namespace detail {
inline std::string printed(const char* format, double value, const char* unit) {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, value, unit);
  return buf;
}
}  // namespace detail

/// Binary units, as memory budgets are given: "512 B", "1.5 KiB", "19.24 MiB", "1.50 GiB".
inline std::string format_bytes(uint64_t bytes) {
  const auto b = static_cast<double>(bytes);
  if (bytes >= (1ULL << 30)) return detail::printed("%.2f %s", b / (1ULL << 30), "GiB");
  if (bytes >= (1ULL << 20)) return detail::printed("%.2f %s", b / (1ULL << 20), "MiB");
  if (bytes >= 1024) return detail::printed("%.1f %s", b / 1024, "KiB");
  return std::to_string(bytes) + " B";
}

namespace detail {
/// Four significant digits in the largest unit the value reaches (base unit at or above 1).
inline std::string scaled(double value, const char* milli, const char* micro, const char* base,
                          const char* kilo) {
  if (!std::isfinite(value)) return std::isnan(value) ? std::string("unknown") : std::string("unbounded");
  const double a = std::fabs(value);
  if (a >= 1e4 && kilo != nullptr) return printed("%.4g %s", value / 1e3, kilo);
  if (a >= 1 || a == 0) return printed("%.4g %s", value, base);
  if (a >= 1e-3) return printed("%.4g %s", value * 1e3, milli);
  return printed("%.4g %s", value * 1e6, micro);
}
}  // namespace detail

/// "2.683 s", "12.5 ms", "850 µs"; minutes and hours past 100 s ("3 min 20 s", "2 h 05 min").
inline std::string format_duration(double seconds) {
  if (std::isfinite(seconds) && seconds >= 100) {
    const auto whole = static_cast<uint64_t>(std::llround(seconds));
    char buf[64];
    if (whole >= 3600) {
      std::snprintf(buf, sizeof buf, "%llu h %02llu min", static_cast<unsigned long long>(whole / 3600),
                    static_cast<unsigned long long>(whole % 3600 / 60));
    } else {
      std::snprintf(buf, sizeof buf, "%llu min %llu s", static_cast<unsigned long long>(whole / 60),
                    static_cast<unsigned long long>(whole % 60));
    }
    return buf;
  }
  return detail::scaled(seconds, "ms", "µs", "s", nullptr);
}

/// "7.993 J", "41.2 mJ", "12.35 kJ".
inline std::string format_energy(double joules) { return detail::scaled(joules, "mJ", "µJ", "J", "kJ"); }

/// "3.21 W", "850 mW", "120 µW".
inline std::string format_power(double watts) { return detail::scaled(watts, "mW", "µW", "W", "kW"); }

}  // namespace ergon
