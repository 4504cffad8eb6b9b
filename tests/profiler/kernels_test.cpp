#include "profiler/kernels.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace ergon::profiler {
namespace {

std::vector<float> random_values(std::size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

double dot(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) s += static_cast<double>(a[i]) * b[i];
  return s;
}

/// The analytic gradient of L = <dy, f(v)> against central differences at every entry of v
/// (or 40 spread over it).
void expect_gradient(std::vector<float>& v, const std::vector<float>& analytic,
                     const std::function<double()>& loss, const char* what) {
  const std::size_t step = std::max<std::size_t>(1, v.size() / 40);
  for (std::size_t i = 0; i < v.size(); i += step) {
    const float saved = v[i];
    const float eps = 1e-2F;
    v[i] = saved + eps;
    const double up = loss();
    v[i] = saved - eps;
    const double down = loss();
    v[i] = saved;
    const double numeric = (up - down) / (2.0 * eps);
    EXPECT_NEAR(analytic[i], numeric, 2e-3 + 2e-3 * std::abs(numeric)) << what << " entry " << i;
  }
}

TEST(Kernels, Conv2dGradientsMatchFiniteDifferences) {
  for (uint32_t kernel : {1U, 3U, 5U}) {
    const ConvShape s{.batch = 2, .in_ch = 3, .out_ch = 4, .height = 6, .width = 5, .kernel = kernel};
    auto x = random_values(s.input_size(), 1), w = random_values(s.weight_size(), 2);
    const auto dy = random_values(s.output_size(), 3);
    std::vector<float> y(s.output_size()), cols(s.columns_size()), dx(x.size()), dw(w.size());
    auto loss = [&] {
      conv2d_forward(s, x, w, y, cols);
      return dot(dy, y);
    };
    conv2d_backward(s, x, w, dy, dx, dw, cols);
    expect_gradient(x, dx, loss, "conv2d dx");
    expect_gradient(w, dw, loss, "conv2d dw");
  }
}

TEST(Kernels, StridedConv2dGradientsMatchFiniteDifferences) {
  for (uint32_t kernel : {1U, 3U}) {
    const ConvShape s{.batch = 2, .in_ch = 3, .out_ch = 4, .height = 7, .width = 6, .kernel = kernel, .stride = 2};
    EXPECT_EQ(s.out_height(), kernel == 1 ? 4U : 4U);
    EXPECT_EQ(s.out_width(), 3U);
    auto x = random_values(s.input_size(), 21), w = random_values(s.weight_size(), 22);
    const auto dy = random_values(s.output_size(), 23);
    std::vector<float> y(s.output_size()), cols(s.columns_size()), dx(x.size()), dw(w.size());
    auto loss = [&] {
      conv2d_forward(s, x, w, y, cols);
      return dot(dy, y);
    };
    conv2d_backward(s, x, w, dy, dx, dw, cols);
    expect_gradient(x, dx, loss, "strided conv2d dx");
    expect_gradient(w, dw, loss, "strided conv2d dw");
  }
}

TEST(Kernels, BatchNormPoolingAndCrossEntropyGradientsMatchFiniteDifferences) {
  {
    const uint32_t n = 3, c = 2, px = 5;
    auto x = random_values(n * c * px, 31), gamma = random_values(c, 32), beta = random_values(c, 33);
    const auto dy = random_values(x.size(), 34);
    std::vector<float> y(x.size()), saved(2 * c), dx(x.size()), dg(c), db(c);
    batch_norm_forward(n, c, px, x, gamma, beta, y, saved);
    batch_norm_backward(n, c, px, x, gamma, saved, dy, dx, dg, db);
    auto loss = [&] {
      batch_norm_forward(n, c, px, x, gamma, beta, y, saved);
      return dot(dy, y);
    };
    expect_gradient(x, dx, loss, "batch norm dx");
    expect_gradient(gamma, dg, loss, "batch norm dgamma");
    expect_gradient(beta, db, loss, "batch norm dbeta");
    // Normalized: each channel of the output has mean beta.
    batch_norm_forward(n, c, px, x, gamma, beta, y, saved);
    double mean0 = 0;
    for (uint32_t b = 0; b < n; ++b)
      for (uint32_t i = 0; i < px; ++i) mean0 += y[(b * c) * px + i];
    EXPECT_NEAR(mean0 / (n * px), beta[0], 1e-5);
  }
  {
    const uint32_t n = 2, c = 3, px = 4;
    auto x = random_values(n * c * px, 35);
    const auto dy = random_values(n * c, 36);
    std::vector<float> y(n * c), dx(x.size());
    global_avg_pool_backward(n, c, px, dy, dx);
    auto loss = [&] {
      global_avg_pool_forward(n, c, px, x, y);
      return dot(dy, y);
    };
    expect_gradient(x, dx, loss, "global average pool dx");
  }
  {
    const uint32_t n = 4, k = 5;
    auto z = random_values(n * k, 37);
    const std::vector<uint32_t> labels = {0, 3, 4, 1};
    std::vector<float> dz(z.size()), scratch(z.size());
    softmax_cross_entropy(n, k, z, labels, dz);
    auto loss = [&] { return static_cast<double>(softmax_cross_entropy(n, k, z, labels, scratch)); };
    expect_gradient(z, dz, loss, "cross-entropy dlogits");
    // Uniform logits: the loss is log(classes).
    const std::vector<float> flat(n * k, 0.5F);
    EXPECT_NEAR(softmax_cross_entropy(n, k, flat, labels, scratch), std::log(5.0), 1e-6);
  }
}

TEST(Kernels, DepthwiseConv2dGradientsMatchFiniteDifferences) {
  for (uint32_t stride : {1U, 2U}) {
    const ConvShape s{.batch = 2, .in_ch = 3, .out_ch = 3, .height = 7, .width = 6, .kernel = 3,
                      .stride = stride};
    auto x = random_values(s.input_size(), 61), w = random_values(3 * 9, 62);
    const auto dy = random_values(s.output_size(), 63);
    std::vector<float> y(s.output_size()), dx(x.size()), dw(w.size());
    auto loss = [&] {
      depthwise_conv2d_forward(s, x, w, y);
      return dot(dy, y);
    };
    depthwise_conv2d_backward(s, x, w, dy, dx, dw);
    expect_gradient(x, dx, loss, "depthwise dx");
    expect_gradient(w, dw, loss, "depthwise dw");
  }
}

TEST(Kernels, DepthwiseConv2dIsAConvolutionWithOneFilterPerChannel) {
  // The same as a full convolution whose weights are zero across channels.
  const ConvShape s{.batch = 1, .in_ch = 4, .out_ch = 4, .height = 5, .width = 5, .kernel = 3,
                    .stride = 2};
  const auto x = random_values(s.input_size(), 64), w = random_values(4 * 9, 65);
  std::vector<float> full(s.weight_size(), 0.0F);
  for (uint32_t c = 0; c < 4; ++c)
    for (uint32_t k = 0; k < 9; ++k) full[(c * 4 + c) * 9 + k] = w[c * 9 + k];
  std::vector<float> a(s.output_size()), b(s.output_size()), cols(s.columns_size());
  depthwise_conv2d_forward(s, x, w, a);
  conv2d_forward(s, x, full, b, cols);
  for (std::size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-5) << i;
}

TEST(Kernels, ActivationGradientsMatchFiniteDifferences) {
  // Inputs kept away from relu6's kinks at 0 and 6, where the derivative jumps.
  auto x = random_values(60, 66);
  for (float& v : x) v = v * 4.0F + 3.0F;
  for (float& v : x)
    if (std::abs(v) < 0.05F || std::abs(v - 6.0F) < 0.05F) v += 0.2F;
  const auto dy = random_values(x.size(), 67);
  std::vector<float> y(x.size()), dx(x.size());
  const struct {
    const char* name;
    void (*forward)(std::span<const float>, std::span<float>);
    void (*backward)(std::span<const float>, std::span<const float>, std::span<float>);
    bool reads_output;
  } acts[] = {{"relu6", relu6_forward, relu6_backward, true},
              {"gelu", gelu_forward, gelu_backward, false},
              {"tanh", tanh_forward, tanh_backward, true},
              {"sigmoid", sigmoid_forward, sigmoid_backward, true}};
  for (const auto& a : acts) {
    auto v = x;
    for (float& e : v) e = a.reads_output && std::string(a.name) != "relu6" ? e / 3.0F : e;
    a.forward(v, y);
    a.backward(a.reads_output ? std::span<const float>(y) : std::span<const float>(v), dy, dx);
    auto loss = [&] {
      a.forward(v, y);
      return dot(dy, y);
    };
    expect_gradient(v, dx, loss, a.name);
  }
  // GELU's tanh form: gelu(1) = 0.8412 (PyTorch, approximate='tanh').
  const std::vector<float> one{1.0F};
  std::vector<float> out(1);
  gelu_forward(one, out);
  EXPECT_NEAR(out[0], 0.8412F, 1e-4F);
}

TEST(Kernels, LayerNormAndEmbeddingGradientsMatchFiniteDifferences) {
  {
    const uint32_t rows = 4, f = 6;
    auto x = random_values(rows * f, 68), gamma = random_values(f, 69), beta = random_values(f, 70);
    const auto dy = random_values(x.size(), 71);
    std::vector<float> y(x.size()), saved(2 * rows), dx(x.size()), dg(f), db(f);
    layer_norm_forward(rows, f, x, gamma, beta, y, saved);
    layer_norm_backward(rows, f, x, gamma, saved, dy, dx, dg, db);
    auto loss = [&] {
      layer_norm_forward(rows, f, x, gamma, beta, y, saved);
      return dot(dy, y);
    };
    expect_gradient(x, dx, loss, "layer norm dx");
    expect_gradient(gamma, dg, loss, "layer norm dgamma");
    expect_gradient(beta, db, loss, "layer norm dbeta");
  }
  {
    const uint32_t batch = 2, seq = 3, dim = 4;
    const std::vector<uint32_t> rows{5, 3, 2};
    const std::vector<int64_t> ids{4, 0, 4, 1, 2, 9};  // 9 is clamped to the last row
    auto tables = random_values((5 + 3 + 2) * dim, 72);
    const auto dy = random_values(batch * seq * dim, 73);
    std::vector<float> y(dy.size()), dt(tables.size());
    embedding_backward(batch, seq, dim, rows, ids, dy, dt);
    auto loss = [&] {
      embedding_forward(batch, seq, dim, rows, ids, tables, y);
      return dot(dy, y);
    };
    expect_gradient(tables, dt, loss, "embedding dtables");
    // Token 1 of sample 1 reads word 2, position 1 and type 0.
    embedding_forward(batch, seq, dim, rows, ids, tables, y);
    EXPECT_NEAR(y[(3 + 1) * dim], tables[2 * dim] + tables[(5 + 1) * dim] + tables[8 * dim], 1e-6);
  }
}

TEST(Kernels, AttentionGradientsMatchFiniteDifferences) {
  for (bool causal : {false, true}) {
    const AttentionShape s{.batch = 2, .seq = 4, .dim = 6, .heads = 2, .causal = causal};
    auto qkv = random_values(s.qkv_size(), 74);
    const auto dctx = random_values(s.context_size(), 75);
    std::vector<float> p(s.scores_size()), ctx(s.context_size()), dp(p.size()), dqkv_c(qkv.size()),
        dqkv_s(qkv.size()), dqkv(qkv.size());
    // The two ops chained, as a transformer layer runs them.
    attention_scores_forward(s, qkv, p);
    attention_context_backward(s, p, qkv, dctx, dp, dqkv_c);
    attention_scores_backward(s, qkv, p, dp, dqkv_s);
    for (std::size_t i = 0; i < qkv.size(); ++i) dqkv[i] = dqkv_c[i] + dqkv_s[i];
    auto loss = [&] {
      attention_scores_forward(s, qkv, p);
      attention_context_forward(s, p, qkv, ctx);
      return dot(dctx, ctx);
    };
    expect_gradient(qkv, dqkv, loss, causal ? "causal attention dqkv" : "attention dqkv");
    // Rows are distributions; a causal row sees nothing after its own position.
    attention_scores_forward(s, qkv, p);
    double row0 = 0;
    for (uint32_t j = 0; j < s.seq; ++j) row0 += p[j];
    EXPECT_NEAR(row0, 1.0, 1e-6);
    if (causal) {
      EXPECT_EQ(p[1], 0.0F);
      EXPECT_NEAR(p[0], 1.0F, 1e-6F);
    }
  }
}

TEST(Kernels, Conv2dForwardIsTheDirectSum) {
  const ConvShape s{.batch = 1, .in_ch = 2, .out_ch = 3, .height = 4, .width = 4, .kernel = 3};
  const auto x = random_values(s.input_size(), 4), w = random_values(s.weight_size(), 5);
  std::vector<float> y(s.output_size()), cols(s.columns_size());
  conv2d_forward(s, x, w, y, cols);
  for (int o = 0; o < 3; ++o)
    for (int py = 0; py < 4; ++py)
      for (int px = 0; px < 4; ++px) {
        double sum = 0;
        for (int c = 0; c < 2; ++c)
          for (int ky = 0; ky < 3; ++ky)
            for (int kx = 0; kx < 3; ++kx) {
              const int sy = py + ky - 1, sx = px + kx - 1;
              if (sy < 0 || sy >= 4 || sx < 0 || sx >= 4) continue;
              sum += static_cast<double>(x[(c * 4 + sy) * 4 + sx]) * w[((o * 2 + c) * 3 + ky) * 3 + kx];
            }
        EXPECT_NEAR(y[(o * 4 + py) * 4 + px], sum, 1e-5);
      }
}

TEST(Kernels, LinearReluPoolAndAddGradientsMatchFiniteDifferences) {
  {
    const uint32_t b = 3, in = 7, out = 5;
    auto x = random_values(b * in, 6), w = random_values(out * in, 7);
    const auto dy = random_values(b * out, 8);
    std::vector<float> y(b * out), dx(x.size()), dw(w.size());
    auto loss = [&] {
      linear_forward(b, in, out, x, w, y);
      return dot(dy, y);
    };
    linear_backward(b, in, out, x, w, dy, dx, dw);
    expect_gradient(x, dx, loss, "linear dx");
    expect_gradient(w, dw, loss, "linear dw");
  }
  {
    auto x = random_values(64, 9);
    for (float& v : x) v += v < 0 ? -0.05F : 0.05F;  // away from the kink, where no derivative exists
    const auto dy = random_values(64, 10);
    std::vector<float> y(64), dx(64);
    relu_forward(x, y);
    relu_backward(y, dy, dx);
    auto loss = [&] {
      relu_forward(x, y);
      return dot(dy, y);
    };
    expect_gradient(x, dx, loss, "relu dx");
  }
  {
    const uint32_t n = 2, c = 3, h = 4, w = 6, k = 2;
    auto x = random_values(n * c * h * w, 11);
    const auto dy = random_values(n * c * (h / k) * (w / k), 12);
    std::vector<float> y(dy.size()), dx(x.size());
    max_pool_backward(n, c, h, w, k, x, dy, dx);
    auto loss = [&] {
      max_pool_forward(n, c, h, w, k, x, y);
      return dot(dy, y);
    };
    expect_gradient(x, dx, loss, "max pool dx");
  }
  {
    auto a = random_values(32, 13), b = random_values(32, 14);
    const auto dy = random_values(32, 15);
    std::vector<float> y(32), da(32), db(32);
    add_backward(dy, da, db);
    auto loss = [&] {
      add_forward(a, b, y);
      return dot(dy, y);
    };
    expect_gradient(a, da, loss, "add da");
    expect_gradient(b, db, loss, "add db");
  }
}

}  // namespace
}  // namespace ergon::profiler
