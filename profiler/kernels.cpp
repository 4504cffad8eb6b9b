#include "profiler/kernels.h"

#include <Eigen/Dense>

#include <algorithm>
#include <cassert>
#include <cmath>

namespace ergon::profiler {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Map = Eigen::Map<RowMatrix>;
using ConstMap = Eigen::Map<const RowMatrix>;

/// One image to columns: row (c, ky, kx), column (output y, x), zero outside the image.
void im2col(const ConvShape& s, const float* image, float* columns) {
  const int k = static_cast<int>(s.kernel), pad = k / 2, st = static_cast<int>(s.stride);
  const int h = static_cast<int>(s.height), w = static_cast<int>(s.width);
  const int oh = static_cast<int>(s.out_height()), ow = static_cast<int>(s.out_width());
  for (uint32_t c = 0; c < s.in_ch; ++c) {
    for (int ky = 0; ky < k; ++ky) {
      for (int kx = 0; kx < k; ++kx) {
        float* row = columns + ((static_cast<std::size_t>(c) * k + ky) * k + kx) * oh * ow;
        for (int y = 0; y < oh; ++y) {
          const int sy = y * st + ky - pad;
          for (int x = 0; x < ow; ++x) {
            const int sx = x * st + kx - pad;
            row[y * ow + x] = (sy >= 0 && sy < h && sx >= 0 && sx < w)
                                  ? image[(static_cast<std::size_t>(c) * h + sy) * w + sx]
                                  : 0.0F;
          }
        }
      }
    }
  }
}

/// The inverse scatter: adds each column entry back to the pixel it came from.
void col2im(const ConvShape& s, const float* columns, float* image) {
  const int k = static_cast<int>(s.kernel), pad = k / 2, st = static_cast<int>(s.stride);
  const int h = static_cast<int>(s.height), w = static_cast<int>(s.width);
  const int oh = static_cast<int>(s.out_height()), ow = static_cast<int>(s.out_width());
  std::fill(image, image + std::size_t{s.in_ch} * h * w, 0.0F);
  for (uint32_t c = 0; c < s.in_ch; ++c) {
    for (int ky = 0; ky < k; ++ky) {
      for (int kx = 0; kx < k; ++kx) {
        const float* row = columns + ((static_cast<std::size_t>(c) * k + ky) * k + kx) * oh * ow;
        for (int y = 0; y < oh; ++y) {
          const int sy = y * st + ky - pad;
          if (sy < 0 || sy >= h) continue;
          for (int x = 0; x < ow; ++x) {
            const int sx = x * st + kx - pad;
            if (sx >= 0 && sx < w) image[(static_cast<std::size_t>(c) * h + sy) * w + sx] += row[y * ow + x];
          }
        }
      }
    }
  }
}

}  // namespace

void conv2d_forward(const ConvShape& s, std::span<const float> x, std::span<const float> w,
                    std::span<float> y, std::span<float> columns) {
  assert(x.size() >= s.input_size() && w.size() >= s.weight_size() && y.size() >= s.output_size() &&
         columns.size() >= s.columns_size());
  const auto rows = static_cast<Eigen::Index>(std::size_t{s.in_ch} * s.kernel * s.kernel);
  const auto in_pixels = static_cast<std::size_t>(s.height) * s.width;
  const auto pixels = static_cast<Eigen::Index>(std::size_t{s.out_height()} * s.out_width());
  const ConstMap weights(w.data(), s.out_ch, rows);
  for (uint32_t n = 0; n < s.batch; ++n) {
    im2col(s, x.data() + std::size_t{n} * s.in_ch * in_pixels, columns.data());
    Map out(y.data() + std::size_t{n} * s.out_ch * pixels, s.out_ch, pixels);
    out.noalias() = weights * ConstMap(columns.data(), rows, pixels);
  }
}

