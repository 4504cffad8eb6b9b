#pragma once

#include <cstring>
#include <vector>

#include "devices/protocol/messages.h"

namespace ergon::devices::protocol::testing {

// One message of every kind with every field set, for round trips and golden captures.
inline Hello sample_hello() {
  Hello h;
  h.board_kind = BoardKind::kRaspberryPi4;
  h.firmware_version = 0x010203;
  h.tick_hz = 1'000'000'000;
  h.ram_bytes = 0xFFFFFFF0U;
  std::strcpy(h.board_name, "pi4-lab-7");
  h.rail_count = 2;
  h.rails[0].id = 0;
  std::strcpy(h.rails[0].name, "5V");
  h.rails[1].id = 3;
  std::strcpy(h.rails[1].name, "VDD_GPU_SOC_LNG");  // exactly 15 characters
  std::strcpy(h.board_type, "pi4");
  return h;
}

inline OpSpanMsg sample_span() {
  return OpSpanMsg{.op_id = 42, .phase = 2, .begin_ticks = 0x0102030405060708ULL,
                   .end_ticks = 0x0102030405060808ULL, .repetitions = 17};
}

inline PowerBatch sample_batch(uint16_t count = 5) {
  PowerBatch b;
  b.rail = 3;
  b.count = count;
  b.base_ticks = 1'000'000'123;
  for (uint16_t i = 0; i < count; ++i) {
    b.samples[i] = WireSample{.dt_ticks = i * 1064U, .bus_uv = 5'080'000 - i * 4000,
                              .current_ua = -1200 + i * 100, .power_uw = 2'960'000 + i,
                              .flags = static_cast<uint8_t>(i % 4)};
  }
  return b;
}

inline Log sample_log() {
  Log l;
  l.level = LogLevel::kWarning;
  const char* text = "sd card slow: 3.9 MB/s";
  l.length = static_cast<uint16_t>(std::strlen(text));
  std::memcpy(l.text, text, l.length);
  return l;
}

inline PlanOp sample_plan_op() {
  PlanOp p;
  p.op_id = 7;
  p.kind = 1;
  p.phase = 1;
  p.dim_count = 6;
  const uint32_t dims[] = {8, 16, 32, 32, 32, 3};
  std::memcpy(p.dims, dims, sizeof dims);
  p.flops = 75'497'472;
  p.bytes_in = 540'672;
  p.bytes_out = 1'048'576;
  p.windows = 3;
  p.idle_after_us = 50'000;
  return p;
}

inline ExecuteModel sample_execute_model() {
  ExecuteModel m;
  copy_text(m.model, "resnet18-cifar");
  m.batch = 4;
  m.seed = 3;
  m.step_count = 700;
  return m;
}

inline ScheduleSteps sample_schedule_steps() {
  ScheduleSteps s;
  s.first = 200;
  s.count = static_cast<uint8_t>(ScheduleSteps::kMaxSteps);
  for (uint8_t i = 0; i < s.count; ++i) s.steps[i] = {static_cast<uint8_t>(i % 4), 1000U + i};
  return s;
}

inline ExecutionReport sample_execution_report() {
  return ExecutionReport{.run_tag = 0xABCD, .loss_bits = 0x40133333U, .computes = 120,
                         .recomputes = 14, .paged_out_bytes = 524'288, .paged_in_bytes = 524'288,
                         .peak_bytes = 3'000'000, .gradient_digest = 0x0123456789ABCDEFULL};
}

inline SetPowerMode sample_set_power_mode() {
  SetPowerMode m;
  copy_text(m.mode, "MAXP_CORE_ARM");
  return m;
}

inline PowerModeSet sample_power_mode_set() {
  PowerModeSet m;
  m.status = PowerModeStatus::kRefused;
  copy_text(m.mode, "MAXN");
  m.switch_ns = 1'250'000;
  copy_text(m.detail, "nvpmodel -m 3 needs root: run ergon-agent with sudo");
  return m;
}

inline PhaseModes sample_phase_modes() {
  PhaseModes m;
  copy_text(m.backward, "1000MHz");
  m.switch_at = 57;
  return m;
}

}  // namespace ergon::devices::protocol::testing
