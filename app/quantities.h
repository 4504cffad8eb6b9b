#pragma once

// The quantities users type, each with one parser: a memory budget, a deadline and a duration.
// Each parse throws InputError naming the text and what it should look like.

#include <cstdint>
#include <string>
#include <string_view>

namespace ergon::app {

/// "3000000", "2MiB", "1.5MB", "512KiB", "1GB", or "50%" (of store-all's activations).
struct Budget {
  enum class Kind { kBytes, kPercent };
  Kind kind = Kind::kPercent;
  double value = 50;  ///< bytes, or percent

  static Budget parse(std::string_view text);
  /// The bytes it stands for, a percentage being of `store_all_bytes`.
  [[nodiscard]] uint64_t bytes(uint64_t store_all_bytes) const;
  [[nodiscard]] bool percent() const { return kind == Kind::kPercent; }
};

/// "1.3x" (a factor of one pass over the graph), "0.2s", "250ms", or "none" (also "inf").
struct Deadline {
  enum class Kind { kNone, kFactor, kSeconds };
  Kind kind = Kind::kNone;
  double value = 0;  ///< the factor, or seconds

  static Deadline parse(std::string_view text);
  /// Seconds (infinity for none), a factor being of `single_pass_s`.
  [[nodiscard]] double seconds(double single_pass_s) const;
};

/// "10s", "500ms", "2m", or a bare number of seconds; above zero.
struct Duration {
  double seconds = 0;

  /// `option` names what is parsed in the message ("--duration").
  static Duration parse(std::string_view text, std::string_view option = "duration");
};

}  // namespace ergon::app
