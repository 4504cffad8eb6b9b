// The whole host ingest path on one core: bytes from a board -> decoder -> RecordSession ->
// DbSink -> SQLite file on disk, committing every 118 000 samples (the recorder commits
// four times a second; this is a quarter second at ~470 k samples/s).
// Run: build/tests/bench/bench_record_path

#include <benchmark/benchmark.h>
#include <unistd.h>

#include <filesystem>
#include <vector>

#include "app/db_sink.h"
#include "common/clock.h"
#include "costdb/database.h"
#include "devices/host/record_session.h"
#include "devices/protocol/messages.h"

namespace {

namespace proto = ergon::devices::protocol;
namespace fs = std::filesystem;

template <class Msg>
void append(std::vector<uint8_t>& out, const Msg& msg, uint16_t seq) {
  uint8_t buf[proto::kMaxEncodedFrameBytes];
  const std::size_t n = proto::encode_message(msg, seq, buf, sizeof buf);
  out.insert(out.end(), buf, buf + n);
}

void BM_RecordPathIntoSqlite(benchmark::State& state) {
  const fs::path dir = fs::temp_directory_path() / ("ergon-bench-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path db_path = dir / "bench.db";
  fs::remove(db_path);

  // A Hello, then a long stream of full power batches (59 samples each).
  proto::Hello hello;
  hello.board_kind = proto::BoardKind::kRaspberryPi4;
  hello.tick_hz = 1'000'000'000;
  proto::copy_text(hello.board_name, "bench");
  std::vector<uint8_t> hello_bytes;
  append(hello_bytes, hello, 0);
  constexpr int kBatches = 2000;
  std::vector<uint8_t> stream;
  proto::PowerBatch batch;
  batch.count = proto::kMaxBatchSamples;
  for (uint16_t i = 0; i < batch.count; ++i)
    batch.samples[i] = {.dt_ticks = i * 1'064'000U, .bus_uv = 5'080'000,
                        .current_ua = 590'000 + i, .power_uw = 2'998'000 + i * 2000};
  for (int b = 0; b < kBatches; ++b) {
    batch.base_ticks = static_cast<uint64_t>(b) * 62'776'000;
    append(stream, batch, static_cast<uint16_t>(b + 1));
  }

  ergon::SteadyClock clock;
  auto db = ergon::costdb::Database::open(db_path);
  ergon::app::DbSink sink(db, "bench");
  ergon::devices::RecordSession session("bench", {}, sink, clock);
  std::vector<uint8_t> out;
  session.on_open(out);
  session.on_bytes(hello_bytes.data(), hello_bytes.size(), out);

  uint64_t samples = 0;
  for (auto _ : state) {
    for (std::size_t at = 0; at < stream.size(); at += 16384)
      session.on_bytes(stream.data() + at, std::min<std::size_t>(16384, stream.size() - at), out);
    out.clear();
    samples += static_cast<uint64_t>(kBatches) * proto::kMaxBatchSamples;
    db.commit_batch();
  }
  state.SetItemsProcessed(static_cast<int64_t>(samples));
  state.counters["samples_lost"] = static_cast<double>(samples - session.stats().samples);
  fs::remove_all(dir);
}
BENCHMARK(BM_RecordPathIntoSqlite)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
