// libFuzzer target: any byte stream, fed in arbitrary pieces, must never crash the decoder or
// the message parsers, and every frame that parses must re-encode to a frame that decodes to
// the same payload.

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "devices/protocol/decoder.h"
#include "devices/protocol/messages.h"

namespace proto = ergon::devices::protocol;

namespace {

template <class Msg>
void check_round_trip(const proto::Frame& frame) {
  static Msg msg;
  if (!proto::parse_message(frame, msg)) return;
  uint8_t wire[proto::kMaxEncodedFrameBytes];
  const std::size_t n = proto::encode_message(msg, frame.seq, wire, sizeof wire);
  if (n == 0) std::abort();  // a message that parsed must encode
  proto::Decoder again;
  std::size_t frames = 0;
  again.feed(wire, n, [&](const proto::Frame& f) {
    ++frames;
    static Msg back;
    if (!proto::parse_message(f, back)) std::abort();
  });
  if (frames != 1) std::abort();
}

void parse_all(const proto::Frame& f) {
  check_round_trip<proto::Hello>(f);
  check_round_trip<proto::OpSpanMsg>(f);
  check_round_trip<proto::PowerBatch>(f);
  check_round_trip<proto::SyncRequest>(f);
  check_round_trip<proto::SyncReply>(f);
  check_round_trip<proto::Log>(f);
  check_round_trip<proto::Bye>(f);
  check_round_trip<proto::RunDone>(f);
  check_round_trip<proto::HelloRequest>(f);
  check_round_trip<proto::PlanOp>(f);
  check_round_trip<proto::Start>(f);
  check_round_trip<proto::Stop>(f);
  check_round_trip<proto::Ping>(f);
  check_round_trip<proto::Pong>(f);
  check_round_trip<proto::ExecuteModel>(f);
  check_round_trip<proto::ScheduleSteps>(f);
  check_round_trip<proto::ExecutionReport>(f);
  check_round_trip<proto::SetPowerMode>(f);
  check_round_trip<proto::PowerModeSet>(f);
  check_round_trip<proto::PhaseModes>(f);
  check_round_trip<proto::LinkData>(f);
  check_round_trip<proto::HostLinkData>(f);
  check_round_trip<proto::LinkPull>(f);
  check_round_trip<proto::LinkAck>(f);
  check_round_trip<proto::ExecuteStage>(f);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  proto::Decoder decoder;
  // The first byte picks the chunk size, so the fuzzer explores split points as well.
  const std::size_t chunk = size > 0 ? (data[0] % 64) + 1 : 1;
  for (std::size_t pos = 0; pos < size; pos += chunk) {
    const std::size_t n = size - pos < chunk ? size - pos : chunk;
    decoder.feed(data + pos, n, parse_all);
  }
  const auto& s = decoder.stats();
  if (s.bytes != size) std::abort();
  return 0;
}
