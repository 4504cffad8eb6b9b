#include "planner/zoo.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/error.h"

// FLOP conventions (a multiply-add is 2 FLOPs; the same as profiler/op.cpp, so a cost model
// calibrated on profiled layers applies). Per element of the op's output unless said otherwise:
//   conv2d, linear     forward 2*MACs, bias adds not counted; backward 2x forward (gradients
//                      w.r.t. the input and the weights), but 1x for a layer that reads only the
//                      data batch: its gradient is never needed (build_training_graph agrees).
//   batchnorm,         forward 7 (sum 1, sum of squares 2, normalize 2, scale and shift 2);
//   layernorm          backward 9 (dgamma and dbeta reductions 3, xhat again 2, dx 4).
//   relu               forward 1 (compare), backward 1 (mask).
//   relu6              forward 2 (two clamps), backward 2.
//   gelu (tanh form)   forward 8, backward 12.
//   tanh               forward 4, backward 3 (dy * (1 - y^2)).
//   add                forward 1, backward 0 (the gradient is passed on as is).
//   maxpool k x k      forward k^2 comparisons, backward 1 (scatter to the arg-max).
//   global avgpool     forward 1 per input element, backward 1 per input element.
//   embedding          lookups are copies: forward 1 per extra table summed, backward 1 per
//                      table (scatter-add into it).
//   attention_scores   forward QK^T (2*N*T*T*D) + per score scale 1, causal mask 1 (GPT-2) and
//                      softmax 5 (max, subtract, exp, sum, divide); backward dQ and dK
//                      (2 x 2*N*T*T*D) + per score softmax 4 and scale 1.
//   attention_context  forward P*V (2*N*T*T*D); backward dP and dV (2 x 2*N*T*T*D).
// What backward saves follows PyTorch autograd: conv, linear, batchnorm, layernorm, gelu and
// maxpool their inputs; relu, relu6, tanh and softmax their output; add, avgpool and embedding
// nothing. Dropout is not modelled (it would save a mask per site). Batchnorm running statistics
// are buffers, not parameters, and are left out as in published parameter counts.

namespace ergon::planner {
namespace {

constexpr uint64_t kFloatBytes = 4;    // fp32 activations and weights
constexpr uint64_t kTokenIdBytes = 8;  // int64 token ids, as PyTorch embeddings take them
constexpr int kMaxBatch = 1 << 16;     // keeps every byte and FLOP count far inside uint64_t

enum class Bias { kNone, kWith };
enum class Weights { kOwn, kTied };  // tied: shares an earlier op's parameters
enum class Tokens { kAll, kFirst };  // kFirst: only the [CLS] token of (N, T, D)
enum class Saves { kInputs, kOutput, kBoth, kNothing };
enum class Mask { kNone, kCausal };

struct Tensor {
  int op = kGraphInput;
  std::vector<uint64_t> shape;  // (N, C, H, W), (N, T, D) or (N, features)

  [[nodiscard]] uint64_t elements() const {
    uint64_t n = 1;
    for (uint64_t d : shape) n *= d;
    return n;
  }
  [[nodiscard]] uint64_t batch() const { return shape.front(); }
  [[nodiscard]] uint64_t channels() const { return shape[1]; }
  [[nodiscard]] uint64_t last() const { return shape.back(); }
};

uint64_t conv_out(uint64_t size, uint64_t kernel, uint64_t stride, uint64_t padding) {
  return (size + 2 * padding - kernel) / stride + 1;
}

/// Appends ops to a forward graph, tracking the shape of every tensor so output sizes, FLOPs and
/// parameter sizes follow from shapes.
class Builder {
 public:
  Builder(std::string name, std::vector<uint64_t> input_shape, uint64_t input_element_bytes) {
    graph_.name = std::move(name);
    input_.shape = std::move(input_shape);
    graph_.input_shape = input_.shape;
    graph_.input_bytes = input_.elements() * input_element_bytes;
  }

  [[nodiscard]] const Tensor& input() const { return input_; }

