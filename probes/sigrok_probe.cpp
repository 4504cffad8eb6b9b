#include "probes/sigrok_probe.h"

#include <libsigrok/libsigrok.h>

#include <algorithm>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "common/error.h"

namespace ergon::probes {
namespace {

enum class Quantity { kVoltage, kCurrent, kPower };

std::string sr_error(int code) { return sr_strerror(code); }

/// One libsigrok context, device and session, acquiring on a thread of its own (libsigrok's
/// session runs a GLib main loop that blocks): analog packets arrive there, are combined
/// sample by sample into PowerSamples, and wait in a queue for read().
class SigrokProbe final : public Probe {
 public:
  SigrokProbe(const ProbeSpec& spec, double rate_hz, const Clock& clock) : clock_(clock) {
    driver_name_ = spec.bus;
    const auto option = [&](const char* key) {
      const auto it = spec.options.find(key);
      return it == spec.options.end() ? std::string() : it->second;
    };
    const std::string conn = option("conn");
    if (const auto bus = option("bus"); !bus.empty()) bus_v_ = std::stod(bus);
    if (rate_hz <= 0 && !option("rate").empty()) rate_hz = std::stod(option("rate"));

    check(sr_init(&h_.context), "cannot start libsigrok");
    sr_dev_driver* driver = nullptr;
    std::string known;
    for (sr_dev_driver** d = sr_driver_list(h_.context); d && *d; ++d) {
      if (driver_name_ == (*d)->name) driver = *d;
      known += known.empty() ? "" : ", ";
      known += (*d)->name;
    }
    if (!driver) {
      throw InputError("probe '" + spec.text + "': libsigrok has no driver '" + driver_name_ +
                       "' (sigrok-cli -L lists them: " + known.substr(0, 120) + "...)");
    }
    check(sr_driver_init(h_.context, driver), "cannot initialise driver " + driver_name_);
    GSList* options = nullptr;
    sr_config conn_option{};
    if (!conn.empty()) {
      conn_option.key = SR_CONF_CONN;
      conn_option.data = g_variant_new_string(conn.c_str());
      options = g_slist_append(options, &conn_option);
    }
    GSList* devices = sr_driver_scan(driver, options);
    if (conn_option.data) g_variant_unref(conn_option.data);
    g_slist_free(options);
    if (!devices) {
      throw DeviceError("probe '" + spec.text + "': driver " + driver_name_ + " found no device" +
                        (conn.empty() ? std::string(" (does it need @CONN, a port?)") : " at " + conn));
    }
    h_.device = static_cast<sr_dev_inst*>(devices->data);
    g_slist_free(devices);

    // Which analog channel measures what: the options, else each channel's own quantity
    // (known only from its packets: left open here).
    const std::map<std::string, Quantity> asked = [&] {
      std::map<std::string, Quantity> m;
      if (!option("voltage").empty()) m[option("voltage")] = Quantity::kVoltage;
      if (!option("current").empty()) m[option("current")] = Quantity::kCurrent;
      if (!option("power").empty()) m[option("power")] = Quantity::kPower;
      return m;
    }();
    std::string analog;
    for (GSList* l = sr_dev_inst_channels_get(h_.device); l; l = l->next) {
      auto* ch = static_cast<sr_channel*>(l->data);
      const bool is_analog = ch->type == SR_CHANNEL_ANALOG;
      if (is_analog) analog += (analog.empty() ? "" : ", ") + std::string(ch->name);
      const bool use = is_analog && (asked.empty() || asked.count(ch->name));
      sr_dev_channel_enable(ch, use ? TRUE : FALSE);
      if (use) enabled_.insert(ch->name);
      if (use && asked.count(ch->name)) roles_[ch->name] = asked.at(ch->name);
    }
    for (const auto& [name, quantity] : asked)
      if (!roles_.count(name)) {
        throw InputError("probe '" + spec.text + "': the device has no analog channel '" + name + "' (it has " +
                         (analog.empty() ? std::string("none") : analog) + ")");
      }
    if (analog.empty()) {
      throw InputError("probe '" + spec.text + "': the " + driver_name_ + " device has no analog channels");
    }
    // Each channel's own quantity serves a one-channel meter; with more, two of a kind would
    // interleave as if they were successive samples: say which measures what.
    if (asked.empty() && enabled_.size() > 1) {
      throw InputError("probe '" + spec.text + "': the device has " + std::to_string(enabled_.size()) +
                       " analog channels (" + analog + "): say which measures what with voltage=, current=, power=");
    }

    check(sr_session_new(h_.context, &h_.session), "cannot create a session");
    check(sr_dev_open(h_.device), "cannot open the " + driver_name_ + " device");
    h_.opened = true;
    check(sr_session_dev_add(h_.session, h_.device), "cannot add the device to the session");
    if (rate_hz > 0) {
      const int rc = sr_config_set(h_.device, nullptr, SR_CONF_SAMPLERATE,
                                   g_variant_new_uint64(static_cast<uint64_t>(std::llround(rate_hz))));
      if (rc != SR_OK)
        throw InputError("probe '" + spec.text + "': the device does not take a sample rate of " +
                         std::to_string(rate_hz) + " Hz (" + sr_error(rc) + ")");
    }
    GVariant* rate = nullptr;
    if (sr_config_get(driver, h_.device, nullptr, SR_CONF_SAMPLERATE, &rate) == SR_OK && rate) {
      rate_hz_ = static_cast<double>(g_variant_get_uint64(rate));
      g_variant_unref(rate);
    }
    check(sr_session_datafeed_callback_add(h_.session, &SigrokProbe::on_packet, this), "cannot receive data");

    const std::string rail = option("rail").empty() ? driver_name_ : option("rail");
    info_.kind = "sigrok";
    info_.location = driver_name_ + (conn.empty() ? "" : "@" + conn);
    info_.channels = {{0, rail.substr(0, 15)}};
    info_.max_rate_hz = rate_hz_;
    info_.voltage = true;
    info_.current = true;
    info_.power = true;
  }

