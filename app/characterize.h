#pragma once
// Characterizing a board from the bench (docs/boards.md, "Characterizing a board"): run a
// plan of every op kind over a grid of shapes, paging at several sizes and idle, in each
// power mode; attribute; fit the cost model; and say what the board measured against what
// its descriptor claims, as a board card and as a descriptor with the measured figures.

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "devices/board_profile.h"
#include "devices/profile_plan.h"

namespace ergon::app {

/// The plan ergon characterize runs in each mode. On a Linux board: every op kind of the zoo's
/// models (mlp, vgg16-cifar, resnet18-cifar, mobilenetv2-cifar, bert-tiny) at its smallest, median and
/// largest shape there by FLOPs, forward and backward; paging of five sizes from 64 KiB to
/// 16 MiB each way. On a microcontroller: each op kind its firmware has a kernel for (conv2d,
/// linear, relu, max pool, add) at three sizes that fit its arena, forward and backward, and
/// paging of five sizes. Idle windows first and between; shuffled by `seed`.
devices::ProfilePlan characterization_plan(const devices::BoardProfile& board, uint32_t seed);

struct CharacterizeRequest {
  std::string port;
  uint32_t baud = 115200;
  std::filesystem::path db_path = "ergon.db";
  /// What the board is believed to be: its descriptor (a built-in board or a file).
  devices::BoardProfile board;
  /// The modes to measure, the descriptor's first (the one its figures describe) always
  /// among them and measured first; empty: that one alone.
  std::vector<std::string> modes;
  uint32_t seed = 1;
  /// A power monitor this host reads on the board's supply (RecordRequest::host_probe).
  std::optional<std::string> host_probe;
};

struct CharacterizeProgress {
  std::string mode;
  int mode_index = 0;  ///< 0-based
  int modes = 0;
  enum class Step { kRecording, kResumed, kAttributing, kFitting } step = Step::kRecording;
  uint64_t windows_done = 0;  ///< while recording: the plan's windows the board has sent
  uint64_t windows_total = 0;
};
using CharacterizeProgressFn = std::function<void(const CharacterizeProgress&)>;

/// One measured op shape, for the card's plots and tables.
struct MeasuredShape {
  std::string kind;   ///< conv2d, linear, ...
  std::string phase;  ///< forward, backward, page-in, page-out
  uint64_t flops = 0;
  uint64_t bytes = 0;  ///< read + written; for paging, moved
  double time_s = 0;
  std::optional<double> net_energy_j;  ///< above idle; none without power samples
  std::optional<double> gross_energy_j;
};

/// What one power mode measured: the fitted figures in the descriptor's terms.
struct ModeCharacterization {
  std::string mode;
  int64_t run_id = 0;
  bool resumed = false;  ///< measured by an earlier ergon characterize into the same database
  double flops_per_s = 0;
  double mem_bytes_per_s = 0;
  double op_overhead_s = 0;
  double time_cv_median = 0;  ///< the compute-time fit's leave-one-out relative error
  double time_cv_max = 0;
  int compute_shapes = 0;
  bool has_energy = false;    ///< the figures below were measured (power samples)
  double idle_w = 0;
  double compute_w = 0;       ///< above idle while compute-bound
  double memory_bound_w = 0;  ///< above idle while memory-bound
  double energy_cv_median = 0;
  double pagein_bytes_per_s = 0, pagein_latency_s = 0, pagein_w = 0;
  double pageout_bytes_per_s = 0, pageout_latency_s = 0, pageout_w = 0;
  std::vector<MeasuredShape> shapes;  ///< this mode's run's
};

struct CharacterizeResult {
  devices::BoardProfile claimed;   ///< the descriptor as given
  devices::BoardProfile measured;  ///< the same, with every figure measured replaced
  std::vector<ModeCharacterization> modes;
  /// Figures not measured (no power samples: energies; modes not asked for), one line each.
  std::vector<std::string> not_measured;
};

/// Measures `request.board` on `request.port` mode by mode. A mode whose characterization run
/// already completed in the database (an earlier call, cut short by an unplugged board or
/// Ctrl-C) is not run again. DeviceError when a board fails or stops mid-run (what finished
/// stays, and the same call resumes); InputError for a mode the board lacks; cancelled by
/// incrementing `interrupts`.
CharacterizeResult characterize(const CharacterizeRequest& request, const CharacterizeProgressFn& progress,
                                const std::atomic<int>& interrupts);

/// The board card: what was measured against what the descriptor claims, the fits and their
/// errors, per mode; `plots` are image file names (beside the card) to link, in order.
std::string board_card_markdown(const CharacterizeResult& result, const std::vector<std::string>& plots);

}  // namespace ergon::app
