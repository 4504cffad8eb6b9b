#include "devices/truth_model.h"

#include "devices/protocol/messages.h"

#include <algorithm>
#include <cmath>

namespace ergon::devices {
namespace {

using profiler::OpKind;
using profiler::Phase;

/// Beyond this many invocations a run's jitter is drawn as one normal sum (the central limit
/// holds long before): a window of tiny ops stays cheap to simulate.
constexpr uint32_t kExactDraws = 20'000;

BoardProfile capped(const BoardProfile& board, const SimTruth& t) {
  double mode_speed = 1, mode_power = 1;  // the board's mode against its default (first) one
  if (!board.power_modes.empty()) {
    const PowerMode& fastest = board.power_modes.front();
    for (const PowerMode& m : board.power_modes) {
      if (m.name != board.power_mode) continue;
      mode_speed = m.speed / fastest.speed;
      mode_power = m.dynamic_power / fastest.dynamic_power;
    }
  }
  if (mode_speed <= t.throttle_speed) return board;
  BoardProfile b = board;
  const double speed = t.throttle_speed / mode_speed;
  b.flops_per_s *= speed;
  b.mem_bytes_per_s *= speed;
  b.op_overhead_s /= speed;
  b.compute_w *= std::min(1.0, t.throttle_dynamic_power / mode_power);
  return b;
}

BoardProfile spilled(const BoardProfile& board, const SimTruth& t, uint64_t bytes) {
  BoardProfile b = board;
  b.mem_bytes_per_s /= working_set_factor(t, bytes);
  return b;
}

/// Lognormal of mean 1 and log-sigma `sigma` (1 for sigma 0).
class MeanOne {
 public:
  explicit MeanOne(double sigma) : sigma_(sigma), dist_(-sigma * sigma / 2, sigma > 0 ? sigma : 1) {}
  double operator()(std::mt19937_64& rng) { return sigma_ > 0 ? dist_(rng) : 1.0; }
  /// Standard deviation of one draw.
  [[nodiscard]] double stddev() const { return std::sqrt(std::expm1(sigma_ * sigma_)); }

