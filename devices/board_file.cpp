#include "devices/board_file.h"

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "common/error.h"
#include "common/text.h"
#include "devices/protocol/messages.h"
#include "probes/probe.h"

namespace ergon::devices {
namespace {

using nlohmann::json;

/// A JSON object being read field by field: each error names the file and the field's path,
/// and fields it does not know are refused (a typo never passes silently as a default).
class ObjectReader {
 public:
  ObjectReader(const json& object, std::string path, const std::string& origin)
      : object_(object), path_(std::move(path)), origin_(origin) {
    if (!object_.is_object()) fail("", "an object", object_);
  }

  [[noreturn]] void fail(std::string_view key, std::string_view expected, const json& got) const {
    std::string shown = got.dump();
    if (shown.size() > 40) shown = shown.substr(0, 37) + "...";
    throw InputError(printable(origin_ + ": " + field(key) + ": expected " + std::string(expected) + ", got " + shown, 400));
  }
  [[noreturn]] void missing(std::string_view key, std::string_view expected) const {
    throw InputError(printable(origin_ + ": " + field(key) + ": missing (expected " + std::string(expected) + ")", 400));
  }

  bool has(std::string_view key) {
    seen_.insert(std::string(key));
    return object_.contains(key);
  }

  const json& at(std::string_view key, std::string_view expected) {
    if (!has(key)) missing(key, expected);
    return object_.at(std::string(key));
  }

  std::string text(std::string_view key, std::size_t max_bytes = 0, bool required = true) {
    const std::string expected =
        max_bytes ? "text of 1 to " + std::to_string(max_bytes) + " bytes" : std::string("text");
    if (!required && !has(key)) return {};
    const json& v = at(key, expected);
    if (!v.is_string()) fail(key, expected, v);
    std::string s = v.get<std::string>();
    if (max_bytes && (s.empty() || s.size() > max_bytes)) fail(key, expected, v);
    return s;
  }

  /// A finite number in [min, max]; `what` says its unit ("watts").
  double number(std::string_view key, double min, double max, std::string_view what, bool positive = false) {
    const std::string expected = describe(min, max, what, positive);
    const json& v = at(key, expected);
    return checked(key, v, min, max, positive, expected);
  }
  double number_or(std::string_view key, double fallback, double min, double max, std::string_view what,
                   bool positive = false) {
    if (!has(key)) return fallback;
    return number(key, min, max, what, positive);
  }

  uint64_t count(std::string_view key, uint64_t min, std::string_view what,
                 uint64_t max = std::numeric_limits<uint64_t>::max()) {
    const std::string expected = (max == std::numeric_limits<uint64_t>::max()
                                      ? "a whole number >= " + std::to_string(min)
                                      : "a whole number from " + std::to_string(min) + " to " + std::to_string(max)) +
                                 " (" + std::string(what) + ")";
    const json& v = at(key, expected);
    if (!v.is_number_unsigned() && !(v.is_number_integer() && v.get<int64_t>() >= 0)) {
      // 1e9 is how people write a tick rate: accept a float that is a whole number.
      if (!v.is_number_float() || v.get<double>() != std::floor(v.get<double>()) || v.get<double>() < 0 ||
          v.get<double>() > 1.8e19)
        fail(key, expected, v);
      return check_range(key, v, static_cast<uint64_t>(v.get<double>()), min, max, expected);
    }
    return check_range(key, v, v.get<uint64_t>(), min, max, expected);
  }
  uint64_t count_or(std::string_view key, uint64_t fallback, uint64_t min, std::string_view what,
                    uint64_t max = std::numeric_limits<uint64_t>::max()) {
    if (!has(key)) return fallback;
    return count(key, min, what, max);
  }

  ObjectReader object(std::string_view key) {
    const json& v = at(key, "an object");
    if (!v.is_object()) fail(key, "an object", v);
    return ObjectReader(v, field(key), origin_);
  }

