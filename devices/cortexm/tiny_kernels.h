#pragma once

// Float kernels small enough for a Cortex-M: direct loops, no library, no heap. The same
// arithmetic as profiler/kernels.h (tests compare them), with a `yield` called between
// output rows so the firmware can answer clock syncs and read its power monitor while a long
// kernel runs (it is single-threaded).

#include <cstddef>
#include <cstdint>

namespace ergon::devices::cortexm {

struct Yield {
  void (*fn)(void*) = nullptr;
  void* ctx = nullptr;
  void operator()() const {
    if (fn != nullptr) fn(ctx);
  }
};

/// Padding kernel / 2, any stride. Input (batch, in_ch, h, w), weights (out_ch, in_ch, k, k).
struct TinyConv {
  uint32_t batch, in_ch, out_ch, height, width, kernel, stride;
  [[nodiscard]] uint32_t out_h() const { return (height + 2 * (kernel / 2) - kernel) / stride + 1; }
  [[nodiscard]] uint32_t out_w() const { return (width + 2 * (kernel / 2) - kernel) / stride + 1; }
  [[nodiscard]] std::size_t input_size() const { return std::size_t{batch} * in_ch * height * width; }
  [[nodiscard]] std::size_t weight_size() const { return std::size_t{out_ch} * in_ch * kernel * kernel; }
  [[nodiscard]] std::size_t output_size() const { return std::size_t{batch} * out_ch * out_h() * out_w(); }
};

void conv2d_forward(const TinyConv& s, const float* x, const float* w, float* y, Yield yield);
void conv2d_backward(const TinyConv& s, const float* x, const float* w, const float* dy, float* dx,
                     float* dw, Yield yield);
/// y[batch, out] = x[batch, in] w[out, in]^T.
void linear_forward(uint32_t batch, uint32_t in, uint32_t out, const float* x, const float* w,
                    float* y, Yield yield);
void linear_backward(uint32_t batch, uint32_t in, uint32_t out, const float* x, const float* w,
                     const float* dy, float* dx, float* dw, Yield yield);
void relu_forward(std::size_t n, const float* x, float* y);
void relu_backward(std::size_t n, const float* y, const float* dy, float* dx);
/// Windows of `window` x `window`, stride `window`.
void max_pool_forward(uint32_t batch, uint32_t channels, uint32_t height, uint32_t width,
                      uint32_t window, const float* x, float* y);
void max_pool_backward(uint32_t batch, uint32_t channels, uint32_t height, uint32_t width,
                       uint32_t window, const float* x, const float* dy, float* dx);
void add_forward(std::size_t n, const float* a, const float* b, float* y);
void add_backward(std::size_t n, const float* dy, float* da, float* db);

}  // namespace ergon::devices::cortexm
