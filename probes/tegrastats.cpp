#include "probes/tegrastats.h"

#include <charconv>
#include <vector>

namespace ergon::probes {
namespace {

bool is_rail_name(std::string_view s) {
  // Two letters at least: an early AGX Xavier prints its computer-vision rail as "CV 0/0".
  if (s.size() < 2 || s == "RAM" || s == "SWAP" || s == "IRAM") return false;
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

/// A milliwatt reading: "2143" or "2143mW" (`unit` says which it was).
std::optional<uint32_t> milliwatts(std::string_view v, bool& unit) {
  unit = v.size() > 2 && v.substr(v.size() - 2) == "mW";
  if (unit) v.remove_suffix(2);
  return number(v);
}

/// "2143/2143", "2143mW/2143mW", "5139mW/5139mW/5139mW" (now/average/max) or "2171mW" (now
/// alone, which needs the unit: a bare number is no rail). Units on all values or none.
struct RailValue {
  uint32_t now_mw = 0;
  uint32_t average_mw = 0;
  bool has_average = false;
};

std::optional<RailValue> rail_value(std::string_view v) {
  std::vector<std::string_view> parts;
  for (std::size_t start = 0;;) {
    const std::size_t slash = v.find('/', start);
    parts.push_back(v.substr(start, slash == std::string_view::npos ? slash : slash - start));
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  if (parts.size() > 3) return std::nullopt;
  std::vector<uint32_t> values;
  bool first_unit = false;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    bool unit = false;
    const auto mw = milliwatts(parts[i], unit);
    if (!mw || (i > 0 && unit != first_unit)) return std::nullopt;
    if (i == 0) first_unit = unit;
    values.push_back(*mw);
  }
  if (values.size() == 1 && !first_unit) return std::nullopt;
  RailValue out;
  out.now_mw = values[0];
  out.has_average = values.size() > 1;
  out.average_mw = out.has_average ? values[1] : 0;
  return out;
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

const char* tegrastats_total_rail(std::string_view rail) {
  for (const char* total : {"VDD_IN", "POM_5V_IN", "VIN"})
    if (rail == total) return total;
  return nullptr;
}

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
    // "NC": an AGX Orin's monitor channel that is not connected, printed as "NC 0mW/0mW".
    if (is_rail_name(previous) && previous != "NC") {
      if (const auto v = rail_value(token)) {
        TegrastatsRail r;
        r.name = std::string(previous);
        r.now_mw = v->now_mw;
        if (v->has_average) r.average_mw = v->average_mw;
        out.rails.push_back(std::move(r));
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
  for (std::size_t i = 0; i < out.rails.size() && out.total < 0; ++i)
    if (tegrastats_total_rail(out.rails[i].name) != nullptr) out.total = static_cast<int>(i);
  return out;
}

}  // namespace ergon::probes
