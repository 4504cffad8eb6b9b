#include "probes/mcp2221.h"

#include <cstdio>
#include <cstring>

#include "common/error.h"

namespace ergon::probes {
namespace {

constexpr uint8_t kStatus = 0x10;
constexpr uint8_t kWrite = 0x90;
constexpr uint8_t kWriteNoStop = 0x94;
constexpr uint8_t kRead = 0x91;
constexpr uint8_t kReadRepeatedStart = 0x93;
constexpr uint8_t kGetData = 0x40;
constexpr uint8_t kStateAddressNack = 0x25;
constexpr std::size_t kMaxChunk = 60;
constexpr int kMaxStatusPolls = 50;

std::string hex(unsigned v) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "0x%02X", v);
  return buf;
}

}  // namespace

Mcp2221Bus::Mcp2221Bus(std::unique_ptr<HidTransport> transport, double bus_hz)
    : transport_(std::move(transport)) {
  // Set the speed (divider = 12 MHz / speed - 3) and cancel whatever a previous user left.
  HidTransport::Report r{};
  r[0] = kStatus;
  r[2] = 0x10;  // cancel the current transfer
  r[3] = 0x20;  // set the I2C speed
  r[4] = static_cast<uint8_t>(12e6 / bus_hz - 3);
  const auto answer = command(r, "set up", 0);
  if (answer[3] != 0x20 && answer[3] != 0x21)
    throw DeviceError(name() + " did not accept an I2C speed of " +
                      std::to_string(static_cast<int>(bus_hz / 1000)) + " kHz");
}

HidTransport::Report Mcp2221Bus::command(const HidTransport::Report& report, const char* what,
                                         uint8_t address) {
  transport_->send(report);
  HidTransport::Report answer = transport_->receive();
  if (answer[0] != report[0])
    throw DeviceError(name() + ": answer " + hex(answer[0]) + " to command " + hex(report[0]) +
                      " while trying to " + what + " " + hex(address));
  return answer;
}

void Mcp2221Bus::not_acknowledged(uint8_t address) {
  // Cancel the transfer so that the engine is idle for the next one, then say why.
  HidTransport::Report cancel{};
  cancel[0] = kStatus;
  cancel[2] = 0x10;
  command(cancel, "cancel after", address);
  throw DeviceError("I2C transfer to " + hex(address) + " on " + name() +
                    " failed: no device answered at that address");
}

void Mcp2221Bus::wait_idle(uint8_t address, const char* what) {
  for (int i = 0; i < kMaxStatusPolls; ++i) {
    HidTransport::Report r{};
    r[0] = kStatus;
    const auto status = command(r, what, address);
    if (status[8] == kStateAddressNack) not_acknowledged(address);
    if (status[8] == 0) return;  // idle: done
  }
  throw DeviceError(name() + ": the I2C engine stayed busy while trying to " + what + " " +
                    hex(address));
}

void Mcp2221Bus::transfer(uint8_t cmd, uint8_t address, std::span<const uint8_t> data) {
  if (data.size() > kMaxChunk) throw DeviceError(name() + ": writes over 60 bytes are not supported");
  HidTransport::Report r{};
  r[0] = cmd;
  r[1] = static_cast<uint8_t>(data.size() & 0xFF);
  r[2] = static_cast<uint8_t>(data.size() >> 8);
  r[3] = static_cast<uint8_t>(address << 1);
  std::memcpy(r.data() + 4, data.data(), data.size());
  const auto answer = command(r, "write to", address);
  if (answer[1] != 0) throw DeviceError(name() + ": busy, the write to " + hex(address) + " was refused");
  wait_idle(address, "write to");
}

void Mcp2221Bus::read_into(uint8_t cmd, uint8_t address, std::span<uint8_t> in) {
  if (in.size() > kMaxChunk) throw DeviceError(name() + ": reads over 60 bytes are not supported");
  HidTransport::Report r{};
  r[0] = cmd;
  r[1] = static_cast<uint8_t>(in.size() & 0xFF);
  r[2] = static_cast<uint8_t>(in.size() >> 8);
  r[3] = static_cast<uint8_t>(address << 1 | 1);
  const auto answer = command(r, "read from", address);
  if (answer[1] != 0) throw DeviceError(name() + ": busy, the read from " + hex(address) + " was refused");
  HidTransport::Report get{};
  get[0] = kGetData;
  const auto data = command(get, "read from", address);
  if (data[1] != 0 || data[3] == 127 || data[2] == kStateAddressNack) not_acknowledged(address);
  if (data[3] != in.size())
    throw DeviceError(name() + ": read " + std::to_string(data[3]) + " bytes from " + hex(address) +
                      ", expected " + std::to_string(in.size()));
  std::memcpy(in.data(), data.data() + 4, in.size());
}

void Mcp2221Bus::write(uint8_t address, std::span<const uint8_t> data) {
  transfer(kWrite, address, data);
}

void Mcp2221Bus::write_read(uint8_t address, std::span<const uint8_t> out, std::span<uint8_t> in) {
  transfer(kWriteNoStop, address, out);
  read_into(kReadRepeatedStart, address, in);
}

}  // namespace ergon::probes