 private:
  double sigma_;
  std::lognormal_distribution<double> dist_;
};

}  // namespace

TruthEffects& TruthEffects::operator+=(const TruthEffects& o) {
  working_set += o.working_set;
  throttling += o.throttling;
  jitter += o.jitter;
  storage += o.storage;
  cold_start += o.cold_start;
  power += o.power;
  return *this;
}

std::vector<NamedShare> named(const TruthEffects& e) {
  return {{"working set", e.working_set}, {"throttling", e.throttling},
          {"time jitter", e.jitter},      {"storage latency", e.storage},
          {"cold start", e.cold_start},   {"power spread", e.power}};
}

double working_set_factor(const SimTruth& truth, uint64_t bytes) {
  if (truth.cache_bytes == 0 || truth.spill_slowdown <= 0) return 1;
  const double r = static_cast<double>(bytes) / static_cast<double>(truth.cache_bytes);
  return 1 + truth.spill_slowdown * r * r / (1 + r * r);
}

ProfileCost expected_compute_cost(const BoardProfile& board, uint64_t flops, uint64_t bytes) {
  return profile_compute_cost(spilled(board, board.sim_truth, bytes), flops, bytes);
}

ProfileCost expected_op_cost(const BoardProfile& board, const profiler::OpShape& shape, Phase phase) {
  if (shape.kind == OpKind::kPaging || shape.kind == OpKind::kIdle) return profile_op_cost(board, shape, phase);
  return expected_compute_cost(board, shape.flops, shape.bytes_in + shape.bytes_out);
}

TruthModel::TruthModel(const SimTruth& params, uint64_t seed)
    // Its own stream, apart from the sensor's and the link's: the truth of a plan does not
    // depend on how (or how often) it is sampled.
    : params_(params), rng_(seed * 0x9E3779B97F4A7C15ULL + 0x5EED), temperature_c_(params.idle_temp_c) {}

void TruthModel::advance(int64_t t_ns, double dynamic_w) {
  if (t_ns <= last_ns_) return;
  const double dt = static_cast<double>(t_ns - last_ns_) * 1e-9;
  last_ns_ = t_ns;
  const double steady = params_.idle_temp_c + params_.temp_rise_c_per_w * std::max(0.0, dynamic_w);
  temperature_c_ = steady + (temperature_c_ - steady) * std::exp(-dt / std::max(params_.thermal_tau_s, 1e-9));
  if (params_.throttle_c <= 0) return;
  if (!throttled_ && temperature_c_ >= params_.throttle_c) throttled_ = true;
  if (throttled_ && temperature_c_ <= params_.release_c) throttled_ = false;
}

uint64_t link_wire_bytes(uint64_t payload_bytes) {
  namespace proto = protocol;
  auto frame = [](uint64_t filler) {
    return proto::cobs_max_encoded_size(proto::kHeaderBytes + 9 + filler + proto::kCrcBytes) + 2;
  };
  const uint64_t full = payload_bytes / proto::kMaxLinkDataBytes;
  const uint64_t rest = payload_bytes % proto::kMaxLinkDataBytes;
  return full * frame(proto::kMaxLinkDataBytes) + (rest != 0 || full == 0 ? frame(rest) : 0);
}

ProfileCost transfer_truth_cost(const BoardProfile& board, const LinkProfile& link, uint64_t bytes, Phase phase) {
  ProfileCost c;
  c.time_s = 2 * link.latency_s + static_cast<double>(link_wire_bytes(bytes)) / link.bytes_per_s;
  const auto& per_byte = phase == Phase::kLinkSend ? link.tx_j_per_byte : link.rx_j_per_byte;
  const auto& any = link.tx_j_per_byte ? link.tx_j_per_byte : link.rx_j_per_byte;
  const double link_w = per_byte ? *per_byte * link.bytes_per_s
                        : any    ? *any * link.bytes_per_s
                                 : board.compute_w / 3;
  c.power_w = board.idle_w + link_w;
  return c;
}

OpRun TruthModel::run_transfer(const BoardProfile& board, const profiler::OpShape& shape, Phase phase,
                               uint32_t invocations, double min_time_s) {
  OpRun r;
  r.temperature_c = temperature_c_;
  const LinkProfile link = link_ ? *link_ : link_named(default_link(board.name, board.name));
  const ProfileCost p0 = transfer_truth_cost(board, link, shape.bytes_in, phase);
  // The link's time varies as a computation's does; its round trip is part of that time.
  MeanOne time_draw(params_.time_jitter);
  double sum_s = 0;
  uint32_t n = 0;
  const uint32_t wanted = std::max<uint32_t>(1, invocations);
  for (;;) {
    sum_s += p0.time_s * time_draw(rng_);
    ++n;
    if (min_time_s > 0 ? sum_s >= min_time_s || n >= 1'000'000 : n >= wanted) break;
  }
  r.invocations = n;
  r.duration_ns = std::max<int64_t>(1, std::llround(sum_s * 1e9));
  const double true_s = static_cast<double>(r.duration_ns) * 1e-9;
  std::normal_distribution<double> spread(1.0, board.power_jitter);
  const double dynamic_w = p0.power_w - board.idle_w;
  r.power_w = board.idle_w + std::max(0.0, dynamic_w * (board.power_jitter > 0 ? spread(rng_) : 1.0));
  r.profile_time_s = n * p0.time_s;
  r.profile_energy_j = r.profile_time_s * p0.power_w;
  r.time_by.jitter = true_s - r.profile_time_s;
  r.energy_by.jitter = r.time_by.jitter * p0.power_w;
  r.energy_by.power = true_s * (r.power_w - p0.power_w);
  return r;
}

OpRun TruthModel::run(const BoardProfile& board, const profiler::OpShape& shape, Phase phase,
                      uint32_t invocations, double min_time_s, bool cold) {
  if (shape.kind == OpKind::kTransfer) return run_transfer(board, shape, phase, invocations, min_time_s);
  OpRun r;
  r.temperature_c = temperature_c_;
  if (shape.kind == OpKind::kIdle) {
    const ProfileCost idle = profile_op_cost(board, shape, phase);
    r.invocations = 1;
    r.duration_ns = std::max<int64_t>(1, std::llround(idle.time_s * 1e9));
    r.power_w = board.idle_w;
    r.profile_time_s = static_cast<double>(r.duration_ns) * 1e-9;
    r.profile_energy_j = r.profile_time_s * r.power_w;
    return r;
  }

  // The published cost (p0), with the working set (p1), with the governor's cap (p2).
  const bool paging = shape.kind == OpKind::kPaging;
  const ProfileCost p0 = profile_op_cost(board, shape, phase);
  ProfileCost p1 = p0, p2 = p0;
  double latency_s = 0;
  if (paging) {
    latency_s = phase == Phase::kPageIn ? board.pagein_latency_s : board.pageout_latency_s;
  } else {
    const uint64_t bytes = shape.bytes_in + shape.bytes_out;
    const BoardProfile big = spilled(board, params_, bytes);
    p1 = profile_compute_cost(big, shape.flops, bytes);
    if (throttled_) {
      p2 = profile_compute_cost(capped(big, params_), shape.flops, bytes);
      r.throttled = p2.time_s != p1.time_s;
    } else {
      p2 = p1;
    }
  }

  // Invocations, each drawn: the time jitter scales what the clock or the transfer takes, the
  // storage jitter a page's latency.
  MeanOne time_draw(params_.time_jitter);
  MeanOne latency_draw(paging ? params_.storage_latency_jitter : 0);
  const double base_s = p2.time_s - latency_s;
  double sum_s = 0, storage_s = 0;
  uint32_t n = 0;
  const uint32_t wanted = std::max<uint32_t>(1, invocations);
  const double expected_n = min_time_s > 0 ? std::min(min_time_s / std::max(p2.time_s, 1e-12), 1e9) : wanted;
  if (expected_n > kExactDraws) {
    n = min_time_s > 0 ? static_cast<uint32_t>(std::ceil(expected_n)) : wanted;
    std::normal_distribution<double> unit(0, 1);
    const double root_n = std::sqrt(static_cast<double>(n));
    storage_s = latency_s * latency_draw.stddev() * root_n * unit(rng_);
    sum_s = n * p2.time_s + base_s * time_draw.stddev() * root_n * unit(rng_) + storage_s;
  } else {
    for (;;) {
      const double latency = paging ? latency_s * latency_draw(rng_) : 0;
      sum_s += base_s * time_draw(rng_) + latency;
      storage_s += latency - latency_s;
      ++n;
      if (min_time_s > 0 ? sum_s >= min_time_s : n >= wanted) break;
    }
  }
  const double cold_s = cold ? board.cold_start_penalty * p2.time_s : 0;
  r.invocations = n;
  r.duration_ns = std::max<int64_t>(1, std::llround((sum_s + cold_s) * 1e9));
  const double true_s = static_cast<double>(r.duration_ns) * 1e-9;

  std::normal_distribution<double> spread(1.0, board.power_jitter);
  const double dynamic_w = p2.power_w - board.idle_w;
  r.power_w = board.idle_w + std::max(0.0, dynamic_w * (board.power_jitter > 0 ? spread(rng_) : 1.0));

  const double nd = n;
  r.profile_time_s = nd * p0.time_s;
  r.profile_energy_j = r.profile_time_s * p0.power_w;
  r.time_by.working_set = nd * (p1.time_s - p0.time_s);
  r.time_by.throttling = nd * (p2.time_s - p1.time_s);
  r.time_by.storage = storage_s;
  r.time_by.cold_start = cold_s;
  r.time_by.jitter = true_s - nd * p2.time_s - storage_s - cold_s;
  r.energy_by.working_set = nd * (p1.time_s * p1.power_w - p0.time_s * p0.power_w);
  r.energy_by.throttling = nd * (p2.time_s * p2.power_w - p1.time_s * p1.power_w);
  r.energy_by.storage = storage_s * p2.power_w;
  r.energy_by.cold_start = cold_s * p2.power_w;
  r.energy_by.jitter = r.time_by.jitter * p2.power_w;
  r.energy_by.power = true_s * (r.power_w - p2.power_w);
  return r;
}

void TruthLedger::add(const OpRun& run) {
  ++spans;
  const double s = static_cast<double>(run.duration_ns) * 1e-9;
  profile_time_s += run.profile_time_s;
  time_s += s;
  profile_energy_j += run.profile_energy_j;
  energy_j += run.power_w * s;
  time_by += run.time_by;
  energy_by += run.energy_by;
  peak_temperature_c = spans == 1 ? run.temperature_c : std::max(peak_temperature_c, run.temperature_c);
  throttled_s += run.throttled ? s : 0;
}

TruthLedger TruthLedger::per_iteration(uint32_t iterations) const {
  if (iterations <= 1) return *this;
  const double k = 1.0 / iterations;
  auto scaled = [k](TruthEffects e) {
    for (double* v : {&e.working_set, &e.throttling, &e.jitter, &e.storage, &e.cold_start, &e.power}) *v *= k;
    return e;
  };
  TruthLedger out = *this;
  out.spans = spans / iterations;
  out.profile_time_s *= k;
  out.time_s *= k;
  out.profile_energy_j *= k;
  out.energy_j *= k;
  out.time_by = scaled(time_by);
  out.energy_by = scaled(energy_by);
  out.throttled_s *= k;
  return out;
}

ErrorBreakdown break_down_error(const TruthLedger& truth, Quantity quantity, double predicted, double measured) {
  ErrorBreakdown b;
  if (predicted <= 0) return b;
  const bool time = quantity == Quantity::kTime;
  const double real = time ? truth.time_s : truth.energy_j;
  const double profile = time ? truth.profile_time_s : truth.profile_energy_j;
  const TruthEffects& e = time ? truth.time_by : truth.energy_by;
  b.total = measured / predicted - 1;
  b.costs = (profile - predicted) / predicted;
  b.effects = {.working_set = e.working_set / predicted,
               .throttling = e.throttling / predicted,
               .jitter = e.jitter / predicted,
               .storage = e.storage / predicted,
               .cold_start = e.cold_start / predicted,
               .power = e.power / predicted};
  b.measurement = (measured - real) / predicted;
  return b;
}

}  // namespace ergon::devices