  Tensor conv(const std::string& name, const Tensor& x, uint64_t out_channels, uint64_t kernel,
              uint64_t stride, uint64_t padding, uint64_t groups = 1, Bias bias = Bias::kNone) {
    const uint64_t in_channels = x.channels();
    const uint64_t h = conv_out(x.shape[2], kernel, stride, padding);
    const uint64_t w = conv_out(x.shape[3], kernel, stride, padding);
    const std::vector<uint64_t> out{x.batch(), out_channels, h, w};
    const uint64_t weights = out_channels * (in_channels / groups) * kernel * kernel;
    const uint64_t macs =
        x.batch() * out_channels * h * w * (in_channels / groups) * kernel * kernel;
    const uint64_t params = weights + (bias == Bias::kWith ? out_channels : 0);
    attrs_ = {kernel, stride, padding, groups, bias == Bias::kWith};
    return weighted(name, "conv2d", x, out, 2 * macs, params);
  }

  Tensor linear(const std::string& name, const Tensor& x, uint64_t out_features,
                Bias bias = Bias::kWith, Weights tied = Weights::kOwn,
                Tokens tokens = Tokens::kAll) {
    const uint64_t in_features = x.last();
    std::vector<uint64_t> out = x.shape;
    if (tokens == Tokens::kFirst) out = {x.batch(), in_features};
    out.back() = out_features;
    const uint64_t rows = elements_of(out) / out_features;
    uint64_t params = 0;
    if (tied == Weights::kOwn)
      params = in_features * out_features + (bias == Bias::kWith ? out_features : 0);
    attrs_ = {0, 1, 0, 1, bias == Bias::kWith};
    Tensor y = weighted(name, "linear", x, out, 2 * rows * in_features * out_features, params);
    graph_.ops.back().first_token_only = tokens == Tokens::kFirst;
    graph_.ops.back().tied_weights = tied == Weights::kTied;
    return y;
  }

  Tensor batchnorm(const std::string& name, const Tensor& x) {
    return elementwise(name, "batchnorm", x, 7, 9, 2 * x.channels(), Saves::kInputs);
  }
  Tensor layernorm(const std::string& name, const Tensor& x) {
    return elementwise(name, "layernorm", x, 7, 9, 2 * x.last(), Saves::kInputs);
  }
  Tensor relu(const std::string& name, const Tensor& x) {
    return elementwise(name, "relu", x, 1, 1, 0, Saves::kOutput);
  }
  Tensor relu6(const std::string& name, const Tensor& x) {
    return elementwise(name, "relu6", x, 2, 2, 0, Saves::kOutput);
  }
  Tensor gelu(const std::string& name, const Tensor& x) {
    return elementwise(name, "gelu", x, 8, 12, 0, Saves::kInputs);
  }
  Tensor tanh(const std::string& name, const Tensor& x) {
    return elementwise(name, "tanh", x, 4, 3, 0, Saves::kOutput);
  }

  Tensor add(const std::string& name, const Tensor& a, const Tensor& b) {
    ForwardOp op = make(name, "add", {a.op, b.op}, Saves::kNothing);
    op.forward_flops = a.elements();
    return push(std::move(op), a.shape);
  }

  Tensor maxpool(const std::string& name, const Tensor& x, uint64_t kernel, uint64_t stride,
                 uint64_t padding) {
    const std::vector<uint64_t> out{x.batch(), x.channels(),
                                    conv_out(x.shape[2], kernel, stride, padding),
                                    conv_out(x.shape[3], kernel, stride, padding)};
    ForwardOp op = make(name, "maxpool", {x.op}, Saves::kInputs);
    op.kernel = kernel;
    op.stride = stride;
    op.padding = padding;
    op.forward_flops = elements_of(out) * kernel * kernel;
    op.backward_flops = elements_of(out);
    return push(std::move(op), out);
  }

  /// Averages over H and W; the (N, C) result is what the classifier reads (flatten is free).
  Tensor global_avgpool(const std::string& name, const Tensor& x) {
    ForwardOp op = make(name, "avgpool", {x.op}, Saves::kNothing);
    op.forward_flops = x.elements();
    op.backward_flops = x.elements();
    return push(std::move(op), {x.batch(), x.channels()});
  }

