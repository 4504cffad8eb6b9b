#include "probes/nvml.h"

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "common/error.h"

namespace ergon::probes {
namespace {

// The few NVML entry points Ergon uses, declared here (the ABI is stable; no nvml.h needed).
using Return = int;
constexpr Return kSuccess = 0;
constexpr Return kNoPermission = 4;
constexpr Return kNotSupported = 3;
using Device = void*;

// nvmlFieldValue_t (nvml.h): the layout is part of NVML's ABI.
union FieldValue {
  double d;
  unsigned ui;
  unsigned long ul;
  unsigned long long ull;
  long long sll;
  int si;
  unsigned short us;
};
struct Field {
  unsigned field_id;
  unsigned scope_id;
  long long timestamp_us;
  long long latency_us;
  int value_type;
  Return nvml_return;
  FieldValue value;
};
static_assert(sizeof(Field) == 40);
constexpr unsigned kFieldPowerInstant = 186;  // NVML_FI_DEV_POWER_INSTANT, milliwatts
constexpr int kValueUnsignedInt = 1;
constexpr int kValueUnsignedLong = 2;
constexpr int kValueUnsignedLongLong = 3;
constexpr int kValueSignedLongLong = 4;
constexpr int kValueSignedInt = 5;
constexpr int kValueUnsignedShort = 6;

}  // namespace

struct Nvml::Api {
  Return (*init)();
  Return (*shutdown)();
  const char* (*error_string)(Return);
  Return (*device_count)(unsigned*);
  Return (*handle_by_index)(unsigned, Device*);
  Return (*name)(Device, char*, unsigned);
  Return (*power_usage)(Device, unsigned*);
  Return (*total_energy)(Device, unsigned long long*);
  Return (*limit)(Device, unsigned*);
  Return (*limit_constraints)(Device, unsigned*, unsigned*);
  Return (*set_limit)(Device, unsigned);
  Return (*field_values)(Device, int, Field*) = nullptr;  ///< absent before R450

  void check(Return r, const std::string& doing) const {
    if (r == kSuccess) return;
    std::string why = error_string != nullptr ? error_string(r) : "error " + std::to_string(r);
    if (r == kNoPermission) why += " (setting a power limit needs root, as nvidia-smi -pl does)";
    if (r == kNotSupported) why += " (this GPU or driver does not support it)";
    throw DeviceError("NVML: cannot " + doing + ": " + why);
  }
  Device device(unsigned gpu) const {
    Device d = nullptr;
    check(handle_by_index(gpu, &d), "open GPU " + std::to_string(gpu));
    return d;
  }
};

std::shared_ptr<Nvml> Nvml::open(const std::string& library) {
  void* lib = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr)
    throw DeviceError("NVML is not available: cannot load " + library +
                      " (no NVIDIA driver on this machine?): " + ::dlerror());
  std::shared_ptr<Nvml> n(new Nvml());
  n->library_ = lib;
  n->api_ = std::make_unique<Api>();
  Api& a = *n->api_;
  auto sym = [&](auto& fn, const char* name) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(::dlsym(lib, name));
    if (fn == nullptr) throw DeviceError("NVML: " + library + " has no " + name + " (a driver too old?)");
  };
  sym(a.init, "nvmlInit_v2");
  sym(a.shutdown, "nvmlShutdown");
  sym(a.error_string, "nvmlErrorString");
  sym(a.device_count, "nvmlDeviceGetCount_v2");
  sym(a.handle_by_index, "nvmlDeviceGetHandleByIndex_v2");
  sym(a.name, "nvmlDeviceGetName");
  sym(a.power_usage, "nvmlDeviceGetPowerUsage");
  sym(a.total_energy, "nvmlDeviceGetTotalEnergyConsumption");
  sym(a.limit, "nvmlDeviceGetPowerManagementLimit");
  sym(a.limit_constraints, "nvmlDeviceGetPowerManagementLimitConstraints");
  sym(a.set_limit, "nvmlDeviceSetPowerManagementLimit");
  a.field_values = reinterpret_cast<decltype(a.field_values)>(::dlsym(lib, "nvmlDeviceGetFieldValues"));
  a.check(a.init(), "initialize (is the NVIDIA driver loaded?)");
  return n;
}

Nvml::~Nvml() {
  if (api_ && api_->shutdown != nullptr) api_->shutdown();
  if (library_ != nullptr) ::dlclose(library_);
}

