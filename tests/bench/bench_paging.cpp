// Paging as the profile times it and as an iteration meets it (docs/accuracy.md, run 4 and
// what follows): the profile's own page-out and page-in (OpRunner: write + fsync, then a read
// past the page cache), back to back as a profile window runs them, and each after a sweep
// through 96 MiB of other buffers, as a step after compute meets the machine (the sweep is
// not timed). Also a page-out to a new file each time, as the executor writes one per tensor
// after removing the last iteration's.
// Run: build/tests/bench/bench_paging --benchmark_repetitions=6 --benchmark_enable_random_interleaving=true
//      --benchmark_report_aggregates_only=true   (scratch files in $TMPDIR)

#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "profiler/op.h"
#include "profiler/op_runner.h"

namespace {

namespace fs = std::filesystem;
using namespace ergon::profiler;

fs::path scratch() {
  const fs::path dir = fs::temp_directory_path() / ("ergon-bench-paging-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  return dir;
}

/// Touches every cache line of 96 MiB (the profile's rotation size), as compute between two
/// transfers would.
void sweep() {
  static std::vector<float> big(24u << 20, 1.0f);
  float sum = 0;
  for (std::size_t i = 0; i < big.size(); i += 16) sum += (big[i] += 1);
  benchmark::DoNotOptimize(sum);
}

void transfer(benchmark::State& state, Phase phase, bool after_sweep) {
  const fs::path dir = scratch();
  OpRunner runner(dir);
  const OpShape shape = paging(static_cast<uint32_t>(state.range(0)));
  runner.run(shape, Phase::kPageOut);  // a file to page in from
  for (auto _ : state) {
    if (after_sweep) {
      state.PauseTiming();
      sweep();
      state.ResumeTiming();
    }
    runner.run(shape, phase);
  }
  fs::remove_all(dir);
}

void BM_PageOutBackToBack(benchmark::State& s) { transfer(s, Phase::kPageOut, false); }
void BM_PageOutAfterSweep(benchmark::State& s) { transfer(s, Phase::kPageOut, true); }
void BM_PageInBackToBack(benchmark::State& s) { transfer(s, Phase::kPageIn, false); }
void BM_PageInAfterSweep(benchmark::State& s) { transfer(s, Phase::kPageIn, true); }

// As the executor pages out: a new file each time (created, written, fsynced), removed before
// the next (not timed).
void BM_PageOutNewFile(benchmark::State& state) {
  const fs::path dir = scratch();
  const std::vector<char> bytes(static_cast<std::size_t>(state.range(0)), 'e');
  int k = 0;
  for (auto _ : state) {
    const std::string path = (dir / ("node-" + std::to_string(k++) + ".bin")).string();
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    for (std::size_t done = 0; done < bytes.size();) {
      const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
      if (n <= 0) break;
      done += static_cast<std::size_t>(n);
    }
    ::fsync(fd);
    ::close(fd);
    state.PauseTiming();
    ::unlink(path.c_str());
    state.ResumeTiming();
  }
  fs::remove_all(dir);
}

}  // namespace

#define SIZES ->Arg(64 << 10)->Arg(256 << 10)->Arg(1 << 20)->Unit(benchmark::kMicrosecond)->Iterations(30)
BENCHMARK(BM_PageOutBackToBack) SIZES;
BENCHMARK(BM_PageOutAfterSweep) SIZES;
BENCHMARK(BM_PageOutNewFile) SIZES;
BENCHMARK(BM_PageInBackToBack) SIZES;
BENCHMARK(BM_PageInAfterSweep) SIZES;
