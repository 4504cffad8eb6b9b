#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ergon::probes {

/// One power rail of a tegrastats line, in any of the forms Jetson releases print:
/// "VDD_IN 2143/2143" (TX1, TX2, Nano, Xavier: milliwatts without a unit, now/average),
/// "VDD_GPU_SOC 1234mW/1234mW" (Orin on JetPack 5 and 6), "VIN_SYS_5V0 5500mW/5500mW/5500mW"
/// (JetPack 7: now/average/max) and "VDD_GPU_SOC 2171mW" (now alone).
struct TegrastatsRail {
  std::string name;
  uint32_t now_mw = 0;
  /// The running average since tegrastats started; absent when the line printed none.
  std::optional<uint32_t> average_mw;
};

/// The rail that measures a whole module's input, by generation (docs/boards.md says where
/// each fact comes from):
///   TX1, TX2 (L4T 28 and 32), TX2 NX, Xavier NX, Orin NX, Orin Nano   VDD_IN
///   Nano                                                               POM_5V_IN
///   Thor (the carrier board's INA238)                                  VIN
///   AGX Xavier (GPU CPU SOC CV VDDRQ SYS5V), AGX Orin (VDD_GPU_SOC VDD_CPU_CV VIN_SYS_5V0
///   VDDQ_VDD2_1V8AO)                                                   none: each rail is one
///   supply; SYS5V and VIN_SYS_5V0 are the 5 V system branch, not the module's input.
/// nullptr when `rail` is none of those.
const char* tegrastats_total_rail(std::string_view rail);

/// What one tegrastats line says about power.
struct TegrastatsLine {
  /// The date prefix of newer releases ("11-23-2026 08:00:00"), as seconds since the epoch
  /// (UTC as printed); absent on older ones.
  std::optional<int64_t> wall_s;
  std::vector<TegrastatsRail> rails;
  /// The rail that is the whole module's input (tegrastats_total_rail): the others are parts
  /// of it and must never be added to it. -1 when the line has none (AGX Xavier, AGX Orin):
  /// the module's power is then unknown, and no sum of the rails stands in for it.
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
