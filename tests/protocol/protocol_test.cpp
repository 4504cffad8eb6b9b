#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "devices/protocol/decoder.h"
#include "devices/protocol/messages.h"
#include "messages_fixture.h"

namespace ergon::devices::protocol {
namespace {

using testing::sample_batch;
using testing::sample_hello;
using testing::sample_log;
using testing::sample_plan_op;
using testing::sample_span;
using testing::sample_execute_model;
using testing::sample_execution_report;
using testing::sample_phase_modes;
using testing::sample_power_mode_set;
using testing::sample_set_power_mode;
using testing::sample_schedule_steps;

template <class Msg>
std::vector<uint8_t> encode(const Msg& msg, uint16_t seq = 0) {
  std::vector<uint8_t> out(kMaxEncodedFrameBytes);
  const std::size_t n = encode_message(msg, seq, out.data(), out.size());
  out.resize(n);
  return out;
}

std::vector<Frame> decode_all(Decoder& d, const std::vector<uint8_t>& bytes,
                              std::vector<std::vector<uint8_t>>* payloads = nullptr) {
  std::vector<Frame> frames;
  d.feed(bytes.data(), bytes.size(), [&](const Frame& f) {
    frames.push_back(f);
    if (payloads) payloads->emplace_back(f.payload, f.payload + f.payload_size);
  });
  return frames;
}

template <class Msg>
Msg round_trip(const Msg& msg) {
  Decoder d;
  Msg back{};
  std::size_t frames = 0;
  const auto bytes = encode(msg, 9);
  d.feed(bytes.data(), bytes.size(), [&](const Frame& f) {
    ++frames;
    EXPECT_EQ(f.type, Msg::kType);
    EXPECT_EQ(f.seq, 9);
    EXPECT_TRUE(parse_message(f, back));
  });
  EXPECT_EQ(frames, 1U);
  return back;
}

TEST(Crc32c, MatchesTheStandardCheckValue) {
  const char* check = "123456789";
  EXPECT_EQ(crc32c(reinterpret_cast<const uint8_t*>(check), 9), 0xE3069283U);
}

TEST(Cobs, RoundTripsZerosAndLongRunsWithoutZerosInTheOutput) {
  for (std::size_t n : {0U, 1U, 253U, 254U, 255U, 508U, 1000U}) {
    for (int pattern = 0; pattern < 3; ++pattern) {
      std::vector<uint8_t> src(n);
      for (std::size_t i = 0; i < n; ++i)
        src[i] = pattern == 0 ? 0 : pattern == 1 ? static_cast<uint8_t>(i % 255 + 1)
                                                  : static_cast<uint8_t>(i * 7);
      std::vector<uint8_t> enc(cobs_max_encoded_size(n));
      const std::size_t m = cobs_encode(src.data(), n, enc.data(), enc.size());
      ASSERT_GT(m, 0U);
      enc.resize(m);
      for (uint8_t b : enc) ASSERT_NE(b, 0);
      const auto k = cobs_decode_in_place(enc.data(), m);
      ASSERT_EQ(k, static_cast<std::ptrdiff_t>(n)) << "n=" << n << " pattern=" << pattern;
      enc.resize(n);
      EXPECT_EQ(enc, src);
    }
  }
}

TEST(Cobs, RejectsACodeThatRunsPastTheEnd) {
  uint8_t bad[] = {5, 1, 2};
  EXPECT_EQ(cobs_decode_in_place(bad, sizeof bad), -1);
}

TEST(Messages, EveryMessageRoundTripsWithAllFields) {
  const Hello h = round_trip(sample_hello());
  EXPECT_EQ(h.board_kind, BoardKind::kRaspberryPi4);
  EXPECT_EQ(h.firmware_version, 0x010203U);
  EXPECT_EQ(h.tick_hz, 1'000'000'000U);
  EXPECT_EQ(h.ram_bytes, 0xFFFFFFF0U);
  EXPECT_STREQ(h.board_name, "pi4-lab-7");
  ASSERT_EQ(h.rail_count, 2);
  EXPECT_EQ(h.rails[1].id, 3);
  EXPECT_STREQ(h.rails[1].name, "VDD_GPU_SOC_LNG");
  EXPECT_STREQ(h.board_type, "pi4");

  const OpSpanMsg s = round_trip(sample_span());
  EXPECT_EQ(s.op_id, 42U);
  EXPECT_EQ(s.phase, 2);
  EXPECT_EQ(s.begin_ticks, 0x0102030405060708ULL);
  EXPECT_EQ(s.end_ticks, 0x0102030405060808ULL);
  EXPECT_EQ(s.repetitions, 17U);

  const PowerBatch in = sample_batch(static_cast<uint16_t>(kMaxBatchSamples));
  const PowerBatch b = round_trip(in);
  ASSERT_EQ(b.count, kMaxBatchSamples);
  EXPECT_EQ(b.base_ticks, in.base_ticks);
  for (std::size_t i = 0; i < kMaxBatchSamples; ++i) {
    EXPECT_EQ(b.samples[i].dt_ticks, in.samples[i].dt_ticks);
    EXPECT_EQ(b.samples[i].bus_uv, in.samples[i].bus_uv);
    EXPECT_EQ(b.samples[i].current_ua, in.samples[i].current_ua);
    EXPECT_EQ(b.samples[i].power_uw, in.samples[i].power_uw);
    EXPECT_EQ(b.samples[i].flags, in.samples[i].flags);
  }

  const SyncReply r = round_trip(SyncReply{.sync_id = 5, .host_tx_ns = 77, .device_rx_ticks = 100,
                                           .device_tx_ticks = 130});
  EXPECT_EQ(r.sync_id, 5U);
  EXPECT_EQ(r.host_tx_ns, 77U);
  EXPECT_EQ(r.device_tx_ticks, 130U);

  const Log l = round_trip(sample_log());
  EXPECT_EQ(l.level, LogLevel::kWarning);
  EXPECT_EQ(std::string(l.text, l.length), "sd card slow: 3.9 MB/s");

  EXPECT_EQ(round_trip(Bye{.reason = ByeReason::kError}).reason, ByeReason::kError);
  const RunDone d = round_trip(RunDone{.run_tag = 3, .end = RunEnd::kStopped, .spans_sent = 10,
                                       .samples_sent = 20, .frames_sent = 12});
  EXPECT_EQ(d.end, RunEnd::kStopped);
  EXPECT_EQ(d.samples_sent, 20U);
  EXPECT_EQ(round_trip(HelloRequest{}).host_protocol_version, kProtocolVersion);
  EXPECT_EQ(round_trip(SyncRequest{.sync_id = 8, .host_tx_ns = 99}).host_tx_ns, 99U);

  const PlanOp p = round_trip(sample_plan_op());
  EXPECT_EQ(p.dims[5], 3U);
  EXPECT_EQ(p.flops, 75'497'472U);
  EXPECT_EQ(p.idle_after_us, 50'000U);
  EXPECT_EQ(p.copies, 0U);
  PlanOp cached = sample_plan_op();
  cached.copies = 12;
  EXPECT_EQ(round_trip(cached).copies, 12U);

  const Start st = round_trip(Start{.run_tag = 11, .mode = StartMode::kProfile, .op_count = 30,
                                    .loops = 0, .min_window_us = 60'000, .seed = 4});
  EXPECT_EQ(st.op_count, 30);
  EXPECT_EQ(st.min_window_us, 60'000U);
  round_trip(Stop{});
  EXPECT_EQ(round_trip(Ping{.nonce = 6}).nonce, 6U);
  EXPECT_EQ(round_trip(Pong{.nonce = 6, .device_ticks = 1234}).device_ticks, 1234U);
  const ExecuteModel em = round_trip(sample_execute_model());
  EXPECT_STREQ(em.model, "resnet18-cifar");
  EXPECT_EQ(em.batch, 4);
  EXPECT_EQ(em.step_count, 700U);
  const ScheduleSteps ss = round_trip(sample_schedule_steps());
  ASSERT_EQ(ss.count, ScheduleSteps::kMaxSteps);
  EXPECT_EQ(ss.first, 200U);
  EXPECT_EQ(ss.steps[3].kind, 3);
  EXPECT_EQ(ss.steps[3].node, 1003U);
  const ExecutionReport er = round_trip(sample_execution_report());
  EXPECT_EQ(er.loss_bits, 0x40133333U);
  EXPECT_EQ(er.gradient_digest, 0x0123456789ABCDEFULL);
  EXPECT_EQ(er.peak_bytes, 3'000'000U);
  const SetPowerMode sp = round_trip(sample_set_power_mode());
  EXPECT_STREQ(sp.mode, "MAXP_CORE_ARM");
  const PowerModeSet ps = round_trip(sample_power_mode_set());
  EXPECT_EQ(ps.status, PowerModeStatus::kRefused);
  EXPECT_STREQ(ps.mode, "MAXN");
  EXPECT_EQ(ps.switch_ns, 1'250'000U);
  EXPECT_STREQ(ps.detail, "nvpmodel -m 3 needs root: run ergon-agent with sudo");
  const PhaseModes pm = round_trip(sample_phase_modes());
  EXPECT_STREQ(pm.backward, "1000MHz");
  EXPECT_EQ(pm.switch_at, 57U);
}

TEST(Messages, PowerModeRequestsNeedAModeAndAnswersAKnownStatus) {
  // An empty mode name is no request; a status beyond the last known one does not parse.
  Decoder d;
  std::vector<std::vector<uint8_t>> payloads;
  decode_all(d, encode(SetPowerMode{}), &payloads);
  decode_all(d, encode(sample_power_mode_set()), &payloads);
  ASSERT_EQ(payloads.size(), 2U);
  SetPowerMode empty;
  EXPECT_FALSE(parse_message(
      Frame{.type = MsgType::kSetPowerMode, .payload = payloads[0].data(), .payload_size = payloads[0].size()},
      empty));
  PowerModeSet answer;
  const Frame good{.type = MsgType::kPowerModeSet, .payload = payloads[1].data(), .payload_size = payloads[1].size()};
  EXPECT_TRUE(parse_message(good, answer));
  payloads[1][0] = 6;
  EXPECT_FALSE(parse_message(good, answer));
}

TEST(Messages, ScheduleStepsFillAFrameAndRejectUnknownStepKinds) {
  // A full ScheduleSteps is one frame; a step kind beyond page-in does not parse.
  const auto bytes = encode(sample_schedule_steps());
  Decoder d;
  std::vector<std::vector<uint8_t>> payloads;
  decode_all(d, bytes, &payloads);
  ASSERT_EQ(payloads.size(), 1U);
  EXPECT_LE(payloads[0].size(), kMaxPayloadBytes + 1);
  std::vector<uint8_t> p = payloads[0];
  p[5] = 4;  // the first step's kind
  ScheduleSteps out;
  const Frame f{.type = MsgType::kScheduleSteps, .payload = p.data(), .payload_size = p.size() - 1};
  EXPECT_FALSE(parse_message(f, out));

  ExecuteModel unterminated = sample_execute_model();
  for (char& c : unterminated.model) c = 'x';
  const auto mb = encode(unterminated);
  std::vector<std::vector<uint8_t>> mp;
  Decoder d2;
  decode_all(d2, mb, &mp);
  ASSERT_EQ(mp.size(), 1U);
  ExecuteModel em;
  const Frame mf{.type = MsgType::kExecuteModel, .payload = mp[0].data(), .payload_size = mp[0].size()};
  EXPECT_FALSE(parse_message(mf, em)) << "a model name without its NUL";
}

TEST(Messages, ParsersRejectShortLongAndOutOfRangePayloads) {
  auto bytes = encode(sample_span());
  Decoder d;
  std::vector<std::vector<uint8_t>> payloads;
  decode_all(d, bytes, &payloads);
  ASSERT_EQ(payloads.size(), 1U);
  std::vector<uint8_t> p = payloads[0];
  OpSpanMsg msg;
  Frame f{.type = MsgType::kOpSpan, .payload = p.data(), .payload_size = p.size() - 1};
  EXPECT_FALSE(parse_message(f, msg)) << "short";
  p.push_back(0);
  f.payload = p.data();
  f.payload_size = p.size();
  EXPECT_FALSE(parse_message(f, msg)) << "long";
  f.payload_size = p.size() - 1;
  EXPECT_TRUE(parse_message(f, msg));
  f.type = MsgType::kHello;
  EXPECT_FALSE(parse_message(f, msg)) << "wrong type";

  PowerBatch batch = sample_batch(3);
  batch.count = 2;  // header says 2, payload carries 2: fine; now lie about it
  auto bb = encode(batch);
  std::vector<std::vector<uint8_t>> bp;
  Decoder d2;
  decode_all(d2, bb, &bp);
  ASSERT_EQ(bp.size(), 1U);
  bp[0][2] = 3;  // count field says 3 but only 2 samples follow
  PowerBatch out;
  Frame bf{.type = MsgType::kPowerBatch, .payload = bp[0].data(), .payload_size = bp[0].size()};
  EXPECT_FALSE(parse_message(bf, out));
}

TEST(Messages, AHelloOfV6HasNoBoardTypeAndStillReads) {
  // A v6 board's Hello ends after time_scale_milli: the host reads it without a board type.
  Hello v6 = sample_hello();
  v6.protocol_version = 6;
  uint8_t payload[256];
  Writer w(payload, sizeof payload);
  ASSERT_TRUE(v6.write(w));
  const std::size_t without_type = w.size() - kNameBytes;
  Reader r(payload, without_type);
  Hello read;
  ASSERT_TRUE(read.read(r));
  EXPECT_EQ(read.protocol_version, 6);
  EXPECT_STREQ(read.board_type, "");
  EXPECT_EQ(read.time_scale_milli, v6.time_scale_milli);
}

TEST(Encoder, RefusesPayloadsLargerThanAFrameAndBuffersTooSmall) {
  std::vector<uint8_t> big(kMaxPayloadBytes + 1, 1);
  uint8_t out[kMaxEncodedFrameBytes + 64];
  EXPECT_EQ(encode_frame(MsgType::kLog, 0, big.data(), big.size(), out, sizeof out), 0U);
  EXPECT_EQ(encode_frame(MsgType::kLog, 0, big.data(), kMaxPayloadBytes, out, sizeof out),
            kMaxEncodedFrameBytes);
  EXPECT_EQ(encode_message(sample_span(), 0, out, 10), 0U);
  Hello h = sample_hello();
  h.rail_count = kMaxRails + 1;
  EXPECT_EQ(encode_message(h, 0, out, sizeof out), 0U);
}

TEST(Decoder, DeliversFramesSplitAtEveryByteBoundary) {
  std::vector<uint8_t> stream;
  for (uint16_t seq = 0; seq < 4; ++seq) {
    const auto f = encode(sample_batch(static_cast<uint16_t>(seq * 10 + 1)), seq);
    stream.insert(stream.end(), f.begin(), f.end());
  }
  for (std::size_t split = 1; split < stream.size(); split += 7) {
    Decoder d;
    std::vector<uint16_t> seqs;
    auto on = [&](const Frame& f) { seqs.push_back(f.seq); };
    d.feed(stream.data(), split, on);
    d.feed(stream.data() + split, stream.size() - split, on);
    ASSERT_EQ(seqs, (std::vector<uint16_t>{0, 1, 2, 3})) << "split at " << split;
    EXPECT_EQ(d.stats().frames_lost, 0U);
  }
}

TEST(Decoder, CountsSequenceGapsAsLostFramesAndRestartsAsRestarts) {
  std::vector<uint8_t> stream;
  for (uint16_t seq : std::vector<uint16_t>{10, 11, 14, 15, 2}) {
    const auto f = encode(Ping{.nonce = seq}, seq);
    stream.insert(stream.end(), f.begin(), f.end());
  }
  Decoder d;
  decode_all(d, stream);
  EXPECT_EQ(d.stats().frames_ok, 5U);
  EXPECT_EQ(d.stats().frames_lost, 2U);
  EXPECT_EQ(d.stats().seq_restarts, 1U);
}

TEST(Decoder, SequenceNumbersWrapWithoutCountingALoss) {
  std::vector<uint8_t> stream;
  for (uint16_t seq : std::vector<uint16_t>{65534, 65535, 0, 1}) {
    const auto f = encode(Ping{}, seq);
    stream.insert(stream.end(), f.begin(), f.end());
  }
  Decoder d;
  decode_all(d, stream);
  EXPECT_EQ(d.stats().frames_ok, 4U);
  EXPECT_EQ(d.stats().frames_lost, 0U);
}

TEST(Decoder, ResynchronizesAfterGarbageAndOverlongRuns) {
  std::vector<uint8_t> stream(5000, 0x55);  // longer than any frame, no delimiter
  const auto f = encode(sample_span(), 3);
  stream.insert(stream.end(), f.begin(), f.end());
  const std::vector<uint8_t> junk = {1, 2, 3, 0, 9, 9, 0};
  stream.insert(stream.end(), junk.begin(), junk.end());
  stream.insert(stream.end(), f.begin(), f.end());
  Decoder d;
  const auto frames = decode_all(d, stream);
  EXPECT_EQ(frames.size(), 2U);
  EXPECT_EQ(d.stats().malformed, 3U);  // the overlong run and the two junk pieces
  EXPECT_EQ(d.stats().bytes, stream.size());
}

TEST(Decoder, CountsAFrameWithAFlippedBitAsACrcErrorOrMalformed) {
  auto f = encode(sample_batch(20), 0);
  f[f.size() / 2] ^= 0x10;
  Decoder d;
  EXPECT_TRUE(decode_all(d, f).empty());
  EXPECT_EQ(d.stats().crc_errors + d.stats().malformed, 1U);
}

// Golden captures: the exact bytes of one message of each kind. A change here breaks every
// deployed firmware, so it must be deliberate: ERGON_UPDATE_GOLDEN=1 rewrites the files.
struct Golden {
  const char* file;
  std::vector<uint8_t> bytes;
};

template <class Msg>
Msg sample_link_data() {
  Msg m;
  m.transfer = 7;
  m.offset = 1015;
  m.last = true;
  m.fill(40);
  return m;
}

std::vector<Golden> golden_messages() {
  return {
      {"hello.bin", encode(sample_hello(), 0)},
      {"op_span.bin", encode(sample_span(), 1)},
      {"power_batch.bin", encode(sample_batch(5), 2)},
      {"sync_reply.bin", encode(SyncReply{.sync_id = 5, .host_tx_ns = 1'700'000'000'000'000'000,
                                          .device_rx_ticks = 1000, .device_tx_ticks = 1020},
                                3)},
      {"log.bin", encode(sample_log(), 4)},
      {"run_done.bin", encode(RunDone{.run_tag = 0xABCD, .end = RunEnd::kCompleted,
                                      .spans_sent = 90, .samples_sent = 18000,
                                      .frames_sent = 400},
                              5)},
      {"bye.bin", encode(Bye{}, 6)},
      {"hello_request.bin", encode(HelloRequest{}, 0)},
      {"sync_request.bin", encode(SyncRequest{.sync_id = 5, .host_tx_ns = 1'700'000'000'000'000'000}, 1)},
      {"plan_op.bin", encode(sample_plan_op(), 2)},
      {"start.bin", encode(Start{.run_tag = 0xABCD, .op_count = 31, .loops = 1,
                                 .min_window_us = 60'000, .seed = 1},
                           3)},
      {"stop.bin", encode(Stop{}, 4)},
      {"execute_model.bin", encode(sample_execute_model(), 5)},
      {"schedule_steps.bin", encode(sample_schedule_steps(), 6)},
      {"execution_report.bin", encode(sample_execution_report(), 7)},
      {"set_power_mode.bin", encode(sample_set_power_mode(), 8)},
      {"power_mode_set.bin", encode(sample_power_mode_set(), 9)},
      {"phase_modes.bin", encode(sample_phase_modes(), 10)},
      {"link_data.bin", encode(sample_link_data<LinkData>(), 11)},
      {"link_pull.bin", encode(LinkPull{.transfer = 7, .bytes = 65536, .frame_bytes = 1015}, 12)},
      {"host_link_data.bin", encode(sample_link_data<HostLinkData>(), 11)},
      {"link_ack.bin", encode(LinkAck{.transfer = 7, .bytes = 65536}, 12)},
      {"execute_stage.bin", encode(ExecuteStage{.first_op = 32, .end_op = 67, .microbatches = 4}, 13)},
  };
}

// A link transfer's bytes arrive as sent, and a frame claiming more filler than a frame
// holds, or a bad `last` flag, is refused.
TEST(LinkMessages, RoundTripAndRefuseBadFields) {
  const auto data = sample_link_data<LinkData>();
  const auto bytes = encode(data, 0);
  Decoder d;
  const auto frames = decode_all(d, bytes);
  ASSERT_EQ(frames.size(), 1U);
  LinkData back;
  ASSERT_TRUE(parse_message(frames[0], back));
  EXPECT_EQ(back.transfer, data.transfer);
  EXPECT_EQ(back.offset, data.offset);
  EXPECT_TRUE(back.last);
  ASSERT_EQ(back.length, data.length);
  EXPECT_TRUE(std::equal(back.data, back.data + back.length, data.data));
  EXPECT_EQ(std::count(back.data, back.data + back.length, 0), 0) << "the filler has no zero bytes (COBS overhead)";

  LinkPull pull;
  Frame f{.type = MsgType::kLinkPull};
  uint8_t payload[10] = {7, 0, 0, 0, 0, 0, 0, 0, 0xF7, 0x03};  // 0 bytes: refused
  f.payload = payload;
  f.payload_size = sizeof payload;
  EXPECT_FALSE(parse_message(f, pull));
  payload[4] = 1;  // 1 byte, in frames of 1015: fine
  EXPECT_TRUE(parse_message(f, pull));
  payload[8] = 0xF8;  // frames of 1016 bytes of filler: more than a frame holds
  EXPECT_FALSE(parse_message(f, pull));

  uint8_t bad_last[10] = {1, 0, 0, 0, 0, 0, 0, 0, 2, 0x55};
  Frame g{.type = MsgType::kLinkData, .payload = bad_last, .payload_size = sizeof bad_last};
  EXPECT_FALSE(parse_message(g, back));
}

TEST(GoldenCaptures, EncoderProducesTheCapturedBytes) {
  const std::filesystem::path dir = std::filesystem::path(ERGON_TEST_DATA_DIR) / "protocol";
  const bool update = std::getenv("ERGON_UPDATE_GOLDEN") != nullptr;
  for (const auto& g : golden_messages()) {
    const auto path = dir / g.file;
    if (update) {
      std::ofstream(path, std::ios::binary)
          .write(reinterpret_cast<const char*>(g.bytes.data()),
                 static_cast<std::streamsize>(g.bytes.size()));
      continue;
    }
    std::ifstream in(path, std::ios::binary);
    ASSERT_TRUE(in) << "missing " << path;
    const std::vector<uint8_t> captured{std::istreambuf_iterator<char>(in), {}};
    EXPECT_EQ(captured, g.bytes) << g.file;
  }
}

TEST(GoldenCaptures, DecoderReadsEveryCapture) {
  const std::filesystem::path dir = std::filesystem::path(ERGON_TEST_DATA_DIR) / "protocol";
  for (const auto& g : golden_messages()) {
    std::ifstream in(dir / g.file, std::ios::binary);
    const std::vector<uint8_t> captured{std::istreambuf_iterator<char>(in), {}};
    Decoder d;
    EXPECT_EQ(decode_all(d, captured).size(), 1U) << g.file;
    EXPECT_EQ(d.stats().crc_errors + d.stats().malformed, 0U) << g.file;
  }
}

}  // namespace
}  // namespace ergon::devices::protocol
