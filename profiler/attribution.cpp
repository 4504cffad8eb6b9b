#include "profiler/attribution.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <map>
#include <numeric>
#include <utility>

#include "common/stats.h"

namespace ergon::profiler {

double ClockFit::host_ns(uint64_t ticks) const {
  const double dt = ticks >= tick_ref ? static_cast<double>(ticks - tick_ref)
                                      : -static_cast<double>(tick_ref - ticks);
  return host_ref_ns + ns_per_tick * dt;
}

uint64_t ClockFit::ticks_at(double host_ns) const {
  const double t = static_cast<double>(tick_ref) + std::round((host_ns - host_ref_ns) / ns_per_tick);
  return t <= 0 ? 0 : static_cast<uint64_t>(t);
}

std::vector<probes::PowerSample> to_board_ticks(std::span<const probes::PowerSample> samples,
                                                const ClockFit& logger, const ClockFit& board) {
  std::vector<probes::PowerSample> out(samples.begin(), samples.end());
  for (probes::PowerSample& s : out) s.t_ticks = board.ticks_at(logger.host_ns(s.t_ticks));
  return out;
}

uint64_t MarkerFit::board_ticks(uint64_t logger_ticks) const {
  return static_cast<uint64_t>(std::max(0.0, std::round(offset_ticks + slope * static_cast<double>(logger_ticks))));
}

std::optional<MarkerFit> fit_markers(std::span<const uint64_t> rising_edges, std::span<const OpSpan> spans,
                                     const ClockFit& logger, const ClockFit& board, uint64_t board_tick_hz,
                                     double tolerance_ns) {
  std::vector<uint64_t> starts;
  for (const OpSpan& s : spans)
    if (s.phase != Phase::kIdle) starts.push_back(s.begin_ticks);
  std::sort(starts.begin(), starts.end());
  const double ns_per_board_tick = 1e9 / static_cast<double>(std::max<uint64_t>(board_tick_hz, 1));
  const double tolerance_ticks = tolerance_ns / ns_per_board_tick;
  std::vector<std::pair<double, double>> pairs;  // logger ticks, board ticks
  for (uint64_t edge : rising_edges) {
    const double guess = static_cast<double>(board.ticks_at(logger.host_ns(edge)));
    const auto it = std::lower_bound(starts.begin(), starts.end(), static_cast<uint64_t>(std::max(0.0, guess)));
    double best = -1, best_d = tolerance_ticks;
    for (auto c : {it, it == starts.begin() ? it : std::prev(it)}) {
      if (c == starts.end()) continue;
      const double d = std::abs(static_cast<double>(*c) - guess);
      if (d <= best_d) best_d = d, best = static_cast<double>(*c);
    }
    if (best >= 0) pairs.emplace_back(static_cast<double>(edge), best);
  }
  // Markers wired to the windows pair nearly one for one; a pin toggled by something else
  // pairs by chance now and then, and must not move the samples.
  const std::size_t expected = std::min(rising_edges.size(), starts.size());
  if (pairs.size() < 3 || static_cast<double>(pairs.size()) < 0.8 * static_cast<double>(expected)) return std::nullopt;
  // Least squares about the means, for precision with large tick counts.
  double mx = 0, my = 0;
  for (const auto& [x, y] : pairs) mx += x, my += y;
  mx /= static_cast<double>(pairs.size());
  my /= static_cast<double>(pairs.size());
  double sxx = 0, sxy = 0;
  for (const auto& [x, y] : pairs) sxx += (x - mx) * (x - mx), sxy += (x - mx) * (y - my);
  MarkerFit fit;
  fit.slope = sxx > 0 ? sxy / sxx : 1;
  fit.offset_ticks = my - fit.slope * mx;
  fit.pairs = static_cast<int>(pairs.size());
  fit.edges = static_cast<int>(rising_edges.size());
  double ss = 0;
  for (const auto& [x, y] : pairs) {
    const double r = (fit.offset_ticks + fit.slope * x - y) * ns_per_board_tick;
    ss += r * r;
  }
  fit.residual_rms_ns = std::sqrt(ss / static_cast<double>(pairs.size()));
  if (fit.residual_rms_ns > tolerance_ns / 10) return std::nullopt;  // not a clock: chance pairs
  return fit;
}

ClockFit fit_clock(std::span<const SyncPoint> points, uint64_t tick_hz, double max_drift_ppm, double time_scale) {
  ClockFit fit;
  fit.points_total = static_cast<int>(points.size());
  const double nominal = tick_hz > 0 ? 1e9 / static_cast<double>(tick_hz) : 1.0;
  fit.ns_per_tick = nominal;
  const bool paced = time_scale > 0;
  if (paced) {
    fit.ns_per_tick = nominal / time_scale;  // as the host sees it, until fitted
    fit.time_scale = time_scale;
  }

  std::vector<SyncPoint> usable;
  for (const SyncPoint& p : points)
    if (p.host_rx_ns >= p.host_tx_ns && p.device_tx_ticks >= p.device_rx_ticks) usable.push_back(p);
  std::sort(usable.begin(), usable.end(), [](const SyncPoint& a, const SyncPoint& b) {
    return a.round_trip_ns() < b.round_trip_ns();
  });
  if (!usable.empty()) {
    // Without a fit, the fastest exchange still gives the offset.
    const SyncPoint& best = usable.front();
    fit.tick_ref = best.device_rx_ticks + (best.device_tx_ticks - best.device_rx_ticks) / 2;
    fit.host_ref_ns = static_cast<double>(best.host_tx_ns) + 0.5 * static_cast<double>(best.round_trip_ns());
  }
  if (!paced) {
    fit.note = "an unpaced simulator (its time does not follow the host's): its nominal tick rate";
    return fit;
  }
  if (usable.size() < 3) {
    fit.note = "too few sync exchanges (" + std::to_string(usable.size()) +
               "): nominal tick rate, offset from the fastest exchange";
    return fit;
  }
  const double min_rtt = static_cast<double>(usable.front().round_trip_ns());
  std::size_t keep = 0;
  while (keep < usable.size() &&
         static_cast<double>(usable[keep].round_trip_ns()) <= 1.5 * min_rtt + 1000)
    ++keep;
  keep = std::max(keep, (usable.size() + 1) / 2);
  keep = std::max<std::size_t>(keep, 3);
  usable.resize(keep);

  // Least squares host_mid = a + b x (device_mid - ref), in doubles relative to references
  // so that 1e11-tick clocks keep their precision.
  const uint64_t tick_ref = usable.front().device_rx_ticks;
  const int64_t host_ref = usable.front().host_tx_ns;
  std::vector<double> x, y;
  for (const SyncPoint& p : usable) {
    // Signed: the references are the fastest exchange's, not the earliest.
    const double dev_mid = static_cast<double>(static_cast<int64_t>(p.device_rx_ticks - tick_ref)) +
                           0.5 * static_cast<double>(p.device_tx_ticks - p.device_rx_ticks);
    const double host_mid = static_cast<double>(p.host_tx_ns - host_ref) + 0.5 * static_cast<double>(p.round_trip_ns());
    x.push_back(dev_mid);
    y.push_back(host_mid);
  }
  const double n = static_cast<double>(x.size());
  const double mx = std::accumulate(x.begin(), x.end(), 0.0) / n;
  const double my = std::accumulate(y.begin(), y.end(), 0.0) / n;
  double sxx = 0, sxy = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    sxx += (x[i] - mx) * (x[i] - mx);
    sxy += (x[i] - mx) * (y[i] - my);
  }
  if (sxx <= 0) {
    fit.note = "sync exchanges all at one instant: nominal tick rate";
    return fit;
  }
  const double b = sxy / sxx;
  const double a = my - b * mx;
  const double drift_ppm = (b * time_scale / nominal - 1) * 1e6;
  if (!std::isfinite(drift_ppm) || std::abs(drift_ppm) > max_drift_ppm) {
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "the sync exchanges imply a drift of %.0f ppm, beyond any crystal (a board whose "
                  "time runs at another pace than it declares?): nominal tick rate used",
                  drift_ppm);
    fit.note = buf;
    return fit;
  }
  fit.fitted = true;
  fit.ns_per_tick = b;
  fit.drift_ppm = drift_ppm;
  fit.tick_ref = tick_ref;
  fit.host_ref_ns = static_cast<double>(host_ref) + a;
  fit.points_used = static_cast<int>(x.size());
  double ss = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double r = y[i] - (a + b * x[i]);
    ss += r * r;
    fit.residual_max_ns = std::max(fit.residual_max_ns, std::abs(r));
  }
  fit.residual_rms_ns = std::sqrt(ss / n);
  return fit;
}

