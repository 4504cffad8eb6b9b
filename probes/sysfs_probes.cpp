#include "probes/sysfs_probes.h"

#include "probes/tegrastats.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstring>
#include <fstream>
#include <optional>

#include "common/error.h"

namespace ergon::probes {
namespace {

namespace fs = std::filesystem;

std::optional<std::string> read_text(const fs::path& file) {
  std::ifstream f(file);
  if (!f) return std::nullopt;
  std::string s;
  std::getline(f, s);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

/// A file holding one integer; DeviceError naming it (and why) when it cannot be read.
int64_t read_integer(const fs::path& file) {
  std::ifstream f(file);
  if (!f) {
    const int err = errno;
    throw DeviceError("cannot read " + file.string() + ": " + std::strerror(err) +
                      (err == EACCES ? " (root-only on this kernel: run as root, or grant read "
                                       "access to the file)"
                                     : ""));
  }
  std::string s;
  std::getline(f, s);
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || s.empty())
    throw DeviceError(file.string() + " does not hold a number ('" + s + "')");
  (void)end;
  return v;
}

std::vector<fs::path> sorted_entries(const fs::path& dir) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

/// The directory of `file` under `root` ("/sys/class/hwmon" under "/tmp/fake").
fs::path under(const fs::path& root, const std::string& absolute) {
  return root / fs::path(absolute).relative_path();
}

class Ina3221Probe final : public Probe {
 public:
  Ina3221Probe(SysfsProbeFound found, double interval_s, const Clock& clock)
      : found_(std::move(found)), hwmon_(found_.kind == "ina3221-hwmon"),
        pacer_(clock, static_cast<int64_t>(update_interval_s(found_, interval_s) * 1e9)) {
    interval_s = static_cast<double>(pacer_.interval_ns()) * 1e-9;
    info_.kind = found_.kind;
    info_.location = found_.dir.string();
    for (std::size_t i = 0; i < found_.channels.size(); ++i)
      info_.channels.push_back({static_cast<uint8_t>(i), found_.channels[i]});
    info_.max_rate_hz = 1 / interval_s;
    info_.voltage = info_.current = true;
    info_.power = !hwmon_;  // iio exposes the chip's power; hwmon does not
  }
  [[nodiscard]] const ProbeInfo& info() const override { return info_; }
  void start() override { pacer_.start(); }
  void stop() override {}
  std::size_t read(std::vector<PowerSample>& out) override {
    const auto t = static_cast<uint64_t>(pacer_.wait());
    std::size_t n = 0;
    for (std::size_t i = 0; i < found_.channels.size(); ++i) {
      const int k = channel_number_[i];
      PowerSample s;
      s.rail = static_cast<uint8_t>(i);
      s.t_ticks = t;
      const std::string ks = std::to_string(k);
      const int64_t mv = read_integer(found_.dir / (hwmon_ ? "in" + ks + "_input" : "in_voltage" + ks + "_input"));
      const int64_t ma = read_integer(found_.dir / (hwmon_ ? "curr" + ks + "_input" : "in_current" + ks + "_input"));
      s.bus_uv = static_cast<int32_t>(mv * 1000);
      s.current_ua = static_cast<int32_t>(ma * 1000);
      s.power_uw = hwmon_ ? static_cast<int32_t>(mv * ma)
                          : static_cast<int32_t>(read_integer(found_.dir / ("in_power" + ks + "_input")) * 1000);
      out.push_back(s);
      ++n;
    }
    return n;
  }
  [[nodiscard]] uint64_t read_errors() const override { return 0; }

  /// The kernel's channel numbers (hwmon 1..3, iio 0..2) in channel order.
  std::vector<int> channel_number_;

  /// Puts the chip's module-input rail (VDD_IN, POM_5V_IN: tegrastats_total_rail) first, as
  /// channel 0, the board's power. A chip without one (a TX2's first chip, any AGX Xavier
  /// or AGX Orin chip) measures parts only: its total is unknown.
  void put_total_first() {
    const auto n = std::min(found_.channels.size(), channel_number_.size());
    std::size_t total = n;
    for (std::size_t i = 0; i < n && total == n; ++i)
      if (tegrastats_total_rail(found_.channels[i]) != nullptr) total = i;
    info_.total_known = total < n;
    if (total == 0 || total == n) return;
    std::rotate(found_.channels.begin(), found_.channels.begin() + static_cast<std::ptrdiff_t>(total),
                found_.channels.begin() + static_cast<std::ptrdiff_t>(total) + 1);
    std::rotate(channel_number_.begin(), channel_number_.begin() + static_cast<std::ptrdiff_t>(total),
                channel_number_.begin() + static_cast<std::ptrdiff_t>(total) + 1);
    for (std::size_t i = 0; i < info_.channels.size() && i < found_.channels.size(); ++i)
      info_.channels[i].name = found_.channels[i];
  }

 private:
  /// The requested interval, else the driver's update_interval (ms), else 100 ms.
  static double update_interval_s(const SysfsProbeFound& found, double interval_s) {
    if (interval_s > 0) return interval_s;
    const auto ms = read_text(found.dir / "update_interval");
    return ms ? std::max(1.0, std::strtod(ms->c_str(), nullptr)) / 1000 : 0.1;
  }

