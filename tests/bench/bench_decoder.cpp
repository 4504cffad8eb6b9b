// Decoder throughput on a realistic board stream (mostly full power batches, some spans).
// Run: build/tests/bench/bench_decoder

#include <benchmark/benchmark.h>

#include <vector>

#include "devices/protocol/decoder.h"
#include "devices/protocol/messages.h"

namespace {

namespace proto = ergon::devices::protocol;

std::vector<uint8_t> board_stream(std::size_t frames) {
  std::vector<uint8_t> out;
  uint8_t buf[proto::kMaxEncodedFrameBytes];
  proto::PowerBatch batch;
  batch.count = proto::kMaxBatchSamples;
  for (uint16_t i = 0; i < batch.count; ++i)
    batch.samples[i] = {.dt_ticks = i * 1064U, .bus_uv = 5'080'000, .current_ua = 590'000 + i,
                        .power_uw = 2'998'000 + i * 2000, .flags = 0};
  for (std::size_t i = 0; i < frames; ++i) {
    const auto seq = static_cast<uint16_t>(i);
    std::size_t n = 0;
    if (i % 10 == 9) {
      n = proto::encode_message(proto::OpSpanMsg{.op_id = 3, .phase = 1, .begin_ticks = i,
                                                 .end_ticks = i + 60'000'000, .repetitions = 4},
                                seq, buf, sizeof buf);
    } else {
      batch.base_ticks = i * 62'776;
      n = proto::encode_message(batch, seq, buf, sizeof buf);
    }
    out.insert(out.end(), buf, buf + n);
  }
  return out;
}

// Framing only: COBS + CRC + sequence tracking.
void BM_DecodeFrames(benchmark::State& state) {
  const auto stream = board_stream(2000);
  const auto chunk = static_cast<std::size_t>(state.range(0));
  for (auto _ : state) {
    proto::Decoder d;
    std::size_t frames = 0;
    for (std::size_t at = 0; at < stream.size(); at += chunk) {
      const std::size_t n = std::min(chunk, stream.size() - at);
      d.feed(stream.data() + at, n, [&](const proto::Frame&) { ++frames; });
    }
    benchmark::DoNotOptimize(frames);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * stream.size()));
}
BENCHMARK(BM_DecodeFrames)->Arg(64)->Arg(4096);

// Framing plus parsing every PowerBatch into samples, as the host does.
void BM_DecodeAndParse(benchmark::State& state) {
  const auto stream = board_stream(2000);
  proto::PowerBatch batch;
  for (auto _ : state) {
    proto::Decoder d;
    uint64_t samples = 0;
    d.feed(stream.data(), stream.size(), [&](const proto::Frame& f) {
      if (proto::parse_message(f, batch)) samples += batch.count;
    });
    benchmark::DoNotOptimize(samples);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations() * stream.size()));
}
BENCHMARK(BM_DecodeAndParse);

}  // namespace