  /// Sums `tables` lookups (rows, dim) per token of the (N, T) ids into (N, T, dim).
  Tensor embedding(const std::string& name, const Tensor& ids,
                   const std::vector<uint64_t>& table_rows, uint64_t dim) {
    const std::vector<uint64_t> out{ids.shape[0], ids.shape[1], dim};
    ForwardOp op = make(name, "embedding", {ids.op}, Saves::kNothing);
    const uint64_t tables = table_rows.size();
    op.forward_flops = elements_of(out) * (tables - 1);
    op.backward_flops = elements_of(out) * tables;
    for (uint64_t rows : table_rows) op.param_bytes += rows * dim * kFloatBytes;
    op.table_rows = table_rows;
    return push(std::move(op), out);
  }

  /// softmax(QK^T/sqrt(d) [+ mask]) per head from the fused (N, T, 3D) projection, as
  /// (N, heads, T, T).
  Tensor attention_scores(const std::string& name, const Tensor& qkv, uint64_t heads, Mask mask) {
    const uint64_t n = qkv.batch();
    const uint64_t t = qkv.shape[1];
    const uint64_t d = qkv.last() / 3;
    const uint64_t scores = n * heads * t * t;
    const uint64_t matmul = 2 * n * t * t * d;
    ForwardOp op = make(name, "attention_scores", {qkv.op}, Saves::kBoth);
    op.forward_flops = matmul + scores * (1 + 5 + (mask == Mask::kCausal ? 1 : 0));
    op.backward_flops = 2 * matmul + scores * (4 + 1);
    op.heads = heads;
    op.causal = mask == Mask::kCausal;
    return push(std::move(op), {n, heads, t, t});
  }

  /// Scores * V, heads merged back: (N, T, D).
  Tensor attention_context(const std::string& name, const Tensor& scores, const Tensor& qkv) {
    const uint64_t n = qkv.batch();
    const uint64_t t = qkv.shape[1];
    const uint64_t d = qkv.last() / 3;
    const uint64_t matmul = 2 * n * t * t * d;
    ForwardOp op = make(name, "attention_context", {scores.op, qkv.op}, Saves::kInputs);
    op.forward_flops = matmul;
    op.backward_flops = 2 * matmul;
    return push(std::move(op), {n, t, d});
  }

  ForwardGraph finish() && { return std::move(graph_); }

 private:
  static uint64_t elements_of(const std::vector<uint64_t>& shape) {
    return Tensor{kGraphInput, shape}.elements();
  }

  static ForwardOp make(const std::string& name, const std::string& kind, std::vector<int> inputs,
                        Saves saves) {
    ForwardOp op;
    op.name = name;
    op.op = kind;
    op.inputs = std::move(inputs);
    op.backward_needs_inputs = saves == Saves::kInputs || saves == Saves::kBoth;
    op.backward_needs_output = saves == Saves::kOutput || saves == Saves::kBoth;
    return op;
  }

  Tensor weighted(const std::string& name, const std::string& kind, const Tensor& x,
                  std::vector<uint64_t> out, uint64_t flops, uint64_t params) {
    ForwardOp op = make(name, kind, {x.op}, Saves::kInputs);
    op.forward_flops = flops;
    op.backward_flops = x.op == kGraphInput ? flops : 2 * flops;
    op.param_bytes = params * kFloatBytes;
    op.kernel = attrs_.kernel;
    op.stride = attrs_.stride;
    op.padding = attrs_.padding;
    op.groups = attrs_.groups;
    op.bias = attrs_.bias;
    attrs_ = {};
    return push(std::move(op), std::move(out));
  }

  Tensor elementwise(const std::string& name, const std::string& kind, const Tensor& x,
                     uint64_t forward_per_element, uint64_t backward_per_element, uint64_t params,
                     Saves saves) {
    ForwardOp op = make(name, kind, {x.op}, saves);
    op.forward_flops = forward_per_element * x.elements();
    op.backward_flops = backward_per_element * x.elements();
    op.param_bytes = params * kFloatBytes;
    return push(std::move(op), x.shape);
  }

  Tensor push(ForwardOp op, std::vector<uint64_t> shape) {
    op.shape = shape;
    Tensor out{static_cast<int>(graph_.ops.size()), std::move(shape)};
    op.output_bytes = out.elements() * kFloatBytes;
    graph_.ops.push_back(std::move(op));
    return out;
  }