  /// Refuses any field not read: "cpu.flop_per_s: unknown field (expected one of ...)".
  void finish() const {
    for (const auto& [key, value] : object_.items()) {
      if (seen_.count(key)) continue;
      std::string known;
      for (const auto& k : seen_) known += (known.empty() ? "" : ", ") + k;
      throw InputError(printable(origin_ + ": " + field(key) + ": unknown field (expected one of: " + known + ")", 400));
    }
  }

  [[nodiscard]] std::string field(std::string_view key) const {
    if (key.empty()) return path_.empty() ? std::string("the file") : path_;
    return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  }
  [[nodiscard]] const std::string& origin() const { return origin_; }

 private:
  static std::string describe(double min, double max, std::string_view what, bool positive) {
    std::ostringstream out;
    out << "a number";
    if (positive) out << " > 0";
    else if (min > -std::numeric_limits<double>::infinity()) out << " >= " << min;
    if (max < std::numeric_limits<double>::infinity()) out << (positive || min > -1e308 ? " and <= " : " <= ") << max;
    out << " (" << what << ")";
    return out.str();
  }
  double checked(std::string_view key, const json& v, double min, double max, bool positive,
                 const std::string& expected) const {
    if (!v.is_number()) fail(key, expected, v);
    const double x = v.get<double>();
    if (!std::isfinite(x) || x < min || x > max || (positive && x <= 0)) fail(key, expected, v);
    return x;
  }
  uint64_t check_range(std::string_view key, const json& v, uint64_t x, uint64_t min, uint64_t max,
                       const std::string& expected) const {
    if (x < min || x > max) fail(key, expected, v);
    return x;
  }

  const json& object_;
  std::string path_;
  const std::string& origin_;
  std::set<std::string> seen_;
};

constexpr double kInf = std::numeric_limits<double>::infinity();

struct KindName {
  std::string_view name;
  BoardKind kind;
};
constexpr KindName kKinds[] = {{"tx2", BoardKind::kJetsonTx2},
                               {"pi4", BoardKind::kRaspberryPi4},
                               {"nrf52840", BoardKind::kNrf52840},
                               {"mkr1000", BoardKind::kMkr1000},
                               {"described", BoardKind::kDescribed}};

/// "\"text\"" (GCC 12 at -O3 warns falsely on "\"" + std::string(...)).
std::string quoted(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 2);
  out.push_back('"');
  out.append(text);
  out.push_back('"');
  return out;
}

std::string kind_choices() {
  std::string out;
  for (const auto& k : kKinds) out += (out.empty() ? "" : ", ") + std::string(k.name);
  return out;
}

uint32_t parse_version(ObjectReader& r, std::string_view key) {
  if (!r.has(key)) return 0x000100;
  const std::string expected = "a version MAJOR.MINOR.PATCH, each 0 to 255";
  const json& v = r.at(key, expected);
  if (!v.is_string()) r.fail(key, expected, v);
  unsigned major = 0, minor = 0, patch = 0;
  char tail = 0;
  const std::string s = v.get<std::string>();
  if (std::sscanf(s.c_str(), "%u.%u.%u%c", &major, &minor, &patch, &tail) != 3 || major > 255 || minor > 255 ||
      patch > 255)
    r.fail(key, expected, v);
  return major << 16 | minor << 8 | patch;
}

void read_modes(ObjectReader r, BoardProfile& b) {
  const std::set<std::string> controls = {"cpufreq", "nvpmodel", "nvml", "none"};
  b.mode_control = r.has("control") ? r.text("control") : "none";
  if (!controls.count(b.mode_control)) r.fail("control", "one of cpufreq, nvpmodel, nvml, none", b.mode_control);
  b.mode_switch_s = r.number_or("switch_s", 0, 0, 60, "seconds");
  const json& modes = r.at("modes", "a list of power modes, the default first");
  if (!modes.is_array() || modes.empty()) r.fail("modes", "a list of at least one power mode, the default first", modes);
  std::set<std::string> names;
  for (std::size_t i = 0; i < modes.size(); ++i) {
    ObjectReader m(modes[i], r.field("modes") + "[" + std::to_string(i) + "]", r.origin());
    PowerMode mode;
    mode.name = m.text("name", protocol::kNameBytes);
    if (!names.insert(mode.name).second) m.fail("name", "a name no other mode has", mode.name);
    mode.description = m.text("description", 0, false);
    mode.setting = m.text("setting", 0, false);
    mode.speed = m.number("speed", 0, 100, "compute speed against the figures' mode", true);
    mode.dynamic_power = m.number("dynamic_power", 0, 100, "dynamic power against the figures' mode", true);
    m.finish();
    b.power_modes.push_back(std::move(mode));
  }
  const PowerMode& first = b.power_modes.front();
  if (first.speed != 1 || first.dynamic_power != 1)
    r.fail("modes", "the first mode to be the one the figures describe (speed 1, dynamic_power 1)", modes[0]);
  r.finish();
}

void read_truth(ObjectReader r, SimTruth& t) {
  t.time_jitter = r.number_or("time_jitter", 0, 0, 1, "lognormal sigma of an op's time");
  t.idle_temp_c = r.number_or("idle_temp_c", 25, -40, 150, "degrees C");
  t.temp_rise_c_per_w = r.number_or("temp_rise_c_per_w", 0, 0, 1000, "degrees C per watt");
  t.thermal_tau_s = r.number_or("thermal_tau_s", 1, 0, 1e6, "seconds", true);
  t.throttle_c = r.number_or("throttle_c", 0, 0, 200, "degrees C; 0: never throttles");
  t.release_c = r.number_or("release_c", 0, 0, 200, "degrees C");
  if (t.throttle_c > 0 && t.release_c >= t.throttle_c)
    r.fail("release_c", "a temperature below throttle_c", t.release_c);
  t.throttle_speed = r.number_or("throttle_speed", 1, 0, 1, "speed while throttled", true);
  t.throttle_dynamic_power = r.number_or("throttle_dynamic_power", 1, 0, 1, "dynamic power while throttled", true);
  t.cache_bytes = r.count_or("cache_bytes", 0, 0, "bytes; 0: no cache");
  t.spill_slowdown = r.number_or("spill_slowdown", 0, 0, 100, "slowdown of a working set far past the cache");
  t.storage_latency_jitter = r.number_or("storage_latency_jitter", 0, 0, 2, "lognormal sigma of a page's latency");
  r.finish();
}

}  // namespace