void conv2d_backward(const ConvShape& s, std::span<const float> x, std::span<const float> w,
                     std::span<const float> dy, std::span<float> dx, std::span<float> dw,
                     std::span<float> columns) {
  const auto rows = static_cast<Eigen::Index>(std::size_t{s.in_ch} * s.kernel * s.kernel);
  const auto in_pixels = static_cast<std::size_t>(s.height) * s.width;
  const auto pixels = static_cast<Eigen::Index>(std::size_t{s.out_height()} * s.out_width());
  const ConstMap weights(w.data(), s.out_ch, rows);
  Map weight_grad(dw.data(), s.out_ch, rows);
  weight_grad.setZero();
  for (uint32_t n = 0; n < s.batch; ++n) {
    const ConstMap grad(dy.data() + std::size_t{n} * s.out_ch * pixels, s.out_ch, pixels);
    im2col(s, x.data() + std::size_t{n} * s.in_ch * in_pixels, columns.data());
    weight_grad.noalias() += grad * ConstMap(columns.data(), rows, pixels).transpose();
    Map(columns.data(), rows, pixels).noalias() = weights.transpose() * grad;
    col2im(s, columns.data(), dx.data() + std::size_t{n} * s.in_ch * in_pixels);
  }
}

void linear_forward(uint32_t batch, uint32_t in, uint32_t out, std::span<const float> x,
                    std::span<const float> w, std::span<float> y) {
  Map(y.data(), batch, out).noalias() =
      ConstMap(x.data(), batch, in) * ConstMap(w.data(), out, in).transpose();
}

void linear_backward(uint32_t batch, uint32_t in, uint32_t out, std::span<const float> x,
                     std::span<const float> w, std::span<const float> dy, std::span<float> dx,
                     std::span<float> dw) {
  const ConstMap grad(dy.data(), batch, out);
  Map(dx.data(), batch, in).noalias() = grad * ConstMap(w.data(), out, in);
  Map(dw.data(), out, in).noalias() = grad.transpose() * ConstMap(x.data(), batch, in);
}

void relu_forward(std::span<const float> x, std::span<float> y) {
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = std::max(x[i], 0.0F);
}

void relu_backward(std::span<const float> y, std::span<const float> dy, std::span<float> dx) {
  // Branch-free: its time must not depend on which elements are positive.
  for (std::size_t i = 0; i < y.size(); ++i) dx[i] = dy[i] * static_cast<float>(y[i] > 0.0F);
}

namespace {

/// Calls f(input index of the window's maximum, output index) for every window.
template <class F>
void for_each_window_max(uint32_t batch, uint32_t channels, uint32_t height, uint32_t width,
                         uint32_t window, std::span<const float> x, F&& f) {
  const uint32_t oh = height / window, ow = width / window;
  for (std::size_t plane = 0; plane < std::size_t{batch} * channels; ++plane) {
    const float* in = x.data() + plane * height * width;
    for (uint32_t oy = 0; oy < oh; ++oy) {
      for (uint32_t ox = 0; ox < ow; ++ox) {
        std::size_t best = std::size_t{oy} * window * width + std::size_t{ox} * window;
        for (uint32_t ky = 0; ky < window; ++ky)
          for (uint32_t kx = 0; kx < window; ++kx) {
            const std::size_t at = (std::size_t{oy} * window + ky) * width + ox * window + kx;
            if (in[at] > in[best]) best = at;
          }
        f(plane * height * width + best, (plane * oh + oy) * ow + ox);
      }
    }
  }
}

}  // namespace

void max_pool_forward(uint32_t batch, uint32_t channels, uint32_t height, uint32_t width,
                      uint32_t window, std::span<const float> x, std::span<float> y) {
  for_each_window_max(batch, channels, height, width, window, x,
                      [&](std::size_t in, std::size_t out) { y[out] = x[in]; });
}

void max_pool_backward(uint32_t batch, uint32_t channels, uint32_t height, uint32_t width,
                       uint32_t window, std::span<const float> x, std::span<const float> dy,
                       std::span<float> dx) {
  std::fill(dx.begin(), dx.begin() + static_cast<std::ptrdiff_t>(std::size_t{batch} * channels * height * width), 0.0F);
  for_each_window_max(batch, channels, height, width, window, x,
                      [&](std::size_t in, std::size_t out) { dx[in] += dy[out]; });
}

