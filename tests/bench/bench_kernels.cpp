// Kernel throughput: conv2d (im2col + GEMM) and linear forward/backward against Eigen's plain
// GEMM of the same size, in GFLOP/s (a multiply-add counts 2), on one core.
// Run: build/tests/bench/bench_kernels

#include <benchmark/benchmark.h>

#include <Eigen/Dense>

#include <chrono>
#include <random>
#include <vector>

#include "profiler/kernels.h"

namespace {

using namespace ergon::profiler;

std::vector<float> random_values(std::size_t n) {
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

void set_rate(benchmark::State& state, double flops_per_iteration) {
  state.counters["GFLOP/s"] = benchmark::Counter(flops_per_iteration * 1e-9,
                                                 benchmark::Counter::kIsIterationInvariantRate);
}

// The profile plan's larger conv: 8 x 64 -> 64 channels at 16 x 16, 3 x 3.
void BM_Conv2dForward(benchmark::State& state) {
  const ConvShape s{.batch = 8, .in_ch = 64, .out_ch = 64, .height = 16, .width = 16, .kernel = 3};
  const auto x = random_values(s.input_size()), w = random_values(s.weight_size());
  std::vector<float> y(s.output_size()), cols(s.columns_size());
  for (auto _ : state) {
    conv2d_forward(s, x, w, y, cols);
    benchmark::DoNotOptimize(y.data());
  }
  set_rate(state, 2.0 * s.output_size() * s.in_ch * s.kernel * s.kernel);
}

void BM_Conv2dBackward(benchmark::State& state) {
  const ConvShape s{.batch = 8, .in_ch = 64, .out_ch = 64, .height = 16, .width = 16, .kernel = 3};
  const auto x = random_values(s.input_size()), w = random_values(s.weight_size());
  const auto dy = random_values(s.output_size());
  std::vector<float> dx(x.size()), dw(w.size()), cols(s.columns_size());
  for (auto _ : state) {
    conv2d_backward(s, x, w, dy, dx, dw, cols);
    benchmark::DoNotOptimize(dx.data());
  }
  set_rate(state, 4.0 * s.output_size() * s.in_ch * s.kernel * s.kernel);  // dx and dw
}

// The same GEMM the conv forward does per image (64 x 576 by 576 x 256), eight times.
void BM_EigenGemmOfTheConv(benchmark::State& state) {
  using M = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const M a = M::Random(64, 576), b = M::Random(576, 256);
  M c(64, 256);
  for (auto _ : state) {
    for (int i = 0; i < 8; ++i) c.noalias() = a * b;
    benchmark::DoNotOptimize(c.data());
  }
  set_rate(state, 8 * 2.0 * 64 * 576 * 256);
}

void BM_LinearForward(benchmark::State& state) {
  const uint32_t b = 32, in = 1024, out = 1000;
  const auto x = random_values(b * in), w = random_values(std::size_t{out} * in);
  std::vector<float> y(b * out);
  for (auto _ : state) {
    linear_forward(b, in, out, x, w, y);
    benchmark::DoNotOptimize(y.data());
  }
  set_rate(state, 2.0 * b * in * out);
}

void BM_EigenGemmOfTheLinear(benchmark::State& state) {
  using M = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
  const M a = M::Random(32, 1024), b = M::Random(1024, 1000);
  M c(32, 1000);
  for (auto _ : state) {
    c.noalias() = a * b;
    benchmark::DoNotOptimize(c.data());
  }
  set_rate(state, 2.0 * 32 * 1024 * 1000);
}

BENCHMARK(BM_Conv2dForward)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Conv2dBackward)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EigenGemmOfTheConv)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_LinearForward)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_EigenGemmOfTheLinear)->Unit(benchmark::kMillisecond);

// What docs/accuracy.md's "Real silicon" causes are made of. The mlp's 1024 x 1024 linear at
// batch 1, its operands warm in the cache (one set, repeated) against read from memory (sets
// rotated through 96 MiB, as OpRunner's profile now does and a training iteration does).
void linear_1024(benchmark::State& state, std::size_t sets) {
  std::vector<std::vector<float>> x(sets), w(sets), y(sets);
  for (std::size_t k = 0; k < sets; ++k) {
    x[k] = random_values(1024);
    w[k] = random_values(1024 * 1024);
    y[k] = std::vector<float>(1024);
  }
  std::size_t k = 0;
  for (auto _ : state) {
    linear_forward(1, 1024, 1024, x[k], w[k], y[k]);
    benchmark::DoNotOptimize(y[k].data());
    k = (k + 1) % sets;
  }
}
void BM_Linear1024Warm(benchmark::State& state) { linear_1024(state, 1); }
void BM_Linear1024FromMemory(benchmark::State& state) { linear_1024(state, 24); }  // 24 x 4 MiB

