#include <gtest/gtest.h>

#include <random>
#include <set>
#include <vector>

#include "devices/protocol/decoder.h"
#include "devices/protocol/messages.h"
#include "messages_fixture.h"

namespace ergon::devices::protocol {
namespace {

struct Stream {
  std::vector<uint8_t> bytes;
  struct Range {
    std::size_t begin;
    std::size_t end;
  };
  std::vector<Range> frames;  // index = sequence number
};

// A long stream like a board sends: spans and power batches of varied sizes.
Stream make_stream(std::size_t frames, std::mt19937& rng) {
  Stream s;
  uint8_t buf[kMaxEncodedFrameBytes];
  std::uniform_int_distribution<int> samples(1, 12);
  for (std::size_t i = 0; i < frames; ++i) {
    const auto seq = static_cast<uint16_t>(i);
    std::size_t n = 0;
    if (i % 3 == 0) {
      OpSpanMsg span = testing::sample_span();
      span.op_id = static_cast<uint32_t>(i);
      n = encode_message(span, seq, buf, sizeof buf);
    } else {
      n = encode_message(testing::sample_batch(static_cast<uint16_t>(samples(rng))), seq, buf,
                         sizeof buf);
    }
    s.frames.push_back({s.bytes.size(), s.bytes.size() + n});
    s.bytes.insert(s.bytes.end(), buf, buf + n);
  }
  return s;
}

class Corruption : public ::testing::TestWithParam<uint32_t> {};

TEST_P(Corruption, EveryIntactFrameIsRecoveredAndEveryDamagedOneCounted) {
  std::mt19937 rng(GetParam());
  Stream s = make_stream(20'000, rng);  // < 65536 frames: sequence numbers stay unique
  std::vector<bool> damaged_byte(s.bytes.size(), false);
  std::uniform_int_distribution<std::size_t> pos(0, s.bytes.size() - 1);
  std::uniform_int_distribution<int> bit(0, 7);
  const std::size_t flips = s.bytes.size() / 100;  // 1 % of the bytes
  for (std::size_t k = 0; k < flips; ++k) {
    const std::size_t p = pos(rng);
    if (damaged_byte[p]) continue;  // a second flip of the same bit would undo the first
    s.bytes[p] = static_cast<uint8_t>(s.bytes[p] ^ (1U << bit(rng)));
    damaged_byte[p] = true;
  }
  std::set<uint16_t> intact;
  for (std::size_t i = 0; i < s.frames.size(); ++i) {
    bool ok = true;
    for (std::size_t b = s.frames[i].begin; b < s.frames[i].end && ok; ++b) ok = !damaged_byte[b];
    if (ok) intact.insert(static_cast<uint16_t>(i));
  }
  ASSERT_GT(intact.size(), s.frames.size() / 4) << "test stream too damaged to mean much";
  ASSERT_LT(intact.size(), s.frames.size()) << "no damage: the test would prove nothing";

  // Feed in uneven chunks, as reads from a serial port arrive.
  Decoder d;
  std::set<uint16_t> delivered;
  std::uniform_int_distribution<std::size_t> chunk(1, 700);
  for (std::size_t at = 0; at < s.bytes.size();) {
    const std::size_t n = std::min(chunk(rng), s.bytes.size() - at);
    d.feed(s.bytes.data() + at, n, [&](const Frame& f) {
      EXPECT_TRUE(delivered.insert(f.seq).second) << "frame delivered twice";
    });
    at += n;
  }

  EXPECT_EQ(delivered, intact);
  const uint16_t first = *intact.begin();
  const uint16_t last = *intact.rbegin();
  const uint64_t damaged_between = (last - first + 1U) - intact.size();
  EXPECT_EQ(d.stats().frames_ok, intact.size());
  EXPECT_EQ(d.stats().frames_lost, damaged_between);
  EXPECT_GE(d.stats().crc_errors + d.stats().malformed, 1U);
  EXPECT_EQ(d.stats().bytes, s.bytes.size());
}

INSTANTIATE_TEST_SUITE_P(Seeds, Corruption, ::testing::Values(1U, 2U, 3U, 4U, 5U));

}  // namespace
}  // namespace ergon::devices::protocol