void add_forward(std::span<const float> a, std::span<const float> b, std::span<float> y) {
  for (std::size_t i = 0; i < a.size(); ++i) y[i] = a[i] + b[i];
}

void add_backward(std::span<const float> dy, std::span<float> da, std::span<float> db) {
  std::copy(dy.begin(), dy.end(), da.begin());
  std::copy(dy.begin(), dy.end(), db.begin());
}

void batch_norm_forward(uint32_t batch, uint32_t channels, uint32_t pixels,
                        std::span<const float> x, std::span<const float> gamma,
                        std::span<const float> beta, std::span<float> y, std::span<float> saved,
                        float epsilon) {
  const double m = static_cast<double>(batch) * pixels;
  for (uint32_t c = 0; c < channels; ++c) {
    double sum = 0, sq = 0;
    for (uint32_t n = 0; n < batch; ++n) {
      const float* p = x.data() + (std::size_t{n} * channels + c) * pixels;
      for (uint32_t i = 0; i < pixels; ++i) {
        sum += p[i];
        sq += static_cast<double>(p[i]) * p[i];
      }
    }
    const double mean = sum / m;
    const double var = std::max(0.0, sq / m - mean * mean);
    const auto inv_std = static_cast<float>(1.0 / std::sqrt(var + epsilon));
    saved[c] = static_cast<float>(mean);
    saved[channels + c] = inv_std;
    for (uint32_t n = 0; n < batch; ++n) {
      const std::size_t base = (std::size_t{n} * channels + c) * pixels;
      for (uint32_t i = 0; i < pixels; ++i)
        y[base + i] = gamma[c] * (x[base + i] - saved[c]) * inv_std + beta[c];
    }
  }
}

void batch_norm_backward(uint32_t batch, uint32_t channels, uint32_t pixels,
                         std::span<const float> x, std::span<const float> gamma,
                         std::span<const float> saved, std::span<const float> dy,
                         std::span<float> dx, std::span<float> dgamma, std::span<float> dbeta) {
  const double m = static_cast<double>(batch) * pixels;
  for (uint32_t c = 0; c < channels; ++c) {
    const float mean = saved[c], inv_std = saved[channels + c];
    double sum_dy = 0, sum_dy_xhat = 0;
    for (uint32_t n = 0; n < batch; ++n) {
      const std::size_t base = (std::size_t{n} * channels + c) * pixels;
      for (uint32_t i = 0; i < pixels; ++i) {
        sum_dy += dy[base + i];
        sum_dy_xhat += static_cast<double>(dy[base + i]) * (x[base + i] - mean) * inv_std;
      }
    }
    dgamma[c] = static_cast<float>(sum_dy_xhat);
    dbeta[c] = static_cast<float>(sum_dy);
    // dx = gamma / sigma / m x (m dy - sum dy - xhat sum(dy xhat))
    const double scale = gamma[c] * inv_std / m;
    for (uint32_t n = 0; n < batch; ++n) {
      const std::size_t base = (std::size_t{n} * channels + c) * pixels;
      for (uint32_t i = 0; i < pixels; ++i) {
        const double xhat = (x[base + i] - mean) * inv_std;
        dx[base + i] = static_cast<float>(scale * (m * dy[base + i] - sum_dy - xhat * sum_dy_xhat));
      }
    }
  }
}

void global_avg_pool_forward(uint32_t batch, uint32_t channels, uint32_t pixels,
                             std::span<const float> x, std::span<float> y) {
  for (std::size_t plane = 0; plane < std::size_t{batch} * channels; ++plane) {
    double sum = 0;
    for (uint32_t i = 0; i < pixels; ++i) sum += x[plane * pixels + i];
    y[plane] = static_cast<float>(sum / pixels);
  }
}

void global_avg_pool_backward(uint32_t batch, uint32_t channels, uint32_t pixels,
                              std::span<const float> dy, std::span<float> dx) {
  for (std::size_t plane = 0; plane < std::size_t{batch} * channels; ++plane)
    for (uint32_t i = 0; i < pixels; ++i) dx[plane * pixels + i] = dy[plane] / static_cast<float>(pixels);
}

