#include "profiler/op_runner.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <random>
#include <thread>

#include "common/error.h"
#include "profiler/kernels.h"

namespace ergon::profiler {
namespace {

std::vector<float> filled_values(std::size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<float> v(n);
  for (float& x : v) x = u(rng);
  return v;
}

}  // namespace

OpRunner::OpRunner(std::filesystem::path scratch_dir) : scratch_(std::move(scratch_dir)) {
  std::error_code ec;
  std::filesystem::create_directories(scratch_, ec);
  scratch_ /= "ergon-paging-" + std::to_string(::getpid()) + ".bin";
}

OpRunner::~OpRunner() {
  std::error_code ec;
  std::filesystem::remove(scratch_, ec);
}

namespace {

ConvShape conv_shape(const std::array<uint32_t, kMaxDims>& d) {
  return {d[0], d[1], d[2], d[3], d[4], conv_kernel(d[5]), conv_stride(d[5])};
}

AttentionShape attention_shape(const std::array<uint32_t, kMaxDims>& d) {
  return {d[0], d[1], d[2], d[3], d[4] != 0};
}

std::size_t product(const std::array<uint32_t, kMaxDims>& d, std::size_t n) {
  std::size_t p = 1;
  for (std::size_t i = 0; i < n; ++i) p *= d[i];
  return p;
}

std::size_t tensor_bytes(const std::vector<float>& v) { return v.size() * sizeof(float); }

}  // namespace

OpRunner::Buffers& OpRunner::buffers_for(const OpShape& shape, uint16_t copies) {
  auto [it, fresh] = buffers_.try_emplace({static_cast<int>(shape.kind), shape.dims});
  Copies& c = it->second;
  if (fresh) {
    c.copies.push_back(make_buffers(shape, 0));
    const Buffers& one = c.copies.front();
    const std::size_t bytes = tensor_bytes(one.a) + tensor_bytes(one.b) + tensor_bytes(one.c) + tensor_bytes(one.d) +
                              tensor_bytes(one.e) + tensor_bytes(one.f) + one.ids.size() * sizeof(int64_t) +
                              one.labels.size() * sizeof(uint32_t);
    c.bytes = bytes;
    c.rotation = rotation_copies(bytes);
  }
  const std::size_t count = copies == 0 ? c.rotation : copies;
  if (copies > c.rotation && count * c.bytes > kMaxAskedBytes)
    throw DeviceError(std::to_string(copies) + " copies of a " + std::string(to_string(shape.kind)) + " op (" +
                      dims_text(shape) + ") would take " + std::to_string((count * c.bytes) >> 20) + " MiB; at most " +
                      std::to_string(kMaxAskedBytes >> 20) + " MiB");
  while (c.copies.size() < count) c.copies.push_back(make_buffers(shape, static_cast<uint32_t>(c.copies.size())));
  std::size_t& next = c.next[copies];
  Buffers& b = c.copies[next % count];
  next = (next + 1) % count;
  return b;
}

OpRunner::Buffers OpRunner::make_buffers(const OpShape& shape, uint32_t copy) {
  Buffers b;
  const auto& d = shape.dims;
  // Each copy holds other values: seeds 1, 2, 3 (and 4 for token ids) shifted per copy.
  auto filled = [&](std::size_t n, uint32_t seed) { return filled_values(n, seed + 16 * copy); };
  // a: input, b: weights (or a second input), c: output / output gradient, d: scratch,
  // e: input gradient, f: weight gradient (or a second input gradient).
  auto elementwise = [&](std::size_t n) {
    b.a = filled(n, 1);
    b.b = filled(n, 2);
    b.c = filled(n, 3);
    b.e = std::vector<float>(n);
    b.f = std::vector<float>(n);
  };
  switch (shape.kind) {
    case OpKind::kConv2d: {
      const ConvShape s = conv_shape(d);
      const std::size_t weights = conv_depthwise(d[5]) ? std::size_t{s.in_ch} * s.kernel * s.kernel : s.weight_size();
      b.a = filled(s.input_size(), 1);
      b.b = filled(weights, 2);
      b.c = filled(s.output_size(), 3);
      if (!conv_depthwise(d[5])) b.d = std::vector<float>(s.columns_size());
      b.e = std::vector<float>(s.input_size());
      b.f = std::vector<float>(weights);
      break;
    }
    case OpKind::kLinear:
      b.a = filled(std::size_t{d[0]} * d[1], 1);
      b.b = filled(std::size_t{d[2]} * d[1], 2);
      b.c = filled(std::size_t{d[0]} * d[2], 3);
      b.e = std::vector<float>(b.a.size());
      b.f = std::vector<float>(b.b.size());
      break;
    case OpKind::kMaxPool:
      b.a = filled(product(d, 4), 1);
      b.c = filled(b.a.size() / (std::size_t{d[4]} * d[4]), 3);
      b.e = std::vector<float>(b.a.size());
      break;
    case OpKind::kRelu:
    case OpKind::kAdd:
    case OpKind::kRelu6:
    case OpKind::kGelu:
    case OpKind::kTanh:
      elementwise(d[0]);
      break;
    case OpKind::kBatchNorm:
      elementwise(product(d, 3));
      b.b = filled(2 * std::size_t{d[1]}, 2);  // gamma, beta
      b.d = std::vector<float>(2 * std::size_t{d[1]});
      b.f = std::vector<float>(2 * std::size_t{d[1]});
      break;
    case OpKind::kLayerNorm:
      elementwise(product(d, 2));
      b.b = filled(2 * std::size_t{d[1]}, 2);
      b.d = std::vector<float>(2 * std::size_t{d[0]});
      b.f = std::vector<float>(2 * std::size_t{d[1]});
      break;
    case OpKind::kAvgPool:
      b.a = filled(product(d, 3), 1);
      b.c = filled(product(d, 2), 3);
      b.e = std::vector<float>(b.a.size());
      break;
    case OpKind::kEmbedding: {
      const std::size_t rows = std::size_t{d[3]} + d[4] + d[5];
      b.a = filled(rows * d[2], 1);  // the tables
      b.c = filled(product(d, 3), 3);
      b.f = std::vector<float>(b.a.size());
      std::mt19937 rng(4 + 16 * copy);
      std::uniform_int_distribution<int64_t> id(0, std::max<int64_t>(d[3], 1) - 1);
      b.ids.resize(product(d, 2));
      for (int64_t& v : b.ids) v = id(rng);
      break;
    }
    case OpKind::kAttentionScores:
    case OpKind::kAttentionContext: {
      const AttentionShape s = attention_shape(d);
      b.a = filled(s.qkv_size(), 1);
      b.b = filled(s.scores_size(), 2);  // probabilities
      b.c = filled(shape.kind == OpKind::kAttentionScores ? s.scores_size() : s.context_size(), 3);
      b.d = std::vector<float>(s.scores_size());
      b.e = std::vector<float>(s.qkv_size());
      break;
    }
    case OpKind::kCrossEntropy:
      b.a = filled(product(d, 2), 1);
      b.e = std::vector<float>(b.a.size());
      b.labels.resize(d[0]);
      for (uint32_t r = 0; r < d[0]; ++r) b.labels[r] = r % std::max<uint32_t>(d[1], 1);
      break;
    default:
      break;
  }
  return b;
}

void OpRunner::run(const OpShape& shape, Phase phase, uint16_t copies) {
  const auto& d = shape.dims;
  const bool backward = phase == Phase::kBackward;
  switch (shape.kind) {
    case OpKind::kIdle:
      std::this_thread::sleep_for(std::chrono::microseconds(d[0]));
      return;
    case OpKind::kPaging:
      return phase == Phase::kPageIn ? page_in(shape.bytes_in) : page_out(shape.bytes_in);
    default:
      break;
  }
  // A compute op without its dimensions would run nothing and time nothing.
  if (shape.dim_count == 0 || std::any_of(d.begin(), d.begin() + std::min<std::size_t>(shape.dim_count, 3),
                                          [](uint32_t v) { return v == 0; }))
    throw DeviceError(std::string("a ") + std::string(to_string(shape.kind)) +
                      " op without its dimensions cannot run (" + dims_text(shape) + ")");
  Buffers& b = buffers_for(shape, copies);
  switch (shape.kind) {
    case OpKind::kConv2d: {
      const ConvShape s = conv_shape(d);
      if (conv_depthwise(d[5])) {
        if (backward) depthwise_conv2d_backward(s, b.a, b.b, b.c, b.e, b.f);
        else depthwise_conv2d_forward(s, b.a, b.b, b.c);
      } else if (backward) {
        conv2d_backward(s, b.a, b.b, b.c, b.e, b.f, b.d);
      } else {
        conv2d_forward(s, b.a, b.b, b.c, b.d);
      }
      return;
    }
    case OpKind::kLinear:
      if (backward) linear_backward(d[0], d[1], d[2], b.a, b.b, b.c, b.e, b.f);
      else linear_forward(d[0], d[1], d[2], b.a, b.b, b.c);
      return;
    case OpKind::kRelu:
      if (backward) relu_backward(b.a, b.c, b.e);
      else relu_forward(b.a, b.c);
      return;
    case OpKind::kRelu6:
      if (backward) relu6_backward(b.a, b.c, b.e);
      else relu6_forward(b.a, b.c);
      return;
    case OpKind::kGelu:
      if (backward) gelu_backward(b.a, b.c, b.e);
      else gelu_forward(b.a, b.c);
      return;
    case OpKind::kTanh:
      if (backward) tanh_backward(b.a, b.c, b.e);
      else tanh_forward(b.a, b.c);
      return;
    case OpKind::kMaxPool:
      if (backward) max_pool_backward(d[0], d[1], d[2], d[3], d[4], b.a, b.c, b.e);
      else max_pool_forward(d[0], d[1], d[2], d[3], d[4], b.a, b.c);
      return;
    case OpKind::kAdd:
      if (backward) add_backward(b.c, b.e, b.f);
      else add_forward(b.a, b.b, b.c);
      return;
    case OpKind::kBatchNorm: {
      const std::span<const float> gb(b.b);
      if (backward) {  // as the executor does: the statistics again, then the gradients
        batch_norm_forward(d[0], d[1], d[2], b.a, gb.first(d[1]), gb.subspan(d[1]), b.e, b.d);
        batch_norm_backward(d[0], d[1], d[2], b.a, gb.first(d[1]), b.d, b.c, b.e,
                            std::span<float>(b.f).first(d[1]), std::span<float>(b.f).subspan(d[1]));
      } else {
        batch_norm_forward(d[0], d[1], d[2], b.a, gb.first(d[1]), gb.subspan(d[1]), b.c, b.d);
      }
      return;
    }
    case OpKind::kLayerNorm: {
      const std::span<const float> gb(b.b);
      if (backward) {
        layer_norm_forward(d[0], d[1], b.a, gb.first(d[1]), gb.subspan(d[1]), b.e, b.d);
        layer_norm_backward(d[0], d[1], b.a, gb.first(d[1]), b.d, b.c, b.e,
                            std::span<float>(b.f).first(d[1]), std::span<float>(b.f).subspan(d[1]));
      } else {
        layer_norm_forward(d[0], d[1], b.a, gb.first(d[1]), gb.subspan(d[1]), b.c, b.d);
      }
      return;
    }
    case OpKind::kAvgPool:
      if (backward) global_avg_pool_backward(d[0], d[1], d[2], b.c, b.e);
      else global_avg_pool_forward(d[0], d[1], d[2], b.a, b.c);
      return;
    case OpKind::kEmbedding: {
      std::vector<uint32_t> rows;
      for (std::size_t t = 3; t < 6 && d[t] != 0; ++t) rows.push_back(d[t]);
      if (backward) embedding_backward(d[0], d[1], d[2], rows, b.ids, b.c, b.f);
      else embedding_forward(d[0], d[1], d[2], rows, b.ids, b.a, b.c);
      return;
    }
    case OpKind::kAttentionScores:
      if (backward) attention_scores_backward(attention_shape(d), b.a, b.b, b.c, b.e);
      else attention_scores_forward(attention_shape(d), b.a, b.c);
      return;
    case OpKind::kAttentionContext:
      if (backward) attention_context_backward(attention_shape(d), b.b, b.a, b.c, b.d, b.e);
      else attention_context_forward(attention_shape(d), b.b, b.a, b.c);
      return;
    case OpKind::kCrossEntropy:
      (void)softmax_cross_entropy(d[0], d[1], b.a, b.labels, b.e);
      return;
    default:
      return;
  }
}

void OpRunner::page_out(uint64_t bytes) {
  io_.resize(std::max<std::size_t>(io_.size(), bytes), 'e');
  const int fd = ::open(scratch_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  bool ok = fd >= 0;
  for (uint64_t done = 0; ok && done < bytes;) {
    const ssize_t n = ::write(fd, io_.data() + done, bytes - done);
    ok = n > 0;
    done += ok ? static_cast<uint64_t>(n) : 0;
  }
  ok = ok && ::fsync(fd) == 0;  // the data is on the storage, not in the page cache
  const int err = errno;
  if (fd >= 0) ::close(fd);
  if (!ok) throw DeviceError("cannot page out to " + scratch_.string() + ": " + std::strerror(err));
}

void OpRunner::page_in(uint64_t bytes) {
  io_.resize(std::max<std::size_t>(io_.size(), bytes));
  std::error_code ec;
  const auto size = std::filesystem::file_size(scratch_, ec);
  if (ec || size < bytes) page_out(bytes);  // nothing that large paged out yet: write it first
  const int fd = ::open(scratch_.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw DeviceError("cannot page in from " + scratch_.string() + ": " + std::strerror(errno));
  // Read from the storage, not from the page cache the page-out left.
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
  bool ok = true;
  for (uint64_t done = 0; ok && done < bytes;) {
    const ssize_t n = ::pread(fd, io_.data() + done, bytes - done, static_cast<off_t>(done));
    ok = n > 0;
    done += ok ? static_cast<uint64_t>(n) : 0;
  }
  const int err = errno;
  ::close(fd);
  if (!ok) throw DeviceError("cannot page in from " + scratch_.string() + ": " + std::strerror(err));
}

}  // namespace ergon::profiler
