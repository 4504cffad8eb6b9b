// A stand-in for libnvidia-ml.so (tests only): two GPUs with power limits, whose power draw
// follows the limit; FAKE_NVML_DENY=1 refuses to set limits, as NVML does without root.
//
// It behaves as an H100 did when measured (scripts/nvml_step_response.py, docs/boards.md):
// - nvmlDeviceGetPowerUsage is a one-second average: a load that began half a second ago shows
//   half way between idle (60 W) and the load;
// - the instant field (NVML_FI_DEV_POWER_INSTANT) shows the load;
// - the energy counter moves only every 100 ms, by that period's energy.
// Its time is what the test sets with fake_nvml_set_time_ns (a test's clock calls it), or,
// with FAKE_NVML_REAL_TIME=1, the steady clock's since the library's first reading (for a
// test that runs ergon itself).
// FAKE_NVML_TRACE=FILE.csv replays a recorded trace instead (columns t_s, power_usage_mw,
// field_average_mw, field_instant_mw, energy_mj; time 0 of the fake clock is the first row).
// FAKE_NVML_NO_FIELDS=1: a driver without the power fields; FAKE_NVML_NO_ENERGY=1: a GPU
// without the counter; FAKE_NVML_STUCK=1: a counter that never moves; FAKE_NVML_GPU1_STEP=P,O:
// GPU 1's counter moves every P ms from O ms on (out of phase with GPU 0's).

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Gpu {
  const char* name;
  unsigned limit_mw;
};
Gpu gpus[2] = {{"Fake H100 0", 700000}, {"Fake H100 1", 700000}};
int initialized = 0;
long long now_ns = 0;
long long energy_reads = 0;

long long current_ns() {
  if (std::getenv("FAKE_NVML_REAL_TIME") == nullptr) return now_ns;
  static const auto start = std::chrono::steady_clock::now();
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count();
}

constexpr unsigned long long kEnergyAtTimeZeroMj = 3'509'431;  // as the H100's counter read
constexpr long long kCounterPeriodNs = 100'000'000;

struct TraceRow {
  double t_s;
  unsigned usage_mw, instant_mw;
  unsigned long long energy_mj;
};
const std::vector<TraceRow>* trace() {
  static std::vector<TraceRow> rows;
  static bool loaded = false;
  const char* path = std::getenv("FAKE_NVML_TRACE");
  if (path == nullptr) return nullptr;
  if (!loaded) {
    loaded = true;
    std::ifstream in(path);
    std::string line;
    std::getline(in, line);  // header
    while (std::getline(in, line)) {
      std::stringstream s(line);
      std::string t, usage, average, instant, energy;
      std::getline(s, t, ',');
      std::getline(s, usage, ',');
      std::getline(s, average, ',');
      std::getline(s, instant, ',');
      std::getline(s, energy, ',');
      rows.push_back({std::stod(t), static_cast<unsigned>(std::stoul(usage)),
                      static_cast<unsigned>(std::stoul(instant)), std::stoull(energy)});
    }
  }
  return &rows;
}
// The recorded poll in force at the fake clock's time.
const TraceRow& trace_row() {
  const auto& rows = *trace();
  static const TraceRow kNone{};
  if (rows.empty()) return kNone;  // an unreadable trace file: every reading 0
  const double t = rows.front().t_s + static_cast<double>(current_ns()) * 1e-9;
  std::size_t i = 0;
  while (i + 1 < rows.size() && rows[i + 1].t_s <= t) ++i;
  return rows[i];
}

unsigned load_mw(const Gpu* g) { return g->limit_mw < 450000 ? g->limit_mw : 450000; }  // a matmul that wants 450 W

}  // namespace

extern "C" {

void fake_nvml_set_time_ns(long long t_ns) { now_ns = t_ns; }
long long fake_nvml_energy_reads() { return energy_reads; }

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
    case 3: return "Not Supported";
    case 4: return "Insufficient Permissions";
    default: return "Unknown Error";
  }
}
int nvmlDeviceGetCount_v2(unsigned* n) {
  if (!initialized) return 1;
  *n = trace() != nullptr ? 1 : 2;
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
  *mw = trace() != nullptr ? trace_row().usage_mw : (60000 + load_mw(static_cast<Gpu*>(d))) / 2;
  return 0;
}
struct FieldValue {
  unsigned field_id, scope_id;
  long long timestamp, latency_us;
  int value_type, nvml_return;
  union {
    double d;
    unsigned ui;
    unsigned long long ull;
  } value;
};
int nvmlDeviceGetFieldValues(void* d, int count, FieldValue* values) {
  for (int i = 0; i < count; ++i) {
    FieldValue& f = values[i];
    if (f.field_id != 186 || std::getenv("FAKE_NVML_NO_FIELDS") != nullptr) {
      f.nvml_return = 3;  // not supported
      continue;
    }
    f.nvml_return = 0;
    f.value_type = 1;  // unsigned int, milliwatts
    f.value.ui = trace() != nullptr ? trace_row().instant_mw : load_mw(static_cast<Gpu*>(d));
  }
  return 0;
}
int nvmlDeviceGetTotalEnergyConsumption(void* d, unsigned long long* mj) {
  if (std::getenv("FAKE_NVML_NO_ENERGY") != nullptr) return 3;
  ++energy_reads;
  if (trace() != nullptr) {
    *mj = trace_row().energy_mj;
    return 0;
  }
  if (std::getenv("FAKE_NVML_STUCK") != nullptr) {
    *mj = kEnergyAtTimeZeroMj;
    return 0;
  }
  long long period_ns = kCounterPeriodNs, offset_ns = 0;  // the counter moves every 100 ms
  if (const char* step = std::getenv("FAKE_NVML_GPU1_STEP"); step != nullptr && d == &gpus[1]) {
    period_ns = std::atoll(step) * 1'000'000;
    offset_ns = std::atoll(std::strchr(step, ',') + 1) * 1'000'000;
  }
  const long long now = current_ns();
  const long long steps = now < offset_ns ? 0 : (now - offset_ns) / period_ns;
  // Each step adds its period's energy at the load.
  *mj = kEnergyAtTimeZeroMj + static_cast<unsigned long long>(steps * period_ns / 1'000'000) * load_mw(static_cast<Gpu*>(d)) / 1000;
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
