#include "probes/nvml.h"

#include <dlfcn.h>

#include <algorithm>
#include <cmath>

#include "common/error.h"

namespace ergon::probes {
namespace {

// The few NVML entry points Ergon uses, declared here (the ABI is stable; no nvml.h needed).
using Return = int;
constexpr Return kSuccess = 0;
constexpr Return kNoPermission = 4;
constexpr Return kNotSupported = 3;
using Device = void*;

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

class NvmlProbe final : public Probe {
 public:
  NvmlProbe(std::shared_ptr<Nvml> nvml, double interval_s, const Clock& clock)
      : nvml_(std::move(nvml)),
        pacer_(clock, static_cast<int64_t>((interval_s > 0 ? interval_s : 0.05) * 1e9)) {
    info_.kind = "nvml";
    info_.location = "NVML";
    const unsigned n = nvml_->device_count();
    for (unsigned i = 0; i < n && i < 255; ++i)
      info_.channels.push_back({static_cast<uint8_t>(i), nvml_->name(i)});
    info_.max_rate_hz = 1e9 / static_cast<double>(pacer_.interval_ns());
    info_.power = true;
  }
  [[nodiscard]] const ProbeInfo& info() const override { return info_; }
  void start() override { pacer_.start(); }
  void stop() override {}
  std::size_t read(std::vector<PowerSample>& out) override {
    const auto t = static_cast<uint64_t>(pacer_.wait());
    for (const Rail& ch : info_.channels) {
      PowerSample s;
      s.rail = ch.id;
      s.t_ticks = t;
      s.power_uw = static_cast<int32_t>(std::lround(nvml_->power_w(ch.id) * 1e6));
      out.push_back(s);
    }
    return info_.channels.size();
  }
  [[nodiscard]] uint64_t read_errors() const override { return 0; }

 private:
  std::shared_ptr<Nvml> nvml_;
  Pacer pacer_;
  ProbeInfo info_;
};

}  // namespace

std::unique_ptr<Probe> open_nvml_probe(std::shared_ptr<Nvml> nvml, double interval_s,
                                       const Clock& clock) {
  if (nvml->device_count() == 0) throw DeviceError("NVML sees no GPU");
  return std::make_unique<NvmlProbe>(std::move(nvml), interval_s, clock);
}

}  // namespace ergon::probes
