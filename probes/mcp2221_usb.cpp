#include "probes/mcp2221.h"

#include <libusb-1.0/libusb.h>

#include <cstdio>

#include "common/error.h"

namespace ergon::probes {

namespace {

constexpr uint16_t kVendor = 0x04D8;
constexpr uint16_t kProduct = 0x00DD;
constexpr int kHidInterface = 2;
constexpr unsigned char kEndpointOut = 0x03;
constexpr unsigned char kEndpointIn = 0x83;
constexpr unsigned kTimeoutMs = 1000;

std::string usb_error(int rc) {
  std::string s = libusb_strerror(static_cast<libusb_error>(rc));
  if (rc == LIBUSB_ERROR_ACCESS)
    s += " (add a udev rule for 04d8:00dd, e.g. SUBSYSTEM==\"usb\", ATTR{idVendor}==\"04d8\", "
         "ATTR{idProduct}==\"00dd\", MODE=\"0666\")";
  return s;
}

class UsbHid final : public HidTransport {
 public:
  UsbHid(libusb_context* ctx, libusb_device_handle* h, std::string name)
      : ctx_(ctx), handle_(h), name_(std::move(name)) {}
  ~UsbHid() override {
    libusb_release_interface(handle_, kHidInterface);
    libusb_close(handle_);
    libusb_exit(ctx_);
  }
  UsbHid(const UsbHid&) = delete;
  UsbHid& operator=(const UsbHid&) = delete;

  void send(const Report& report) override {
    Report copy = report;
    int done = 0;
    const int rc = libusb_interrupt_transfer(handle_, kEndpointOut, copy.data(), 64, &done, kTimeoutMs);
    if (rc != 0 || done != 64) throw DeviceError(name_ + ": USB write failed: " + usb_error(rc));
  }
  Report receive() override {
    Report r{};
    int done = 0;
    const int rc = libusb_interrupt_transfer(handle_, kEndpointIn, r.data(), 64, &done, kTimeoutMs);
    if (rc != 0 || done != 64) throw DeviceError(name_ + ": USB read failed: " + usb_error(rc));
    return r;
  }
  [[nodiscard]] std::string name() const override { return name_; }

 private:
  libusb_context* ctx_;
  libusb_device_handle* handle_;
  std::string name_;
};

/// Every MCP2221A on the system: (device, "mcp2221 usb B:A").
template <class F>
int for_each_mcp2221(libusb_context* ctx, F&& f) {
  libusb_device** list = nullptr;
  const ssize_t n = libusb_get_device_list(ctx, &list);
  if (n < 0) return static_cast<int>(n);
  int found = 0;
  for (ssize_t i = 0; i < n; ++i) {
    libusb_device_descriptor d{};
    if (libusb_get_device_descriptor(list[i], &d) != 0) continue;
    if (d.idVendor != kVendor || d.idProduct != kProduct) continue;
    char name[64];
    std::snprintf(name, sizeof name, "mcp2221 usb %u:%u", libusb_get_bus_number(list[i]),
                  libusb_get_device_address(list[i]));
    if (!f(found++, list[i], std::string(name))) break;
  }
  libusb_free_device_list(list, 1);
  return found;
}

}  // namespace

std::vector<std::string> find_mcp2221() {
  std::vector<std::string> names;
  libusb_context* ctx = nullptr;
  if (libusb_init(&ctx) != 0) return names;
  for_each_mcp2221(ctx, [&](int, libusb_device*, std::string name) {
    names.push_back(std::move(name));
    return true;
  });
  libusb_exit(ctx);
  return names;
}

std::unique_ptr<HidTransport> open_mcp2221_usb(int index) {
  libusb_context* ctx = nullptr;
  if (const int rc = libusb_init(&ctx); rc != 0)
    throw DeviceError("cannot use USB: " + usb_error(rc));
  libusb_device_handle* handle = nullptr;
  std::string name;
  int error = 0;
  for_each_mcp2221(ctx, [&](int i, libusb_device* dev, std::string n) {
    if (i != index) return true;
    name = std::move(n);
    error = libusb_open(dev, &handle);
    return false;
  });
  if (handle == nullptr) {
    libusb_exit(ctx);
    if (name.empty())
      throw DeviceError("no MCP2221A USB-I2C bridge (04d8:00dd)" +
                        (index > 0 ? " number " + std::to_string(index) : std::string()) +
                        " is plugged in");
    throw DeviceError("cannot open " + name + ": " + usb_error(error));
  }
  libusb_set_auto_detach_kernel_driver(handle, 1);
  if (const int rc = libusb_claim_interface(handle, kHidInterface); rc != 0) {
    libusb_close(handle);
    libusb_exit(ctx);
    throw DeviceError("cannot claim the HID interface of " + name + ": " + usb_error(rc));
  }
  return std::make_unique<UsbHid>(ctx, handle, name);
}

}  // namespace ergon::probes