namespace {

/// Power as a piecewise-linear function of time through the samples, with its running
/// integral, so any interval's energy costs two binary searches.
class PowerTrace {
 public:
  PowerTrace(std::vector<double> t_s, std::vector<double> p_w) : t_(std::move(t_s)), p_(std::move(p_w)) {
    integral_.assign(t_.size(), 0);
    for (std::size_t i = 1; i < t_.size(); ++i)
      integral_[i] = integral_[i - 1] + 0.5 * (p_[i] + p_[i - 1]) * (t_[i] - t_[i - 1]);
  }

  [[nodiscard]] std::size_t size() const { return t_.size(); }
  [[nodiscard]] double t(std::size_t i) const { return t_[i]; }
  [[nodiscard]] double p(std::size_t i) const { return p_[i]; }
  /// Index of the first sample at or after `at`.
  [[nodiscard]] std::size_t first_at_or_after(double at) const {
    return static_cast<std::size_t>(std::lower_bound(t_.begin(), t_.end(), at) - t_.begin());
  }

  /// Energy from the first sample to `at` (inside the trace).
  [[nodiscard]] double energy_to(double at) const {
    std::size_t k = first_at_or_after(at);
    if (k == 0) return 0;
    if (k >= t_.size()) return integral_.back();
    --k;  // t_[k] < at <= t_[k + 1]
    const double dt = t_[k + 1] - t_[k];
    const double f = dt > 0 ? (at - t_[k]) / dt : 0;
    const double p_at = p_[k] + f * (p_[k + 1] - p_[k]);
    return integral_[k] + 0.5 * (p_[k] + p_at) * (at - t_[k]);
  }

