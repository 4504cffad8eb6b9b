#include "devices/cortexm/host/host_hal.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "common/error.h"

namespace ergon::devices::cortexm {

void FdLink::occupy(int64_t& free_ns, std::size_t n) const {
  if (bytes_per_s_ <= 0) return;
  constexpr int64_t kSlackNs = 200'000;  // below this, a sleep overshoots more than it waits
  const int64_t now = clock_.now_ns();
  free_ns = std::max(free_ns, now) + static_cast<int64_t>(static_cast<double>(n) / bytes_per_s_ * 1e9);
  if (free_ns - now > kSlackNs) clock_.sleep_until_ns(free_ns);
}

std::size_t FdLink::read(uint8_t* dst, std::size_t capacity) {
  if (broken_) return 0;
  pollfd p{fd_, POLLIN, 0};
  if (::poll(&p, 1, 0) <= 0) return 0;
  const ssize_t n = ::read(fd_, dst, capacity);
  if (n > 0) {
    occupy(rx_free_ns_, static_cast<std::size_t>(n));
    return static_cast<std::size_t>(n);
  }
  if (n == 0 || (errno != EAGAIN && errno != EINTR)) broken_ = true;
  return 0;
}

bool FdLink::write(const uint8_t* src, std::size_t n) {
  for (std::size_t done = 0; !broken_ && done < n;) {
    const ssize_t w = ::write(fd_, src + done, n - done);
    if (w < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (w <= 0) broken_ = true;
    else done += static_cast<std::size_t>(w);
  }
  occupy(tx_free_ns_, n);
  return !broken_;
}

uint64_t HostClock::now_ticks() {
  const auto ns = static_cast<uint64_t>(clock_.now_ns());
  // Whole seconds and the rest apart, so that 64 bits hold the product at any tick rate.
  return ns / 1'000'000'000U * tick_hz_ + ns % 1'000'000'000U * tick_hz_ / 1'000'000'000U;
}

bool HostI2c::transfer(uint8_t address, const uint8_t* tx, std::size_t tx_n, uint8_t* rx,
                       std::size_t rx_n) {
  try {
    if (rx_n == 0) bus_.write(address, {tx, tx_n});
    else bus_.write_read(address, {tx, tx_n}, {rx, rx_n});
    return true;
  } catch (const Error&) {
    return false;  // not acknowledged: the firmware sees a failed transfer, as on the chip
  }
}

FileBlockDevice::FileBlockDevice(const std::filesystem::path& path, uint32_t block_bytes, uint32_t block_count)
    : path_(path), block_bytes_(block_bytes), block_count_(block_count) {
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd_ < 0) throw DeviceError("cannot open storage file " + path.string() + ": " + std::strerror(errno));
}

FileBlockDevice::~FileBlockDevice() {
  ::close(fd_);
  std::error_code ignored;
  std::filesystem::remove(path_, ignored);
}

bool FileBlockDevice::write(uint32_t first_block, const uint8_t* src, uint32_t blocks) {
  if (uint64_t{first_block} + blocks > block_count_) return false;
  const std::size_t n = std::size_t{blocks} * block_bytes_;
  const auto at = static_cast<off_t>(uint64_t{first_block} * block_bytes_);
  return ::pwrite(fd_, src, n, at) == static_cast<ssize_t>(n) && ::fdatasync(fd_) == 0;
}

bool FileBlockDevice::read(uint32_t first_block, uint8_t* dst, uint32_t blocks) {
  if (uint64_t{first_block} + blocks > block_count_) return false;
  const std::size_t n = std::size_t{blocks} * block_bytes_;
  const auto at = static_cast<off_t>(uint64_t{first_block} * block_bytes_);
  ::posix_fadvise(fd_, at, static_cast<off_t>(n), POSIX_FADV_DONTNEED);
  return ::pread(fd_, dst, n, at) == static_cast<ssize_t>(n);
}

}  // namespace ergon::devices::cortexm
