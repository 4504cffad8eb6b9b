// One training iteration on real tensors (runtime::TrainingIteration): store-all against a
// plan at half its memory that recomputes and pages, for the zoo's small models. The gap is
// what recomputation and paging cost on this machine's CPU and disk.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <filesystem>
#include <string>

#include "app/board_costs.h"
#include "devices/board_profile.h"
#include "planner/schedule.h"
#include "planner/stage_plan.h"
#include "planner/zoo.h"
#include "runtime/executor.h"

namespace {

using namespace ergon;

void run(benchmark::State& state, const std::string& model, int batch, bool half_memory) {
  const planner::ForwardGraph f = planner::zoo_model(model, batch);
  // Planned on the Pi 4's published profile, as `ergon validate --execute` plans by default.
  const planner::TrainingGraph g =
      planner::build_training_graph(f, app::BoardProfileCosts(*devices::find_board("pi4")));
  planner::Schedule s = planner::store_all_schedule(g);
  const uint64_t all_bytes = planner::simulate(g, s).peak_bytes;
  if (half_memory) {
    const auto plan = planner::greedy_stage_plan(g, all_bytes / 2, 1e9, {}, 2.0);
    if (!plan) {
      state.SkipWithError("no plan at half memory");
      return;
    }
    s = planner::to_schedule(g, *plan);
  }
  const auto dir = std::filesystem::temp_directory_path() / "ergon-bench-runtime";
  runtime::ExecutionResult r;
  for (auto _ : state) r = runtime::execute(f, g, s, dir);
  std::filesystem::remove_all(dir);
  state.counters["peak_MiB"] = static_cast<double>(r.peak_bytes) / (1 << 20);
  state.counters["recomputes"] = static_cast<double>(r.recomputes);
  state.counters["paged_MiB"] = static_cast<double>(r.paged_out_bytes + r.paged_in_bytes) / (1 << 20);
}

// A training iteration's first run against the ones after it (docs/accuracy.md, "Real
// silicon": first touch): a fresh TrainingIteration faults in every buffer it allocates; the
// next iteration on it reuses them, which is what the agent times. Counter minor_faults: per
// iteration (docs/accuracy.md, "Page faults in every iteration": bert-tiny's later
// iterations faulted some 1000 pages each before the executor kept freed memory).
void iteration(benchmark::State& state, const std::string& model, bool first) {
  const planner::ForwardGraph f = planner::zoo_model(model, 1);
  const planner::TrainingGraph g = runtime::structure_of(f);
  const planner::Schedule s = planner::store_all_schedule(g);
  const auto dir = std::filesystem::temp_directory_path() / ("ergon-bench-runtime-" + model);
  runtime::TrainingIteration warm(f, g, dir);
  for (const planner::Step& st : s.steps) warm.run(st);
  auto minor_faults = [] {
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    return u.ru_minflt;
  };
  long faults = 0;
  for (auto _ : state) {
    const long before = minor_faults();
    if (first) {
      runtime::TrainingIteration fresh(f, g, dir);
      for (const planner::Step& st : s.steps) fresh.run(st);
      benchmark::DoNotOptimize(fresh.finish().loss);
    } else {
      // As the agent times them: finish() (a copy of every gradient) comes once, after the
      // last iteration.
      warm.next_iteration();
      for (const planner::Step& st : s.steps) warm.run(st);
      benchmark::ClobberMemory();
    }
    faults += minor_faults() - before;
  }
  state.counters["minor_faults"] = benchmark::Counter(static_cast<double>(faults), benchmark::Counter::kAvgIterations);
  std::filesystem::remove_all(dir);
}
void BM_MlpFirstIteration(benchmark::State& s) { iteration(s, "mlp", true); }
void BM_MlpNextIteration(benchmark::State& s) { iteration(s, "mlp", false); }
void BM_BertTinyNextIteration(benchmark::State& s) { iteration(s, "bert-tiny", false); }
void BM_ResNet18NextIteration(benchmark::State& s) { iteration(s, "resnet18-cifar", false); }

void BM_ResNet18StoreAll(benchmark::State& s) { run(s, "resnet18-cifar", 8, false); }
void BM_ResNet18HalfMemory(benchmark::State& s) { run(s, "resnet18-cifar", 8, true); }
void BM_MobileNetV2StoreAll(benchmark::State& s) { run(s, "mobilenetv2-cifar", 8, false); }
void BM_MobileNetV2HalfMemory(benchmark::State& s) { run(s, "mobilenetv2-cifar", 8, true); }
void BM_BertTinyStoreAll(benchmark::State& s) { run(s, "bert-tiny", 8, false); }
void BM_BertTinyHalfMemory(benchmark::State& s) { run(s, "bert-tiny", 8, true); }

}  // namespace

BENCHMARK(BM_MlpFirstIteration)->Unit(benchmark::kMillisecond)->Iterations(20);
BENCHMARK(BM_MlpNextIteration)->Unit(benchmark::kMillisecond)->Iterations(20);
BENCHMARK(BM_BertTinyNextIteration)->Unit(benchmark::kMillisecond)->Iterations(20);
BENCHMARK(BM_ResNet18NextIteration)->Unit(benchmark::kMillisecond)->Iterations(10);
BENCHMARK(BM_ResNet18StoreAll)->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK(BM_ResNet18HalfMemory)->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK(BM_MobileNetV2StoreAll)->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK(BM_MobileNetV2HalfMemory)->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK(BM_BertTinyStoreAll)->Unit(benchmark::kMillisecond)->Iterations(2);
BENCHMARK(BM_BertTinyHalfMemory)->Unit(benchmark::kMillisecond)->Iterations(2);