unsigned Nvml::device_count() const {
  unsigned n = 0;
  api_->check(api_->device_count(&n), "count GPUs");
  return n;
}

std::string Nvml::name(unsigned gpu) const {
  char buf[96] = {};
  api_->check(api_->name(api_->device(gpu), buf, sizeof buf), "read the name of GPU " + std::to_string(gpu));
  return buf;
}

double Nvml::power_w(unsigned gpu) const {
  unsigned mw = 0;
  api_->check(api_->power_usage(api_->device(gpu), &mw), "read the power of GPU " + std::to_string(gpu));
  return mw * 1e-3;
}

double Nvml::instant_power_w(unsigned gpu) const {
  const std::string doing = "read the instant power of GPU " + std::to_string(gpu);
  if (api_->field_values == nullptr)
    throw DeviceError("NVML: cannot " + doing + ": the driver has no nvmlDeviceGetFieldValues");
  Field f{};
  f.field_id = kFieldPowerInstant;
  api_->check(api_->field_values(api_->device(gpu), 1, &f), doing);
  api_->check(f.nvml_return, doing + " (field NVML_FI_DEV_POWER_INSTANT)");
  double mw = 0;
  switch (f.value_type) {
    case kValueUnsignedInt: mw = f.value.ui; break;
    case kValueUnsignedLong: mw = static_cast<double>(f.value.ul); break;
    case kValueUnsignedLongLong: mw = static_cast<double>(f.value.ull); break;
    case kValueSignedLongLong: mw = static_cast<double>(f.value.sll); break;
    case kValueSignedInt: mw = f.value.si; break;
    case kValueUnsignedShort: mw = f.value.us; break;
    default: mw = f.value.d;  // NVML_VALUE_TYPE_DOUBLE
  }
  return mw * 1e-3;
}

double Nvml::energy_j(unsigned gpu) const {
  unsigned long long mj = 0;
  api_->check(api_->total_energy(api_->device(gpu), &mj), "read the energy of GPU " + std::to_string(gpu));
  return static_cast<double>(mj) * 1e-3;
}

double Nvml::power_limit_w(unsigned gpu) const {
  unsigned mw = 0;
  api_->check(api_->limit(api_->device(gpu), &mw), "read the power limit of GPU " + std::to_string(gpu));
  return mw * 1e-3;
}

std::pair<double, double> Nvml::power_limit_range_w(unsigned gpu) const {
  unsigned lo = 0, hi = 0;
  api_->check(api_->limit_constraints(api_->device(gpu), &lo, &hi),
              "read the power limit range of GPU " + std::to_string(gpu));
  return {lo * 1e-3, hi * 1e-3};
}

void Nvml::set_power_limit_w(unsigned gpu, double watts) {
  const auto [lo, hi] = power_limit_range_w(gpu);
  if (!(watts >= lo && watts <= hi))
    throw InputError("GPU " + std::to_string(gpu) + " accepts power limits from " +
                     std::to_string(static_cast<int>(lo)) + " to " +
                     std::to_string(static_cast<int>(hi)) + " W, not " + std::to_string(watts));
  api_->check(api_->set_limit(api_->device(gpu), static_cast<unsigned>(std::lround(watts * 1000))),
              "set the power limit of GPU " + std::to_string(gpu));
}

