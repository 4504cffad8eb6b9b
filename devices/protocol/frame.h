#pragma once

// Freestanding framing (see docs/protocol.md for the byte layout):
//
//   0x00 | COBS( type u8 | flags u8 | seq u16 | length u16 | payload | crc32c u32 ) | 0x00
//
// Each frame carries its own leading and trailing delimiter, so damage to one frame, its
// delimiters included, never costs a neighbouring frame.

#include <cstddef>
#include <cstdint>

#include "devices/protocol/cobs.h"
#include "devices/protocol/crc32c.h"
#include "devices/protocol/wire.h"

namespace ergon::devices::protocol {

inline constexpr uint16_t kProtocolVersion = 8;
inline constexpr std::size_t kHeaderBytes = 6;
inline constexpr std::size_t kCrcBytes = 4;
/// Largest payload of any frame; sized so a Cortex-M0+ with 32 KB of RAM can hold a frame.
inline constexpr std::size_t kMaxPayloadBytes = 1024;
inline constexpr std::size_t kMaxFrameBytes = kHeaderBytes + kMaxPayloadBytes + kCrcBytes;
/// Worst case on the wire: COBS overhead plus the two delimiters.
inline constexpr std::size_t kMaxEncodedFrameBytes = cobs_max_encoded_size(kMaxFrameBytes) + 2;

/// Message type codes. Device to host below 0x80, host to device from 0x80. Append only.
enum class MsgType : uint8_t {
  kHello = 0x01,
  kOpSpan = 0x02,
  kPowerBatch = 0x03,
  kSyncReply = 0x04,
  kLog = 0x05,
  kBye = 0x06,
  kRunDone = 0x07,
  kPong = 0x08,
  kExecutionReport = 0x09,  ///< since v3
  kPowerModeSet = 0x0A,     ///< since v4
  kLinkData = 0x0B,         ///< since v6
  kLinkPull = 0x0C,         ///< since v6
  kHelloRequest = 0x81,
  kSyncRequest = 0x82,
  kPlanOp = 0x83,
  kStart = 0x84,
  kStop = 0x85,
  kPing = 0x86,
  kExecuteModel = 0x87,   ///< since v3
  kScheduleSteps = 0x88,  ///< since v3
  kSetPowerMode = 0x89,   ///< since v4
  kPhaseModes = 0x8A,     ///< since v4
  kHostLinkData = 0x8B,   ///< since v6
  kLinkAck = 0x8C,        ///< since v6
  kExecuteStage = 0x8D,   ///< since v6
};

/// A decoded frame. `payload` points into the decoder's buffer and is valid only during the
/// callback that receives it.
struct Frame {
  MsgType type{};
  uint8_t flags = 0;
  uint16_t seq = 0;
  const uint8_t* payload = nullptr;
  std::size_t payload_size = 0;
};

/// Frames `payload` into dst (capacity cap) with both delimiters. Returns the bytes written,
/// or 0 when the payload is larger than kMaxPayloadBytes or dst is too small.
inline std::size_t encode_frame(MsgType type, uint16_t seq, const uint8_t* payload,
                                std::size_t payload_size, uint8_t* dst, std::size_t cap) {
  if (payload_size > kMaxPayloadBytes) return 0;
  uint8_t raw[kMaxFrameBytes];
  Writer w(raw, sizeof raw);
  w.u8(static_cast<uint8_t>(type));
  w.u8(0);
  w.u16(seq);
  w.u16(static_cast<uint16_t>(payload_size));
  w.bytes(payload, payload_size);
  w.u32(crc32c(raw, w.size()));
  if (!w.ok() || cap < 2) return 0;
  dst[0] = 0;
  const std::size_t n = cobs_encode(raw, w.size(), dst + 1, cap - 2);
  if (n == 0) return 0;
  dst[n + 1] = 0;
  return n + 2;
}

/// Encodes a message (any struct with kType and `bool write(Writer&) const`).
template <class Msg>
std::size_t encode_message(const Msg& msg, uint16_t seq, uint8_t* dst, std::size_t cap) {
  uint8_t payload[kMaxPayloadBytes];
  payload[0] = 0;  // empty messages (Stop) would otherwise pass an untouched buffer along
  Writer w(payload, sizeof payload);
  if (!msg.write(w) || !w.ok()) return 0;
  return encode_frame(Msg::kType, seq, payload, w.size(), dst, cap);
}

/// Parses a frame's payload as Msg; false when the type differs or the payload is malformed
/// (short, long, or a field out of range).
template <class Msg>
bool parse_message(const Frame& frame, Msg& out) {
  if (frame.type != Msg::kType) return false;
  Reader r(frame.payload, frame.payload_size);
  return out.read(r) && r.done();
}

}  // namespace ergon::devices::protocol
