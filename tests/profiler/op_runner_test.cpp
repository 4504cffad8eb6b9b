#include "profiler/op_runner.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "common/error.h"

namespace ergon::profiler {
namespace {

OpShape shape_of(OpKind kind, std::initializer_list<uint32_t> dims) {
  OpShape s;
  s.kind = kind;
  for (uint32_t d : dims) s.dims[s.dim_count++] = d;
  return s;
}

class OpRunnerTest : public ::testing::Test {
 protected:
  std::filesystem::path dir_ =
      std::filesystem::temp_directory_path() / ("ergon-op-runner-" + std::to_string(::getpid()));
  void TearDown() override { std::filesystem::remove_all(dir_); }
};

TEST_F(OpRunnerTest, RunsEveryOpKindOfTheZooForwardAndBackward) {
  OpRunner runner(dir_);
  const OpShape shapes[] = {
      shape_of(OpKind::kConv2d, {2, 3, 8, 9, 9, 3}),
      shape_of(OpKind::kConv2d, {2, 8, 16, 9, 9, conv_window(3, 2, false)}),
      shape_of(OpKind::kConv2d, {2, 8, 8, 9, 9, conv_window(3, 2, true)}),
      shape_of(OpKind::kLinear, {4, 16, 8}),
      shape_of(OpKind::kRelu, {100}),
      shape_of(OpKind::kRelu6, {100}),
      shape_of(OpKind::kGelu, {100}),
      shape_of(OpKind::kTanh, {100}),
      shape_of(OpKind::kAdd, {100}),
      shape_of(OpKind::kMaxPool, {2, 3, 8, 8, 2}),
      shape_of(OpKind::kBatchNorm, {2, 3, 16}),
      shape_of(OpKind::kLayerNorm, {6, 16}),
      shape_of(OpKind::kAvgPool, {2, 3, 16}),
      shape_of(OpKind::kEmbedding, {2, 5, 8, 50, 5, 2}),
      shape_of(OpKind::kAttentionScores, {2, 5, 8, 2, 1}),
      shape_of(OpKind::kAttentionContext, {2, 5, 8, 2}),
      shape_of(OpKind::kCrossEntropy, {4, 10}),
  };
  for (const OpShape& s : shapes) {
    SCOPED_TRACE(std::string(to_string(s.kind)) + " " + dims_text(s));
    EXPECT_NO_THROW(runner.run(s, Phase::kForward));
    EXPECT_NO_THROW(runner.run(s, Phase::kBackward));
    EXPECT_NO_THROW(runner.run(s, Phase::kRecompute));
  }
}

TEST_F(OpRunnerTest, CopiesAskedBeyondWhatTheBoardShouldHoldAreRefusedWithTheirSize) {
  OpRunner runner(dir_);
  const OpShape add = shape_of(OpKind::kAdd, {1 << 20});  // 12 MiB of tensors a copy
  EXPECT_NO_THROW(runner.run(add, Phase::kForward, 1));
  EXPECT_NO_THROW(runner.run(add, Phase::kForward, 2));
  try {
    runner.run(add, Phase::kForward, 100);  // 1.2 GiB
    FAIL() << "expected a DeviceError";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("100 copies"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("MiB"), std::string::npos) << e.what();
  }
}

TEST_F(OpRunnerTest, AComputeOpWithoutItsDimensionsIsRefusedNotTimedAsNothing) {
  OpRunner runner(dir_);
  OpShape work;  // what a host that knew only FLOPs would send
  work.kind = OpKind::kConv2d;
  work.flops = 1'000'000;
  try {
    runner.run(work, Phase::kForward);
    FAIL() << "expected a DeviceError";
  } catch (const DeviceError& e) {
    EXPECT_NE(std::string(e.what()).find("conv2d"), std::string::npos) << e.what();
  }
  EXPECT_THROW(runner.run(shape_of(OpKind::kLinear, {4, 0, 8}), Phase::kForward), DeviceError);
}

TEST(OpKinds, EveryCodeRoundTripsAndConvWindowsPackKernelStrideAndDepthwise) {
  for (uint8_t code = 1; code <= static_cast<uint8_t>(kLastOpKind); ++code) {
    const auto kind = op_kind_from_code(code);
    ASSERT_TRUE(kind) << int{code};
    EXPECT_NE(to_string(*kind), "unknown");
  }
  EXPECT_FALSE(op_kind_from_code(static_cast<uint8_t>(kLastOpKind) + 1));
  EXPECT_EQ(conv_window(3, 1, false), 3U);  // what protocol v2 hosts sent
  const uint32_t w = conv_window(7, 2, true);
  EXPECT_EQ(conv_kernel(w), 7U);
  EXPECT_EQ(conv_stride(w), 2U);
  EXPECT_TRUE(conv_depthwise(w));
  EXPECT_EQ(conv_stride(3), 1U);
}

}  // namespace
}  // namespace ergon::profiler