void depthwise_conv2d_forward(const ConvShape& s, std::span<const float> x,
                              std::span<const float> w, std::span<float> y) {
  assert(s.in_ch == s.out_ch && x.size() >= s.input_size() && y.size() >= s.output_size() &&
         w.size() >= std::size_t{s.in_ch} * s.kernel * s.kernel);
  const int k = static_cast<int>(s.kernel), pad = k / 2, st = static_cast<int>(s.stride);
  const int h = static_cast<int>(s.height), wd = static_cast<int>(s.width);
  const int oh = static_cast<int>(s.out_height()), ow = static_cast<int>(s.out_width());
  for (uint32_t n = 0; n < s.batch; ++n) {
    for (uint32_t c = 0; c < s.in_ch; ++c) {
      const std::size_t plane = std::size_t{n} * s.in_ch + c;
      const float* img = x.data() + plane * h * wd;
      const float* f = w.data() + std::size_t{c} * k * k;
      float* out = y.data() + plane * oh * ow;
      for (int oy = 0; oy < oh; ++oy) {
        for (int ox = 0; ox < ow; ++ox) {
          float acc = 0;
          for (int ky = 0; ky < k; ++ky) {
            const int sy = oy * st + ky - pad;
            if (sy < 0 || sy >= h) continue;
            for (int kx = 0; kx < k; ++kx) {
              const int sx = ox * st + kx - pad;
              if (sx >= 0 && sx < wd) acc += f[ky * k + kx] * img[sy * wd + sx];
            }
          }
          out[oy * ow + ox] = acc;
        }
      }
    }
  }
}

void depthwise_conv2d_backward(const ConvShape& s, std::span<const float> x,
                               std::span<const float> w, std::span<const float> dy,
                               std::span<float> dx, std::span<float> dw) {
  const int k = static_cast<int>(s.kernel), pad = k / 2, st = static_cast<int>(s.stride);
  const int h = static_cast<int>(s.height), wd = static_cast<int>(s.width);
  const int oh = static_cast<int>(s.out_height()), ow = static_cast<int>(s.out_width());
  std::fill(dx.begin(), dx.begin() + static_cast<std::ptrdiff_t>(s.input_size()), 0.0F);
  std::fill(dw.begin(), dw.begin() + static_cast<std::ptrdiff_t>(std::size_t{s.in_ch} * k * k), 0.0F);
  for (uint32_t n = 0; n < s.batch; ++n) {
    for (uint32_t c = 0; c < s.in_ch; ++c) {
      const std::size_t plane = std::size_t{n} * s.in_ch + c;
      const float* img = x.data() + plane * h * wd;
      float* dimg = dx.data() + plane * h * wd;
      const float* f = w.data() + std::size_t{c} * k * k;
      float* df = dw.data() + std::size_t{c} * k * k;
      const float* g = dy.data() + plane * oh * ow;
      for (int oy = 0; oy < oh; ++oy) {
        for (int ox = 0; ox < ow; ++ox) {
          const float go = g[oy * ow + ox];
          for (int ky = 0; ky < k; ++ky) {
            const int sy = oy * st + ky - pad;
            if (sy < 0 || sy >= h) continue;
            for (int kx = 0; kx < k; ++kx) {
              const int sx = ox * st + kx - pad;
              if (sx < 0 || sx >= wd) continue;
              df[ky * k + kx] += go * img[sy * wd + sx];
              dimg[sy * wd + sx] += go * f[ky * k + kx];
            }
          }
        }
      }
    }
  }
}

void relu6_forward(std::span<const float> x, std::span<float> y) {
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = std::clamp(x[i], 0.0F, 6.0F);
}

void relu6_backward(std::span<const float> y, std::span<const float> dy, std::span<float> dx) {
  for (std::size_t i = 0; i < y.size(); ++i) dx[i] = dy[i] * static_cast<float>((y[i] > 0.0F) & (y[i] < 6.0F));
}

namespace {
constexpr float kSqrt2OverPi = 0.7978845608028654F;
constexpr float kGeluCubic = 0.044715F;
}  // namespace

