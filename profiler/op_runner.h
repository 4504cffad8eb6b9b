#pragma once

#include <filesystem>
#include <map>
#include <tuple>
#include <vector>

#include "profiler/op.h"

namespace ergon::profiler {

/// Runs one op of a shape, in a phase, on real tensors: the kernels for compute ops, a file on
/// the board's storage for paging (page-out writes and fsyncs, page-in drops the file from the
/// page cache and reads it back), a sleep for idle. Buffers are allocated at a shape's first
/// run and reused, so repetitions time the op, not the allocator. Throws DeviceError when the
/// scratch file cannot be written or read, or a compute op comes without its dimensions.
class OpRunner {
 public:
  explicit OpRunner(std::filesystem::path scratch_dir);
  ~OpRunner();
  OpRunner(const OpRunner&) = delete;
  OpRunner& operator=(const OpRunner&) = delete;

  void run(const OpShape& shape, Phase phase);

 private:
  struct Buffers {
    std::vector<float> a, b, c, d, e, f;
    std::vector<int64_t> ids;      // embedding token ids
    std::vector<uint32_t> labels;  // cross-entropy labels
  };
  Buffers& buffers_for(const OpShape& shape);
  void page_out(uint64_t bytes);
  void page_in(uint64_t bytes);

  std::filesystem::path scratch_;
  std::map<std::tuple<int, std::array<uint32_t, kMaxDims>>, Buffers> buffers_;
  std::vector<char> io_;
};

}  // namespace ergon::profiler
