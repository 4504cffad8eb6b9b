// Building a power trace's plot series: 10 million samples (about three hours of an INA219
// at 940/s) min/max-decimated for a 2000-pixel-wide view, zoomed out and zoomed in.
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <vector>

#include "gui/model/decimate.h"

namespace {

struct Trace {
  std::vector<double> t, w;
  Trace() {
    constexpr std::size_t kSamples = 10'000'000;
    t.resize(kSamples);
    w.resize(kSamples);
    std::mt19937 rng(3);
    std::normal_distribution<double> noise(0, 0.02);
    for (std::size_t i = 0; i < kSamples; ++i) {
      t[i] = static_cast<double>(i) * 1.064e-3;
      w[i] = 3.0 + std::sin(static_cast<double>(i) * 1e-4) + noise(rng);
    }
  }
};

const Trace& trace() {
  static const Trace t;
  return t;
}

void BM_SeriesOfTheWholeTrace(benchmark::State& state) {
  const Trace& tr = trace();
  for (auto _ : state) {
    auto line = ergon::gui::decimated_polyline(tr.t, tr.w, tr.t.front(), tr.t.back() + 1, 2000);
    benchmark::DoNotOptimize(line.data());
  }
  state.counters["samples"] = static_cast<double>(tr.t.size());
}

void BM_SeriesOfATenthOfTheTrace(benchmark::State& state) {
  const Trace& tr = trace();
  const double span = tr.t.back() / 10;
  for (auto _ : state) {
    auto line = ergon::gui::decimated_polyline(tr.t, tr.w, 4 * span, 5 * span, 2000);
    benchmark::DoNotOptimize(line.data());
  }
}

}  // namespace

BENCHMARK(BM_SeriesOfTheWholeTrace)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_SeriesOfATenthOfTheTrace)->Unit(benchmark::kMillisecond);
