#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace ergon::profiler {

/// Operation kinds a board can run and time. Values are wire and database codes: append only.
enum class OpKind : uint8_t {
  /// dims: batch, in_ch, out_ch, height, width, window (conv_window(): kernel, stride and
  /// depthwise packed; a plain kernel size means stride 1, dense); padding kernel / 2.
  kConv2d = 1,
  kLinear = 2,   ///< dims: batch, in_features, out_features
  kRelu = 3,     ///< dims: elements
  kMaxPool = 4,  ///< dims: batch, channels, height, width, window
  kAdd = 5,      ///< dims: elements
  kPaging = 6,   ///< dims: bytes (moved to or from the board's storage; phase says which)
  kIdle = 7,     ///< dims: duration in microseconds
  // Since protocol v3: the rest of the zoo's ops, named as the planner names them.
  kBatchNorm = 8,         ///< dims: batch, channels, pixels per channel
  kLayerNorm = 9,         ///< dims: rows, features
  kRelu6 = 10,            ///< dims: elements
  kGelu = 11,             ///< dims: elements
  kTanh = 12,             ///< dims: elements
  kAvgPool = 13,          ///< global average pool; dims: batch, channels, pixels
  kEmbedding = 14,        ///< dims: batch, seq, dim, rows of up to three tables (0: none)
  kAttentionScores = 15,  ///< dims: batch, seq, dim, heads, causal (0/1)
  kAttentionContext = 16, ///< dims: batch, seq, dim, heads
  kCrossEntropy = 17,     ///< softmax cross-entropy; dims: rows, classes
  // Since protocol v6.
  /// Bytes moved over the board's link to or from the host (phase link-send or
  /// link-receive); dims: bytes. Measures what a pipeline's activations and gradients cost.
  kTransfer = 18,
};
inline constexpr OpKind kLastOpKind = OpKind::kTransfer;

/// kConv2d's last dim: kernel | stride << 8 | depthwise << 16 (stride 0 reads as 1).
constexpr uint32_t conv_window(uint32_t kernel, uint32_t stride, bool depthwise) {
  return kernel | (stride == 1 ? 0 : stride << 8) | (depthwise ? 1U << 16 : 0);
}
constexpr uint32_t conv_kernel(uint32_t window) { return window & 0xFF; }
constexpr uint32_t conv_stride(uint32_t window) { return (window >> 8 & 0xFF) == 0 ? 1 : window >> 8 & 0xFF; }
constexpr bool conv_depthwise(uint32_t window) { return (window >> 16 & 1) != 0; }

/// What a span was doing. Values are wire and database codes: append only.
enum class Phase : uint8_t {
  kForward = 1,
  kBackward = 2,
  kRecompute = 3,
  kPageIn = 4,
  kPageOut = 5,
  kIdle = 6,
  kSync = 7,
  kLinkSend = 8,     ///< since protocol v6: the board sends bytes to the host over its link
  kLinkReceive = 9,  ///< since protocol v6: the board receives bytes from the host
};
inline constexpr Phase kLastPhase = Phase::kLinkReceive;

inline constexpr std::size_t kMaxDims = 6;

/// An operation at a concrete shape, with the work it does. FLOPs count a multiply-add as 2.
struct OpShape {
  OpKind kind = OpKind::kIdle;
  std::array<uint32_t, kMaxDims> dims{};
  uint8_t dim_count = 0;
  uint64_t flops = 0;
  uint64_t bytes_in = 0;
  uint64_t bytes_out = 0;

  friend bool operator==(const OpShape&, const OpShape&) = default;
};

/// One timed execution window of an op on a board, in device ticks; `repetitions` back-to-back
/// runs of the op fill [begin_ticks, end_ticks).
struct OpSpan {
  uint32_t op_id = 0;
  Phase phase = Phase::kForward;
  uint64_t begin_ticks = 0;
  uint64_t end_ticks = 0;
  uint32_t repetitions = 1;

  friend bool operator==(const OpSpan&, const OpSpan&) = default;
};

/// Shapes with FLOPs and bytes (fp32) filled in from the dims, for forward or backward.
OpShape conv2d(uint32_t batch, uint32_t in_ch, uint32_t out_ch, uint32_t height, uint32_t width,
               uint32_t kernel, Phase phase);
OpShape linear(uint32_t batch, uint32_t in_features, uint32_t out_features, Phase phase);
OpShape relu(uint32_t elements, Phase phase);
OpShape max_pool(uint32_t batch, uint32_t channels, uint32_t height, uint32_t width,
                 uint32_t window, Phase phase);
OpShape add(uint32_t elements, Phase phase);
OpShape paging(uint32_t bytes);
/// `tag` (non-zero): which transfer this is, the same on the board that sends it and the one
/// that receives it (a pipeline's activation or gradient of one micro-batch), so the host can
/// relay it; 0: a link test's, numbered by the board.
OpShape transfer(uint32_t bytes, uint32_t tag = 0);
OpShape idle(uint32_t duration_us);

std::string_view to_string(OpKind kind);
std::string_view to_string(Phase phase);
std::optional<OpKind> op_kind_from_code(uint8_t code);
std::optional<Phase> phase_from_code(uint8_t code);
/// Inverse of to_string(Phase): "forward", "page-in", ...; nullopt for anything else.
std::optional<Phase> phase_from_name(std::string_view name);
/// "3x16x16x32x32x3" style text of the used dims, for the database and for people.
std::string dims_text(const OpShape& shape);

}  // namespace ergon::profiler
