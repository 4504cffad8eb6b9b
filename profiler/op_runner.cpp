#include "profiler/op_runner.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <random>
#include <thread>

#include "common/error.h"
#include "profiler/kernels.h"

namespace ergon::profiler {
namespace {

std::vector<float> filled(std::size_t n, uint32_t seed) {
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

OpRunner::Buffers& OpRunner::buffers_for(const OpShape& shape) {
  auto [it, fresh] = buffers_.try_emplace({static_cast<int>(shape.kind), shape.dims});
  Buffers& b = it->second;
  if (!fresh) return b;
  const auto& d = shape.dims;
  switch (shape.kind) {
    case OpKind::kConv2d: {
      const ConvShape s{d[0], d[1], d[2], d[3], d[4], d[5]};
      b.a = filled(s.input_size(), 1);    // x
      b.b = filled(s.weight_size(), 2);   // w
      b.c = filled(s.output_size(), 3);   // y / dy
      b.d = std::vector<float>(s.columns_size());
      b.e = std::vector<float>(s.input_size());   // dx
      b.f = std::vector<float>(s.weight_size());  // dw
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
      b.a = filled(std::size_t{d[0]} * d[1] * d[2] * d[3], 1);
      b.c = filled(b.a.size() / (std::size_t{d[4]} * d[4]), 3);
      b.e = std::vector<float>(b.a.size());
      break;
    case OpKind::kRelu:
    case OpKind::kAdd:
      b.a = filled(d[0], 1);
      b.b = filled(d[0], 2);
      b.c = filled(d[0], 3);
      b.e = std::vector<float>(d[0]);
      b.f = std::vector<float>(d[0]);
      break;
    default:
      break;
  }
  return b;
}

void OpRunner::run(const OpShape& shape, Phase phase) {
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
  Buffers& b = buffers_for(shape);
  switch (shape.kind) {
    case OpKind::kConv2d: {
      const ConvShape s{d[0], d[1], d[2], d[3], d[4], d[5]};
      if (backward) conv2d_backward(s, b.a, b.b, b.c, b.e, b.f, b.d);
      else conv2d_forward(s, b.a, b.b, b.c, b.d);
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
    case OpKind::kMaxPool:
      if (backward) max_pool_backward(d[0], d[1], d[2], d[3], d[4], b.a, b.c, b.e);
      else max_pool_forward(d[0], d[1], d[2], d[3], d[4], b.a, b.c);
      return;
    case OpKind::kAdd:
      if (backward) add_backward(b.c, b.e, b.f);
      else add_forward(b.a, b.b, b.c);
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