  ~SigrokProbe() override { stop(); }

  [[nodiscard]] const ProbeInfo& info() const override { return info_; }

  void start() override {
    if (thread_.joinable()) return;
    check(sr_session_start(h_.session), "cannot start acquisition on the " + driver_name_ + " device");
    thread_ = std::thread([this] {
      const int rc = sr_session_run(h_.session);
      std::lock_guard lock(mutex_);
      ended_ = true;
      if (rc != SR_OK) error_ = "libsigrok: " + sr_error(rc);
      ready_.notify_all();
    });
  }

  void stop() override {
    if (!thread_.joinable()) return;
    sr_session_stop(h_.session);
    thread_.join();
  }

  std::size_t read(std::vector<PowerSample>& out) override {
    std::unique_lock lock(mutex_);
    ready_.wait(lock, [&] { return !queue_.empty() || ended_; });
    if (queue_.empty()) throw DeviceError(error_.empty() ? "the " + driver_name_ + " device stopped sending" : error_);
    const std::size_t n = queue_.size();
    out.insert(out.end(), queue_.begin(), queue_.end());
    queue_.clear();
    return n;
  }

  [[nodiscard]] uint64_t read_errors() const override { return 0; }

 private:
  void check(int rc, const std::string& what) const {
    if (rc != SR_OK) throw DeviceError(what + ": " + sr_error(rc));
  }

  static void on_packet(const sr_dev_inst*, const sr_datafeed_packet* packet, void* self) {
    if (packet->type != SR_DF_ANALOG) return;
    static_cast<SigrokProbe*>(self)->on_analog(*static_cast<const sr_datafeed_analog*>(packet->payload));
  }

  void on_analog(const sr_datafeed_analog& analog) {
    const int channels = static_cast<int>(g_slist_length(analog.meaning->channels));
    if (channels < 1 || analog.num_samples == 0) return;
    std::vector<float> values(static_cast<std::size_t>(analog.num_samples) * channels);
    if (sr_analog_to_float(&analog, values.data()) != SR_OK) return;
    const int64_t now = clock_.now_ns();
    int c = 0;
    for (GSList* l = analog.meaning->channels; l; l = l->next, ++c) {
      const auto* ch = static_cast<const sr_channel*>(l->data);
      Quantity q;
      if (const auto it = roles_.find(ch->name); it != roles_.end()) {
        q = it->second;
      } else if (analog.meaning->mq == SR_MQ_CURRENT) {
        q = Quantity::kCurrent;
      } else if (analog.meaning->mq == SR_MQ_POWER) {
        q = Quantity::kPower;
      } else if (analog.meaning->mq == SR_MQ_VOLTAGE) {
        q = Quantity::kVoltage;
      } else {
        // Its one channel measures something else (a temperature, a resistance).
        std::lock_guard lock(mutex_);
        if (error_.empty())
          error_ = "the " + driver_name_ + " device's channel " + ch->name + " measures neither voltage, current nor power";
        ended_ = true;
        ready_.notify_all();
        return;
      }
      auto& pending = pending_[static_cast<int>(q)];
      for (uint32_t i = 0; i < analog.num_samples; ++i)
        pending.push_back(values[static_cast<std::size_t>(i) * channels + c]);
      used_[static_cast<int>(q)] = true;
      seen_.insert(ch->name);
    }
    // Channels arrive in packets of their own: combine once every channel has been heard
    // from, so no sample goes out with a quantity still unknown.
    if (seen_.size() == enabled_.size()) combine(now);
  }