BoardProfile parse_board_descriptor(std::string_view json_text, const std::string& origin) {
  json doc;
  try {
    // A descriptor nests a few levels; a file nested thousands deep (corrupt, or made to)
    // would exhaust the stack in what reads it after the parser.
    constexpr int kMaxDepth = 64;
    doc = json::parse(json_text, [&](int depth, json::parse_event_t, json&) {
      if (depth > kMaxDepth)
        throw InputError(printable(origin, 200) + ": nested deeper than " + std::to_string(kMaxDepth) + " levels: not a board descriptor");
      return true;
    });
  } catch (const json::exception& e) {
    // "[json.exception.parse_error.101] parse error at line 3, column 5: ..." without its
    // prefix; also a number too large for a double ("number overflow parsing '60e6144'").
    std::string what = e.what();
    if (const auto at = what.find("] "); what.starts_with("[json.exception.") && at != std::string::npos)
      what = what.substr(at + 2);
    throw InputError(printable(origin + ": not JSON: " + what, 400));
  }
  ObjectReader r(doc, "", origin);
  const std::string schema = r.text("schema");
  if (schema != kBoardSchema) r.fail("schema", quoted(kBoardSchema), schema);

  BoardProfile b;
  b.origin = origin;
  b.name = r.text("name", protocol::kNameBytes);
  for (char c : b.name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.'))
      r.fail("name", "letters, digits, '-', '_' or '.' (it is a command-line name)", b.name);
  const std::string kind = r.has("kind") ? r.text("kind") : "described";
  b.kind = BoardKind::kUnknown;
  for (const auto& k : kKinds)
    if (k.name == kind) b.kind = k.kind;
  if (b.kind == BoardKind::kUnknown) r.fail("kind", "one of " + kind_choices(), kind);
  if (b.kind != BoardKind::kDescribed && kind != b.name)
    r.fail("kind", "\"described\" for a board named " + b.name + " (a built-in kind is its own name)", kind);
  b.description = r.text("description");
  if (r.has("notes")) {
    const json& notes = r.at("notes", "a list of text");
    if (!notes.is_array()) r.fail("notes", "a list of text", notes);
    for (const auto& n : notes)
      if (!n.is_string()) r.fail("notes", "a list of text", n);
  }

  {
    ObjectReader cpu = r.object("cpu");
    b.cpu = cpu.text("name", 0, false);
    b.cores = static_cast<int>(cpu.count_or("cores", 1, 1, "cores the kernels may use", 4096));
    b.flops_per_s = cpu.number("flops_per_s", 0, kInf, "sustained fp32 FLOP/s of one core", true);
    b.mem_bytes_per_s = cpu.number("mem_bytes_per_s", 0, kInf, "bytes/s for memory-bound ops", true);
    b.op_overhead_s = cpu.number("op_overhead_s", 0, 1, "seconds per op invocation");
    cpu.finish();
  }
  b.ram_bytes = r.count("ram_bytes", 1, "bytes");
  b.tick_hz = r.count("tick_hz", 1, "device timestamps per second");
  b.firmware_version = parse_version(r, "firmware_version");
  {
    ObjectReader power = r.object("power");
    b.bus_v = power.number("bus_v", 0, 60, "supply volts", true);
    b.idle_w = power.number("idle_w", 0, 1000, "watts with nothing running", true);
    b.compute_w = power.number("compute_w", 0, 1000, "watts above idle per busy core");
    power.finish();
  }
  {
    ObjectReader st = r.object("storage");
    b.storage = st.text("name", 0, false);
    b.storage_w = st.number("power_w", 0, 1000, "watts above idle while paging");
    b.pagein_bytes_per_s = st.number("pagein_bytes_per_s", 0, kInf, "bytes/s", true);
    b.pagein_latency_s = st.number("pagein_latency_s", 0, 10, "seconds");
    b.pageout_bytes_per_s = st.number("pageout_bytes_per_s", 0, kInf, "bytes/s", true);
    b.pageout_latency_s = st.number("pageout_latency_s", 0, 10, "seconds");
    st.finish();
  }
  read_modes(r.object("power_modes"), b);
  b.power_mode = b.power_modes.front().name;
  {
    ObjectReader probe = r.object("probe");
    b.rail_name = probe.text("rail", protocol::kNameBytes);
    b.probe_spec = probe.text("spec", 0, false);
    if (!b.probe_spec.empty()) {
      try {
        (void)probes::parse_probe_spec(b.probe_spec);
      } catch (const InputError& e) {
        probe.fail("spec", std::string("a probe spec (") + e.what() + ")", b.probe_spec);
      }
    }
    if (probe.has("ina219")) {
      ObjectReader ina = probe.object("ina219");
      b.ina219.shunt_ohm = ina.number("shunt_ohm", 0, 1000, "ohms", true);
      b.ina219.current_lsb_a = ina.number("current_lsb_a", 0, 1, "amperes per current LSB", true);
      ina.finish();
    }
    probe.finish();
  }
  if (r.has("simulator")) {
    ObjectReader sim = r.object("simulator");
    b.cold_start_penalty = sim.number_or("cold_start_penalty", 0, 0, 10, "extra fraction of a cold op's time");
    b.clock_drift_ppm = sim.number_or("clock_drift_ppm", 0, -1000, 1000, "ppm");
    b.power_jitter = sim.number_or("power_jitter", 0, 0, 1, "relative spread of power between windows");
    b.shunt_noise_v = sim.number_or("shunt_noise_v", 0, 0, 0.32, "volts, 1 sigma");
    if (sim.has("truth")) read_truth(sim.object("truth"), b.sim_truth);
    sim.finish();
  }
  r.finish();
  return b;
}

BoardProfile load_board_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(printable(path.string(), 200) + ": cannot read the board descriptor");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_board_descriptor(text.str(), path.string());
}