void gelu_forward(std::span<const float> x, std::span<float> y) {
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float v = x[i];
    y[i] = 0.5F * v * (1.0F + std::tanh(kSqrt2OverPi * (v + kGeluCubic * v * v * v)));
  }
}

void gelu_backward(std::span<const float> x, std::span<const float> dy, std::span<float> dx) {
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float v = x[i];
    const float t = std::tanh(kSqrt2OverPi * (v + kGeluCubic * v * v * v));
    const float dt = (1.0F - t * t) * kSqrt2OverPi * (1.0F + 3.0F * kGeluCubic * v * v);
    dx[i] = dy[i] * (0.5F * (1.0F + t) + 0.5F * v * dt);
  }
}

void tanh_forward(std::span<const float> x, std::span<float> y) {
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = std::tanh(x[i]);
}

void tanh_backward(std::span<const float> y, std::span<const float> dy, std::span<float> dx) {
  for (std::size_t i = 0; i < y.size(); ++i) dx[i] = dy[i] * (1.0F - y[i] * y[i]);
}

void sigmoid_forward(std::span<const float> x, std::span<float> y) {
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = 1.0F / (1.0F + std::exp(-x[i]));
}

void sigmoid_backward(std::span<const float> y, std::span<const float> dy, std::span<float> dx) {
  for (std::size_t i = 0; i < y.size(); ++i) dx[i] = dy[i] * y[i] * (1.0F - y[i]);
}

void layer_norm_forward(uint32_t rows, uint32_t features, std::span<const float> x,
                        std::span<const float> gamma, std::span<const float> beta,
                        std::span<float> y, std::span<float> saved, float epsilon) {
  for (uint32_t r = 0; r < rows; ++r) {
    const float* in = x.data() + std::size_t{r} * features;
    float* out = y.data() + std::size_t{r} * features;
    double sum = 0, sq = 0;
    for (uint32_t f = 0; f < features; ++f) sum += in[f];
    const double mean = sum / features;
    for (uint32_t f = 0; f < features; ++f) sq += (in[f] - mean) * (in[f] - mean);
    const auto inv = static_cast<float>(1.0 / std::sqrt(sq / features + epsilon));
    const auto m = static_cast<float>(mean);
    for (uint32_t f = 0; f < features; ++f) out[f] = (in[f] - m) * inv * gamma[f] + beta[f];
    saved[2 * r] = m;
    saved[2 * r + 1] = inv;
  }
}

void layer_norm_backward(uint32_t rows, uint32_t features, std::span<const float> x,
                         std::span<const float> gamma, std::span<const float> saved,
                         std::span<const float> dy, std::span<float> dx, std::span<float> dgamma,
                         std::span<float> dbeta) {
  std::fill(dgamma.begin(), dgamma.begin() + features, 0.0F);
  std::fill(dbeta.begin(), dbeta.begin() + features, 0.0F);
  for (uint32_t r = 0; r < rows; ++r) {
    const float* in = x.data() + std::size_t{r} * features;
    const float* g = dy.data() + std::size_t{r} * features;
    float* out = dx.data() + std::size_t{r} * features;
    const float m = saved[2 * r], inv = saved[2 * r + 1];
    // dxhat = dy * gamma; dx = inv * (dxhat - mean(dxhat) - xhat * mean(dxhat * xhat)).
    double mean_d = 0, mean_dx = 0;
    for (uint32_t f = 0; f < features; ++f) {
      const float xhat = (in[f] - m) * inv;
      const float d = g[f] * gamma[f];
      mean_d += d;
      mean_dx += static_cast<double>(d) * xhat;
      dgamma[f] += g[f] * xhat;
      dbeta[f] += g[f];
    }
    mean_d /= features;
    mean_dx /= features;
    for (uint32_t f = 0; f < features; ++f) {
      const float xhat = (in[f] - m) * inv;
      out[f] = inv * (g[f] * gamma[f] - static_cast<float>(mean_d) - xhat * static_cast<float>(mean_dx));
    }
  }
}

