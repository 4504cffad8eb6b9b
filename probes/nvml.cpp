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
constexpr int kValueDouble = 0;
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
    case kValueDouble: mw = f.value.d; break;
    default: throw DeviceError("NVML: cannot " + doing + ": a value of unknown type " + std::to_string(f.value_type));
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
// 580): a reading between two steps holds the last one. Each GPU's steps are timed by polling
// its counter every 2 ms from a little before the step a sample ends at is due (each NVML call
// costs about a millisecond of the kernel's time, so the probe does not poll all the time),
// and a sample is the energy between two steps over the time between them.
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
    std::string no_energy = every_gpu([&](unsigned g) { return nvml_->energy_j(g); });
    const std::string no_instant = every_gpu([&](unsigned g) { return nvml_->instant_power_w(g); });
    const bool chosen = source_ != NvmlSource::kAuto;
    if (no_energy.empty() && (!chosen || source_ == NvmlSource::kEnergy)) {
      // No sample can be finer than a counter's own steps: time a few on every GPU. A
      // counter that does not move is refused when asked for, passed over under auto.
      try {
        time_steps();
        source_ = NvmlSource::kEnergy;
      } catch (const DeviceError& e) {
        if (chosen) throw;
        no_energy = e.what();
      }
    }
    if (!chosen && source_ != NvmlSource::kEnergy)
      source_ = no_instant.empty() ? NvmlSource::kInstant : NvmlSource::kAverage;
    if (source_ == NvmlSource::kEnergy && !no_energy.empty()) throw DeviceError(no_energy);
    if (source_ == NvmlSource::kInstant && !no_instant.empty()) throw DeviceError(no_instant);
    info_.max_rate_hz = 1e9 / static_cast<double>(pacer_.interval_ns());
    info_.location = std::string("NVML ") + source_name(source_);
    if (source_ == NvmlSource::kEnergy) {
      const int64_t slowest = *std::max_element(period_ns_.begin(), period_ns_.end());
      info_.max_rate_hz = std::min(info_.max_rate_hz, 1e9 / static_cast<double>(slowest));
      info_.location += ", moving every " + std::to_string(std::lround(static_cast<double>(slowest) * 1e-6)) + " ms";
    }
    info_.power = true;
  }
  [[nodiscard]] const ProbeInfo& info() const override { return info_; }
  void start() override {
    pacer_.start();
    if (source_ != NvmlSource::kEnergy) return;
    align_to_steps();
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
  [[noreturn]] static void stuck(unsigned gpu) {
    throw DeviceError("NVML: the energy counter of GPU " + std::to_string(gpu) +
                      " has not moved for 1 s (--probe nvml,source=instant reads its instant power instead)");
  }
  // Polls every GPU's counter every 2 ms until each has stepped `steps` times, calling
  // on_step(gpu, interval since its last step) at each step (the first interval of a call is
  // from the step seen before it, 0 if none). Leaves last_/seen_ at each GPU's last step.
  template <class OnStep>
  void poll_until(OnStep on_step, int steps) {
    const std::size_t n = info_.channels.size();
    seen_mj_.resize(n);
    seen_ns_.resize(n, 0);
    std::vector<int> left(n, steps);
    for (std::size_t g = 0; g < n; ++g) seen_mj_[g] = nvml_->energy_j(static_cast<unsigned>(g)) * 1e3;
    std::vector<int64_t> since(n, clock_.now_ns());
    for (std::size_t waiting = n; waiting > 0;) {
      clock_.sleep_until_ns(clock_.now_ns() + kCounterPollNs);
      for (std::size_t g = 0; g < n; ++g) {
        if (left[g] == 0) continue;
        const int64_t now = clock_.now_ns();
        const double mj = nvml_->energy_j(static_cast<unsigned>(g)) * 1e3;
        if (mj == seen_mj_[g]) {
          if (now - since[g] > kCounterStuckNs) stuck(static_cast<unsigned>(g));
          continue;
        }
        on_step(g, seen_ns_[g] > 0 ? now - seen_ns_[g] : 0);
        seen_mj_[g] = mj;
        seen_ns_[g] = since[g] = now;
        if (--left[g] == 0) --waiting;
      }
    }
    last_mj_ = seen_mj_;
    last_ns_ = seen_ns_;
  }
  // Waits for a step of every GPU's counter, so that its next sample begins at one, not part
  // way between two.
  void align_to_steps() { poll_until([](std::size_t, int64_t) {}, 1); }
  // The period of each GPU's counter: the median of its last few steps, each timed from the
  // step seen before it.
  void note_step(std::size_t gpu, int64_t interval_ns) {
    if (interval_ns <= 0) return;
    auto& steps = steps_ns_[gpu];
    steps.push_back(interval_ns);
    if (steps.size() > 2 * kPeriodSteps - 1) steps.erase(steps.begin());
    std::vector<int64_t> sorted = steps;
    std::nth_element(sorted.begin(), sorted.begin() + static_cast<std::ptrdiff_t>(sorted.size() / 2), sorted.end());
    period_ns_[gpu] = sorted[sorted.size() / 2];
  }
  void time_steps() {
    const std::size_t n = info_.channels.size();
    steps_ns_.assign(n, {});
    period_ns_.assign(n, 0);
    // Aligned at a step first, then every interval between consecutive steps (all GPUs are
    // polled every 2 ms, so none is missed) counts.
    align_to_steps();
    poll_until([&](std::size_t g, int64_t interval) { note_step(g, interval); }, kPeriodSteps);
  }
  // The step a GPU's next sample ends at: the first due at least an interval (less half a
  // period, as steps come early and late by a few ms) after its last sample's.
  [[nodiscard]] int64_t next_step_due(std::size_t g) const {
    const int64_t period = std::max(period_ns_[g], kCounterPollNs);
    const int64_t earliest = last_ns_[g] + pacer_.interval_ns() - period / 2;
    int64_t due = seen_ns_[g] + period;
    if (due < earliest) due += (earliest - due + period - 1) / period * period;
    return due;
  }
  [[nodiscard]] int64_t polling_from(std::size_t g) const {
    return seen_ns_[g] + (next_step_due(g) - kCounterLeadNs - seen_ns_[g]) / kCounterPollNs * kCounterPollNs;
  }
  std::size_t read_energy(std::vector<PowerSample>& out) {
    if (last_mj_.size() != info_.channels.size()) start();
    const std::size_t n = info_.channels.size();
    for (;;) {
      // Sleep until the first GPU's next sample is nearly due, then poll every 2 ms.
      int64_t wake = std::numeric_limits<int64_t>::max();
      // (On the 2 ms grid from the GPU's last step, so a step on time is seen on time.)
      for (std::size_t g = 0; g < n; ++g) wake = std::min(wake, polling_from(g));
      clock_.sleep_until_ns(std::max(wake, clock_.now_ns() + kCounterPollNs));
      std::size_t emitted = 0;
      for (std::size_t g = 0; g < n; ++g) {
        const int64_t now = clock_.now_ns();
        if (now < polling_from(g)) continue;  // not due yet
        const double mj = nvml_->energy_j(static_cast<unsigned>(g)) * 1e3;
        if (mj == seen_mj_[g]) {
          if (now - seen_ns_[g] > std::max(kCounterStuckNs, 2 * period_ns_[g])) stuck(static_cast<unsigned>(g));
          continue;
        }
        // Steps skipped while not polled (a sample of several steps) count as one period each.
        const int64_t since = now - seen_ns_[g];
        const int64_t skipped = std::max<int64_t>(1, std::llround(static_cast<double>(since) / static_cast<double>(period_ns_[g])));
        note_step(g, since / skipped);
        seen_mj_[g] = mj;
        seen_ns_[g] = now;
        if (now - last_ns_[g] < pacer_.interval_ns() - period_ns_[g] / 2) continue;
        // Stamped at the middle of the two steps: attribution reads samples as points of a
        // piecewise-linear power, and a mean stamped at its end would lag by half.
        out.push_back(sample(static_cast<uint8_t>(g), last_ns_[g] + (now - last_ns_[g]) / 2,
                             (mj - last_mj_[g]) * 1e-3 / (static_cast<double>(now - last_ns_[g]) * 1e-9)));
        last_mj_[g] = mj;
        last_ns_[g] = now;
        ++emitted;
      }
      if (emitted > 0) return emitted;
    }
  }

  std::shared_ptr<Nvml> nvml_;
  const Clock& clock_;
  Pacer pacer_;
  NvmlSource source_;
  std::vector<int64_t> period_ns_;               ///< per GPU
  std::vector<std::vector<int64_t>> steps_ns_;   ///< per GPU, its last step intervals
  std::vector<double> last_mj_, seen_mj_;        ///< at the last sample's end, at the last step seen
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
