#include "probes/ppk2.h"

#include <fcntl.h>
#include <poll.h>
#include <termios.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <utility>

#include "common/error.h"
#include "common/text.h"

namespace ergon::probes {
namespace {

constexpr double kAdcMult = 1.8 / 163840;
constexpr uint32_t kAdcMax = 0x3FFF;  // 14 bits

double parse_number(std::string_view key, std::string_view value) {
  // "-nan" is what an uncalibrated device says for some constants: take it as absent.
  if (value == "-nan" || value == "nan") return std::numeric_limits<double>::quiet_NaN();
  try {
    std::size_t used = 0;
    const double v = std::stod(std::string(value), &used);
    if (used == value.size() && std::isfinite(v)) return v;
  } catch (const std::exception&) {
  }
  throw InputError("PPK2 metadata: " + printable(key, 40) + ": expected a number, got '" + printable(value, 40) + "'");
}

/// An integer field: a whole number within [lo, hi].
int parse_whole(std::string_view key, double v, double lo, double hi, const char* unit = "") {
  if (!(v >= lo && v <= hi) || v != std::floor(v)) {
    char got[32];
    std::snprintf(got, sizeof got, "%g", v);
    throw InputError("PPK2 metadata: " + std::string(key) + ": " + got + unit + " is not a whole number from " +
                     std::to_string(static_cast<long long>(lo)) + " to " + std::to_string(static_cast<long long>(hi)) + unit);
  }
  return static_cast<int>(v);
}

/// y = GS rwg^2 + GI rwg solved for rwg >= 0.
double solve_rwg(double y, double gs, double gi) {
  if (std::abs(gs) < 1e-12) return y / gi;
  return (-gi + std::sqrt(std::max(0.0, gi * gi + 4 * gs * y))) / (2 * gs);
}

class SerialPort {
 public:
  explicit SerialPort(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (fd_ < 0) throw DeviceError("cannot open " + path + ": " + std::strerror(errno));
    termios t{};
    if (::tcgetattr(fd_, &t) == 0) {
      ::cfmakeraw(&t);
      ::cfsetspeed(&t, B115200);  // ignored by USB CDC, as by a pty
      ::tcsetattr(fd_, TCSANOW, &t);
    }
  }
  ~SerialPort() {
    if (fd_ >= 0) ::close(fd_);
  }
  SerialPort(const SerialPort&) = delete;
  SerialPort& operator=(const SerialPort&) = delete;

  void write(std::initializer_list<uint8_t> bytes) {
    const std::vector<uint8_t> b(bytes);
    std::size_t done = 0;
    while (done < b.size()) {
      const ssize_t n = ::write(fd_, b.data() + done, b.size() - done);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) throw DeviceError(path_ + ": write failed: " + std::strerror(errno));
      done += static_cast<std::size_t>(n);
    }
  }
  /// Reads and drops whatever arrives until the line is quiet for `quiet_ms`.
  void drain(int quiet_ms) {
    ::tcflush(fd_, TCIFLUSH);
    uint8_t sink[4096];
    for (int i = 0; i < 100 && read(sink, sizeof sink, quiet_ms) > 0; ++i) {
    }
  }
  /// Up to `max` bytes, waiting at most `timeout_ms`; 0 on a timeout. DeviceError when the
  /// port goes away (unplugged).
  std::size_t read(uint8_t* out, std::size_t max, int timeout_ms) {
    pollfd p{fd_, POLLIN, 0};
    const int ready = ::poll(&p, 1, timeout_ms);
    if (ready < 0 && errno == EINTR) return 0;
    if (ready <= 0) return 0;
    const ssize_t n = ::read(fd_, out, max);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
    if (n <= 0) throw DeviceError(path_ + ": the PPK2 went away (" + (n == 0 ? std::string("end of file") : std::strerror(errno)) + ")");
    return static_cast<std::size_t>(n);
  }