  /// Emits a sample for each index every quantity in use has reached; the last emitted gets
  /// the packet's arrival time, earlier ones one sample period apart before it.
  void combine(int64_t now_ns) {
    std::size_t ready = SIZE_MAX;
    for (int q = 0; q < 3; ++q)
      if (used_[q]) ready = std::min(ready, pending_[q].size());
    if (ready == SIZE_MAX || ready == 0) return;
    const double period_ns = rate_hz_ > 0 ? 1e9 / rate_hz_ : 0;
    std::vector<PowerSample> samples;
    samples.reserve(ready);
    for (std::size_t i = 0; i < ready; ++i) {
      const auto take = [&](Quantity q) -> std::optional<double> {
        auto& p = pending_[static_cast<int>(q)];
        if (!used_[static_cast<int>(q)]) return std::nullopt;
        const double v = p.front();
        p.pop_front();
        return v;
      };
      const auto v = take(Quantity::kVoltage);
      const auto a = take(Quantity::kCurrent);
      const auto w = take(Quantity::kPower);
      const double volts = v ? *v : bus_v_.value_or(0);
      const double watts = w ? *w : (a && (v || bus_v_)) ? volts * *a : 0;
      PowerSample s;
      s.rail = 0;
      s.t_ticks = static_cast<uint64_t>(now_ns - static_cast<int64_t>(period_ns * static_cast<double>(ready - 1 - i)));
      s.bus_uv = saturate(volts * 1e6);
      s.current_ua = saturate(a ? *a * 1e6 : (v && w && volts != 0 ? watts / volts * 1e6 : 0));
      s.power_uw = saturate(watts * 1e6);
      samples.push_back(s);
    }
    std::lock_guard lock(mutex_);
    queue_.insert(queue_.end(), samples.begin(), samples.end());
    ready_.notify_all();
  }

  static int32_t saturate(double micro) {
    return static_cast<int32_t>(std::clamp(std::round(micro), -2147483648.0, 2147483647.0));
  }

  /// Released in reverse order, also when the constructor throws half-way.
  struct Handles {
    sr_context* context = nullptr;
    sr_dev_inst* device = nullptr;  ///< the driver's: sr_exit frees it
    sr_session* session = nullptr;
    bool opened = false;
    Handles() = default;
    Handles(const Handles&) = delete;
    Handles& operator=(const Handles&) = delete;
    ~Handles() {
      if (session) sr_session_destroy(session);
      if (opened) sr_dev_close(device);
      if (context) sr_exit(context);
    }
  };

  Handles h_;
  const Clock& clock_;
  std::string driver_name_;
  std::optional<double> bus_v_;
  double rate_hz_ = 0;
  std::map<std::string, Quantity> roles_;
  std::set<std::string> enabled_;  ///< the analog channels acquired
  ProbeInfo info_;
  // On the acquisition thread only:
  std::deque<float> pending_[3];
  bool used_[3] = {false, false, false};
  std::set<std::string> seen_;  ///< channels a packet came from
  // Shared with read():
  std::mutex mutex_;
  std::condition_variable ready_;
  std::vector<PowerSample> queue_;
  bool ended_ = false;
  std::string error_;
  std::thread thread_;
};

}  // namespace

std::unique_ptr<Probe> open_sigrok_probe(const ProbeSpec& spec, double rate_hz, const Clock& clock) {
  return std::make_unique<SigrokProbe>(spec, rate_hz, clock);
}

}  // namespace ergon::probes