std::string board_descriptor_json(const BoardProfile& b, const std::vector<std::string>& notes) {
  std::string kind = "described";
  for (const auto& k : kKinds)
    if (k.kind == b.kind && b.kind != BoardKind::kDescribed) kind = std::string(k.name);
  json modes = json::array();
  // Written relative to the first mode, which the figures describe.
  for (const PowerMode& m : b.power_modes) {
    json mode = {{"name", m.name}, {"speed", m.speed}, {"dynamic_power", m.dynamic_power}};
    if (!m.description.empty()) mode["description"] = m.description;
    if (!m.setting.empty()) mode["setting"] = m.setting;
    modes.push_back(std::move(mode));
  }
  const SimTruth& t = b.sim_truth;
  json probe = {{"rail", b.rail_name},
                {"ina219", {{"shunt_ohm", b.ina219.shunt_ohm}, {"current_lsb_a", b.ina219.current_lsb_a}}}};
  if (!b.probe_spec.empty()) probe["spec"] = b.probe_spec;
  char version[16];
  std::snprintf(version, sizeof version, "%u.%u.%u", b.firmware_version >> 16 & 0xff, b.firmware_version >> 8 & 0xff,
                b.firmware_version & 0xff);
  json doc = {
      {"schema", kBoardSchema},
      {"name", b.name},
      {"kind", kind},
      {"description", b.description},
      {"notes", notes},
      {"cpu",
       {{"name", b.cpu},
        {"cores", b.cores},
        {"flops_per_s", b.flops_per_s},
        {"mem_bytes_per_s", b.mem_bytes_per_s},
        {"op_overhead_s", b.op_overhead_s}}},
      {"ram_bytes", b.ram_bytes},
      {"tick_hz", b.tick_hz},
      {"firmware_version", version},
      {"power", {{"bus_v", b.bus_v}, {"idle_w", b.idle_w}, {"compute_w", b.compute_w}}},
      {"storage",
       {{"name", b.storage},
        {"power_w", b.storage_w},
        {"pagein_bytes_per_s", b.pagein_bytes_per_s},
        {"pagein_latency_s", b.pagein_latency_s},
        {"pageout_bytes_per_s", b.pageout_bytes_per_s},
        {"pageout_latency_s", b.pageout_latency_s}}},
      {"power_modes", {{"control", b.mode_control}, {"switch_s", b.mode_switch_s}, {"modes", modes}}},
      {"probe", probe},
      {"simulator",
       {{"cold_start_penalty", b.cold_start_penalty},
        {"clock_drift_ppm", b.clock_drift_ppm},
        {"power_jitter", b.power_jitter},
        {"shunt_noise_v", b.shunt_noise_v},
        {"truth",
         {{"time_jitter", t.time_jitter},
          {"idle_temp_c", t.idle_temp_c},
          {"temp_rise_c_per_w", t.temp_rise_c_per_w},
          {"thermal_tau_s", t.thermal_tau_s},
          {"throttle_c", t.throttle_c},
          {"release_c", t.release_c},
          {"throttle_speed", t.throttle_speed},
          {"throttle_dynamic_power", t.throttle_dynamic_power},
          {"cache_bytes", t.cache_bytes},
          {"spill_slowdown", t.spill_slowdown},
          {"storage_latency_jitter", t.storage_latency_jitter}}}}}};
  return doc.dump(2) + "\n";
}

std::vector<std::filesystem::path> board_search_dirs() {
  std::vector<std::filesystem::path> dirs;
  if (const char* path = std::getenv("ERGON_BOARD_PATH")) {
    std::string_view rest = path;
    while (!rest.empty()) {
      const auto colon = rest.find(':');
      const std::string_view dir = rest.substr(0, colon);
      if (!dir.empty()) dirs.emplace_back(std::string(dir));
      if (colon == std::string_view::npos) break;
      rest.remove_prefix(colon + 1);
    }
  }
  if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg && *xdg) {
    dirs.push_back(std::filesystem::path(xdg) / "ergon" / "boards");
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    dirs.push_back(std::filesystem::path(home) / ".config" / "ergon" / "boards");
  }
  return dirs;
}

}  // namespace ergon::devices