namespace {

const char* source_name(NvmlSource source) {
  switch (source) {
    case NvmlSource::kEnergy: return "energy counter, the mean between its steps";
    case NvmlSource::kInstant: return "instant power";
    case NvmlSource::kAverage: return "nvmlDeviceGetPowerUsage (a 1 s average on Ampere and newer)";
    default: return "auto";
  }
}

// The energy counter moves in steps (every 100 ms, within about 5 ms, on an H100 with driver
// 580): a reading between two steps holds the last one. Each step is timed by polling the
// counter every 2 ms from a little before it is due (each NVML call costs about a millisecond
// of the kernel's time, so the probe does not poll all the time), and a sample is the energy
// between two steps over the time between them.
constexpr int64_t kCounterPollNs = 2'000'000;
constexpr int64_t kCounterLeadNs = 15'000'000;  ///< polling starts this long before a step is due
constexpr int64_t kCounterStuckNs = 1'000'000'000;
constexpr int kPeriodSteps = 5;                 ///< steps timed at open; their median is the period

class NvmlProbe final : public Probe {
 public:
  NvmlProbe(std::shared_ptr<Nvml> nvml, double interval_s, const Clock& clock, NvmlSource source)
      : nvml_(std::move(nvml)),
        clock_(clock),
        pacer_(clock, static_cast<int64_t>((interval_s > 0 ? interval_s : 0.05) * 1e9)),
        source_(source) {
    info_.kind = "nvml";
    const unsigned n = nvml_->device_count();
    for (unsigned i = 0; i < n && i < 255; ++i)
      info_.channels.push_back({static_cast<uint8_t>(i), nvml_->name(i)});
    // Which readings this driver and these GPUs give: each is tried once on every GPU.
    auto every_gpu = [&](auto read) {
      try {
        for (const Rail& ch : info_.channels) (void)read(ch.id);
        return std::string();
      } catch (const DeviceError& e) {
        return std::string(e.what());
      }
    };
    const std::string no_energy = every_gpu([&](unsigned g) { return nvml_->energy_j(g); });
    const std::string no_instant = every_gpu([&](unsigned g) { return nvml_->instant_power_w(g); });
    if (source_ == NvmlSource::kAuto)
      source_ = no_energy.empty() ? NvmlSource::kEnergy
                : no_instant.empty() ? NvmlSource::kInstant
                                     : NvmlSource::kAverage;
    if (source_ == NvmlSource::kEnergy && !no_energy.empty()) throw DeviceError(no_energy);
    if (source_ == NvmlSource::kInstant && !no_instant.empty()) throw DeviceError(no_instant);
    info_.max_rate_hz = 1e9 / static_cast<double>(pacer_.interval_ns());
    info_.location = std::string("NVML ") + source_name(source_);
    if (source_ == NvmlSource::kEnergy) {
      // No sample can be finer than the counter's own steps: time a few on GPU 0.
      start();
      for (int i = 0; i < kPeriodSteps; ++i) {
        const int64_t before = seen_ns_[0];
        (void)wait_for_steps();
        note_step(seen_ns_[0] - before);
      }
      info_.max_rate_hz = std::min(info_.max_rate_hz, 1e9 / static_cast<double>(period_ns_));
      info_.location += fmt_period(period_ns_);
    }
    info_.power = true;
  }
  [[nodiscard]] const ProbeInfo& info() const override { return info_; }
  void start() override {
    pacer_.start();
    if (source_ != NvmlSource::kEnergy) return;
    // Each GPU's first sample begins at a step of its counter, not part way between two.
    last_mj_.assign(info_.channels.size(), 0);
    last_ns_.assign(info_.channels.size(), 0);
    seen_mj_.assign(info_.channels.size(), 0);
    seen_ns_.assign(info_.channels.size(), 0);
    (void)wait_for_steps();
  }
  void stop() override {}
  std::size_t read(std::vector<PowerSample>& out) override {
    if (source_ == NvmlSource::kEnergy) return read_energy(out);
    const int64_t t = pacer_.wait();
    for (const Rail& ch : info_.channels) {
      const double w = source_ == NvmlSource::kInstant ? nvml_->instant_power_w(ch.id) : nvml_->power_w(ch.id);
      out.push_back(sample(ch.id, t, w));
    }
    return info_.channels.size();
  }
  [[nodiscard]] uint64_t read_errors() const override { return 0; }

