#include "profiler/kernels.h"

#include <Eigen/Dense>

#include <algorithm>
#include <cassert>

namespace ergon::profiler {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using Map = Eigen::Map<RowMatrix>;
using ConstMap = Eigen::Map<const RowMatrix>;

/// One image to columns: row (c, ky, kx), column (y, x), zero outside the image.
void im2col(const ConvShape& s, const float* image, float* columns) {
  const int k = static_cast<int>(s.kernel), pad = k / 2;
  const int h = static_cast<int>(s.height), w = static_cast<int>(s.width);
  for (uint32_t c = 0; c < s.in_ch; ++c) {
    for (int ky = 0; ky < k; ++ky) {
      for (int kx = 0; kx < k; ++kx) {
        float* row = columns + ((static_cast<std::size_t>(c) * k + ky) * k + kx) * h * w;
        for (int y = 0; y < h; ++y) {
          const int sy = y + ky - pad;
          for (int x = 0; x < w; ++x) {
            const int sx = x + kx - pad;
            row[y * w + x] = (sy >= 0 && sy < h && sx >= 0 && sx < w)
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
  const int k = static_cast<int>(s.kernel), pad = k / 2;
  const int h = static_cast<int>(s.height), w = static_cast<int>(s.width);
  std::fill(image, image + std::size_t{s.in_ch} * h * w, 0.0F);
  for (uint32_t c = 0; c < s.in_ch; ++c) {
    for (int ky = 0; ky < k; ++ky) {
      for (int kx = 0; kx < k; ++kx) {
        const float* row = columns + ((static_cast<std::size_t>(c) * k + ky) * k + kx) * h * w;
        for (int y = 0; y < h; ++y) {
          const int sy = y + ky - pad;
          if (sy < 0 || sy >= h) continue;
          for (int x = 0; x < w; ++x) {
            const int sx = x + kx - pad;
            if (sx >= 0 && sx < w) image[(static_cast<std::size_t>(c) * h + sy) * w + sx] += row[y * w + x];
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
  const auto pixels = static_cast<Eigen::Index>(std::size_t{s.height} * s.width);
  const ConstMap weights(w.data(), s.out_ch, rows);
  for (uint32_t n = 0; n < s.batch; ++n) {
    im2col(s, x.data() + std::size_t{n} * s.in_ch * pixels, columns.data());
    Map out(y.data() + std::size_t{n} * s.out_ch * pixels, s.out_ch, pixels);
    out.noalias() = weights * ConstMap(columns.data(), rows, pixels);
  }
}

void conv2d_backward(const ConvShape& s, std::span<const float> x, std::span<const float> w,
                     std::span<const float> dy, std::span<float> dx, std::span<float> dw,
                     std::span<float> columns) {
  const auto rows = static_cast<Eigen::Index>(std::size_t{s.in_ch} * s.kernel * s.kernel);
  const auto pixels = static_cast<Eigen::Index>(std::size_t{s.height} * s.width);
  const ConstMap weights(w.data(), s.out_ch, rows);
  Map weight_grad(dw.data(), s.out_ch, rows);
  weight_grad.setZero();
  for (uint32_t n = 0; n < s.batch; ++n) {
    const ConstMap grad(dy.data() + std::size_t{n} * s.out_ch * pixels, s.out_ch, pixels);
    im2col(s, x.data() + std::size_t{n} * s.in_ch * pixels, columns.data());
    weight_grad.noalias() += grad * ConstMap(columns.data(), rows, pixels).transpose();
    Map(columns.data(), rows, pixels).noalias() = weights.transpose() * grad;
    col2im(s, columns.data(), dx.data() + std::size_t{n} * s.in_ch * pixels);
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
  for (std::size_t i = 0; i < y.size(); ++i) dx[i] = y[i] > 0 ? dy[i] : 0.0F;
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

}  // namespace ergon::profiler