 private:
  std::string path_;
  int fd_ = -1;
};

class Ppk2Probe final : public Probe {
 public:
  Ppk2Probe(const ProbeSpec& spec, double rate_hz, const Clock& clock) : clock_(clock), port_(spec.bus) {
    const auto option = [&](const char* key) {
      const auto it = spec.options.find(key);
      return it == spec.options.end() ? std::string() : it->second;
    };
    const std::string mode = option("mode").empty() ? "source" : option("mode");
    if (mode != "source" && mode != "ampere")
      throw InputError("probe '" + spec.text + "': mode is source or ampere, not '" + mode + "'");
    mode_ = mode == "source" ? Ppk2Mode::kSource : Ppk2Mode::kAmpere;
    if (rate_hz <= 0 && !option("rate").empty()) rate_hz = std::stod(option("rate"));
    if (rate_hz <= 0) rate_hz = 1000;
    if (rate_hz > kPpk2SampleRateHz)
      throw InputError("probe '" + spec.text + "': at most 100000 samples a second, not " + std::to_string(rate_hz));
    window_ = std::max<uint32_t>(1, static_cast<uint32_t>(std::lround(kPpk2SampleRateHz / rate_hz)));

    // A PPK2 left streaming by a killed client: stop it and drop what it sent, so neither the
    // metadata nor the first sample word starts mid-stream.
    port_.write({kPpk2AverageStop});
    port_.drain(50);
    // Its metadata says it is a PPK2, and gives the calibration.
    port_.write({kPpk2GetMetadata});
    std::string text;
    uint8_t buffer[512];
    const int64_t deadline = clock_.now_ns() + 2'000'000'000;
    while (text.find("END") == std::string::npos && clock_.now_ns() < deadline) {
      const std::size_t n = port_.read(buffer, sizeof buffer, 100);
      text.append(reinterpret_cast<const char*>(buffer), n);
    }
    if (text.find("END") == std::string::npos)
      throw DeviceError("probe '" + spec.text + "': " + spec.bus + " sent no PPK2 metadata within 2 s (is it a PPK2?)");
    cal_ = parse_ppk2_metadata(text.substr(0, text.find("END")));
    vdd_mv_ = option("vdd").empty() ? cal_.vdd_mv : static_cast<int>(std::lround(std::stod(option("vdd"))));
    if (mode_ == Ppk2Mode::kSource && (vdd_mv_ < 800 || vdd_mv_ > 5000))
      throw InputError("probe '" + spec.text + "': vdd is 800 to 5000 mV in source mode, not " + std::to_string(vdd_mv_));

    info_.kind = "ppk2";
    info_.location = spec.bus;
    info_.channels = {{0, "VOUT"}, {1, "VOUT_min"}, {2, "VOUT_max"}};
    info_.max_rate_hz = kPpk2SampleRateHz / window_;
    info_.voltage = true;
    info_.current = true;
    info_.power = false;
  }

  ~Ppk2Probe() override {
    try {
      stop();
    } catch (const Error&) {
    }
  }

  [[nodiscard]] const ProbeInfo& info() const override { return info_; }

  void start() override {
    if (running_) return;
    port_.write({kPpk2SetPowerMode, static_cast<uint8_t>(mode_)});
    if (mode_ == Ppk2Mode::kSource)
      port_.write({kPpk2RegulatorSet, static_cast<uint8_t>(vdd_mv_ >> 8), static_cast<uint8_t>(vdd_mv_ & 0xFF)});
    port_.write({kPpk2DeviceRunningSet, 1});
    port_.drain(0);
    port_.write({kPpk2AverageStart});
    running_ = true;
    t0_ns_ = clock_.now_ns();
    index_ = 0;
    have_counter_ = false;
  }

  void stop() override {
    if (!running_) return;
    running_ = false;
    port_.write({kPpk2AverageStop});
  }

  std::size_t read(std::vector<PowerSample>& out) override {
    const std::size_t before = out.size();
    uint8_t buffer[16384];
    while (out.size() == before) {
      const std::size_t n = port_.read(buffer, sizeof buffer, 1000);
      if (n == 0) throw DeviceError("the PPK2 on " + info_.location + " sent nothing for 1 s");
      for (std::size_t i = 0; i < n; ++i) {
        partial_ |= static_cast<uint32_t>(buffer[i]) << (8 * partial_bytes_);
        if (++partial_bytes_ < 4) continue;
        take(partial_, out);
        partial_ = 0;
        partial_bytes_ = 0;
      }
    }
    return out.size() - before;
  }