 private:
  static PowerSample sample(uint8_t rail, int64_t t_ns, double w) {
    PowerSample s;
    s.rail = rail;
    s.t_ticks = static_cast<uint64_t>(t_ns);
    s.power_uw = static_cast<int32_t>(std::lround(w * 1e6));
    return s;
  }
  static std::string fmt_period(int64_t period_ns) {
    return ", moving every " + std::to_string(static_cast<int>(std::lround(static_cast<double>(period_ns) * 1e-6))) + " ms";
  }
  // The counter's period: the median of GPU 0's last few steps, timed from one seen step to
  // the next (so the time an NVML call takes does not shorten it).
  void note_step(int64_t interval_ns) {
    steps_ns_.push_back(interval_ns);
    if (steps_ns_.size() > 2 * kPeriodSteps - 1) steps_ns_.erase(steps_ns_.begin());
    std::vector<int64_t> sorted = steps_ns_;
    std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() / 2), sorted.end());
    period_ns_ = sorted[sorted.size() / 2];
  }
  [[noreturn]] void stuck(unsigned gpu) const {
    throw DeviceError("NVML: the energy counter of GPU " + std::to_string(gpu) +
                      " has not moved for 1 s (--probe nvml,source=instant reads its instant power instead)");
  }
  // Polls every GPU's counter until it has stepped; leaves last_mj_/last_ns_ at that step and
  // returns, per GPU, the time from the call to the step.
  std::vector<int64_t> wait_for_steps() {
    const std::size_t n = info_.channels.size();
    std::vector<double> was(n);
    for (std::size_t g = 0; g < n; ++g) was[g] = nvml_->energy_j(static_cast<unsigned>(g));
    std::vector<int64_t> took(n, -1);
    const int64_t begin = clock_.now_ns();
    for (std::size_t left = n; left > 0;) {
      clock_.sleep_until_ns(clock_.now_ns() + kCounterPollNs);
      const int64_t now = clock_.now_ns();
      for (std::size_t g = 0; g < n; ++g) {
        if (took[g] >= 0) continue;
        const double j = nvml_->energy_j(static_cast<unsigned>(g));
        if (j != was[g]) {
          took[g] = now - begin;
          last_mj_[g] = seen_mj_[g] = j * 1e3;
          last_ns_[g] = seen_ns_[g] = now;
          --left;
        } else if (now - begin > kCounterStuckNs) {
          stuck(static_cast<unsigned>(g));
        }
      }
    }
    return took;
  }
  // Waits for the next step of a counter at least one interval after that GPU's last sample;
  // the sample is the energy since then over the time since then, stamped half way.
  std::size_t read_energy(std::vector<PowerSample>& out) {
    if (last_mj_.size() != info_.channels.size()) start();
    for (;;) {
      // Sleep until the first GPU's next step is nearly due, then poll (every 2 ms from its last).
      const int64_t lead_ns = (period_ns_ - kCounterLeadNs) / kCounterPollNs * kCounterPollNs;
      int64_t wake = std::numeric_limits<int64_t>::max();
      for (const Rail& ch : info_.channels) wake = std::min(wake, seen_ns_[ch.id] + lead_ns);
      clock_.sleep_until_ns(std::max(wake, clock_.now_ns() + kCounterPollNs));
      const int64_t now = clock_.now_ns();
      std::size_t emitted = 0;
      for (const Rail& ch : info_.channels) {
        if (now < seen_ns_[ch.id] + lead_ns) continue;  // not due yet
        const double mj = nvml_->energy_j(ch.id) * 1e3;
        if (mj != seen_mj_[ch.id]) {
          if (ch.id == 0) note_step(now - seen_ns_[0]);
          seen_mj_[ch.id] = mj;
          seen_ns_[ch.id] = now;
          if (now - last_ns_[ch.id] >= pacer_.interval_ns() - kCounterPollNs) {
            // Stamped at the middle of the two steps: attribution reads samples as points
            // of a piecewise-linear power, and a mean stamped at its end would lag by half.
            out.push_back(sample(ch.id, last_ns_[ch.id] + (now - last_ns_[ch.id]) / 2,
                                 (mj - last_mj_[ch.id]) * 1e-3 / (static_cast<double>(now - last_ns_[ch.id]) * 1e-9)));
            last_mj_[ch.id] = mj;
            last_ns_[ch.id] = now;
            ++emitted;
          }
        } else if (now - seen_ns_[ch.id] > std::max(kCounterStuckNs, 2 * period_ns_)) {
          stuck(ch.id);
        }
      }
      if (emitted > 0) return emitted;
    }
  }

  std::shared_ptr<Nvml> nvml_;
  const Clock& clock_;
  Pacer pacer_;
  NvmlSource source_;
  int64_t period_ns_ = 0;
  std::vector<int64_t> steps_ns_;  ///< GPU 0's last step intervals
  std::vector<double> last_mj_, seen_mj_;  ///< at the last sample's end, at the last step seen
  std::vector<int64_t> last_ns_, seen_ns_;
  ProbeInfo info_;
};

}  // namespace

NvmlSource parse_nvml_source(const std::string& text) {
  if (text == "auto") return NvmlSource::kAuto;
  if (text == "energy") return NvmlSource::kEnergy;
  if (text == "instant") return NvmlSource::kInstant;
  if (text == "average") return NvmlSource::kAverage;
  throw InputError("nvml source '" + text + "': energy, instant, average or auto");
}

std::unique_ptr<Probe> open_nvml_probe(std::shared_ptr<Nvml> nvml, double interval_s,
                                       const Clock& clock, NvmlSource source) {
  if (nvml->device_count() == 0) throw DeviceError("NVML sees no GPU");
  return std::make_unique<NvmlProbe>(std::move(nvml), interval_s, clock, source);
}

}  // namespace ergon::probes
