#pragma once

#include <cstdint>
#include <span>

namespace ergon::profiler {

/// The forward and backward kernels a board runs to time the zoo's ops (fp32, NCHW), with
/// Eigen's matrix products where the work is a GEMM. Shapes match `OpShape` (op.h), whose
/// FLOP and byte counts the planner uses too. Backward kernels overwrite their outputs (no
/// accumulation across calls).

/// Padding kernel / 2 on each side (so stride 1 keeps the size), any stride, no bias.
struct ConvShape {
  uint32_t batch = 1, in_ch = 1, out_ch = 1, height = 1, width = 1, kernel = 3, stride = 1;
  [[nodiscard]] uint32_t out_height() const { return (height + 2 * (kernel / 2) - kernel) / stride + 1; }
  [[nodiscard]] uint32_t out_width() const { return (width + 2 * (kernel / 2) - kernel) / stride + 1; }
  [[nodiscard]] std::size_t input_size() const { return std::size_t{batch} * in_ch * height * width; }
  [[nodiscard]] std::size_t output_size() const {
    return std::size_t{batch} * out_ch * out_height() * out_width();
  }
  [[nodiscard]] std::size_t weight_size() const { return std::size_t{out_ch} * in_ch * kernel * kernel; }
  /// im2col scratch for one image.
  [[nodiscard]] std::size_t columns_size() const {
    return std::size_t{in_ch} * kernel * kernel * out_height() * out_width();
  }
};
/// y = conv(x, w). `columns` is scratch of columns_size().
void conv2d_forward(const ConvShape& s, std::span<const float> x, std::span<const float> w,
                    std::span<float> y, std::span<float> columns);
/// dx and dw from dy (x and w as in the forward pass).
void conv2d_backward(const ConvShape& s, std::span<const float> x, std::span<const float> w,
                     std::span<const float> dy, std::span<float> dx, std::span<float> dw,
                     std::span<float> columns);

/// y[batch, out] = x[batch, in] w[out, in]^T.
void linear_forward(uint32_t batch, uint32_t in, uint32_t out, std::span<const float> x,
                    std::span<const float> w, std::span<float> y);
void linear_backward(uint32_t batch, uint32_t in, uint32_t out, std::span<const float> x,
                     std::span<const float> w, std::span<const float> dy, std::span<float> dx,
                     std::span<float> dw);

void relu_forward(std::span<const float> x, std::span<float> y);
/// dx = dy where the forward output was positive.
void relu_backward(std::span<const float> y, std::span<const float> dy, std::span<float> dx);

/// Non-overlapping windows (stride = window); height and width divisible by it.
void max_pool_forward(uint32_t batch, uint32_t channels, uint32_t height, uint32_t width,
                      uint32_t window, std::span<const float> x, std::span<float> y);
/// The gradient goes to each window's maximum (the first, on ties).
void max_pool_backward(uint32_t batch, uint32_t channels, uint32_t height, uint32_t width,
                       uint32_t window, std::span<const float> x, std::span<const float> dy,
                       std::span<float> dx);

void add_forward(std::span<const float> a, std::span<const float> b, std::span<float> y);
/// Both inputs receive dy.
void add_backward(std::span<const float> dy, std::span<float> da, std::span<float> db);

/// Batch normalization in training mode over (batch, height, width) per channel, with scale
/// gamma and shift beta; `saved` (2 x channels: mean, inverse standard deviation) is what the
/// backward pass needs.
void batch_norm_forward(uint32_t batch, uint32_t channels, uint32_t pixels,
                        std::span<const float> x, std::span<const float> gamma,
                        std::span<const float> beta, std::span<float> y, std::span<float> saved,
                        float epsilon = 1e-5F);
void batch_norm_backward(uint32_t batch, uint32_t channels, uint32_t pixels,
                         std::span<const float> x, std::span<const float> gamma,
                         std::span<const float> saved, std::span<const float> dy,
                         std::span<float> dx, std::span<float> dgamma, std::span<float> dbeta);

/// Mean over each channel's pixels: y[batch, channels].
void global_avg_pool_forward(uint32_t batch, uint32_t channels, uint32_t pixels,
                             std::span<const float> x, std::span<float> y);
void global_avg_pool_backward(uint32_t batch, uint32_t channels, uint32_t pixels,
                              std::span<const float> dy, std::span<float> dx);

/// Depthwise convolution (groups = channels): each channel convolved with its own k x k
/// filter, padding kernel / 2, any stride; `s.out_ch` must equal `s.in_ch`. w[channel, ky, kx].
void depthwise_conv2d_forward(const ConvShape& s, std::span<const float> x,
                              std::span<const float> w, std::span<float> y);
void depthwise_conv2d_backward(const ConvShape& s, std::span<const float> x,
                               std::span<const float> w, std::span<const float> dy,
                               std::span<float> dx, std::span<float> dw);

/// min(max(x, 0), 6); the backward pass reads the output.
void relu6_forward(std::span<const float> x, std::span<float> y);
void relu6_backward(std::span<const float> y, std::span<const float> dy, std::span<float> dx);
/// GELU, tanh form (as BERT and GPT-2 use it); the backward pass reads the input.
void gelu_forward(std::span<const float> x, std::span<float> y);
void gelu_backward(std::span<const float> x, std::span<const float> dy, std::span<float> dx);
/// tanh and the logistic sigmoid; their backward passes read the output.
void tanh_forward(std::span<const float> x, std::span<float> y);
void tanh_backward(std::span<const float> y, std::span<const float> dy, std::span<float> dx);
void sigmoid_forward(std::span<const float> x, std::span<float> y);
void sigmoid_backward(std::span<const float> y, std::span<const float> dy, std::span<float> dx);

/// Layer normalization over the last dimension (`features`) of `rows` rows, with scale gamma
/// and shift beta; `saved` (2 x rows: mean, inverse standard deviation) for the backward pass.
void layer_norm_forward(uint32_t rows, uint32_t features, std::span<const float> x,
                        std::span<const float> gamma, std::span<const float> beta,
                        std::span<float> y, std::span<float> saved, float epsilon = 1e-12F);
void layer_norm_backward(uint32_t rows, uint32_t features, std::span<const float> x,
                         std::span<const float> gamma, std::span<const float> saved,
                         std::span<const float> dy, std::span<float> dx, std::span<float> dgamma,
                         std::span<float> dbeta);

/// The sum of one row of each table per token: ids[tokens] index the first table, the
/// token's position in its sequence (tokens = batch x seq) the second, and 0 the others
/// (BERT's token type). tables: the concatenated (rows_t, dim) tables. Ids outside the first
/// table are clamped to its last row.
void embedding_forward(uint32_t batch, uint32_t seq, uint32_t dim,
                       std::span<const uint32_t> table_rows, std::span<const int64_t> ids,
                       std::span<const float> tables, std::span<float> y);
/// Scatter-adds dy into the rows each token read (dtables is overwritten).
void embedding_backward(uint32_t batch, uint32_t seq, uint32_t dim,
                        std::span<const uint32_t> table_rows, std::span<const int64_t> ids,
                        std::span<const float> dy, std::span<float> dtables);

/// Multi-head attention from a fused projection qkv[batch, seq, 3 x dim] (Q, K, V, heads of
/// dim / heads side by side in each): probabilities p[batch, heads, seq, seq] =
/// softmax(Q K^T / sqrt(dim / heads)), causal (no position sees a later one) when asked.
struct AttentionShape {
  uint32_t batch = 1, seq = 1, dim = 1, heads = 1;
  bool causal = false;
  [[nodiscard]] uint32_t head_dim() const { return dim / heads; }
  [[nodiscard]] std::size_t qkv_size() const { return std::size_t{batch} * seq * 3 * dim; }
  [[nodiscard]] std::size_t scores_size() const { return std::size_t{batch} * heads * seq * seq; }
  [[nodiscard]] std::size_t context_size() const { return std::size_t{batch} * seq * dim; }
};
void attention_scores_forward(const AttentionShape& s, std::span<const float> qkv,
                              std::span<float> p);
/// d(qkv) for the Q and K parts from dp (reads the probabilities p); the V part is set to 0.
void attention_scores_backward(const AttentionShape& s, std::span<const float> qkv,
                               std::span<const float> p, std::span<const float> dp,
                               std::span<float> dqkv);
/// context[batch, seq, dim] = p V, heads side by side.
void attention_context_forward(const AttentionShape& s, std::span<const float> p,
                               std::span<const float> qkv, std::span<float> context);
/// dp, and d(qkv) for the V part (the Q and K parts set to 0).
void attention_context_backward(const AttentionShape& s, std::span<const float> p,
                                std::span<const float> qkv, std::span<const float> dcontext,
                                std::span<float> dp, std::span<float> dqkv);

/// Mean softmax cross-entropy of logits[batch, classes] against labels; returns the loss and
/// writes its gradient with respect to the logits.
float softmax_cross_entropy(uint32_t batch, uint32_t classes, std::span<const float> logits,
                            std::span<const uint32_t> labels, std::span<float> dlogits);

}  // namespace ergon::profiler
