#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ergon::probes {

/// One power rail of a tegrastats line: "VDD_IN 2143/2143" (TX2, Nano, Xavier: milliwatts
/// without a unit) or "VDD_GPU_SOC 1234mW/1234mW" (Orin, JetPack 5 and later).
struct TegrastatsRail {
  std::string name;
  uint32_t now_mw = 0;
  uint32_t average_mw = 0;
};

/// What one tegrastats line says about power.
struct TegrastatsLine {
  /// The date prefix of newer releases ("11-23-2026 08:00:00"), as seconds since the epoch
  /// (UTC as printed); absent on older ones.
  std::optional<int64_t> wall_s;
  std::vector<TegrastatsRail> rails;
  /// The rail that is the whole module's input (VDD_IN, POM_5V_IN, VIN_SYS_5V0_*): the others
  /// are parts of it and must never be added to it. -1 when the line has none.
  int total = -1;
};

/// Parses one line. nullopt when it holds no power rail at all (a truncated or garbled line,
/// or one from a board without power monitors), with the reason in `why`. Rails with a
/// malformed value are left out; the rest of the line still counts. Never throws.
std::optional<TegrastatsLine> parse_tegrastats_line(std::string_view line, std::string* why = nullptr);

/// Splits a byte stream into lines and parses them, counting what it could not use.
class TegrastatsStream {
 public:
  /// Feeds bytes; calls on_line(const TegrastatsLine&) for every usable complete line.
  template <class OnLine>
  void feed(std::string_view bytes, OnLine&& on_line) {
    for (char c : bytes) {
      if (c != '\n') {
        if (pending_.size() < kMaxLineBytes) pending_.push_back(c);
        else overlong_ = true;
        continue;
      }
      ++lines_;
      if (overlong_) {
        ++malformed_;
      } else if (auto parsed = parse_tegrastats_line(pending_)) {
        on_line(*parsed);
      } else {
        ++malformed_;
      }
      pending_.clear();
      overlong_ = false;
    }
  }
  [[nodiscard]] uint64_t lines() const { return lines_; }
  [[nodiscard]] uint64_t malformed() const { return malformed_; }

 private:
  static constexpr std::size_t kMaxLineBytes = 8192;
  std::string pending_;
  bool overlong_ = false;
  uint64_t lines_ = 0;
  uint64_t malformed_ = 0;
};

}  // namespace ergon::probes
