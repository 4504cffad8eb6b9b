// A pipeline stage's graphs: what a board needs to run its stage (ergon-agent builds them
// too, so they live in the planner's core, with no solver and no fmt); the split search is in
// pipeline.cpp.

#include <algorithm>
#include <string>

#include "common/error.h"
#include "planner/pipeline.h"

namespace ergon::planner {

std::vector<CutPoint> cut_points(const ForwardGraph& forward) {
  const int n = static_cast<int>(forward.ops.size());
  // lowest[k]: the earliest op k reads (-1: the data batch).
  std::vector<int> suffix_lowest(static_cast<std::size_t>(n) + 1, n);
  for (int k = n - 1; k >= 0; --k) {
    int lowest = k;
    for (int in : forward.ops[k].inputs) lowest = std::min(lowest, in == kGraphInput ? -1 : in);
    suffix_lowest[k] = std::min(suffix_lowest[k + 1], lowest);
  }
  std::vector<CutPoint> cuts;
  for (int c = 1; c < n; ++c)
    if (suffix_lowest[c] >= c - 1) cuts.push_back({c, forward.ops[c - 1].output_bytes});
  return cuts;
}

ForwardGraph stage_forward(const ForwardGraph& forward, int first, int end) {
  const int n = static_cast<int>(forward.ops.size());
  if (first < 0 || end > n || first >= end)
    throw InputError("stage ops " + std::to_string(first) + ".." + std::to_string(end - 1) + " are not a range of " +
                     forward.name + "'s " + std::to_string(n) + " ops");
  auto crossing = [&](int c) {
    for (int k = c; k < n; ++k)
      for (int in : forward.ops[k].inputs)
        if (in < c - 1) return true;  // the data batch (-1) too, unless c = 0
    return false;
  };
  if ((first > 0 && crossing(first)) || (end < n && crossing(end)))
    throw InputError(forward.name + " cannot be cut before op " +
                     std::to_string(first > 0 && crossing(first) ? first : end) + ": more than one tensor crosses there");
  ForwardGraph g;
  g.name = forward.name + " ops " + std::to_string(first) + ".." + std::to_string(end - 1);
  g.input_bytes = first == 0 ? forward.input_bytes : forward.ops[first - 1].output_bytes;
  g.input_shape = first == 0 ? forward.input_shape : forward.ops[first - 1].shape;
  g.import_note = forward.import_note;
  for (int k = first; k < end; ++k) {
    ForwardOp op = forward.ops[k];
    for (int& in : op.inputs) in = (in == kGraphInput || in == first - 1) ? kGraphInput : in - first;
    g.ops.push_back(std::move(op));
  }
  return g;
}

TrainingGraph build_stage_graph(const ForwardGraph& forward, int first, int end, const CostModel& costs,
                                int optimizer_copies) {
  const ForwardGraph stage = stage_forward(forward, first, end);
  TrainingGraph g = build_training_graph(stage, costs, optimizer_copies);
  const int m = static_cast<int>(stage.ops.size());
  if (end < static_cast<int>(forward.ops.size())) {
    TrainingNode& receive = g.nodes[static_cast<std::size_t>(m)];
    receive.name = "receive gradient";
    receive.op = "receive";
    receive.time_s = 0;
    receive.energy_j = 0;
    receive.flops = 0;
    receive.bytes_touched = 0;
  }
  if (first > 0) {
    // The first ops' backward nodes send their input's gradient back upstream.
    for (int i = 0; i < m; ++i) {
      const auto& op = stage.ops[static_cast<std::size_t>(i)];
      const auto reads = static_cast<uint64_t>(std::count(op.inputs.begin(), op.inputs.end(), kGraphInput));
      if (reads == 0) continue;
      TrainingNode& b = g.nodes[static_cast<std::size_t>(2 * m - i)];
      uint64_t own = 0;
      for (int in : op.inputs)
        if (in != kGraphInput) own += stage.ops[static_cast<std::size_t>(in)].output_bytes;
      const uint64_t bytes = own + reads * stage.input_bytes;
      if (b.output_bytes == bytes) continue;
      b.bytes_touched += bytes - b.output_bytes;
      b.output_bytes = bytes;
      apply_costs(b, costs);
    }
  }
  g.validate();
  return g;
}

std::size_t backward_part_begins(const TrainingGraph& graph, const Schedule& schedule) {
  const ScheduleReport r = simulate(graph, schedule);
  if (!r.valid) throw InputError("a stage's schedule fails the simulator: " + r.error);
  return r.stash_step;
}

}  // namespace ergon::planner
