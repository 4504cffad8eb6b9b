#include "app/step_plans.h"

#include <gtest/gtest.h>

#include <string>

#include "app/board_costs.h"
#include "devices/board_profile.h"
#include "planner/onnx_import.h"
#include "planner/zoo.h"

namespace ergon::cli {
namespace {

planner::TrainingGraph zoo_graph(const std::string& model, int batch) {
  return planner::build_training_graph(planner::zoo_model(model, batch),
                                       app::BoardProfileCosts(*devices::find_board("pi4")));
}

/// The op kind name a node runs as: its own op's (the loss: cross_entropy).
std::string expected_kind(const planner::TrainingNode& node) { return node.op; }

TEST(NodeShapes, EveryNodeOfTheConvAndTransformerModelsRunsItsOwnKernelWithThePlannersCounts) {
  for (const char* model : {"mlp", "resnet18-cifar", "mobilenetv2-cifar", "vgg16-cifar", "bert-tiny"}) {
    SCOPED_TRACE(model);
    const auto g = zoo_graph(model, 2);
    for (const auto& node : g.nodes) {
      SCOPED_TRACE(node.name);
      const profiler::OpShape s = app::node_shape(g, node.id);
      EXPECT_EQ(std::string(profiler::to_string(s.kind)), expected_kind(node));
      EXPECT_EQ(s.flops, node.flops);
      EXPECT_EQ(s.bytes_in, node.bytes_touched);
      ASSERT_GT(s.dim_count, 0);
      for (uint8_t d = 0; d < std::min<uint8_t>(s.dim_count, 3); ++d) EXPECT_GT(s.dims[d], 0U);
    }
  }
}

TEST(NodeShapes, ConvolutionAndLinearDimsDoTheWorkThePlannerCounts) {
  // The kernel's own arithmetic at the sent dims equals the zoo's forward FLOPs.
  for (const char* model : {"resnet18-cifar", "mobilenetv2-cifar", "bert-tiny"}) {
    SCOPED_TRACE(model);
    const auto g = zoo_graph(model, 2);
    for (const auto& node : g.nodes) {
      if (node.phase != planner::NodePhase::kForward) continue;
      const profiler::OpShape s = app::node_shape(g, node.id);
      const auto& d = s.dims;
      uint64_t macs = 0;
      if (s.kind == profiler::OpKind::kConv2d) {
        const uint32_t k = profiler::conv_kernel(d[5]), st = profiler::conv_stride(d[5]);
        const uint64_t oh = (d[3] + 2 * (k / 2) - k) / st + 1, ow = (d[4] + 2 * (k / 2) - k) / st + 1;
        const uint64_t in_per_group = profiler::conv_depthwise(d[5]) ? 1 : d[1];
        macs = uint64_t{d[0]} * d[2] * oh * ow * in_per_group * k * k;
      } else if (s.kind == profiler::OpKind::kLinear) {
        macs = uint64_t{d[0]} * d[1] * d[2];
      } else {
        continue;
      }
      EXPECT_EQ(2 * macs, node.flops) << node.name;
    }
  }
}

TEST(NodeShapes, GraphsWithoutShapesRunAMatrixProductOfTheNodesWork) {
  // GPT-2's lm_head shares the embedding's weights (no kernel for that): by work.
  const auto gpt2 = zoo_graph("gpt2", 1);
  const int lm_head = static_cast<int>(gpt2.forward->ops.size()) - 1;
  const profiler::OpShape s = app::node_shape(gpt2, lm_head);
  EXPECT_EQ(s.kind, profiler::OpKind::kLinear);
  const double work = 2.0 * s.dims[0] * s.dims[1] * s.dims[2];
  EXPECT_NEAR(work, static_cast<double>(gpt2.nodes[static_cast<std::size_t>(lm_head)].flops),
              0.05 * static_cast<double>(gpt2.nodes[static_cast<std::size_t>(lm_head)].flops));

  // An ONNX graph carries no shapes the kernels take: every compute runs by its work.
  const auto onnx = planner::import_onnx(std::string(ERGON_TEST_DATA_DIR) + "/onnx/tiny_cnn.onnx");
  const auto g = planner::build_training_graph(onnx, app::BoardProfileCosts(*devices::find_board("pi4")));
  for (const auto& node : g.nodes) {
    const profiler::OpShape shape = app::node_shape(g, node.id);
    EXPECT_EQ(shape.kind, profiler::OpKind::kLinear) << node.name;
    EXPECT_GT(shape.dims[0] * shape.dims[1] * shape.dims[2], 0U) << node.name;
    EXPECT_EQ(shape.flops, node.flops);
  }
}

}  // namespace
}  // namespace ergon::cli
