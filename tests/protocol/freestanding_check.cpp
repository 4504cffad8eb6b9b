// The protocol runs on a 32 KB Cortex-M0+: encoding and decoding must not touch the heap or
// need exceptions. This program is built with -fno-exceptions -fno-rtti, replaces the global
// allocator with one that aborts, and round-trips every message through encoder and decoder.

#include <cstdio>
#include <cstdlib>
#include <new>

#include "devices/protocol/decoder.h"
#include "devices/protocol/messages.h"

void* operator new(std::size_t) { std::abort(); }
void* operator new[](std::size_t) { std::abort(); }
void operator delete(void*) noexcept { std::abort(); }
void operator delete[](void*) noexcept { std::abort(); }
void operator delete(void*, std::size_t) noexcept { std::abort(); }
void operator delete[](void*, std::size_t) noexcept { std::abort(); }

namespace proto = ergon::devices::protocol;

namespace {

uint8_t g_wire[8 * proto::kMaxEncodedFrameBytes];
std::size_t g_size = 0;

template <class Msg>
bool put(const Msg& msg, uint16_t seq) {
  const std::size_t n = proto::encode_message(msg, seq, g_wire + g_size, sizeof g_wire - g_size);
  g_size += n;
  return n != 0;
}

}  // namespace

int main() {
  proto::Hello hello;
  hello.tick_hz = 1'000'000;
  proto::PowerBatch batch;
  batch.count = proto::kMaxBatchSamples;
  bool ok = put(hello, 0) && put(batch, 1) && put(proto::OpSpanMsg{.repetitions = 1}, 2) &&
            put(proto::RunDone{}, 3) && put(proto::Start{}, 4) && put(proto::Stop{}, 5);
  proto::Decoder decoder;
  int frames = 0;
  decoder.feed(g_wire, g_size, [&](const proto::Frame& f) {
    ++frames;
    static proto::PowerBatch back;
    if (f.type == proto::MsgType::kPowerBatch) ok = ok && proto::parse_message(f, back);
  });
  ok = ok && frames == 6 && decoder.stats().frames_lost == 0;
  std::printf("%s: %d frames, %zu bytes, no heap\n", ok ? "ok" : "FAILED", frames, g_size);
  return ok ? 0 : 1;
}