  SysfsProbeFound found_;
  bool hwmon_;
  Pacer pacer_;
  ProbeInfo info_;
};

class RaplProbe final : public Probe {
 public:
  RaplProbe(std::vector<SysfsProbeFound> zones, double interval_s, const Clock& clock)
      : zones_(std::move(zones)), clock_(clock),
        interval_ns_(static_cast<int64_t>(std::max(interval_s, 1e-3) * 1e9)) {
    info_.kind = "rapl";
    info_.location = zones_.empty() ? "" : zones_.front().dir.parent_path().string();
    for (std::size_t i = 0; i < zones_.size(); ++i) {
      info_.channels.push_back({static_cast<uint8_t>(i), zones_[i].channels.front()});
      const auto max = read_text(zones_[i].dir / "max_energy_range_uj");
      range_uj_.push_back(max ? std::strtoll(max->c_str(), nullptr, 10) : 0);
    }
    info_.max_rate_hz = 1e9 / static_cast<double>(interval_ns_);
    info_.power = true;
  }
  [[nodiscard]] const ProbeInfo& info() const override { return info_; }
  void start() override {
    last_uj_.clear();
    for (const auto& z : zones_) last_uj_.push_back(read_integer(z.dir / "energy_uj"));
    last_ns_ = clock_.now_ns();
  }
  void stop() override {}
  std::size_t read(std::vector<PowerSample>& out) override {
    if (last_uj_.size() != zones_.size()) start();
    clock_.sleep_until_ns(last_ns_ + interval_ns_);
    const int64_t now = clock_.now_ns();
    const double dt_s = static_cast<double>(now - last_ns_) * 1e-9;
    for (std::size_t i = 0; i < zones_.size(); ++i) {
      const int64_t uj = read_integer(zones_[i].dir / "energy_uj");
      int64_t delta = uj - last_uj_[i];
      if (delta < 0) delta += range_uj_[i] + 1;  // the counter wrapped at max_energy_range_uj
      last_uj_[i] = uj;
      PowerSample s;
      s.rail = static_cast<uint8_t>(i);
      // The interval's mean, stamped half way through it: attribution reads samples as points
      // of a piecewise-linear power, and a mean stamped at its end would lag by half.
      s.t_ticks = static_cast<uint64_t>(last_ns_ + (now - last_ns_) / 2);
      s.power_uw = static_cast<int32_t>(std::lround(static_cast<double>(delta) / dt_s));
      out.push_back(s);
    }
    last_ns_ = now;
    return zones_.size();
  }
  [[nodiscard]] uint64_t read_errors() const override { return 0; }

 private:
  std::vector<SysfsProbeFound> zones_;
  const Clock& clock_;
  int64_t interval_ns_;
  std::vector<int64_t> range_uj_, last_uj_;
  int64_t last_ns_ = 0;
  ProbeInfo info_;
};

}  // namespace

std::vector<SysfsProbeFound> find_ina3221(const fs::path& root) {
  std::vector<SysfsProbeFound> found;
  for (const fs::path& dir : sorted_entries(under(root, "/sys/class/hwmon"))) {
    if (read_text(dir / "name") != "ina3221") continue;
    SysfsProbeFound f{"ina3221-hwmon", dir, {}};
    for (int k = 1; k <= 3; ++k) {
      if (!fs::exists(dir / ("in" + std::to_string(k) + "_input"))) continue;
      f.channels.push_back(read_text(dir / ("in" + std::to_string(k) + "_label"))
                               .value_or("channel " + std::to_string(k)));
    }
    if (!f.channels.empty()) found.push_back(f);
  }
  for (const fs::path& chip : sorted_entries(under(root, "/sys/bus/i2c/drivers/ina3221x"))) {
    for (const fs::path& dir : sorted_entries(chip)) {
      if (dir.filename().string().rfind("iio:device", 0) != 0) continue;
      SysfsProbeFound f{"ina3221-iio", dir, {}};
      for (int k = 0; k <= 2; ++k)
        if (fs::exists(dir / ("in_power" + std::to_string(k) + "_input")))
          f.channels.push_back(read_text(dir / ("rail_name_" + std::to_string(k)))
                                   .value_or("channel " + std::to_string(k)));
      if (!f.channels.empty()) found.push_back(f);
    }
  }
  return found;
}

std::vector<SysfsProbeFound> find_rapl(const fs::path& root) {
  std::vector<SysfsProbeFound> found;
  for (const fs::path& dir : sorted_entries(under(root, "/sys/class/powercap"))) {
    const std::string name = dir.filename().string();
    if (name.rfind("intel-rapl:", 0) != 0 || !fs::exists(dir / "energy_uj")) continue;
    found.push_back({"rapl", dir, {read_text(dir / "name").value_or(name)}});
  }
  return found;
}

std::unique_ptr<Probe> open_ina3221(const SysfsProbeFound& found, double interval_s,
                                    const Clock& clock) {
  auto probe = std::make_unique<Ina3221Probe>(found, interval_s, clock);
  const bool hwmon = found.kind == "ina3221-hwmon";
  for (int k = hwmon ? 1 : 0; k <= (hwmon ? 3 : 2); ++k) {
    const std::string file = hwmon ? "in" + std::to_string(k) + "_input"
                                   : "in_power" + std::to_string(k) + "_input";
    if (fs::exists(found.dir / file)) probe->channel_number_.push_back(k);
  }
  probe->put_total_first();
  return probe;
}

std::unique_ptr<Probe> open_rapl(const std::vector<SysfsProbeFound>& zones, double interval_s,
                                 const Clock& clock) {
  if (zones.empty()) throw DeviceError("no RAPL zones (/sys/class/powercap/intel-rapl:*)");
  return std::make_unique<RaplProbe>(zones, interval_s, clock);
}

}  // namespace ergon::probes
