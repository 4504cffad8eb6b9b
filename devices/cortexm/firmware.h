#pragma once

// The board side of Ergon on a Cortex-M (nRF52840, SAMD21 / Arduino MKR1000): the same wire
// protocol as the Linux agent, single-threaded and cooperative. poll() does one small piece
// of work: it answers what arrived (Hello, clock syncs at once, plan entries, Start, Stop),
// reads the INA219 when a conversion is due, and runs the plan one repetition at a time; the
// kernels yield between output rows so syncs and samples keep flowing during long ones.
// No heap, no exceptions: the tensors of the running op live in one arena given at start-up.

#include <cstddef>
#include <cstdint>

#include "devices/cortexm/hal.h"
#include "devices/cortexm/ina219.h"
#include "devices/cortexm/tiny_kernels.h"
#include "devices/protocol/decoder.h"
#include "devices/protocol/messages.h"

#ifndef ERGON_FIRMWARE_MAX_PLAN_OPS
#define ERGON_FIRMWARE_MAX_PLAN_OPS 64
#endif

namespace ergon::devices::cortexm {

inline constexpr std::size_t kMaxPlanOps = ERGON_FIRMWARE_MAX_PLAN_OPS;

class Firmware {
 public:
  /// `ina` null: no power monitor. `arena` holds the running op's tensors (its size bounds
  /// the shapes the board can run).
  Firmware(const BoardInfo& board, const Hal& hal, const Ina219Config* ina, uint8_t* arena,
           std::size_t arena_bytes);
  Firmware(const Firmware&) = delete;
  Firmware& operator=(const Firmware&) = delete;

  /// Starts the power monitor; false (and no samples) when it does not answer.
  bool start();
  void poll();

  [[nodiscard]] bool running() const { return running_; }
  enum class Activity : uint8_t { kIdle, kComputing, kPaging };
  /// What the board is doing now (the host build's simulated supply follows it).
  [[nodiscard]] Activity activity() const;
  [[nodiscard]] bool has_power_monitor() const { return ina_ok_; }

 private:
  struct Op {
    uint32_t op_id;
    uint8_t kind, phase, dim_count;
    uint32_t dims[protocol::kPlanDims];
    uint64_t bytes;
    uint16_t windows, warmup_reps;
    uint32_t idle_after_us;
  };
  enum class Stage : uint8_t { kWarmup, kWindow, kGap };

  void service();  // link and power monitor: from poll() and from inside kernels
  void on_frame(const protocol::Frame& f, uint64_t rx_ticks);
  void start_run(const protocol::Start& start);
  void refuse(uint32_t run_tag, const char* why);
  void step();
  void begin_op();
  /// Lays the op's tensors out in the arena (false: they do not fit, or no kernel), and with
  /// `fill` gives them values; Start checks every op without filling.
  bool prepare(const Op& op, bool fill);
  bool run_once(const Op& op);
  /// One link transfer (protocol v6): LinkData frames and the host's LinkAck, or a LinkPull
  /// and the host's bytes; false (with a Log) when the host does not answer within 10 s.
  bool transfer(const Op& op);
  void end_window();
  void finish(protocol::RunEnd end);
  void sample_power();
  void flush_power();
  void log(protocol::LogLevel level, const char* text);
  template <class Msg>
  bool send(const Msg& msg);
  float* take(std::size_t floats);
  [[nodiscard]] uint64_t us_to_ticks(uint64_t us) const;

  static void yield_trampoline(void* self);

  BoardInfo board_;
  Hal hal_;
  Ina219 ina_;
  bool has_ina_ = false, ina_ok_ = false;
  uint8_t* arena_;
  std::size_t arena_bytes_, arena_used_ = 0;

  protocol::Decoder decoder_;
  uint8_t tx_frame_[protocol::kMaxEncodedFrameBytes] = {};  // one frame out at a time
  uint16_t tx_seq_ = 0;
  bool in_service_ = false;

  Op plan_[kMaxPlanOps] = {};
  std::size_t plan_size_ = 0, plan_received_ = 0;  // received > size: it overflowed
  bool plan_closed_ = false;
  bool phase_modes_pending_ = false;  ///< a PhaseModes arrived: refuse the next Start
  bool running_ = false, stop_requested_ = false;
  protocol::Start start_{};
  std::size_t op_index_ = 0;
  uint32_t loop_ = 0;
  uint16_t window_ = 0, reps_ = 0;
  Stage stage_ = Stage::kWarmup;
  uint64_t window_begin_ = 0, gap_until_ = 0;
  float *a_ = nullptr, *b_ = nullptr, *c_ = nullptr, *d_ = nullptr, *e_ = nullptr;
  protocol::RunDone done_{};
  bool have_done_ = false;

  uint32_t transfer_ = 0, next_transfer_ = 0;
  bool transfer_done_ = false;  ///< the running transfer's LinkAck or last byte arrived

  protocol::PowerBatch batch_{};
  uint64_t last_flush_ = 0;
};

}  // namespace ergon::devices::cortexm