  /// The window and bias attributes of the weighted op being built (conv2d, linear).
  struct Attrs {
    uint64_t kernel = 0, stride = 1, padding = 0, groups = 1;
    bool bias = false;
  };
  ForwardGraph graph_;
  Tensor input_;
  Attrs attrs_;
};

// MLP (POET's benchmark): 784 -> 1024 x6 -> 10 with relu between.

ForwardGraph mlp(uint64_t n) {
  Builder b("mlp", {n, 784}, kFloatBytes);
  Tensor x = b.input();
  for (int i = 1; i <= 6; ++i) {
    x = b.linear("fc" + std::to_string(i), x, 1024);
    x = b.relu("relu" + std::to_string(i), x);
  }
  b.linear("fc7", x, 10);
  return std::move(b).finish();
}

// VGG-16 (configuration D, no batchnorm).

ForwardGraph vgg16(const std::string& name, uint64_t n, uint64_t image, uint64_t hidden,
                   uint64_t classes) {
  Builder b(name, {n, 3, image, image}, kFloatBytes);
  const std::vector<std::vector<uint64_t>> stages{
      {64, 64}, {128, 128}, {256, 256, 256}, {512, 512, 512}, {512, 512, 512}};
  Tensor x = b.input();
  for (std::size_t s = 0; s < stages.size(); ++s) {
    for (std::size_t c = 0; c < stages[s].size(); ++c) {
      const std::string id = std::to_string(s + 1) + "_" + std::to_string(c + 1);
      x = b.conv("features.conv" + id, x, stages[s][c], 3, 1, 1, 1, Bias::kWith);
      x = b.relu("features.relu" + id, x);
    }
    x = b.maxpool("features.pool" + std::to_string(s + 1), x, 2, 2, 0);
  }
  // Flatten is free: the classifier reads the (N, 512, h, w) tensor as (N, 512*h*w).
  x.shape = {n, x.elements() / n};
  x = b.linear("classifier.fc6", x, hidden);
  x = b.relu("classifier.relu6", x);
  x = b.linear("classifier.fc7", x, hidden);
  x = b.relu("classifier.relu7", x);
  b.linear("classifier.fc8", x, classes);
  return std::move(b).finish();
}

// ResNet (torchvision layout; Bottleneck strides in the 3x3 conv, "v1.5").

enum class Dataset { kImageNet, kCifar };

Tensor conv_bn(Builder& b, const std::string& conv_name, const std::string& bn_name,
               const Tensor& x, uint64_t out_channels, uint64_t kernel, uint64_t stride) {
  return b.batchnorm(bn_name, b.conv(conv_name, x, out_channels, kernel, stride, kernel / 2));
}

Tensor basic_block(Builder& b, const std::string& p, const Tensor& x, uint64_t planes,
                   uint64_t stride) {
  Tensor y = conv_bn(b, p + ".conv1", p + ".bn1", x, planes, 3, stride);
  y = b.relu(p + ".relu1", y);
  y = conv_bn(b, p + ".conv2", p + ".bn2", y, planes, 3, 1);
  Tensor shortcut = x;
  if (stride != 1 || x.channels() != planes)
    shortcut = conv_bn(b, p + ".downsample.0", p + ".downsample.1", x, planes, 1, stride);
  return b.relu(p + ".relu2", b.add(p + ".add", y, shortcut));
}

Tensor bottleneck(Builder& b, const std::string& p, const Tensor& x, uint64_t planes,
                  uint64_t stride) {
  const uint64_t out_channels = 4 * planes;
  Tensor y = b.relu(p + ".relu1", conv_bn(b, p + ".conv1", p + ".bn1", x, planes, 1, 1));
  y = b.relu(p + ".relu2", conv_bn(b, p + ".conv2", p + ".bn2", y, planes, 3, stride));
  y = conv_bn(b, p + ".conv3", p + ".bn3", y, out_channels, 1, 1);
  Tensor shortcut = x;
  if (stride != 1 || x.channels() != out_channels)
    shortcut = conv_bn(b, p + ".downsample.0", p + ".downsample.1", x, out_channels, 1, stride);
  return b.relu(p + ".relu3", b.add(p + ".add", y, shortcut));
}

enum class Block { kBasic, kBottleneck };

ForwardGraph resnet(const std::string& name, uint64_t n, Dataset data, Block block,
                    const std::vector<int>& blocks) {
  const bool imagenet = data == Dataset::kImageNet;
  Builder b(name, {n, 3, imagenet ? 224u : 32u, imagenet ? 224u : 32u}, kFloatBytes);
  Tensor x =
      imagenet ? b.conv("conv1", b.input(), 64, 7, 2, 3) : b.conv("conv1", b.input(), 64, 3, 1, 1);
  x = b.relu("relu", b.batchnorm("bn1", x));
  if (imagenet) x = b.maxpool("maxpool", x, 3, 2, 1);
  for (std::size_t s = 0; s < blocks.size(); ++s) {
    const uint64_t planes = uint64_t{64} << s;
    for (int i = 0; i < blocks[s]; ++i) {
      const uint64_t stride = (s > 0 && i == 0) ? 2 : 1;
      const std::string p = "layer" + std::to_string(s + 1) + "." + std::to_string(i);
      x = block == Block::kBasic ? basic_block(b, p, x, planes, stride)
                                 : bottleneck(b, p, x, planes, stride);
    }
  }
  x = b.global_avgpool("avgpool", x);
  b.linear("fc", x, imagenet ? 1000 : 10);
  return std::move(b).finish();
}

// MobileNetV2 (width 1.0).

ForwardGraph mobilenetv2(const std::string& name, uint64_t n, Dataset data) {
  const bool imagenet = data == Dataset::kImageNet;
  Builder b(name, {n, 3, imagenet ? 224u : 32u, imagenet ? 224u : 32u}, kFloatBytes);
  struct Stage {
    uint64_t expand, channels;
    int repeats;
    uint64_t stride;
  };
  // The CIFAR variant (as in kuangliu/pytorch-cifar) keeps 32x32 longer: stem stride 1 and the
  // first stride-2 stage (24 channels) at stride 1, so the last feature map is 4x4.
  const std::vector<Stage> stages{{1, 16, 1, 1}, {6, 24, 2, imagenet ? 2u : 1u},
                                  {6, 32, 3, 2}, {6, 64, 4, 2},
                                  {6, 96, 3, 1}, {6, 160, 3, 2},
                                  {6, 320, 1, 1}};
  Tensor x = b.conv("features.0.conv", b.input(), 32, 3, imagenet ? 2 : 1, 1);
  x = b.relu6("features.0.relu6", b.batchnorm("features.0.bn", x));
  int index = 1;
  for (const Stage& s : stages) {
    for (int i = 0; i < s.repeats; ++i, ++index) {
      const std::string p = "features." + std::to_string(index);
      const uint64_t stride = i == 0 ? s.stride : 1;
      const uint64_t hidden = x.channels() * s.expand;
      Tensor y = x;
      if (s.expand != 1) {
        y = b.conv(p + ".expand.conv", y, hidden, 1, 1, 0);
        y = b.relu6(p + ".expand.relu6", b.batchnorm(p + ".expand.bn", y));
      }
      y = b.conv(p + ".depthwise.conv", y, hidden, 3, stride, 1, hidden);
      y = b.relu6(p + ".depthwise.relu6", b.batchnorm(p + ".depthwise.bn", y));
      y = b.batchnorm(p + ".project.bn", b.conv(p + ".project.conv", y, s.channels, 1, 1, 0));
      x = stride == 1 && x.channels() == s.channels ? b.add(p + ".add", y, x) : y;
    }
  }
  const std::string p = "features." + std::to_string(index);
  x = b.conv(p + ".conv", x, 1280, 1, 1, 0);
  x = b.relu6(p + ".relu6", b.batchnorm(p + ".bn", x));
  x = b.global_avgpool("avgpool", x);
  b.linear("classifier", x, imagenet ? 1000 : 10);
  return std::move(b).finish();
}

// Transformers.

struct TransformerShape {
  int layers;
  uint64_t dim, heads, ffn, seq, vocab, positions;
};

/// BERT encoder (post-layernorm) with the pooler and a 2-way classifier on [CLS].
ForwardGraph bert(const std::string& name, uint64_t n, const TransformerShape& s) {
  Builder b(name, {n, s.seq}, kTokenIdBytes);
  Tensor x = b.embedding("embeddings", b.input(), {s.vocab, s.positions, 2}, s.dim);
  x = b.layernorm("embeddings.layernorm", x);
  for (int l = 0; l < s.layers; ++l) {
    const std::string p = "layer." + std::to_string(l);
    const Tensor qkv = b.linear(p + ".attention.qkv", x, 3 * s.dim);
    const Tensor scores = b.attention_scores(p + ".attention.scores", qkv, s.heads, Mask::kNone);
    Tensor y = b.attention_context(p + ".attention.context", scores, qkv);
    y = b.linear(p + ".attention.output", y, s.dim);
    x = b.layernorm(p + ".attention.layernorm", b.add(p + ".attention.add", y, x));
    y = b.gelu(p + ".ffn.gelu", b.linear(p + ".ffn.fc1", x, s.ffn));
    y = b.linear(p + ".ffn.fc2", y, s.dim);
    x = b.layernorm(p + ".ffn.layernorm", b.add(p + ".ffn.add", y, x));
  }
  x = b.linear("pooler.dense", x, s.dim, Bias::kWith, Weights::kOwn, Tokens::kFirst);
  x = b.tanh("pooler.tanh", x);
  b.linear("classifier", x, 2);
  return std::move(b).finish();
}

/// GPT-2 (pre-layernorm blocks, final layernorm, lm head tied to the token embedding).
ForwardGraph gpt2(const std::string& name, uint64_t n, const TransformerShape& s) {
  Builder b(name, {n, s.seq}, kTokenIdBytes);
  Tensor x = b.embedding("embeddings", b.input(), {s.vocab, s.positions}, s.dim);
  for (int l = 0; l < s.layers; ++l) {
    const std::string p = "h." + std::to_string(l);
    const Tensor qkv = b.linear(p + ".attn.c_attn", b.layernorm(p + ".ln_1", x), 3 * s.dim);
    const Tensor scores = b.attention_scores(p + ".attn.scores", qkv, s.heads, Mask::kCausal);
    Tensor y = b.attention_context(p + ".attn.context", scores, qkv);
    x = b.add(p + ".add_1", b.linear(p + ".attn.c_proj", y, s.dim), x);
    y = b.gelu(p + ".mlp.gelu", b.linear(p + ".mlp.c_fc", b.layernorm(p + ".ln_2", x), s.ffn));
    x = b.add(p + ".add_2", b.linear(p + ".mlp.c_proj", y, s.dim), x);
  }
  x = b.layernorm("ln_f", x);
  b.linear("lm_head", x, s.vocab, Bias::kNone, Weights::kTied);
  return std::move(b).finish();
}

constexpr TransformerShape kBertBase{12, 768, 12, 3072, 128, 30522, 512};
constexpr TransformerShape kBertTiny{2, 128, 2, 512, 128, 30522, 512};
constexpr TransformerShape kGpt2Small{12, 768, 12, 3072, 1024, 50257, 1024};

struct ZooModel {
  ZooEntry entry;
  std::function<ForwardGraph(uint64_t)> build;
};

const std::vector<ZooModel>& registry() {
  static const std::vector<ZooModel> models{
      {{"mlp", "7-layer MLP 784-1024x6-10 with relu (POET's benchmark), 28x28 inputs"},
       [](uint64_t n) { return mlp(n); }},
      {{"vgg16", "VGG-16, ImageNet 224x224, 1000 classes"},
       [](uint64_t n) { return vgg16("vgg16", n, 224, 4096, 1000); }},
      {{"vgg16-cifar", "VGG-16, CIFAR 32x32, classifier 512-512-512-10"},
       [](uint64_t n) { return vgg16("vgg16-cifar", n, 32, 512, 10); }},
      {{"resnet18", "ResNet-18, ImageNet 224x224, 1000 classes"},
       [](uint64_t n) {
         return resnet("resnet18", n, Dataset::kImageNet, Block::kBasic, {2, 2, 2, 2});
       }},
      {{"resnet18-cifar", "ResNet-18, CIFAR 32x32 (3x3 stem, no maxpool), 10 classes"},
       [](uint64_t n) {
         return resnet("resnet18-cifar", n, Dataset::kCifar, Block::kBasic, {2, 2, 2, 2});
       }},
      {{"resnet50", "ResNet-50 (v1.5), ImageNet 224x224, 1000 classes"},
       [](uint64_t n) {
         return resnet("resnet50", n, Dataset::kImageNet, Block::kBottleneck, {3, 4, 6, 3});
       }},
      {{"resnet50-cifar", "ResNet-50, CIFAR 32x32 (3x3 stem, no maxpool), 10 classes"},
       [](uint64_t n) {
         return resnet("resnet50-cifar", n, Dataset::kCifar, Block::kBottleneck, {3, 4, 6, 3});
       }},
      {{"mobilenetv2", "MobileNetV2 width 1.0, ImageNet 224x224, 1000 classes"},
       [](uint64_t n) { return mobilenetv2("mobilenetv2", n, Dataset::kImageNet); }},
      {{"mobilenetv2-cifar",
        "MobileNetV2 width 1.0, CIFAR 32x32 (stem and 24-channel stage at stride 1), 10 classes"},
       [](uint64_t n) { return mobilenetv2("mobilenetv2-cifar", n, Dataset::kCifar); }},
      {{"bert-base", "BERT-base (12 layers, D 768, 12 heads), sequence 128, 2-way classifier"},
       [](uint64_t n) { return bert("bert-base", n, kBertBase); }},
      {{"bert-tiny", "BERT-tiny (2 layers, D 128, 2 heads), sequence 128, 2-way classifier"},
       [](uint64_t n) { return bert("bert-tiny", n, kBertTiny); }},
      {{"gpt2", "GPT-2 small (12 layers, D 768, 12 heads), sequence 1024, tied lm head"},
       [](uint64_t n) { return gpt2("gpt2", n, kGpt2Small); }},
  };
  return models;
}

}  // namespace

const std::vector<ZooEntry>& zoo_models() {
  static const std::vector<ZooEntry> entries = [] {
    std::vector<ZooEntry> out;
    for (const auto& m : registry()) out.push_back(m.entry);
    return out;
  }();
  return entries;
}

namespace {

/// "mlp:64,32,10": an MLP of those layer widths (input first), relu between, for boards too
/// small for POET's. Nullopt when `name` is not of that form.
std::optional<std::vector<uint64_t>> mlp_widths(const std::string& name) {
  if (name.rfind("mlp:", 0) != 0) return std::nullopt;
  std::vector<uint64_t> widths;
  std::size_t at = 4;
  while (at <= name.size()) {
    const std::size_t comma = std::min(name.find(',', at), name.size());
    const std::string part = name.substr(at, comma - at);
    if (part.empty() || part.size() > 7 || part.find_first_not_of("0123456789") != std::string::npos || std::stoul(part) == 0)
      throw InputError("model '" + name + "': mlp:IN,HIDDEN...,OUT takes widths from 1 to 9999999");
    widths.push_back(std::stoul(part));
    at = comma + 1;
  }
  if (widths.size() < 2) throw InputError("model '" + name + "': mlp:IN,HIDDEN...,OUT needs two widths at least");
  return widths;
}

}  // namespace

ForwardGraph zoo_model(const std::string& name, int batch) {
  if (const auto widths = mlp_widths(name)) {
    if (batch < 1 || batch > kMaxBatch)
      throw InputError("batch size " + std::to_string(batch) + " is out of range (1 to " +
                       std::to_string(kMaxBatch) + ")");
    Builder b(name, {static_cast<uint64_t>(batch), widths->front()}, kFloatBytes);
    Tensor x = b.input();
    for (std::size_t i = 1; i < widths->size(); ++i) {
      x = b.linear("fc" + std::to_string(i), x, (*widths)[i]);
      if (i + 1 < widths->size()) x = b.relu("relu" + std::to_string(i), x);
    }
    return std::move(b).finish();
  }
  for (const auto& m : registry()) {
    if (m.entry.name != name) continue;
    if (batch < 1 || batch > kMaxBatch)
      throw InputError("batch size " + std::to_string(batch) + " is out of range (1 to " +
                       std::to_string(kMaxBatch) + ")");
    return m.build(static_cast<uint64_t>(batch));
  }
  std::string known;
  for (const auto& m : registry()) known += (known.empty() ? "" : ", ") + m.entry.name;
  throw InputError("unknown model '" + name + "' (known: " + known + ")");
}

}  // namespace ergon::planner
