#include "planner/zoo.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <set>
#include <string>

#include "common/error.h"
#include "planner/graph.h"

namespace ergon::planner {
namespace {

const ForwardOp& op_named(const ForwardGraph& g, const std::string& name) {
  for (const auto& op : g.ops)
    if (op.name == name) return op;
  ADD_FAILURE() << g.name << " has no op " << name;
  static const ForwardOp kMissing;
  return kMissing;
}

uint64_t activation_bytes(const ForwardGraph& g) {
  uint64_t total = 0;
  for (const auto& op : g.ops) total += op.output_bytes;
  return total;
}

double relative_error(double actual, double expected) {
  return std::abs(actual - expected) / expected;
}

/// Number of parameters (fp32, so bytes / 4).
double params_of(const std::string& model) {
  return static_cast<double>(zoo_model(model, 1).param_bytes()) / 4.0;
}

/// Costs one second per node and nothing to page: only the graph's shape matters here.
class UnitCosts : public CostModel {
 public:
  NodeCost compute(const std::string&, NodePhase, uint64_t, uint64_t) const override { return {1, 1}; }
  NodeCost page_in(uint64_t) const override { return {}; }
  NodeCost page_out(uint64_t) const override { return {}; }
};

TEST(Zoo, ResNet18CifarFirstConvHasHandComputedFlopsAndOutput) {
  const ForwardGraph g = zoo_model("resnet18-cifar", 1);
  const ForwardOp& conv = g.ops.front();
  EXPECT_EQ(conv.name, "conv1");
  EXPECT_EQ(conv.op, "conv2d");
  EXPECT_EQ(conv.inputs, std::vector<int>{kGraphInput});
  EXPECT_EQ(conv.forward_flops, 2ULL * 64 * 32 * 32 * 3 * 9);
  EXPECT_EQ(conv.forward_flops, 3'538'944U);
  EXPECT_EQ(conv.output_bytes, 64ULL * 32 * 32 * 4);
  EXPECT_EQ(conv.output_bytes, 262'144U);
  EXPECT_EQ(conv.param_bytes, 64ULL * 3 * 9 * 4);
  EXPECT_EQ(g.input_bytes, 3ULL * 32 * 32 * 4);
  EXPECT_TRUE(conv.backward_needs_inputs);
  EXPECT_FALSE(conv.backward_needs_output);
}

TEST(Zoo, BackwardOfAWeightedLayerIsTwiceForwardExceptOnTheDataBatch) {
  const ForwardGraph g = zoo_model("resnet18-cifar", 2);
  // The first conv only needs weight gradients: the data batch's gradient is never used.
  EXPECT_EQ(g.ops.front().backward_flops, g.ops.front().forward_flops);
  const ForwardOp& conv = op_named(g, "layer1.0.conv1");
  EXPECT_EQ(conv.forward_flops, 2ULL * 2 * 64 * 32 * 32 * 64 * 9);
  EXPECT_EQ(conv.backward_flops, 2 * conv.forward_flops);
}

TEST(Zoo, ResNetDownsamplesTheShortcutWhereTheShapeChanges) {
  const ForwardGraph g = zoo_model("resnet18-cifar", 1);
  const ForwardOp& down = op_named(g, "layer2.0.downsample.0");
  EXPECT_EQ(down.op, "conv2d");
  EXPECT_EQ(down.param_bytes, 128ULL * 64 * 4);
  EXPECT_EQ(down.output_bytes, 128ULL * 16 * 16 * 4);
  const ForwardOp& add = op_named(g, "layer2.0.add");
  ASSERT_EQ(add.inputs.size(), 2U);
  EXPECT_EQ(g.ops[add.inputs[1]].name, "layer2.0.downsample.1");
  EXPECT_FALSE(add.backward_needs_inputs);
  EXPECT_FALSE(add.backward_needs_output);
  for (const auto& op : g.ops) EXPECT_EQ(op.name.find("layer1.0.downsample"), std::string::npos);
}

TEST(Zoo, ResNet18CifarHasAboutSixtySixForwardOps) {
  const ForwardGraph g = zoo_model("resnet18-cifar", 1);
  // Stem 3, 8 blocks x 7, 3 downsamples x 2, avgpool, fc.
  EXPECT_EQ(g.ops.size(), 67U);
}

TEST(Zoo, TrainingGraphsHaveTwoNodesPerOpPlusTheLoss) {
  EXPECT_EQ(build_training_graph(zoo_model("mlp", 1), UnitCosts{}).size(), 27);
  EXPECT_EQ(build_training_graph(zoo_model("resnet18-cifar", 1), UnitCosts{}).size(), 135);
  for (const auto& entry : zoo_models()) {
    SCOPED_TRACE(entry.name);
    const ForwardGraph g = zoo_model(entry.name, 1);
    EXPECT_EQ(build_training_graph(g, UnitCosts{}).size(), 2 * static_cast<int>(g.ops.size()) + 1);
  }
}

TEST(Zoo, MlpHasThirteenForwardOpsAsInPoet) {
  const ForwardGraph g = zoo_model("mlp", 3);
  ASSERT_EQ(g.ops.size(), 13U);
  EXPECT_EQ(g.input_bytes, 3ULL * 784 * 4);
  EXPECT_EQ(g.ops[0].forward_flops, 2ULL * 3 * 784 * 1024);
  EXPECT_EQ(g.ops[1].op, "relu");
  EXPECT_TRUE(g.ops[1].backward_needs_output);
  EXPECT_FALSE(g.ops[1].backward_needs_inputs);
  EXPECT_EQ(g.ops.back().output_bytes, 3ULL * 10 * 4);
}

TEST(Zoo, Vgg16FullyConnectedLayerHasHandComputedCosts) {
  const ForwardGraph g = zoo_model("vgg16", 2);
  const ForwardOp& fc6 = op_named(g, "classifier.fc6");
  EXPECT_EQ(fc6.op, "linear");
  EXPECT_EQ(fc6.forward_flops, 2ULL * 2 * 25088 * 4096);
  EXPECT_EQ(fc6.backward_flops, 2 * fc6.forward_flops);
  EXPECT_EQ(fc6.param_bytes, (25088ULL * 4096 + 4096) * 4);
  EXPECT_EQ(fc6.output_bytes, 2ULL * 4096 * 4);
  EXPECT_EQ(g.ops[fc6.inputs.at(0)].name, "features.pool5");
  EXPECT_EQ(g.ops[fc6.inputs.at(0)].output_bytes, 2ULL * 512 * 7 * 7 * 4);
}

TEST(Zoo, BertAttentionScoresOutputIsOneScorePerHeadAndTokenPair) {
  const int n = 4;
  const ForwardGraph g = zoo_model("bert-base", n);
  const ForwardOp& scores = op_named(g, "layer.0.attention.scores");
  EXPECT_EQ(scores.op, "attention_scores");
  EXPECT_EQ(scores.output_bytes, 4ULL * 12 * 128 * 128 * 4);
  EXPECT_TRUE(scores.backward_needs_inputs);
  EXPECT_TRUE(scores.backward_needs_output);
  EXPECT_EQ(g.ops[scores.inputs.at(0)].name, "layer.0.attention.qkv");
  const ForwardOp& context = op_named(g, "layer.0.attention.context");
  EXPECT_EQ(context.output_bytes, 4ULL * 128 * 768 * 4);
  EXPECT_EQ(context.forward_flops, 2ULL * 4 * 128 * 128 * 768);
  ASSERT_EQ(context.inputs.size(), 2U);
  EXPECT_EQ(g.ops[context.inputs[0]].name, "layer.0.attention.scores");
  EXPECT_EQ(g.ops[context.inputs[1]].name, "layer.0.attention.qkv");
  EXPECT_EQ(g.input_bytes, 4ULL * 128 * 8);
  EXPECT_EQ(g.ops.back().name, "classifier");
  EXPECT_EQ(g.ops.back().output_bytes, 4ULL * 2 * 4);
}

TEST(Zoo, EmbeddingSavesNothingForBackward) {
  const ForwardGraph g = zoo_model("bert-tiny", 1);
  const ForwardOp& emb = g.ops.front();
  EXPECT_EQ(emb.op, "embedding");
  EXPECT_EQ(emb.inputs, std::vector<int>{kGraphInput});
  EXPECT_FALSE(emb.backward_needs_inputs);
  EXPECT_FALSE(emb.backward_needs_output);
  EXPECT_EQ(emb.output_bytes, 128ULL * 128 * 4);
}

TEST(Zoo, Gpt2LmHeadIsTiedAndCoversEveryToken) {
  const ForwardGraph g = zoo_model("gpt2", 1);
  const ForwardOp& head = g.ops.back();
  EXPECT_EQ(head.name, "lm_head");
  EXPECT_EQ(head.param_bytes, 0U);
  EXPECT_EQ(head.output_bytes, 1024ULL * 50257 * 4);
  EXPECT_EQ(head.forward_flops, 2ULL * 1024 * 768 * 50257);
}

TEST(Zoo, ParameterCountsMatchPublishedOnes) {
  EXPECT_LT(relative_error(params_of("resnet18"), 11.7e6), 0.01);
  EXPECT_LT(relative_error(static_cast<double>(zoo_model("resnet18", 1).param_bytes()), 46.8e6),
            0.01);
  EXPECT_LT(relative_error(params_of("resnet50"), 25.6e6), 0.01);
  EXPECT_LT(relative_error(params_of("vgg16"), 138.4e6), 0.01);
  EXPECT_LT(relative_error(params_of("mobilenetv2"), 3.5e6), 0.01);
  EXPECT_LT(relative_error(params_of("bert-base"), 110e6), 0.01);
  EXPECT_LT(relative_error(params_of("bert-tiny"), 4.4e6), 0.01);
  EXPECT_LT(relative_error(params_of("gpt2"), 124e6), 0.01);
  // Exact torchvision counts.
  EXPECT_EQ(params_of("resnet18"), 11'689'512.0);
  EXPECT_EQ(params_of("resnet50"), 25'557'032.0);
  EXPECT_EQ(params_of("vgg16"), 138'357'544.0);
  EXPECT_EQ(params_of("mobilenetv2"), 3'504'872.0);
}

TEST(Zoo, ForwardFlopsMatchPublishedOnes) {
  // ResNet-18: 1.82 G multiply-adds; ResNet-50: 4.1 G; VGG-16: 15.5 G; MobileNetV2: 300 M.
  const auto gflops = [](const std::string& m) {
    return static_cast<double>(zoo_model(m, 1).forward_flops()) / 1e9;
  };
  EXPECT_LT(relative_error(gflops("resnet18"), 3.64), 0.05);
  EXPECT_LT(relative_error(gflops("resnet50"), 8.2), 0.05);
  EXPECT_LT(relative_error(gflops("vgg16"), 31.0), 0.05);
  EXPECT_LT(relative_error(gflops("mobilenetv2"), 0.6), 0.15);
}

TEST(Zoo, EveryModelIsAWellFormedGraph) {
  ASSERT_GE(zoo_models().size(), 12U);
  for (const auto& entry : zoo_models()) {
    SCOPED_TRACE(entry.name);
    EXPECT_FALSE(entry.description.empty());
    const ForwardGraph g = zoo_model(entry.name, 1);
    EXPECT_EQ(g.name, entry.name);
    EXPECT_GT(g.input_bytes, 0U);
    ASSERT_FALSE(g.ops.empty());
    std::set<std::string> names;
    for (int i = 0; i < static_cast<int>(g.ops.size()); ++i) {
      const ForwardOp& op = g.ops[i];
      EXPECT_TRUE(names.insert(op.name).second) << "duplicate op " << op.name;
      EXPECT_FALSE(op.op.empty());
      EXPECT_FALSE(op.inputs.empty()) << op.name;
      for (int in : op.inputs) EXPECT_TRUE(in == kGraphInput || (in >= 0 && in < i)) << op.name;
      EXPECT_GT(op.output_bytes, 0U) << op.name;
      EXPECT_EQ(op.output_bytes % 4, 0U) << op.name;
      EXPECT_GT(op.forward_flops, 0U) << op.name;
    }
    // Every op but the logits feeds a later op.
    std::vector<bool> used(g.ops.size(), false);
    for (const auto& op : g.ops)
      for (int in : op.inputs)
        if (in != kGraphInput) used[in] = true;
    for (std::size_t i = 0; i + 1 < g.ops.size(); ++i) EXPECT_TRUE(used[i]) << g.ops[i].name;
    EXPECT_GT(g.param_bytes(), 0U);
  }
}

TEST(Zoo, DoublingTheBatchDoublesActivationsButNotParameters) {
  for (const auto& entry : zoo_models()) {
    SCOPED_TRACE(entry.name);
    const ForwardGraph one = zoo_model(entry.name, 1);
    const ForwardGraph two = zoo_model(entry.name, 2);
    EXPECT_EQ(activation_bytes(two), 2 * activation_bytes(one));
    EXPECT_EQ(two.input_bytes, 2 * one.input_bytes);
    EXPECT_EQ(two.forward_flops(), 2 * one.forward_flops());
    EXPECT_EQ(two.param_bytes(), one.param_bytes());
  }
}

TEST(Zoo, UnknownModelNameListsTheKnownOnes) {
  try {
    (void)zoo_model("resnet19", 1);
    FAIL() << "expected InputError";
  } catch (const InputError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("resnet19"), std::string::npos);
    for (const auto& entry : zoo_models())
      EXPECT_NE(what.find(entry.name), std::string::npos) << entry.name;
  }
}

TEST(Zoo, BatchOutsideOneTo65536IsRejected) {
  EXPECT_THROW((void)zoo_model("mlp", 0), InputError);
  EXPECT_THROW((void)zoo_model("resnet18", -3), InputError);
  EXPECT_THROW((void)zoo_model("gpt2", 65537), InputError);
  EXPECT_NO_THROW((void)zoo_model("mlp", 65536));
}

}  // namespace
TEST(Zoo, AnMlpOfAnyWidthsIsBuiltFromItsName) {
  const ForwardGraph g = zoo_model("mlp:64,32,10", 4);
  ASSERT_EQ(g.ops.size(), 3U);  // fc1, relu1, fc2
  EXPECT_EQ(g.ops[0].op, "linear");
  EXPECT_EQ(g.ops[0].forward_flops, 2U * 4 * 64 * 32);
  EXPECT_EQ(g.ops[0].param_bytes, (64U * 32 + 32) * 4);
  EXPECT_EQ(g.ops[2].shape, (std::vector<uint64_t>{4, 10}));
  EXPECT_EQ(g.input_bytes, 4U * 64 * 4);
  for (const char* bad : {"mlp:", "mlp:64", "mlp:64,,10", "mlp:64,0,10", "mlp:64,x,10", "mlp:99999999,2"})
    EXPECT_THROW((void)zoo_model(bad, 1), InputError) << bad;
}

}  // namespace ergon::planner
