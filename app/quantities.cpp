#include "app/quantities.h"

#include <cctype>
#include <cmath>
#include <limits>
#include <optional>
#include <string>

#include "common/error.h"

namespace ergon::app {
namespace {

std::string lower(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())) != 0) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())) != 0) s.remove_suffix(1);
  return s;
}

/// A non-negative decimal number at the start of `text` ("1.5", ".5", "12"), and the unit
/// after it (spaces between allowed); nullopt when there is no number.
std::optional<std::pair<double, std::string>> number_and_unit(std::string_view text) {
  text = trim(text);
  std::size_t end = 0;
  bool digits = false, dot = false;
  while (end < text.size()) {
    const char c = text[end];
    if (std::isdigit(static_cast<unsigned char>(c)) != 0) {
      digits = true;
    } else if (c == '.' && !dot) {
      dot = true;
    } else {
      break;
    }
    ++end;
  }
  if (!digits) return std::nullopt;
  const double value = std::stod(std::string(text.substr(0, end)));
  return std::make_pair(value, lower(trim(text.substr(end))));
}

}  // namespace

Budget Budget::parse(std::string_view text) {
  const auto bad = [&] {
    return InputError("budget '" + std::string(text) + "' is not a size (e.g. 3000000, 2MiB, 1.5MB, 50%)");
  };
  const auto n = number_and_unit(text);
  if (!n) throw bad();
  const auto& [value, unit] = *n;
  Budget b;
  b.value = value;
  b.kind = Kind::kBytes;
  if (unit == "%") b.kind = Kind::kPercent;
  else if (unit.empty() || unit == "b") b.value = value;
  else if (unit == "kb") b.value = value * 1e3;
  else if (unit == "kib") b.value = value * 1024;
  else if (unit == "mb") b.value = value * 1e6;
  else if (unit == "mib") b.value = value * 1024 * 1024;
  else if (unit == "gb") b.value = value * 1e9;
  else if (unit == "gib") b.value = value * 1024.0 * 1024 * 1024;
  else throw bad();
  if (!(b.value > 0)) throw InputError("budget '" + std::string(text) + "' must be positive");
  // Past what 64 bits count (a typo's extra digits): no machine has it, and the bytes would wrap.
  if (!b.percent() && b.value >= 1e18) throw InputError("budget '" + std::string(text) + "' is more memory than any machine has");
  return b;
}

uint64_t Budget::bytes(uint64_t store_all_bytes) const {
  const double b = percent() ? value / 100.0 * static_cast<double>(store_all_bytes) : value;
  // 1e30 % of store-all is all the memory there is, not a wrapped count.
  return b >= 1.8e19 ? std::numeric_limits<uint64_t>::max() : static_cast<uint64_t>(b);
}

Deadline Deadline::parse(std::string_view text) {
  const std::string t = lower(trim(text));
  if (t == "none" || t == "inf") return {};
  const auto n = number_and_unit(text);
  Deadline d;
  if (n && n->second == "x") {
    d = {Kind::kFactor, n->first};
  } else if (n && (n->second == "s" || n->second == "ms")) {
    d = {Kind::kSeconds, n->second == "ms" ? n->first * 1e-3 : n->first};
  } else {
    throw InputError("deadline '" + std::string(text) +
                     "' is not a factor or a time (e.g. 1.3x, 0.2s, none)");
  }
  if (!(d.value > 0)) throw InputError("deadline '" + std::string(text) + "' must be positive");
  return d;
}

double Deadline::seconds(double single_pass_s) const {
  switch (kind) {
    case Kind::kNone:
      return std::numeric_limits<double>::infinity();
    case Kind::kFactor:
      return value * single_pass_s;
    case Kind::kSeconds:
      return value;
  }
  return value;
}

Duration Duration::parse(std::string_view text, std::string_view option) {
  const auto n = number_and_unit(text);
  const std::string unit = n ? n->second : std::string();
  const double scale = unit.empty() || unit == "s" ? 1 : unit == "ms" ? 1e-3 : unit == "m" ? 60 : -1;
  if (!n || scale < 0 || !(n->first > 0))
    throw InputError(std::string(option) + " must be a time like 10s, 500ms or 2m, not '" +
                     std::string(text) + "'");
  return {n->first * scale};
}

}  // namespace ergon::app
