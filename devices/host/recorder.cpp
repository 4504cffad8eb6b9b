#include "devices/host/recorder.h"

#include <utility>  // before Asio: Boost 1.74 misses it under GCC 12

#include <boost/asio.hpp>
#include <boost/asio/serial_port.hpp>

#include <array>
#include <chrono>
#include <vector>

namespace ergon::devices {
namespace {

namespace asio = boost::asio;
constexpr auto kTick = std::chrono::milliseconds(5);

}  // namespace

struct Recorder::Impl {
  struct Board {
    std::string port;
    uint32_t baud = 115200;
    std::unique_ptr<RecordSession> session;
    std::unique_ptr<asio::serial_port> serial;
    std::unique_ptr<asio::ip::tcp::socket> tcp;
    std::array<uint8_t, 16 * 1024> rx{};
    std::vector<uint8_t> out;
    bool open = false;
    bool logger_stopped = false;  ///< a power logger told to stop: its boards are done
  };

  explicit Impl(const Clock& c) : clock(c) {}

  void open(Board& b) {
    boost::system::error_code ec;
    if (b.port.rfind("tcp:", 0) == 0) {
      const std::string rest = b.port.substr(4);
      const auto colon = rest.rfind(':');
      if (colon == std::string::npos) {
        b.session->on_open_failed("expected tcp:HOST:PORT");
        return;
      }
      asio::ip::tcp::resolver resolver(io);
      const auto endpoints = resolver.resolve(rest.substr(0, colon), rest.substr(colon + 1), ec);
      if (!ec) {
        b.tcp = std::make_unique<asio::ip::tcp::socket>(io);
        asio::connect(*b.tcp, endpoints, ec);
        if (!ec) b.tcp->set_option(asio::ip::tcp::no_delay(true), ec);
      }
    } else {
      b.serial = std::make_unique<asio::serial_port>(io);
      b.serial->open(b.port, ec);
      if (!ec) {
        using sp = asio::serial_port_base;
        b.serial->set_option(sp::baud_rate(b.baud), ec);
        if (!ec) b.serial->set_option(sp::character_size(8), ec);
        if (!ec) b.serial->set_option(sp::parity(sp::parity::none), ec);
        if (!ec) b.serial->set_option(sp::stop_bits(sp::stop_bits::one), ec);
        if (!ec) b.serial->set_option(sp::flow_control(sp::flow_control::none), ec);
      }
    }
    if (ec) {
      b.session->on_open_failed(ec.message());
      return;
    }
    b.open = true;
    b.session->on_open(b.out);
    flush(b);
    read(b);
  }

  void read(Board& b) {
    auto handler = [this, &b](const boost::system::error_code& ec, std::size_t n) {
      if (ec) {
        if (b.open && ec != asio::error::operation_aborted) {
          b.session->on_link_error(ec == asio::error::eof ? "the board closed the link"
                                                          : ec.message());
        }
        close(b);
        return;
      }
      b.session->on_bytes(b.rx.data(), n, b.out);
      flush(b);
      // Another board may be waiting for what this one just sent (a relayed transfer).
      for (auto& other : boards)
        if (other.get() != &b && other->open) {
          other->session->serve_relay(other->out);
          flush(*other);
        }
      if (b.session->finished()) {
        close(b);
        return;
      }
      read(b);
    };
    if (b.serial) b.serial->async_read_some(asio::buffer(b.rx), handler);
    if (b.tcp) b.tcp->async_read_some(asio::buffer(b.rx), handler);
  }

  void flush(Board& b) {
    if (b.out.empty() || !b.open) {
      b.out.clear();
      return;
    }
    boost::system::error_code ec;
    if (b.serial) asio::write(*b.serial, asio::buffer(b.out), ec);
    if (b.tcp) asio::write(*b.tcp, asio::buffer(b.out), ec);
    b.out.clear();
    if (ec) {
      b.session->on_link_error(ec.message());
      close(b);
    }
  }

  void close(Board& b) {
    if (!b.open) return;
    b.open = false;
    boost::system::error_code ignored;
    if (b.serial) b.serial->close(ignored);
    if (b.tcp) b.tcp->close(ignored);
  }

  const Clock& clock;
  asio::io_context io;
  std::vector<std::unique_ptr<Board>> boards;
};

Recorder::Recorder(const Clock& clock) : impl_(std::make_unique<Impl>(clock)) {}
Recorder::~Recorder() = default;

void Recorder::add(const std::string& port, uint32_t baud, const RecordOptions& options,
                   RecordSink& sink) {
  auto b = std::make_unique<Impl::Board>();
  b->port = port;
  b->baud = baud;
  b->session = std::make_unique<RecordSession>(port, options, sink, impl_->clock);
  impl_->boards.push_back(std::move(b));
}

void Recorder::run(const Progress& on_progress, const std::atomic<int>& interrupts,
                   double progress_interval_s) {
  Impl& im = *impl_;
  for (auto& b : im.boards) im.open(*b);

  std::vector<const RecordSession*> sessions;
  for (const auto& b : im.boards) sessions.push_back(b->session.get());

  int seen_interrupts = 0;
  int64_t last_progress_ns = 0;
  const auto interval_ns = static_cast<int64_t>(progress_interval_s * 1e9);
  asio::steady_timer timer(im.io);
  std::function<void()> tick = [&] {
    const int n = interrupts.load();
    for (; seen_interrupts < n; ++seen_interrupts)
      for (auto& b : im.boards) {
        b->session->request_stop(b->out);
        im.flush(*b);
      }
    bool all_done = true;
    bool boards_done = true;  // every session that is not a power logger has ended
    bool any_board = false;
    for (auto& b : im.boards) {
      if (!b->session->finished()) {
        b->session->on_tick(b->out);
        im.flush(*b);
      }
      if (b->session->finished()) im.close(*b);
      all_done = all_done && b->session->finished();
      if (!b->session->is_power_logger()) {
        any_board = true;
        boards_done = boards_done && b->session->finished();
      }
    }
    // A power logger measures the other boards: it stops when they are done.
    if (any_board && boards_done && !all_done) {
      for (auto& b : im.boards) {
        if (!b->session->is_power_logger() || b->logger_stopped) continue;
        b->session->request_stop(b->out);
        b->logger_stopped = true;
        im.flush(*b);
      }
    }
    const int64_t now = im.clock.now_ns();
    if (on_progress && now - last_progress_ns >= interval_ns) {
      on_progress(sessions);
      last_progress_ns = now;
    }
    if (all_done) {
      im.io.stop();
      return;
    }
    timer.expires_after(kTick);
    timer.async_wait([&](const boost::system::error_code&) { tick(); });
  };
  tick();
  im.io.run();
  for (auto& b : im.boards) im.close(*b);
  if (on_progress) on_progress(sessions);
}

}  // namespace ergon::devices
