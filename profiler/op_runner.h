#pragma once

#include <algorithm>
#include <filesystem>
#include <map>
#include <tuple>
#include <vector>

#include "profiler/op.h"

namespace ergon::profiler {

/// Runs one op of a shape, in a phase, on real tensors: the kernels for compute ops, a file on
/// the board's storage for paging (page-out writes and fsyncs, page-in drops the file from the
/// page cache and reads it back), a sleep for idle. Buffers are allocated at a shape's first
/// run and reused, so repetitions time the op, not the allocator. A shape has several copies
/// of its tensors, each with other values, used in turn: together they exceed any of the
/// boards' last-level caches (kRotationBytes), so each repetition reads its operands from
/// memory as an op of a training iteration does (which sweeps every layer's parameters and
/// activations between two uses of one), and no branch predictor learns the data. Throws
/// DeviceError when the scratch file cannot be written or read, or a compute op comes without
/// its dimensions.
class OpRunner {
 public:
  explicit OpRunner(std::filesystem::path scratch_dir);
  ~OpRunner();
  OpRunner(const OpRunner&) = delete;
  OpRunner& operator=(const OpRunner&) = delete;

  /// Runs the op once. `copies` (protocol v8): 0 cycles through the shape's copies that
  /// together exceed any cache (kRotationBytes); k >= 1 through k of them, so k - 1 other
  /// copies are touched between two runs on one (1: the same tensors every run, warm).
  void run(const OpShape& shape, Phase phase, uint16_t copies = 0);

  /// The tensors of a shape's copies add up to at least this (at most kMaxCopies copies):
  /// more than the last-level cache of any board Ergon profiles (a Pi 4's L2 is 1 MiB, a
  /// desktop's L3 tens of MiB).
  static constexpr std::size_t kRotationBytes = std::size_t{96} << 20;
  static constexpr std::size_t kMaxCopies = 64;  ///< for the default rotation
  /// The copies the default rotation (copies 0) cycles through for tensors of `bytes` in all.
  static constexpr std::size_t rotation_copies(std::size_t bytes) {
    return std::clamp<std::size_t>((kRotationBytes + bytes - 1) / std::max<std::size_t>(bytes, 1), 1, kMaxCopies);
  }
  /// The most that the copies a plan asks for may take (DeviceError beyond).
  static constexpr std::size_t kMaxAskedBytes = std::size_t{512} << 20;

 private:
  struct Buffers {
    std::vector<float> a, b, c, d, e, f;
    std::vector<int64_t> ids;      // embedding token ids
    std::vector<uint32_t> labels;  // cross-entropy labels
  };
  struct Copies {
    std::vector<Buffers> copies;
    std::size_t bytes = 0;     ///< one copy's tensors
    std::size_t rotation = 1;  ///< copies that together exceed kRotationBytes
    std::map<uint16_t, std::size_t> next;  ///< by the copies asked: the next one to use
  };
  /// The next copy of the shape's tensors, of the first `copies` (0: `rotation`); each made
  /// at its first use.
  Buffers& buffers_for(const OpShape& shape, uint16_t copies);
  static Buffers make_buffers(const OpShape& shape, uint32_t seed);
  void page_out(uint64_t bytes);
  void page_in(uint64_t bytes);

  std::filesystem::path scratch_;
  std::map<std::tuple<int, std::array<uint32_t, kMaxDims>>, Copies> buffers_;
  std::vector<char> io_;
};

}  // namespace ergon::profiler
