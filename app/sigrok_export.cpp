#include "app/sigrok_export.h"

#include <fmt/format.h>
#include <zip.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <map>

#include "common/error.h"
#include "costdb/costs.h"

namespace ergon::app {
namespace {

using profiler::Phase;

/// A zip being written: its entries' bytes must live until it is closed.
class ZipWriter {
 public:
  explicit ZipWriter(const std::filesystem::path& path) : path_(path) {
    int error = 0;
    zip_ = zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &error);
    if (!zip_) {
      zip_error_t e;
      zip_error_init_with_code(&e, error);
      const std::string why = zip_error_strerror(&e);
      zip_error_fini(&e);
      throw Error("cannot write " + path.string() + ": " + why);
    }
  }
  ~ZipWriter() {
    if (zip_) zip_discard(zip_);
  }
  ZipWriter(const ZipWriter&) = delete;
  ZipWriter& operator=(const ZipWriter&) = delete;

  void add(const std::string& name, std::string bytes) {
    entries_.push_back(std::move(bytes));
    const std::string& data = entries_.back();
    zip_source_t* source = zip_source_buffer(zip_, data.data(), data.size(), 0);
    if (!source || zip_file_add(zip_, name.c_str(), source, ZIP_FL_OVERWRITE | ZIP_FL_ENC_UTF_8) < 0) {
      if (source) zip_source_free(source);
      throw Error("cannot write " + path_.string() + ": " + zip_strerror(zip_));
    }
  }

  void close() {
    if (zip_close(zip_) < 0) throw Error("cannot write " + path_.string() + ": " + zip_strerror(zip_));
    zip_ = nullptr;
  }

