// Sustained sample ingest into a real on-disk cost database, the way the host records a run:
// PowerBatch frames of 59 samples, a durable commit every ~100k samples. Target (DESIGN.md):
// > 1 M samples/s on one core. The same into PostgreSQL (binary COPY) on a local server the
// benchmark starts itself (tests/support/postgres_server.h), the lab's shared database.

#include <stdlib.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "costdb/database.h"
#include "tests/support/postgres_server.h"

namespace {

constexpr std::size_t kBatchSamples = 59;
constexpr std::size_t kCommitEverySamples = 100'000;

/// A directory for one benchmark's database, on the same file system as the system temp dir
/// (override with ERGON_BENCH_DIR to measure a particular disk).
std::filesystem::path make_dir() {
  const char* root = std::getenv("ERGON_BENCH_DIR");
  const std::filesystem::path parent =
      root != nullptr ? std::filesystem::path(root) : std::filesystem::temp_directory_path();
  std::string pattern = (parent / "ergon-bench-ingest-XXXXXX").string();
  if (mkdtemp(pattern.data()) == nullptr) return {};
  return pattern;
}

ergon::costdb::BoardInfo bench_board() {
  ergon::costdb::BoardInfo board;
  board.name = "bench-sim";
  board.kind = "pi4";
  board.firmware_version = 1;
  board.tick_hz = 1'000'000;
  board.ram_bytes = 4ULL << 30;
  board.rails = {{0, "5V"}, {1, "VDD_CORE"}, {2, "VDD_SDRAM"}};
  return board;
}

/// Plausible INA219 readings: three rails round-robin, 1 kHz per rail, slowly varying values.
std::vector<ergon::probes::PowerSample> make_batch(uint64_t first_tick, std::size_t count) {
  std::vector<ergon::probes::PowerSample> batch(count);
  for (std::size_t i = 0; i < count; ++i) {
    const uint64_t n = first_tick + i;
    auto& s = batch[i];
    s.rail = static_cast<uint8_t>(n % 3);
    s.t_ticks = n * 333;
    s.bus_uv = 5'000'000 - static_cast<int32_t>(n % 4096) * 4;
    s.current_ua = 400'000 + static_cast<int32_t>((n * 7919) % 200'000);
    s.power_uw = 2'000'000 + static_cast<int32_t>((n * 104'729) % 1'000'000);
    s.flags = ergon::probes::kSampleOk;
  }
  return batch;
}

/// Samples through one RunWriter for as long as the benchmark runs; returns how many.
int64_t ingest(benchmark::State& state, ergon::costdb::Database& db) {
  ergon::costdb::RunWriter run(db, bench_board(), "bench", 0);
  // Distinct batches so values vary as in a real capture; reused round-robin.
  std::vector<std::vector<ergon::probes::PowerSample>> batches;
  for (uint64_t b = 0; b < 64; ++b) batches.push_back(make_batch(b * kBatchSamples, kBatchSamples));
  std::size_t since_commit = 0;
  std::size_t next = 0;
  int64_t total = 0;
  for (auto _ : state) {
    run.add_samples(batches[next]);
    next = (next + 1) % batches.size();
    since_commit += kBatchSamples;
    total += static_cast<int64_t>(kBatchSamples);
    if (since_commit >= kCommitEverySamples) {
      db.commit_batch();
      since_commit = 0;
    }
  }
  db.commit_batch();
  return total;
}

void BM_IngestSamples(benchmark::State& state) {
  const std::filesystem::path dir = make_dir();
  if (dir.empty()) {
    state.SkipWithError("cannot create a temporary directory");
    return;
  }
  {
    auto db = ergon::costdb::Database::open(dir / "bench.db");
    state.SetItemsProcessed(ingest(state, db));
  }
  // Closing the last connection checkpoints the WAL into the file.
  std::error_code size_ec;
  const auto bytes = std::filesystem::file_size(dir / "bench.db", size_ec);
  state.counters["db_bytes_per_sample"] =
      static_cast<double>(bytes) / static_cast<double>(state.iterations() * kBatchSamples);
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}
// Enough iterations for many commits and WAL checkpoints: sustained, not a warm cache burst.
BENCHMARK(BM_IngestSamples)->Iterations(100'000)->Unit(benchmark::kMillisecond)->UseRealTime();

/// The same into PostgreSQL on this machine (Unix socket; the server's default settings,
/// fsync on): the client's COPY and the server's work share the machine's cores.
void BM_IngestSamplesPostgres(benchmark::State& state) {
  auto& server = ergon::testing::PostgresServer::shared();
  if (!server.available()) {
    state.SkipWithError(("PostgreSQL: " + server.why_not()).c_str());
    return;
  }
  const std::string locator = server.create_database("bench_ingest");
  {
    auto db = ergon::costdb::Database::open(locator);
    state.SetItemsProcessed(ingest(state, db));
  }
  const std::string bytes = server.query("SELECT pg_total_relation_size('power_samples')", "bench_ingest");
  state.counters["db_bytes_per_sample"] =
      std::stod(bytes.empty() ? "0" : bytes) / static_cast<double>(state.iterations() * kBatchSamples);
}
BENCHMARK(BM_IngestSamplesPostgres)->Iterations(100'000)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
