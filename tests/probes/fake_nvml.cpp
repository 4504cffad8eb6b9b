// A stand-in for libnvidia-ml.so (tests only): two GPUs with power limits, whose power draw
// follows the limit; FAKE_NVML_DENY=1 refuses to set limits, as NVML does without root.

#include <cstdlib>
#include <cstring>

namespace {

struct Gpu {
  const char* name;
  unsigned limit_mw;
  unsigned long long energy_mj;
};
Gpu gpus[2] = {{"Fake H100 0", 700000, 0}, {"Fake H100 1", 700000, 0}};
int initialized = 0;

}  // namespace

extern "C" {

int nvmlInit_v2() {
  initialized = 1;
  return 0;
}
int nvmlShutdown() {
  initialized = 0;
  return 0;
}
const char* nvmlErrorString(int r) {
  switch (r) {
    case 2: return "Invalid Argument";
    case 4: return "Insufficient Permissions";
    default: return "Unknown Error";
  }
}
int nvmlDeviceGetCount_v2(unsigned* n) {
  if (!initialized) return 1;
  *n = 2;
  return 0;
}
int nvmlDeviceGetHandleByIndex_v2(unsigned i, void** d) {
  if (i >= 2) return 2;
  *d = &gpus[i];
  return 0;
}
int nvmlDeviceGetName(void* d, char* buf, unsigned n) {
  std::strncpy(buf, static_cast<Gpu*>(d)->name, n - 1);
  return 0;
}
int nvmlDeviceGetPowerUsage(void* d, unsigned* mw) {
  Gpu* g = static_cast<Gpu*>(d);
  *mw = g->limit_mw < 450000 ? g->limit_mw : 450000;  // a matmul that wants 450 W
  g->energy_mj += *mw / 20;                          // 50 ms at that power
  return 0;
}
int nvmlDeviceGetTotalEnergyConsumption(void* d, unsigned long long* mj) {
  *mj = static_cast<Gpu*>(d)->energy_mj;
  return 0;
}
int nvmlDeviceGetPowerManagementLimit(void* d, unsigned* mw) {
  *mw = static_cast<Gpu*>(d)->limit_mw;
  return 0;
}
int nvmlDeviceGetPowerManagementLimitConstraints(void*, unsigned* lo, unsigned* hi) {
  *lo = 200000;
  *hi = 700000;
  return 0;
}
int nvmlDeviceSetPowerManagementLimit(void* d, unsigned mw) {
  if (std::getenv("FAKE_NVML_DENY") != nullptr) return 4;
  static_cast<Gpu*>(d)->limit_mw = mw;
  return 0;
}
}
