#include "devices/cortexm/tiny_kernels.h"

namespace ergon::devices::cortexm {

void conv2d_forward(const TinyConv& s, const float* x, const float* w, float* y, Yield yield) {
  const int k = static_cast<int>(s.kernel), pad = k / 2, st = static_cast<int>(s.stride);
  const int h = static_cast<int>(s.height), wd = static_cast<int>(s.width);
  const int oh = static_cast<int>(s.out_h()), ow = static_cast<int>(s.out_w());
  for (uint32_t n = 0; n < s.batch; ++n) {
    for (uint32_t o = 0; o < s.out_ch; ++o) {
      float* out = y + (std::size_t{n} * s.out_ch + o) * oh * ow;
      for (int oy = 0; oy < oh; ++oy) {
        for (int ox = 0; ox < ow; ++ox) {
          float acc = 0;
          for (uint32_t c = 0; c < s.in_ch; ++c) {
            const float* img = x + (std::size_t{n} * s.in_ch + c) * h * wd;
            const float* f = w + (std::size_t{o} * s.in_ch + c) * k * k;
            for (int ky = 0; ky < k; ++ky) {
              const int sy = oy * st + ky - pad;
              if (sy < 0 || sy >= h) continue;
              for (int kx = 0; kx < k; ++kx) {
                const int sx = ox * st + kx - pad;
                if (sx >= 0 && sx < wd) acc += f[ky * k + kx] * img[sy * wd + sx];
              }
            }
          }
          out[oy * ow + ox] = acc;
        }
        yield();
      }
    }
  }
}

void conv2d_backward(const TinyConv& s, const float* x, const float* w, const float* dy, float* dx,
                     float* dw, Yield yield) {
  const int k = static_cast<int>(s.kernel), pad = k / 2, st = static_cast<int>(s.stride);
  const int h = static_cast<int>(s.height), wd = static_cast<int>(s.width);
  const int oh = static_cast<int>(s.out_h()), ow = static_cast<int>(s.out_w());
  for (std::size_t i = 0; i < s.input_size(); ++i) dx[i] = 0;
  for (std::size_t i = 0; i < s.weight_size(); ++i) dw[i] = 0;
  for (uint32_t n = 0; n < s.batch; ++n) {
    for (uint32_t o = 0; o < s.out_ch; ++o) {
      const float* g = dy + (std::size_t{n} * s.out_ch + o) * oh * ow;
      for (int oy = 0; oy < oh; ++oy) {
        for (int ox = 0; ox < ow; ++ox) {
          const float go = g[oy * ow + ox];
          for (uint32_t c = 0; c < s.in_ch; ++c) {
            const float* img = x + (std::size_t{n} * s.in_ch + c) * h * wd;
            float* dimg = dx + (std::size_t{n} * s.in_ch + c) * h * wd;
            const float* f = w + (std::size_t{o} * s.in_ch + c) * k * k;
            float* df = dw + (std::size_t{o} * s.in_ch + c) * k * k;
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
        yield();
      }
    }
  }
}

void linear_forward(uint32_t batch, uint32_t in, uint32_t out, const float* x, const float* w,
                    float* y, Yield yield) {
  for (uint32_t b = 0; b < batch; ++b) {
    for (uint32_t o = 0; o < out; ++o) {
      float acc = 0;
      const float* row = w + std::size_t{o} * in;
      const float* xs = x + std::size_t{b} * in;
      for (uint32_t i = 0; i < in; ++i) acc += row[i] * xs[i];
      y[std::size_t{b} * out + o] = acc;
      if ((o & 15) == 15) yield();
    }
  }
}

void linear_backward(uint32_t batch, uint32_t in, uint32_t out, const float* x, const float* w,
                     const float* dy, float* dx, float* dw, Yield yield) {
  for (std::size_t i = 0; i < std::size_t{batch} * in; ++i) dx[i] = 0;
  for (std::size_t i = 0; i < std::size_t{out} * in; ++i) dw[i] = 0;
  for (uint32_t b = 0; b < batch; ++b) {
    for (uint32_t o = 0; o < out; ++o) {
      const float g = dy[std::size_t{b} * out + o];
      const float* row = w + std::size_t{o} * in;
      float* drow = dw + std::size_t{o} * in;
      const float* xs = x + std::size_t{b} * in;
      float* dxs = dx + std::size_t{b} * in;
      for (uint32_t i = 0; i < in; ++i) {
        dxs[i] += g * row[i];
        drow[i] += g * xs[i];
      }
      if ((o & 15) == 15) yield();
    }
  }
}

void relu_forward(std::size_t n, const float* x, float* y) {
  for (std::size_t i = 0; i < n; ++i) y[i] = x[i] > 0 ? x[i] : 0.0F;
}

void relu_backward(std::size_t n, const float* y, const float* dy, float* dx) {
  for (std::size_t i = 0; i < n; ++i) dx[i] = y[i] > 0 ? dy[i] : 0.0F;
}

namespace {
/// Calls f(input index, output index) for each window's first maximum.
template <class F>
void for_each_window_max(uint32_t batch, uint32_t channels, uint32_t height, uint32_t width,
                         uint32_t window, const float* x, F&& f) {
  const uint32_t oh = height / window, ow = width / window;
  for (uint32_t p = 0; p < batch * channels; ++p) {
    const float* img = x + std::size_t{p} * height * width;
    for (uint32_t oy = 0; oy < oh; ++oy) {
      for (uint32_t ox = 0; ox < ow; ++ox) {
        std::size_t best = std::size_t{oy} * window * width + std::size_t{ox} * window;
        for (uint32_t ky = 0; ky < window; ++ky)
          for (uint32_t kx = 0; kx < window; ++kx) {
            const std::size_t at = (std::size_t{oy} * window + ky) * width + ox * window + kx;
            if (img[at] > img[best]) best = at;
          }
        f(std::size_t{p} * height * width + best, (std::size_t{p} * oh + oy) * ow + ox);
      }
    }
  }
}
}  // namespace

void max_pool_forward(uint32_t batch, uint32_t channels, uint32_t height, uint32_t width,
                      uint32_t window, const float* x, float* y) {
  for_each_window_max(batch, channels, height, width, window, x,
                      [&](std::size_t in, std::size_t out) { y[out] = x[in]; });
}

void max_pool_backward(uint32_t batch, uint32_t channels, uint32_t height, uint32_t width,
                       uint32_t window, const float* x, const float* dy, float* dx) {
  for (std::size_t i = 0; i < std::size_t{batch} * channels * height * width; ++i) dx[i] = 0;
  for_each_window_max(batch, channels, height, width, window, x,
                      [&](std::size_t in, std::size_t out) { dx[in] += dy[out]; });
}

void add_forward(std::size_t n, const float* a, const float* b, float* y) {
  for (std::size_t i = 0; i < n; ++i) y[i] = a[i] + b[i];
}

void add_backward(std::size_t n, const float* dy, float* da, float* db) {
  for (std::size_t i = 0; i < n; ++i) da[i] = db[i] = dy[i];
}

}  // namespace ergon::devices::cortexm