// The same linear inside a training loop (docs/accuracy.md, "A second machine"): six such
// layers forward, then backward, each reading its own 4 MiB of weights and the backward
// writing its 4 MiB weight gradient (24 MiB of weights, 24 MiB of gradients). Manual time:
// the mean forward (or backward) of one layer, to set beside the rotations that the profile
// times (BM_Linear1024FromMemory, BM_Linear1024BackwardFromMemory). Run them with
// --benchmark_enable_random_interleaving=true: this machine's speed drifts between runs.
void linear_1024_in_training(benchmark::State& state, bool time_backward) {
  constexpr std::size_t kLayers = 6;
  std::vector<std::vector<float>> x(kLayers), w(kLayers), dw(kLayers);
  for (std::size_t k = 0; k < kLayers; ++k) {
    x[k] = random_values(1024);
    w[k] = random_values(1024 * 1024);
    dw[k] = std::vector<float>(1024 * 1024);
  }
  std::vector<float> y(1024), dy = random_values(1024), dx(1024);
  using Clock = std::chrono::steady_clock;
  for (auto _ : state) {
    Clock::duration timed{};
    for (std::size_t k = 0; k < kLayers; ++k) {
      const auto begin = Clock::now();
      linear_forward(1, 1024, 1024, x[k], w[k], y);
      if (!time_backward) timed += Clock::now() - begin;
    }
    for (std::size_t k = kLayers; k-- > 0;) {
      const auto begin = Clock::now();
      linear_backward(1, 1024, 1024, x[k], w[k], dy, dx, dw[k]);
      if (time_backward) timed += Clock::now() - begin;
    }
    benchmark::DoNotOptimize(dx.data());
    state.SetIterationTime(std::chrono::duration<double>(timed).count() / kLayers);
  }
}
void BM_Linear1024ForwardInTraining(benchmark::State& state) { linear_1024_in_training(state, false); }
void BM_Linear1024BackwardInTraining(benchmark::State& state) { linear_1024_in_training(state, true); }

// The backward as the profile times it: its operands and weight gradient rotated through
// 12 sets (96 MiB).
void BM_Linear1024BackwardFromMemory(benchmark::State& state) {
  constexpr std::size_t kSets = 12;
  std::vector<std::vector<float>> x(kSets), w(kSets), dy(kSets), dx(kSets), dw(kSets);
  for (std::size_t k = 0; k < kSets; ++k) {
    x[k] = random_values(1024);
    w[k] = random_values(1024 * 1024);
    dy[k] = random_values(1024);
    dx[k] = std::vector<float>(1024);
    dw[k] = std::vector<float>(1024 * 1024);
  }
  std::size_t k = 0;
  for (auto _ : state) {
    linear_backward(1, 1024, 1024, x[k], w[k], dy[k], dx[k], dw[k]);
    benchmark::DoNotOptimize(dw[k].data());
    k = (k + 1) % kSets;
  }
}

// relu's backward on 1024 elements: the same data every repetition (what the profile fed it)
// against a new set each time. Equal since the kernel is branch-free.
void relu_backward_1024(benchmark::State& state, std::size_t sets) {
  std::vector<std::vector<float>> y(sets), dy(sets);
  std::mt19937 rng(2);
  std::uniform_real_distribution<float> u(-1, 1);
  for (std::size_t k = 0; k < sets; ++k) {
    y[k].resize(1024);
    for (float& v : y[k]) v = u(rng);
    dy[k] = random_values(1024);
  }
  std::vector<float> dx(1024);
  std::size_t k = 0;
  for (auto _ : state) {
    relu_backward(y[k], dy[k], dx);
    benchmark::DoNotOptimize(dx.data());
    k = (k + 1) % sets;
  }
}
void BM_ReluBackwardSameData(benchmark::State& state) { relu_backward_1024(state, 1); }
void BM_ReluBackwardFreshData(benchmark::State& state) { relu_backward_1024(state, 64); }

BENCHMARK(BM_Linear1024Warm)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Linear1024FromMemory)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Linear1024ForwardInTraining)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Linear1024BackwardFromMemory)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Linear1024BackwardInTraining)->UseManualTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ReluBackwardSameData)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_ReluBackwardFreshData)->Unit(benchmark::kMicrosecond);

}  // namespace