 private:
  std::vector<double> t_, p_, integral_;
};

}  // namespace

Attribution attribute(std::span<const OpSpan> spans, std::span<const probes::PowerSample> samples,
                      std::span<const SyncPoint> sync, uint64_t tick_hz, uint8_t rail, double time_scale) {
  Attribution a;
  a.clock = fit_clock(sync, tick_hz, kMaxPlausibleDriftPpm, time_scale);
  const double s_per_tick = a.clock.device_ns_per_tick() * 1e-9;

  std::vector<const probes::PowerSample*> ok;
  for (const auto& s : samples) {
    if (s.rail != rail) continue;
    ++a.samples_seen;
    if (s.flags != probes::kSampleOk) {
      ++a.samples_flagged;
      continue;
    }
    ok.push_back(&s);
  }
  std::stable_sort(ok.begin(), ok.end(), [](const auto* x, const auto* y) { return x->t_ticks < y->t_ticks; });
  uint64_t ref = ok.empty() ? 0 : ok.front()->t_ticks;
  for (const OpSpan& s : spans) ref = std::min(ref, s.begin_ticks);
  auto seconds = [&](uint64_t ticks) { return static_cast<double>(ticks - ref) * s_per_tick; };

  std::vector<double> t_s, p_w;
  t_s.reserve(ok.size());
  p_w.reserve(ok.size());
  for (const auto* s : ok) {
    if (!t_s.empty() && seconds(s->t_ticks) <= t_s.back()) continue;  // duplicate timestamp
    t_s.push_back(seconds(s->t_ticks));
    p_w.push_back(static_cast<double>(s->power_uw) * 1e-6);
  }
  {
    std::vector<double> gaps;
    for (std::size_t i = 1; i < t_s.size(); ++i) gaps.push_back(t_s[i] - t_s[i - 1]);
    a.sample_period_s = median(std::move(gaps));
    std::vector<double> levels = p_w;
    std::sort(levels.begin(), levels.end());
    levels.erase(std::unique(levels.begin(), levels.end()), levels.end());
    double lsb = 0;
    for (std::size_t i = 1; i < levels.size(); ++i) {
      const double d = levels[i] - levels[i - 1];
      if (d > 0 && (lsb == 0 || d < lsb)) lsb = d;
    }
    a.power_lsb_w = lsb;
  }
  const PowerTrace trace(t_s, p_w);
  const double period = a.sample_period_s;

  // Idle power: inside the idle windows, away from their edges; else in the gaps between spans.
  std::vector<std::pair<double, double>> intervals;  // every span, seconds
  for (const OpSpan& s : spans) intervals.emplace_back(seconds(s.begin_ticks), seconds(s.end_ticks));
  std::vector<double> idle;
  for (std::size_t j = 0; j < spans.size(); ++j) {
    if (spans[j].phase != Phase::kIdle) continue;
    const auto [b, e] = intervals[j];
    for (std::size_t i = trace.first_at_or_after(b + 2 * period); i < trace.size() && trace.t(i) < e - 2 * period; ++i)
      idle.push_back(trace.p(i));
  }
  if (idle.empty() && trace.size() > 0) {
    std::vector<std::pair<double, double>> busy = intervals;
    std::sort(busy.begin(), busy.end());
    std::size_t k = 0;
    for (std::size_t i = 0; i < trace.size(); ++i) {
      const double t = trace.t(i);
      while (k < busy.size() && busy[k].second + 2 * period < t) ++k;
      bool inside = false;
      for (std::size_t m = k; m < busy.size() && busy[m].first - 2 * period <= t; ++m)
        inside = inside || t <= busy[m].second + 2 * period;
      if (!inside && t > trace.t(0) && t < trace.t(trace.size() - 1)) idle.push_back(trace.p(i));
    }
  }
  if (!idle.empty()) {
    const double n = static_cast<double>(idle.size());
    a.idle_power_w = std::accumulate(idle.begin(), idle.end(), 0.0) / n;
    double ss = 0;
    for (double v : idle) ss += (v - a.idle_power_w) * (v - a.idle_power_w);
    const double sd = idle.size() > 1 ? std::sqrt(ss / (n - 1)) : 0;
    a.idle_power_sigma_w = std::sqrt((sd * sd + a.power_lsb_w * a.power_lsb_w / 12) / n);
    a.idle_samples = static_cast<uint32_t>(idle.size());
  }

  // Each window.
  for (std::size_t j = 0; j < spans.size(); ++j) {
    WindowCost w;
    w.span = spans[j];
    const auto [b, e] = intervals[j];
    w.time_s = std::max(0.0, e - b);
    const std::size_t first = trace.first_at_or_after(b);
    const std::size_t after = trace.first_at_or_after(e);  // first sample at or after e
    w.samples = static_cast<uint32_t>(after - std::min(after, first));
    if (w.samples > 0) {
      // Samples inside reach both edges, without a hole between them.
      bool gap = false;
      for (std::size_t i = first + 1; i < after && !gap; ++i) gap = trace.t(i) - trace.t(i - 1) > 3 * period;
      w.covered = !gap && trace.t(first) - b <= 2 * period && e - trace.t(after - 1) <= 2 * period;
    } else {
      // A window shorter than a sample interval: the samples either side must be close.
      w.covered = first > 0 && after < trace.size() && b - trace.t(first - 1) <= 2 * period &&
                  trace.t(after) - e <= 2 * period;
    }
    w.covered = w.covered && period > 0;
    if (w.covered) {
      // Power changes where spans begin and end: between the edge and the nearest sample
      // inside, the inside sample holds (interpolating toward a neighbour's power would mix
      // in another op's). Without a sample inside, interpolate.
      if (after > first) {
        const std::size_t last = after - 1;
        w.gross_energy_j = trace.energy_to(trace.t(last)) - trace.energy_to(trace.t(first)) +
                           trace.p(first) * (trace.t(first) - b) + trace.p(last) * (e - trace.t(last));
      } else {
        w.gross_energy_j = trace.energy_to(e) - trace.energy_to(b);
      }
      w.net_energy_j = w.gross_energy_j - a.idle_power_w * w.time_s;
      // Noise and quantization of the mean power over the window's samples.
      double mean = 0, ss = 0;
      for (std::size_t i = first; i < after; ++i) mean += trace.p(i);
      const double n = std::max<double>(1, static_cast<double>(w.samples));
      mean /= n;
      for (std::size_t i = first; i < after; ++i) ss += (trace.p(i) - mean) * (trace.p(i) - mean);
      const double sd = w.samples > 1 ? std::sqrt(ss / (n - 1)) : 0;
      // Noise averages out over the samples; the chip's rounding of its power register (it
      // truncates) need not, so its share is not divided by the count.
      const double noise_j = w.time_s * std::sqrt(sd * sd / n + a.power_lsb_w * a.power_lsb_w / 12);
      // Where in the sample interval the power changed at each edge is unknown.
      // Where in the sample interval the power changed at each edge is unknown (no neighbour
      // at the run's ends: no step there).
      const double edge_b =
          first > 0 ? std::abs(trace.p(first) - trace.p(first - 1)) * period / std::sqrt(12.0) : 0;
      const double edge_e =
          after < trace.size() && after > 0
              ? std::abs(trace.p(after) - trace.p(after - 1)) * period / std::sqrt(12.0)
              : 0;
      const double idle_j = a.idle_power_sigma_w * w.time_s;
      w.energy_sigma_j = std::sqrt(noise_j * noise_j + edge_b * edge_b + edge_e * edge_e + idle_j * idle_j);
    }
    a.windows.push_back(w);
  }

  // Per op and phase, per repetition.
  std::map<std::pair<uint32_t, int>, std::vector<const WindowCost*>> groups;
  for (const WindowCost& w : a.windows)
    if (w.span.phase != Phase::kIdle) groups[{w.span.op_id, static_cast<int>(w.span.phase)}].push_back(&w);
  for (const auto& [key, ws] : groups) {
    OpCost c;
    c.op_id = key.first;
    c.phase = static_cast<Phase>(key.second);
    std::vector<double> time, gross, net;
    double meas_var = 0;
    for (const WindowCost* w : ws) {
      const double reps = std::max<uint32_t>(1, w->span.repetitions);
      time.push_back(w->time_s / reps);
      if (!w->covered) {
        ++c.windows_uncovered;
        continue;
      }
      gross.push_back(w->gross_energy_j / reps);
      net.push_back(w->net_energy_j / reps);
      meas_var += (w->energy_sigma_j / reps) * (w->energy_sigma_j / reps);
      c.sample_count += w->samples;
    }
    auto mean = [](const std::vector<double>& v) {
      return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
    };
    auto sd = [](const std::vector<double>& v, double m) {
      if (v.size() < 2) return 0.0;
      double ss = 0;
      for (double x : v) ss += (x - m) * (x - m);
      return std::sqrt(ss / static_cast<double>(v.size() - 1));
    };
    c.windows = static_cast<uint32_t>(time.size());
    c.time_s = mean(time);
    c.time_s_stddev = sd(time, c.time_s);
    if (c.energy_known()) {
      const double k = static_cast<double>(net.size());
      c.gross_energy_j = mean(gross);
      c.net_energy_j = mean(net);
      const double spread = sd(net, c.net_energy_j);
      c.energy_j_stddev = std::sqrt(meas_var / (k * k) + spread * spread / k);
    }
    a.ops.push_back(c);
  }
  return a;
}

}  // namespace ergon::profiler