  [[nodiscard]] uint64_t read_errors() const override { return lost_; }
  std::vector<Ppk2Edge> take_edges() { return std::exchange(edges_, {}); }

 private:
  int64_t time_of(uint64_t index) const { return t0_ns_ + static_cast<int64_t>(index) * 10'000; }

  void take(uint32_t word, std::vector<PowerSample>& out) {
    const Ppk2Sample s = decode_ppk2_sample(word);
    if (have_counter_) {
      const uint8_t expected = static_cast<uint8_t>((counter_ + 1) & 0x3F);
      if (s.counter != expected) {
        // Samples lost (mod 64): keep time going across them.
        const uint64_t gap = static_cast<uint8_t>((s.counter - expected) & 0x3F);
        lost_ += gap;
        index_ += gap;
      }
    }
    counter_ = s.counter;
    if (!have_counter_ || s.logic != logic_) edges_.push_back({time_of(index_), s.logic});
    logic_ = s.logic;
    have_counter_ = true;

    const double amps = ppk2_current_a(s, cal_, vdd_mv_);
    sum_a_ += amps;
    min_a_ = std::min(min_a_, amps);
    max_a_ = std::max(max_a_, amps);
    ++index_;
    if (++in_window_ < window_) return;
    const int64_t t = time_of(index_ - window_ / 2);
    const auto sample = [&](uint8_t rail, double a) {
      PowerSample p;
      p.rail = rail;
      p.t_ticks = static_cast<uint64_t>(t);
      p.bus_uv = vdd_mv_ * 1000;
      p.current_ua = static_cast<int32_t>(std::lround(a * 1e6));
      p.power_uw = static_cast<int32_t>(std::lround(a * vdd_mv_ * 1e3));
      return p;
    };
    out.push_back(sample(0, sum_a_ / window_));
    out.push_back(sample(1, min_a_));
    out.push_back(sample(2, max_a_));
    sum_a_ = 0;
    min_a_ = std::numeric_limits<double>::infinity();
    max_a_ = -std::numeric_limits<double>::infinity();
    in_window_ = 0;
  }

  const Clock& clock_;
  SerialPort port_;
  Ppk2Mode mode_ = Ppk2Mode::kSource;
  Ppk2Calibration cal_;
  int vdd_mv_ = 3000;
  uint32_t window_ = 100;
  ProbeInfo info_;
  bool running_ = false;
  int64_t t0_ns_ = 0;
  uint64_t index_ = 0;
  uint32_t partial_ = 0;
  int partial_bytes_ = 0;
  bool have_counter_ = false;
  uint8_t counter_ = 0;
  uint8_t logic_ = 0;
  uint64_t lost_ = 0;
  uint32_t in_window_ = 0;
  double sum_a_ = 0;
  double min_a_ = std::numeric_limits<double>::infinity();
  double max_a_ = -std::numeric_limits<double>::infinity();
  std::vector<Ppk2Edge> edges_;
};

}  // namespace

Ppk2Calibration parse_ppk2_metadata(std::string_view text) {
  Ppk2Calibration cal;
  while (!text.empty()) {
    const auto eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    const auto colon = line.find(": ");
    if (colon == std::string_view::npos) continue;
    const std::string_view key = line.substr(0, colon);
    const std::string_view value = line.substr(colon + 2);
    const double v = parse_number(key, value);
    if (std::isnan(v)) continue;
    if (key == "Calibrated") cal.calibrated = v != 0;
    // The regulator's range (Nordic's PPK2 user guide: 800 to 5000 mV); 1 ampere, 2 source meter.
    else if (key == "VDD") cal.vdd_mv = parse_whole("VDD", v, 800, 5000, " mV");
    else if (key == "mode") cal.mode = parse_whole("mode", v, 1, 2);
    else if (key == "HW") cal.hw = parse_whole("HW", v, 0, std::numeric_limits<int>::max());
    else if (key.size() >= 2 && key.back() >= '0' && key.back() <= '4') {
      const auto r = static_cast<std::size_t>(key.back() - '0');
      const std::string_view name = key.substr(0, key.size() - 1);
      if (name == "R") {
        if (v != 0) cal.r[r] = v;  // as the clients do: a zero resistor is no calibration
      } else if (name == "GS") cal.gs[r] = v;
      else if (name == "GI") cal.gi[r] = v;
      else if (name == "O") cal.o[r] = v;
      else if (name == "S") cal.s[r] = v;
      else if (name == "I") cal.i[r] = v;
      else if (name == "UG") cal.ug[r] = v;
    }
  }
  return cal;
}

std::string ppk2_metadata_text(const Ppk2Calibration& cal) {
  std::string out = "Calibrated: " + std::to_string(cal.calibrated ? 1 : 0) + "\n";
  char line[64];
  const auto add = [&](const char* name, const std::array<double, 5>& v, const char* format) {
    for (int r = 0; r < 5; ++r) {
      std::snprintf(line, sizeof line, format, name, r, v[static_cast<std::size_t>(r)]);
      out += line;
    }
  };
  add("R", cal.r, "%s%d: %.4f\n");
  add("GS", cal.gs, "%s%d: %.4f\n");
  add("GI", cal.gi, "%s%d: %.4f\n");
  add("O", cal.o, "%s%d: %.4f\n");
  out += "VDD: " + std::to_string(cal.vdd_mv) + "\nHW: " + std::to_string(cal.hw) + "\nmode: " + std::to_string(cal.mode) + "\n";
  add("S", cal.s, "%s%d: %.9f\n");
  add("I", cal.i, "%s%d: %.9f\n");
  add("UG", cal.ug, "%s%d: %.2f\n");
  out += "IA: 56\nEND\n";
  return out;
}

Ppk2Sample decode_ppk2_sample(uint32_t word) {
  return {.adc = (word & kAdcMax) * 4,
          .range = static_cast<uint8_t>(std::min<uint32_t>((word >> 14) & 0x7, 4)),
          .counter = static_cast<uint8_t>((word >> 18) & 0x3F),
          .logic = static_cast<uint8_t>(word >> 24)};
}

double ppk2_current_a(const Ppk2Sample& s, const Ppk2Calibration& cal, int vdd_mv) {
  const std::size_t r = s.range;
  const double rwg = (static_cast<double>(s.adc) - cal.o[r]) * (kAdcMult / cal.r[r]);
  return cal.ug[r] * (rwg * (cal.gs[r] * rwg + cal.gi[r]) + (cal.s[r] * (vdd_mv / 1000.0) + cal.i[r]));
}

uint32_t encode_ppk2_sample(double current_a, const Ppk2Calibration& cal, int vdd_mv, uint8_t counter, uint8_t logic) {
  uint32_t raw = kAdcMax;
  uint32_t range = 4;
  for (std::size_t r = 0; r < 5; ++r) {
    const double y = current_a / cal.ug[r] - cal.s[r] * (vdd_mv / 1000.0) - cal.i[r];
    const double rwg = solve_rwg(y, cal.gs[r], cal.gi[r]);
    const double adc = rwg * cal.r[r] / kAdcMult + cal.o[r];
    const double raw14 = std::round(adc / 4);
    if (raw14 <= kAdcMax || r == 4) {
      raw = static_cast<uint32_t>(std::clamp(raw14, 0.0, static_cast<double>(kAdcMax)));
      range = static_cast<uint32_t>(r);
      break;
    }
  }
  return raw | range << 14 | static_cast<uint32_t>(counter & 0x3F) << 18 | static_cast<uint32_t>(logic) << 24;
}

std::unique_ptr<Probe> open_ppk2_probe(const ProbeSpec& spec, double rate_hz, const Clock& clock) {
  return std::make_unique<Ppk2Probe>(spec, rate_hz, clock);
}

std::vector<Ppk2Edge> take_ppk2_edges(Probe& probe) {
  if (auto* p = dynamic_cast<Ppk2Probe*>(&probe)) return p->take_edges();
  return {};
}

}  // namespace ergon::probes
