#include "probes/tegrastats.h"

#include <array>
#include <charconv>

namespace ergon::probes {
namespace {

/// The rail names that measure a module's whole input, most specific first.
constexpr std::array<std::string_view, 4> kTotalRails = {"VDD_IN", "POM_5V_IN", "VIN_SYS_5V0",
                                                         "VIN"};

bool is_rail_name(std::string_view s) {
  if (s.size() < 3 || s == "RAM" || s == "SWAP" || s == "IRAM") return false;
  for (char c : s)
    if (!((c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
  return s[0] >= 'A' && s[0] <= 'Z';
}

std::optional<uint32_t> number(std::string_view s) {
  uint32_t v = 0;
  if (s.empty() || s.size() > 9) return std::nullopt;  // over 10^9 mW is no reading
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

/// "2143/2143" or "2143mW/2143mW" (both with the unit, or neither).
std::optional<std::pair<uint32_t, uint32_t>> rail_value(std::string_view v) {
  const auto slash = v.find('/');
  if (slash == std::string_view::npos) return std::nullopt;
  std::string_view now = v.substr(0, slash), avg = v.substr(slash + 1);
  const bool unit_now = now.size() > 2 && now.substr(now.size() - 2) == "mW";
  const bool unit_avg = avg.size() > 2 && avg.substr(avg.size() - 2) == "mW";
  if (unit_now != unit_avg) return std::nullopt;
  if (unit_now) {
    now.remove_suffix(2);
    avg.remove_suffix(2);
  }
  const auto n = number(now), a = number(avg);
  if (!n || !a) return std::nullopt;
  return std::make_pair(*n, *a);
}

/// "MM-DD-YYYY HH:MM:SS" at the start of the line, as seconds since the epoch (UTC).
std::optional<int64_t> date_prefix(std::string_view line) {
  if (line.size() < 19 || line[2] != '-' || line[5] != '-' || line[10] != ' ' || line[13] != ':' ||
      line[16] != ':')
    return std::nullopt;
  auto field = [&](std::size_t at, std::size_t n) { return number(line.substr(at, n)); };
  const auto mon = field(0, 2), day = field(3, 2), year = field(6, 4), h = field(11, 2),
             m = field(14, 2), s = field(17, 2);
  if (!mon || !day || !year || !h || !m || !s || *mon < 1 || *mon > 12 || *day < 1 || *day > 31 ||
      *h > 23 || *m > 59 || *s > 60)
    return std::nullopt;
  // Days from the civil date (proleptic Gregorian), after H. Hinnant's algorithm.
  const int64_t y = static_cast<int64_t>(*year) - (*mon <= 2 ? 1 : 0);
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t mp = (static_cast<int64_t>(*mon) + 9) % 12;
  const int64_t doy = (153 * mp + 2) / 5 + static_cast<int64_t>(*day) - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  const int64_t days = era * 146097 + doe - 719468;
  return days * 86400 + static_cast<int64_t>(*h) * 3600 + static_cast<int64_t>(*m) * 60 +
         static_cast<int64_t>(*s);
}

}  // namespace

std::optional<TegrastatsLine> parse_tegrastats_line(std::string_view line, std::string* why) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  TegrastatsLine out;
  out.wall_s = date_prefix(line);
  std::string_view previous;
  std::size_t pos = 0;
  while (pos < line.size()) {
    while (pos < line.size() && line[pos] == ' ') ++pos;
    const std::size_t end = std::min(line.find(' ', pos), line.size());
    const std::string_view token = line.substr(pos, end - pos);
    pos = end;
    if (token.empty()) continue;
    if (is_rail_name(previous)) {
      if (const auto v = rail_value(token)) {
        out.rails.push_back({std::string(previous), v->first, v->second});
        previous = {};
        continue;
      }
    }
    previous = token;
  }
  if (out.rails.empty()) {
    if (why != nullptr)
      *why = line.empty() ? "empty line" : "no power rail (NAME now/average) in the line";
    return std::nullopt;
  }
  for (std::string_view total : kTotalRails) {
    for (std::size_t i = 0; i < out.rails.size() && out.total < 0; ++i) {
      const std::string& n = out.rails[i].name;
      if (n == total || (total == "VIN_SYS_5V0" && n.rfind("VIN_SYS_5V0", 0) == 0))
        out.total = static_cast<int>(i);
    }
    if (out.total >= 0) break;
  }
  return out;
}

}  // namespace ergon::probes