 private:
  std::filesystem::path path_;
  zip_t* zip_ = nullptr;
  std::deque<std::string> entries_;
};

std::string floats(const std::vector<float>& values) {
  // srzip stores float32 in the host's byte order, and libsigrok reads it back as such: this
  // is little-endian on every machine Ergon builds for.
  std::string bytes(values.size() * sizeof(float), '\0');
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

enum LogicBit : uint16_t {
  kBusy = 1U << 0,
  kForward = 1U << 1,
  kBackward = 1U << 2,
  kPageIn = 1U << 3,
  kPageOut = 1U << 4,
  kLink = 1U << 5,
  kOpShift = 6,
};

uint16_t logic_of(const profiler::OpSpan& span) {
  uint16_t bits = 0;
  switch (span.phase) {
    case Phase::kIdle: return 0;
    case Phase::kForward: bits = kForward; break;
    case Phase::kBackward: bits = kBackward; break;
    case Phase::kPageIn: bits = kPageIn; break;
    case Phase::kPageOut: bits = kPageOut; break;
    case Phase::kLinkSend:
    case Phase::kLinkReceive: bits = kLink; break;
    default: break;
  }
  return static_cast<uint16_t>(bits | kBusy | (span.op_id & 0xFF) << kOpShift);
}

}  // namespace

SigrokExport export_sigrok(costdb::Database& db, int64_t run_id, const std::filesystem::path& path) {
  const costdb::RunData data = costdb::load_run_data(db, run_id);
  if (data.samples.empty())
    throw InputError(data.run.power_run_id
                         ? fmt::format("run {} has no samples of its own: its power logger's run {} has them",
                                       run_id, *data.run.power_run_id)
                         : fmt::format("run {} has no power samples to export", run_id));
  if (data.tick_hz == 0) throw InputError(fmt::format("run {} has no tick rate", run_id));

  // The rails, by id, with the names the board gave them.
  std::map<uint8_t, std::string> rail_names;
  for (const auto& rail : costdb::list_rails(db, run_id)) rail_names[rail.id] = rail.name;
  std::map<uint8_t, std::vector<const probes::PowerSample*>> by_rail;
  for (const auto& s : data.samples) by_rail[s.rail].push_back(&s);

  // One rate for the file: the first rail's median interval.
  const auto& first = by_rail.begin()->second;
  std::vector<uint64_t> gaps;
  for (std::size_t i = 1; i < first.size(); ++i)
    if (first[i]->t_ticks > first[i - 1]->t_ticks) gaps.push_back(first[i]->t_ticks - first[i - 1]->t_ticks);
  std::nth_element(gaps.begin(), gaps.begin() + static_cast<std::ptrdiff_t>(gaps.size() / 2), gaps.end());
  const double median_ticks = gaps.empty() ? static_cast<double>(data.tick_hz) : static_cast<double>(gaps[gaps.size() / 2]);
  SigrokExport out;
  out.samplerate_hz = std::max<uint64_t>(1, static_cast<uint64_t>(std::llround(static_cast<double>(data.tick_hz) / median_ticks)));
  const double period_ticks = static_cast<double>(data.tick_hz) / static_cast<double>(out.samplerate_hz);
  const uint64_t t0 = data.samples.front().t_ticks;
  const uint64_t t_end = data.samples.back().t_ticks;
  out.samples = static_cast<uint64_t>(std::floor(static_cast<double>(t_end - t0) / period_ticks)) + 1;
  auto grid_tick = [&](uint64_t i) { return t0 + static_cast<uint64_t>(std::llround(static_cast<double>(i) * period_ticks)); };

  // Logic: the op windows on the grid.
  std::vector<profiler::OpSpan> spans = data.spans;
  std::sort(spans.begin(), spans.end(), [](const auto& a, const auto& b) { return a.begin_ticks < b.begin_ticks; });
  std::string logic(out.samples * 2, '\0');
  std::size_t next = 0;
  std::vector<const profiler::OpSpan*> open;
  for (uint64_t i = 0; i < out.samples; ++i) {
    const uint64_t t = grid_tick(i);
    while (next < spans.size() && spans[next].begin_ticks <= t) open.push_back(&spans[next++]);
    std::erase_if(open, [&](const profiler::OpSpan* s) { return s->end_ticks <= t; });
    uint16_t bits = 0;
    for (const auto* s : open) bits |= logic_of(*s);
    logic[2 * i] = static_cast<char>(bits & 0xFF);
    logic[2 * i + 1] = static_cast<char>(bits >> 8);
  }
  out.logic_channels = {"busy", "forward", "backward", "page-in", "page-out", "link"};
  for (int b = 0; b < 8; ++b) out.logic_channels.push_back("op" + std::to_string(b));

  // Analog: each rail's power, current and voltage, held from the last sample at or before
  // each grid point.
  std::vector<std::pair<std::string, std::vector<float>>> analog;
  for (const auto& [rail, samples] : by_rail) {
    const auto name = rail_names.count(rail) ? rail_names[rail] : "rail" + std::to_string(rail);
    std::vector<float> w(out.samples), a(out.samples), v(out.samples);
    std::size_t k = 0;
    for (uint64_t i = 0; i < out.samples; ++i) {
      const uint64_t t = grid_tick(i);
      while (k + 1 < samples.size() && samples[k + 1]->t_ticks <= t) ++k;
      w[i] = static_cast<float>(samples[k]->power_uw * 1e-6);
      a[i] = static_cast<float>(samples[k]->current_ua * 1e-6);
      v[i] = static_cast<float>(samples[k]->bus_uv * 1e-6);
    }
    analog.emplace_back(name + "_W", std::move(w));
    analog.emplace_back(name + "_A", std::move(a));
    analog.emplace_back(name + "_V", std::move(v));
  }

  // metadata: the keys in the order libsigrok's reader needs them (total probes before
  // total analog; analog channel N numbered after the logic ones).
  const std::size_t logic_count = out.logic_channels.size();
  std::string meta = "[global]\nsigrok version=0.5.2\n\n[device 1]\ncapturefile=logic-1\n";
  meta += fmt::format("total probes={}\nsamplerate={} Hz\ntotal analog={}\n", logic_count, out.samplerate_hz,
                      analog.size());
  for (std::size_t i = 0; i < logic_count; ++i) meta += fmt::format("probe{}={}\n", i + 1, out.logic_channels[i]);
  for (std::size_t i = 0; i < analog.size(); ++i) meta += fmt::format("analog{}={}\n", logic_count + i + 1, analog[i].first);
  meta += "unitsize=2\n";

  ZipWriter zip(path);
  zip.add("version", "2");
  zip.add("metadata", meta);
  zip.add("logic-1-1", std::move(logic));
  for (std::size_t i = 0; i < analog.size(); ++i) {
    zip.add(fmt::format("analog-1-{}-1", logic_count + i + 1), floats(analog[i].second));
    out.analog_channels.push_back(analog[i].first);
  }
  zip.close();
  return out;
}

}  // namespace ergon::app
