#pragma once

// Freestanding incremental decoder: bytes in, frames out through a callback, errors counted.
// No I/O, no heap, no exceptions; any byte sequence is safe to feed.

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "devices/protocol/frame.h"

namespace ergon::devices::protocol {

struct DecoderStats {
  uint64_t bytes = 0;          ///< every byte fed
  uint64_t frames_ok = 0;      ///< frames delivered to the callback
  uint64_t crc_errors = 0;     ///< well-formed COBS whose CRC did not match
  uint64_t malformed = 0;      ///< bad COBS, too short or long, length field mismatch
  uint64_t frames_lost = 0;    ///< frames missing according to sequence numbers
  uint64_t seq_restarts = 0;   ///< sequence went backwards (sender restarted)
  uint64_t resync_bytes = 0;   ///< bytes thrown away inside damaged frames
};

class Decoder {
 public:
  /// Feeds bytes; calls on_frame(const Frame&) for every intact frame, in order.
  template <class OnFrame>
  void feed(const uint8_t* data, std::size_t n, OnFrame&& on_frame) {
    stats_.bytes += n;
    while (n > 0) {
      const auto* zero = static_cast<const uint8_t*>(std::memchr(data, 0, n));
      const std::size_t chunk = zero != nullptr ? static_cast<std::size_t>(zero - data) : n;
      append(data, chunk);
      if (zero == nullptr) return;
      finish_frame(on_frame);
      data += chunk + 1;
      n -= chunk + 1;
    }
  }

  [[nodiscard]] const DecoderStats& stats() const { return stats_; }
  /// Forget the sequence history (e.g. after reconnecting to a board).
  void reset_sequence() { have_seq_ = false; }

 private:
  void append(const uint8_t* data, std::size_t n) {
    if (overflow_) {
      stats_.resync_bytes += n;
      return;
    }
    if (n > sizeof buf_ - len_) {
      overflow_ = true;
      stats_.resync_bytes += len_ + n;
      len_ = 0;
      return;
    }
    std::memcpy(buf_ + len_, data, n);
    len_ += n;
  }

  template <class OnFrame>
  void finish_frame(OnFrame& on_frame) {
    if (overflow_) {
      overflow_ = false;
      ++stats_.malformed;
      return;
    }
    if (len_ == 0) return;  // back-to-back delimiters
    const std::size_t encoded = len_;
    len_ = 0;
    const std::ptrdiff_t size = cobs_decode_in_place(buf_, encoded);
    if (size < static_cast<std::ptrdiff_t>(kHeaderBytes + kCrcBytes)) {
      reject_malformed(encoded);
      return;
    }
    const auto n = static_cast<std::size_t>(size);
    Reader header(buf_, kHeaderBytes);
    Frame f;
    f.type = static_cast<MsgType>(header.u8());
    f.flags = header.u8();
    f.seq = header.u16();
    f.payload_size = header.u16();
    if (f.payload_size != n - kHeaderBytes - kCrcBytes) {
      reject_malformed(encoded);
      return;
    }
    Reader crc_reader(buf_ + n - kCrcBytes, kCrcBytes);
    if (crc_reader.u32() != crc32c(buf_, n - kCrcBytes)) {
      ++stats_.crc_errors;
      stats_.resync_bytes += encoded;
      return;
    }
    track_sequence(f.seq);
    f.payload = buf_ + kHeaderBytes;
    ++stats_.frames_ok;
    on_frame(static_cast<const Frame&>(f));
  }

  void reject_malformed(std::size_t encoded) {
    ++stats_.malformed;
    stats_.resync_bytes += encoded;
  }

  void track_sequence(uint16_t seq) {
    if (have_seq_) {
      const auto delta = static_cast<uint16_t>(seq - next_seq_);
      if (delta < 0x8000U) {
        stats_.frames_lost += delta;
      } else {
        ++stats_.seq_restarts;
      }
    }
    have_seq_ = true;
    next_seq_ = static_cast<uint16_t>(seq + 1U);
  }

  uint8_t buf_[kMaxEncodedFrameBytes] = {};
  std::size_t len_ = 0;
  bool overflow_ = false;
  bool have_seq_ = false;
  uint16_t next_seq_ = 0;
  DecoderStats stats_;
};

}  // namespace ergon::devices::protocol