namespace {
/// The row of table t a token reads.
std::size_t embedding_row(std::size_t t, std::span<const uint32_t> table_rows,
                          std::span<const int64_t> ids, std::size_t token, uint32_t seq) {
  std::size_t row = 0;
  if (t == 0) row = static_cast<std::size_t>(std::max<int64_t>(ids[token], 0));
  if (t == 1) row = token % seq;
  return std::min<std::size_t>(row, table_rows[t] - 1);
}
}  // namespace

void embedding_forward(uint32_t batch, uint32_t seq, uint32_t dim,
                       std::span<const uint32_t> table_rows, std::span<const int64_t> ids,
                       std::span<const float> tables, std::span<float> y) {
  const std::size_t tokens = std::size_t{batch} * seq;
  std::fill(y.begin(), y.begin() + static_cast<std::ptrdiff_t>(tokens * dim), 0.0F);
  std::size_t base = 0;
  for (std::size_t t = 0; t < table_rows.size(); ++t) {
    for (std::size_t tok = 0; tok < tokens; ++tok) {
      const float* row = tables.data() + (base + embedding_row(t, table_rows, ids, tok, seq)) * dim;
      float* out = y.data() + tok * dim;
      for (uint32_t d = 0; d < dim; ++d) out[d] += row[d];
    }
    base += table_rows[t];
  }
}

void embedding_backward(uint32_t batch, uint32_t seq, uint32_t dim,
                        std::span<const uint32_t> table_rows, std::span<const int64_t> ids,
                        std::span<const float> dy, std::span<float> dtables) {
  const std::size_t tokens = std::size_t{batch} * seq;
  std::fill(dtables.begin(), dtables.end(), 0.0F);
  std::size_t base = 0;
  for (std::size_t t = 0; t < table_rows.size(); ++t) {
    for (std::size_t tok = 0; tok < tokens; ++tok) {
      float* row = dtables.data() + (base + embedding_row(t, table_rows, ids, tok, seq)) * dim;
      const float* g = dy.data() + tok * dim;
      for (uint32_t d = 0; d < dim; ++d) row[d] += g[d];
    }
    base += table_rows[t];
  }
}

namespace {
using Stride = Eigen::OuterStride<>;
using HeadMap = Eigen::Map<const RowMatrix, 0, Stride>;
using MutHeadMap = Eigen::Map<RowMatrix, 0, Stride>;

/// Part `which` (0 Q, 1 K, 2 V) of head h of sample n: a (seq, head_dim) view into qkv.
template <typename Map_, typename Ptr>
Map_ head_view(const AttentionShape& s, Ptr qkv, uint32_t n, uint32_t h, int which) {
  const std::size_t offset = std::size_t{n} * s.seq * 3 * s.dim + std::size_t(which) * s.dim +
                             std::size_t{h} * s.head_dim();
  return Map_(qkv + offset, s.seq, s.head_dim(), Stride(3 * static_cast<Eigen::Index>(s.dim)));
}
}  // namespace

void attention_scores_forward(const AttentionShape& s, std::span<const float> qkv,
                              std::span<float> p) {
  const float scale = 1.0F / std::sqrt(static_cast<float>(s.head_dim()));
  for (uint32_t n = 0; n < s.batch; ++n) {
    for (uint32_t h = 0; h < s.heads; ++h) {
      Map scores(p.data() + (std::size_t{n} * s.heads + h) * s.seq * s.seq, s.seq, s.seq);
      scores.noalias() = scale * head_view<HeadMap>(s, qkv.data(), n, h, 0) *
                         head_view<HeadMap>(s, qkv.data(), n, h, 1).transpose();
      for (Eigen::Index i = 0; i < scores.rows(); ++i) {
        const Eigen::Index visible = s.causal ? i + 1 : scores.cols();
        const float top = scores.row(i).head(visible).maxCoeff();
        float sum = 0;
        for (Eigen::Index j = 0; j < visible; ++j) sum += (scores(i, j) = std::exp(scores(i, j) - top));
        scores.row(i).head(visible) /= sum;
        scores.row(i).tail(scores.cols() - visible).setZero();
      }
    }
  }
}

