#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <deque>
#include <random>
#include <string>
#include <vector>

#include "tests/support/fake_clock.h"
#include "devices/cortexm/firmware.h"
#include "devices/cortexm/ina219.h"
#include "devices/cortexm/tiny_kernels.h"
#include "devices/cortexm/host/host_hal.h"
#include "devices/protocol/decoder.h"
#include "probes/sim_ina2xx.h"
#include "profiler/kernels.h"
#include "profiler/op.h"

namespace ergon::devices::cortexm {
namespace {

namespace proto = protocol;

std::vector<float> random_values(std::size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

void expect_close(const std::vector<float>& a, const std::vector<float>& b, const char* what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-4F * (1 + std::abs(b[i]))) << what << " " << i;
}

TEST(TinyKernels, ComputeWhatTheProfilersKernelsCompute) {
  int yields = 0;
  const Yield count{[](void* n) { ++*static_cast<int*>(n); }, &yields};
  for (uint32_t stride : {1U, 2U}) {
    const TinyConv t{2, 3, 4, 7, 6, 3, stride};
    const profiler::ConvShape s{2, 3, 4, 7, 6, 3, stride};
    const auto x = random_values(t.input_size(), 1), w = random_values(t.weight_size(), 2),
               dy = random_values(t.output_size(), 3);
    std::vector<float> y1(t.output_size()), y2(t.output_size()), cols(s.columns_size());
    conv2d_forward(t, x.data(), w.data(), y1.data(), count);
    profiler::conv2d_forward(s, x, w, y2, cols);
    expect_close(y1, y2, "conv forward");
    std::vector<float> dx1(x.size()), dw1(w.size()), dx2(x.size()), dw2(w.size());
    conv2d_backward(t, x.data(), w.data(), dy.data(), dx1.data(), dw1.data(), count);
    profiler::conv2d_backward(s, x, w, dy, dx2, dw2, cols);
    expect_close(dx1, dx2, "conv dx");
    expect_close(dw1, dw2, "conv dw");
  }
  EXPECT_GT(yields, 0) << "long kernels let the firmware answer the host";
  const auto x = random_values(3 * 20, 4), w = random_values(5 * 20, 5), dy = random_values(3 * 5, 6);
  std::vector<float> y1(15), y2(15), dx1(60), dx2(60), dw1(100), dw2(100);
  linear_forward(3, 20, 5, x.data(), w.data(), y1.data(), {});
  profiler::linear_forward(3, 20, 5, x, w, y2);
  expect_close(y1, y2, "linear forward");
  linear_backward(3, 20, 5, x.data(), w.data(), dy.data(), dx1.data(), dw1.data(), {});
  profiler::linear_backward(3, 20, 5, x, w, dy, dx2, dw2);
  expect_close(dx1, dx2, "linear dx");
  expect_close(dw1, dw2, "linear dw");
  const auto img = random_values(2 * 3 * 8 * 8, 7), g = random_values(2 * 3 * 4 * 4, 8);
  std::vector<float> p1(96), p2(96), dp1(img.size()), dp2(img.size());
  max_pool_forward(2, 3, 8, 8, 2, img.data(), p1.data());
  profiler::max_pool_forward(2, 3, 8, 8, 2, img, p2);
  expect_close(p1, p2, "max pool");
  max_pool_backward(2, 3, 8, 8, 2, img.data(), g.data(), dp1.data());
  profiler::max_pool_backward(2, 3, 8, 8, 2, img, g, dp2);
  expect_close(dp1, dp2, "max pool backward");
}

/// A simulated INA219 on a simulated bus, as the firmware's I2C master sees it.
struct SimChip {
  testing::FakeClock clock;
  probes::SimIna2xx chip{probes::Ina2xxChip::kIna219, 1.0,
                         [](int64_t) { return probes::SupplyState{.bus_v = 3.3, .current_a = 0.0123}; }};
  probes::SimI2cBus bus{clock};
  HostI2c i2c{bus};
  SimChip() { bus.attach(0x40, chip); }
};

TEST(FirmwareIna219, ReadsTheConversionsOfTheChipOncePerConversion) {
  SimChip sim;
  Ina219 ina(&sim.i2c, Ina219Config{.address = 0x40, .shunt_milliohm = 1000, .max_current_ma = 327});
  ASSERT_TRUE(ina.start());
  Ina219Sample s;
  EXPECT_FALSE(ina.read(s)) << "no conversion has completed yet";
  sim.clock.advance_ns(Ina219::kConversionUs * 1000 + 50'000);
  ASSERT_TRUE(ina.read(s));
  EXPECT_NEAR(s.bus_uv, 3.3e6, 4000);             // 4 mV LSB
  EXPECT_NEAR(s.current_ua, 12300, 20);           // 10 uA LSB
  EXPECT_NEAR(s.power_uw, 3.3 * 12300, 3.3 * 12300 * 0.01);
  EXPECT_EQ(s.flags, 0);
  EXPECT_FALSE(ina.read(s)) << "the same conversion is not read twice";
  sim.bus.fail_next(1);
  sim.clock.advance_ns(2'000'000);
  EXPECT_FALSE(ina.read(s));
  EXPECT_TRUE(ina.failed());
  EXPECT_TRUE(ina.read(s)) << "the next read recovers";
  Ina219 absent(&sim.i2c, Ina219Config{.address = 0x41});
  EXPECT_FALSE(absent.start());
}

/// The host's side of an in-memory link: what the firmware sent, decoded.
class MemoryLink final : public ByteLink {
 public:
  std::size_t read(uint8_t* dst, std::size_t capacity) override {
    std::size_t n = 0;
    while (n < capacity && !in.empty()) dst[n++] = in.front(), in.pop_front();
    return n;
  }
  bool write(const uint8_t* src, std::size_t n) override {
    decoder.feed(src, n, [&](const proto::Frame& f) {
      frames.push_back({f.type, std::vector<uint8_t>(f.payload, f.payload + f.payload_size)});
    });
    return true;
  }
  template <class Msg>
  void host_sends(const Msg& msg) {
    uint8_t buf[proto::kMaxEncodedFrameBytes];
    const std::size_t n = proto::encode_message(msg, seq++, buf, sizeof buf);
    in.insert(in.end(), buf, buf + n);
  }
  template <class Msg>
  std::vector<Msg> received() const {
    std::vector<Msg> out;
    for (const auto& [type, payload] : frames) {
      if (type != Msg::kType) continue;
      Msg m;
      const proto::Frame f{.type = type, .payload = payload.data(), .payload_size = payload.size()};
      if (proto::parse_message(f, m)) out.push_back(m);
    }
    return out;
  }
  std::deque<uint8_t> in;
  proto::Decoder decoder;
  std::vector<std::pair<proto::MsgType, std::vector<uint8_t>>> frames;
  uint16_t seq = 0;
};

class TickingClock final : public TickClock {
 public:
  uint64_t now_ticks() override { return t += 10; }  // 10 us per look
  [[nodiscard]] uint64_t tick_hz() const override { return 1'000'000; }
  uint64_t t = 0;
};

struct Bench {
  MemoryLink link;
  TickingClock clock;
  SimChip sim;
  std::vector<uint8_t> arena = std::vector<uint8_t>(16 * 1024);
  Ina219Config ina{.address = 0x40, .shunt_milliohm = 1000, .max_current_ma = 327};
  BoardInfo info{.kind = proto::BoardKind::kMkr1000, .name = "mkr1000", .firmware_version = 0x000100,
                 .ram_bytes = 32 * 1024, .rail_name = "VIN"};
  Firmware fw{info, Hal{.link = link, .clock = clock, .i2c = &sim.i2c, .storage = nullptr}, &ina,
              arena.data(), arena.size()};
  void run_until_done(int max_polls = 100'000) {
    for (int i = 0; i < max_polls && (fw.running() || !link.in.empty()); ++i) {
      fw.poll();
      sim.clock.advance_ns(100'000);
    }
  }
};

TEST(Firmware, SaysWhatBoardItIsWithItsRailAndTickRate) {
  Bench b;
  ASSERT_TRUE(b.fw.start());
  b.link.host_sends(proto::HelloRequest{});
  b.fw.poll();
  const auto hello = b.link.received<proto::Hello>();
  ASSERT_EQ(hello.size(), 1U);
  EXPECT_EQ(hello[0].board_kind, proto::BoardKind::kMkr1000);
  EXPECT_STREQ(hello[0].board_name, "mkr1000");
  EXPECT_EQ(hello[0].tick_hz, 1'000'000U);
  EXPECT_EQ(hello[0].ram_bytes, 32U * 1024);
  ASSERT_EQ(hello[0].rail_count, 1);
  EXPECT_STREQ(hello[0].rails[0].name, "VIN");
  b.link.host_sends(proto::SyncRequest{.sync_id = 4, .host_tx_ns = 77});
  b.fw.poll();
  const auto sync = b.link.received<proto::SyncReply>();
  ASSERT_EQ(sync.size(), 1U);
  EXPECT_EQ(sync[0].host_tx_ns, 77U);
  EXPECT_LE(sync[0].device_rx_ticks, sync[0].device_tx_ticks);
}

proto::PlanOp plan_op(uint32_t id, const profiler::OpShape& s, profiler::Phase phase, uint16_t windows = 1) {
  proto::PlanOp p;
  p.op_id = id;
  p.kind = static_cast<uint8_t>(s.kind);
  p.phase = static_cast<uint8_t>(phase);
  p.dim_count = s.dim_count;
  for (std::size_t i = 0; i < s.dim_count; ++i) p.dims[i] = s.dims[i];
  p.flops = s.flops;
  p.bytes_in = s.bytes_in;
  p.windows = windows;
  return p;
}

TEST(Firmware, RunsAPlanAndCountsWhatItSent) {
  Bench b;
  ASSERT_TRUE(b.fw.start());
  b.link.host_sends(plan_op(1, profiler::idle(2000), profiler::Phase::kIdle));
  b.link.host_sends(plan_op(2, profiler::conv2d(1, 3, 4, 8, 8, 3, profiler::Phase::kForward), profiler::Phase::kForward, 2));
  b.link.host_sends(plan_op(3, profiler::conv2d(1, 3, 4, 8, 8, 3, profiler::Phase::kBackward), profiler::Phase::kBackward, 2));
  b.link.host_sends(plan_op(4, profiler::linear(2, 32, 8, profiler::Phase::kForward), profiler::Phase::kForward));
  b.link.host_sends(proto::Start{.run_tag = 9, .op_count = 4, .loops = 1, .min_window_us = 500});
  b.run_until_done();
  const auto done = b.link.received<proto::RunDone>();
  ASSERT_EQ(done.size(), 1U);
  EXPECT_EQ(done[0].end, proto::RunEnd::kCompleted);
  const auto spans = b.link.received<proto::OpSpanMsg>();
  EXPECT_EQ(spans.size(), 6U);
  EXPECT_EQ(done[0].spans_sent, spans.size());
  uint32_t samples = 0;
  for (const auto& batch : b.link.received<proto::PowerBatch>()) samples += batch.count;
  EXPECT_GT(samples, 0U);
  EXPECT_EQ(done[0].samples_sent, samples);
  for (const auto& s : spans) {
    EXPECT_GE(s.end_ticks - s.begin_ticks, s.op_id == 1 ? 2000U : 500U) << s.op_id;
    EXPECT_GE(s.repetitions, 1U);
  }
}

TEST(Firmware, RefusesWhatItCannotRunWithAReasonAndRunsTheNextPlan) {
  Bench b;
  ASSERT_TRUE(b.fw.start());
  auto refused = [&](uint32_t tag) {
    b.run_until_done();
    for (const auto& d : b.link.received<proto::RunDone>())
      if (d.run_tag == tag) return d.end == proto::RunEnd::kFailed;
    return false;
  };
  auto last_log = [&] {
    const auto logs = b.link.received<proto::Log>();
    return logs.empty() ? std::string() : std::string(logs.back().text, logs.back().length);
  };
  // Too big for a 16 KiB arena.
  b.link.host_sends(plan_op(1, profiler::linear(1, 1024, 1024, profiler::Phase::kForward), profiler::Phase::kForward));
  b.link.host_sends(proto::Start{.run_tag = 1, .op_count = 1, .loops = 1});
  EXPECT_TRUE(refused(1));
  EXPECT_NE(last_log().find("does not fit"), std::string::npos) << last_log();
  // Paging without storage.
  b.link.host_sends(plan_op(1, profiler::paging(4096), profiler::Phase::kPageOut));
  b.link.host_sends(proto::Start{.run_tag = 2, .op_count = 1, .loops = 1});
  EXPECT_TRUE(refused(2));
  EXPECT_NE(last_log().find("storage"), std::string::npos) << last_log();
  // A kind it has no kernel for, and a compute without dims.
  profiler::OpShape gelu;
  gelu.kind = profiler::OpKind::kGelu;
  gelu.dims[0] = 64;
  gelu.dim_count = 1;
  b.link.host_sends(plan_op(1, gelu, profiler::Phase::kForward));
  b.link.host_sends(proto::Start{.run_tag = 3, .op_count = 1, .loops = 1});
  EXPECT_TRUE(refused(3));
  EXPECT_NE(last_log().find("no kernel"), std::string::npos) << last_log();
  // Executing on real tensors.
  b.link.host_sends(plan_op(1, profiler::relu(64, profiler::Phase::kForward), profiler::Phase::kForward));
  b.link.host_sends(proto::Start{.run_tag = 4, .mode = proto::StartMode::kExecute, .op_count = 1, .loops = 1});
  EXPECT_TRUE(refused(4));
  EXPECT_NE(last_log().find("ergon-agent"), std::string::npos) << last_log();
  // A plan longer than the firmware holds.
  for (uint32_t i = 0; i < kMaxPlanOps + 1; ++i)
    b.link.host_sends(plan_op(i, profiler::relu(64, profiler::Phase::kForward), profiler::Phase::kForward));
  b.link.host_sends(proto::Start{.run_tag = 5, .op_count = static_cast<uint16_t>(kMaxPlanOps + 1), .loops = 1});
  EXPECT_TRUE(refused(5));
  EXPECT_NE(last_log().find("holds"), std::string::npos) << last_log();
  // And then a plan it can run.
  b.link.host_sends(plan_op(1, profiler::relu(64, profiler::Phase::kForward), profiler::Phase::kForward));
  b.link.host_sends(proto::Start{.run_tag = 6, .op_count = 1, .loops = 1});
  b.run_until_done();
  EXPECT_EQ(b.link.received<proto::RunDone>().back().end, proto::RunEnd::kCompleted);
}

TEST(Firmware, StopEndsTheRunAndARepeatedStopRepeatsRunDone) {
  Bench b;
  ASSERT_TRUE(b.fw.start());
  b.link.host_sends(plan_op(1, profiler::relu(64, profiler::Phase::kForward), profiler::Phase::kForward));
  b.link.host_sends(proto::Start{.run_tag = 7, .op_count = 1, .loops = 0, .min_window_us = 100});
  for (int i = 0; i < 50; ++i) b.fw.poll();
  EXPECT_TRUE(b.fw.running()) << "loops 0 runs until stopped";
  b.link.host_sends(proto::Stop{});
  b.run_until_done();
  ASSERT_EQ(b.link.received<proto::RunDone>().size(), 1U);
  EXPECT_EQ(b.link.received<proto::RunDone>()[0].end, proto::RunEnd::kStopped);
  b.link.host_sends(proto::Stop{});
  b.fw.poll();
  EXPECT_EQ(b.link.received<proto::RunDone>().size(), 2U);
}

}  // namespace
}  // namespace ergon::devices::cortexm
