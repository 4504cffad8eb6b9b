#include "profiler/op.h"

#include <initializer_list>

namespace ergon::profiler {
namespace {

constexpr uint64_t kFloatBytes = 4;

OpShape make(OpKind kind, std::initializer_list<uint32_t> dims) {
  OpShape s;
  s.kind = kind;
  for (uint32_t d : dims) s.dims[s.dim_count++] = d;
  return s;
}

// Layers with weights (conv, linear): the backward pass computes the gradient w.r.t. the input
// and w.r.t. the weights, two products the size of the forward one.
void fill_weighted(OpShape& s, uint64_t macs, uint64_t input, uint64_t output,
                   uint64_t weights, Phase phase) {
  if (phase == Phase::kBackward) {
    s.flops = 4 * macs;
    s.bytes_in = output + input + weights;
    s.bytes_out = input + weights;
  } else {
    s.flops = 2 * macs;
    s.bytes_in = input + weights;
    s.bytes_out = output;
  }
}

}  // namespace

OpShape conv2d(uint32_t batch, uint32_t in_ch, uint32_t out_ch, uint32_t height, uint32_t width,
               uint32_t kernel, Phase phase) {
  OpShape s = make(OpKind::kConv2d, {batch, in_ch, out_ch, height, width, kernel});
  const uint64_t macs = uint64_t{batch} * out_ch * height * width * in_ch * kernel * kernel;
  const uint64_t input = uint64_t{batch} * in_ch * height * width * kFloatBytes;
  const uint64_t output = uint64_t{batch} * out_ch * height * width * kFloatBytes;
  const uint64_t weights = uint64_t{out_ch} * in_ch * kernel * kernel * kFloatBytes;
  fill_weighted(s, macs, input, output, weights, phase);
  return s;
}

OpShape linear(uint32_t batch, uint32_t in_features, uint32_t out_features, Phase phase) {
  OpShape s = make(OpKind::kLinear, {batch, in_features, out_features});
  const uint64_t macs = uint64_t{batch} * in_features * out_features;
  const uint64_t input = uint64_t{batch} * in_features * kFloatBytes;
  const uint64_t output = uint64_t{batch} * out_features * kFloatBytes;
  const uint64_t weights = uint64_t{in_features} * out_features * kFloatBytes;
  fill_weighted(s, macs, input, output, weights, phase);
  return s;
}

OpShape relu(uint32_t elements, Phase phase) {
  OpShape s = make(OpKind::kRelu, {elements});
  const uint64_t bytes = uint64_t{elements} * kFloatBytes;
  s.flops = elements;
  s.bytes_in = phase == Phase::kBackward ? 2 * bytes : bytes;
  s.bytes_out = bytes;
  return s;
}

OpShape max_pool(uint32_t batch, uint32_t channels, uint32_t height, uint32_t width,
                 uint32_t window, Phase phase) {
  OpShape s = make(OpKind::kMaxPool, {batch, channels, height, width, window});
  const uint64_t in_elems = uint64_t{batch} * channels * height * width;
  const uint64_t out_elems = in_elems / (uint64_t{window} * window);
  s.flops = in_elems;  // one comparison per input element
  if (phase == Phase::kBackward) {
    s.bytes_in = (out_elems + in_elems) * kFloatBytes;
    s.bytes_out = in_elems * kFloatBytes;
  } else {
    s.bytes_in = in_elems * kFloatBytes;
    s.bytes_out = out_elems * kFloatBytes;
  }
  return s;
}

OpShape add(uint32_t elements, Phase phase) {
  OpShape s = make(OpKind::kAdd, {elements});
  const uint64_t bytes = uint64_t{elements} * kFloatBytes;
  s.flops = phase == Phase::kBackward ? 0 : elements;
  s.bytes_in = phase == Phase::kBackward ? bytes : 2 * bytes;
  s.bytes_out = phase == Phase::kBackward ? 2 * bytes : bytes;
  return s;
}

OpShape paging(uint32_t bytes) {
  OpShape s = make(OpKind::kPaging, {bytes});
  s.bytes_in = bytes;
  s.bytes_out = bytes;
  return s;
}

OpShape transfer(uint32_t bytes, uint32_t tag) {
  OpShape s = tag == 0 ? make(OpKind::kTransfer, {bytes}) : make(OpKind::kTransfer, {bytes, tag});
  s.bytes_in = bytes;
  s.bytes_out = bytes;
  return s;
}

OpShape idle(uint32_t duration_us) { return make(OpKind::kIdle, {duration_us}); }

std::string_view to_string(OpKind kind) {
  switch (kind) {
    case OpKind::kConv2d: return "conv2d";
    case OpKind::kLinear: return "linear";
    case OpKind::kRelu: return "relu";
    case OpKind::kMaxPool: return "maxpool";
    case OpKind::kAdd: return "add";
    case OpKind::kPaging: return "paging";
    case OpKind::kIdle: return "idle";
    case OpKind::kBatchNorm: return "batchnorm";
    case OpKind::kLayerNorm: return "layernorm";
    case OpKind::kRelu6: return "relu6";
    case OpKind::kGelu: return "gelu";
    case OpKind::kTanh: return "tanh";
    case OpKind::kAvgPool: return "avgpool";
    case OpKind::kEmbedding: return "embedding";
    case OpKind::kAttentionScores: return "attention_scores";
    case OpKind::kAttentionContext: return "attention_context";
    case OpKind::kCrossEntropy: return "cross_entropy";
    case OpKind::kTransfer: return "transfer";
  }
  return "unknown";
}

std::string_view to_string(Phase phase) {
  switch (phase) {
    case Phase::kForward: return "forward";
    case Phase::kBackward: return "backward";
    case Phase::kRecompute: return "recompute";
    case Phase::kPageIn: return "page-in";
    case Phase::kPageOut: return "page-out";
    case Phase::kIdle: return "idle";
    case Phase::kSync: return "sync";
    case Phase::kLinkSend: return "link-send";
    case Phase::kLinkReceive: return "link-receive";
  }
  return "unknown";
}

std::optional<Phase> phase_from_name(std::string_view name) {
  for (uint8_t code = static_cast<uint8_t>(Phase::kForward); code <= static_cast<uint8_t>(kLastPhase);
       ++code) {
    const auto phase = static_cast<Phase>(code);
    if (to_string(phase) == name) return phase;
  }
  return std::nullopt;
}

std::optional<OpKind> op_kind_from_code(uint8_t code) {
  if (code >= static_cast<uint8_t>(OpKind::kConv2d) && code <= static_cast<uint8_t>(kLastOpKind))
    return static_cast<OpKind>(code);
  return std::nullopt;
}

std::optional<Phase> phase_from_code(uint8_t code) {
  if (code >= static_cast<uint8_t>(Phase::kForward) && code <= static_cast<uint8_t>(kLastPhase))
    return static_cast<Phase>(code);
  return std::nullopt;
}

std::string dims_text(const OpShape& shape) {
  std::string out;
  for (uint8_t i = 0; i < shape.dim_count; ++i) {
    if (i != 0) out += 'x';
    out += std::to_string(shape.dims[i]);
  }
  return out;
}

}  // namespace ergon::profiler