void attention_scores_backward(const AttentionShape& s, std::span<const float> qkv,
                               std::span<const float> p, std::span<const float> dp,
                               std::span<float> dqkv) {
  const float scale = 1.0F / std::sqrt(static_cast<float>(s.head_dim()));
  std::fill(dqkv.begin(), dqkv.begin() + static_cast<std::ptrdiff_t>(s.qkv_size()), 0.0F);
  RowMatrix ds(s.seq, s.seq);
  for (uint32_t n = 0; n < s.batch; ++n) {
    for (uint32_t h = 0; h < s.heads; ++h) {
      const std::size_t at = (std::size_t{n} * s.heads + h) * s.seq * s.seq;
      const ConstMap pm(p.data() + at, s.seq, s.seq), dpm(dp.data() + at, s.seq, s.seq);
      // Softmax backward: ds = p * (dp - rowsum(p * dp)); masked entries have p = 0.
      const Eigen::VectorXf rows = (pm.array() * dpm.array()).rowwise().sum();
      ds = (pm.array() * (dpm.array().colwise() - rows.array())).matrix() * scale;
      head_view<MutHeadMap>(s, dqkv.data(), n, h, 0).noalias() = ds * head_view<HeadMap>(s, qkv.data(), n, h, 1);
      head_view<MutHeadMap>(s, dqkv.data(), n, h, 1).noalias() =
          ds.transpose() * head_view<HeadMap>(s, qkv.data(), n, h, 0);
    }
  }
}

void attention_context_forward(const AttentionShape& s, std::span<const float> p,
                               std::span<const float> qkv, std::span<float> context) {
  for (uint32_t n = 0; n < s.batch; ++n) {
    for (uint32_t h = 0; h < s.heads; ++h) {
      const ConstMap pm(p.data() + (std::size_t{n} * s.heads + h) * s.seq * s.seq, s.seq, s.seq);
      MutHeadMap out(context.data() + std::size_t{n} * s.seq * s.dim + std::size_t{h} * s.head_dim(),
                     s.seq, s.head_dim(), Stride(s.dim));
      out.noalias() = pm * head_view<HeadMap>(s, qkv.data(), n, h, 2);
    }
  }
}

void attention_context_backward(const AttentionShape& s, std::span<const float> p,
                                std::span<const float> qkv, std::span<const float> dcontext,
                                std::span<float> dp, std::span<float> dqkv) {
  std::fill(dqkv.begin(), dqkv.begin() + static_cast<std::ptrdiff_t>(s.qkv_size()), 0.0F);
  for (uint32_t n = 0; n < s.batch; ++n) {
    for (uint32_t h = 0; h < s.heads; ++h) {
      const std::size_t at = (std::size_t{n} * s.heads + h) * s.seq * s.seq;
      const ConstMap pm(p.data() + at, s.seq, s.seq);
      const HeadMap dc(dcontext.data() + std::size_t{n} * s.seq * s.dim + std::size_t{h} * s.head_dim(),
                       s.seq, s.head_dim(), Stride(s.dim));
      Map(dp.data() + at, s.seq, s.seq).noalias() = dc * head_view<HeadMap>(s, qkv.data(), n, h, 2).transpose();
      head_view<MutHeadMap>(s, dqkv.data(), n, h, 2).noalias() = pm.transpose() * dc;
    }
  }
}

float softmax_cross_entropy(uint32_t batch, uint32_t classes, std::span<const float> logits,
                            std::span<const uint32_t> labels, std::span<float> dlogits) {
  double loss = 0;
  for (uint32_t n = 0; n < batch; ++n) {
    const float* z = logits.data() + std::size_t{n} * classes;
    float* g = dlogits.data() + std::size_t{n} * classes;
    const float top = *std::max_element(z, z + classes);
    double total = 0;
    for (uint32_t k = 0; k < classes; ++k) total += std::exp(static_cast<double>(z[k] - top));
    for (uint32_t k = 0; k < classes; ++k)
      g[k] = static_cast<float>(std::exp(static_cast<double>(z[k] - top)) / total / batch);
    g[labels[n]] -= 1.0F / static_cast<float>(batch);
    loss += std::log(total) + top - z[labels[n]];
  }
  return static_cast<float>(loss / batch);
}

}  // namespace ergon::profiler
