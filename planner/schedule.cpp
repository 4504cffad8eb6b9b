#include "planner/schedule.h"

#include <algorithm>
#include <limits>

#include "common/error.h"

namespace ergon::planner {

std::string to_string(StepKind kind) {
  switch (kind) {
    case StepKind::kCompute: return "compute";
    case StepKind::kPageOut: return "page-out";
    case StepKind::kPageIn: return "page-in";
    case StepKind::kFree: return "free";
  }
  return "unknown";
}

std::string to_string(Objective objective) {
  return objective == Objective::kTotal ? "total" : "poet";
}

ScheduleReport simulate(const TrainingGraph& graph, const Schedule& schedule,
                        std::optional<uint64_t> budget_bytes) {
  ScheduleReport r;
  const int n = graph.size();
  const auto inputs = graph.inputs();
  std::vector<char> resident(n, 0), stored(n, 0), computed(n, 0);
  uint64_t memory = 0;
  auto reject = [&](std::size_t at, const std::string& why) {
    r.valid = false;
    r.error = "step " + std::to_string(at) + ": " + why;
    return r;
  };
  auto over_budget = [&] { return budget_bytes && memory > *budget_bytes; };
  // Timed replay (see schedule.h): when the next step is handed out, when each unit is free,
  // when each tensor's RAM copy is complete, on storage, and last touched.
  constexpr double kNever = std::numeric_limits<double>::infinity();
  double handed_out_s = 0, compute_free_s = 0, storage_free_s = 0, dynamic_j = 0;
  int forward_nodes = 0, forward_computed = 0;
  // The stash: memory once the forward pass is over and its frees are done, before the next
  // compute or page-in (a recomputation for the backward pass is not kept in between).
  bool forward_done = false, stash_taken = false;
  for (const auto& node : graph.nodes) forward_nodes += node.phase == NodePhase::kForward ? 1 : 0;
  std::vector<double> ready_s(n, 0), stored_s(n, kNever), touched_s(n, 0);
  auto run = [&](double& unit_free_s, double earliest_s, double duration_s, double energy_j) {
    const double end_s = std::max({handed_out_s, unit_free_s, earliest_s}) + duration_s;
    unit_free_s = end_s;
    r.makespan_s = std::max(r.makespan_s, end_s);
    dynamic_j += graph.dynamic_energy_j(energy_j, duration_s);
    return end_s;
  };

  for (std::size_t s = 0; s < schedule.steps.size(); ++s) {
    const Step& step = schedule.steps[s];
    const int k = step.node;
    if (k < 0 || k >= n) return reject(s, "node " + std::to_string(k) + " does not exist");
    const auto& node = graph.nodes[k];
    if (forward_done && !stash_taken && (step.kind == StepKind::kCompute || step.kind == StepKind::kPageIn)) {
      stash_taken = true;
      r.stash_bytes = memory;
      r.stash_step = s;
    }
    switch (step.kind) {
      case StepKind::kCompute: {
        for (int i : inputs[k])
          if (!resident[i])
            return reject(s, "computing " + node.name + " needs " + graph.nodes[i].name +
                                 ", which is not in memory");
        if (!resident[k]) {
          resident[k] = 1;
          memory += node.output_bytes;
        }
        r.peak_bytes = std::max(r.peak_bytes, memory);
        if (over_budget())
          return reject(s, "computing " + node.name + " needs " + std::to_string(memory) +
                               " bytes, over the budget of " + std::to_string(*budget_bytes));
        // Once every forward node has been computed the backward phase runs (in its own
        // power mode when the graph has per-phase costs).
        const NodeCost cost = graph.compute_cost(k, forward_computed == forward_nodes);
        r.compute_time_s += cost.time_s;
        r.energy_j += cost.energy_j;
        double inputs_ready_s = 0;
        for (int i : inputs[k]) inputs_ready_s = std::max(inputs_ready_s, ready_s[i]);
        const double end_s = run(compute_free_s, inputs_ready_s, cost.time_s, cost.energy_j);
        ready_s[k] = touched_s[k] = end_s;
        for (int i : inputs[k]) touched_s[i] = std::max(touched_s[i], end_s);
        ++(computed[k] ? r.recomputes : r.computes);
        if (!computed[k] && node.phase == NodePhase::kForward && ++forward_computed == forward_nodes) {
          r.forward_end_s = end_s;
          forward_done = true;
        }
        computed[k] = 1;
        break;
      }
      case StepKind::kPageOut:
        if (!resident[k]) return reject(s, "paging out " + node.name + ", which is not in memory");
        stored[k] = 1;
        {
          const double end_s =
              run(storage_free_s, ready_s[k], node.pageout_time_s, node.pageout_energy_j);
          stored_s[k] = std::min(stored_s[k], end_s);
          touched_s[k] = std::max(touched_s[k], end_s);
        }
        r.paging_time_s += node.pageout_time_s;
        r.energy_j += node.pageout_energy_j;
        ++r.page_outs;
        break;
      case StepKind::kPageIn:
        if (!stored[k]) return reject(s, "paging in " + node.name + ", which is not on storage");
        if (!resident[k]) {
          resident[k] = 1;
          memory += node.output_bytes;
        }
        r.peak_bytes = std::max(r.peak_bytes, memory);
        if (over_budget())
          return reject(s, "paging in " + node.name + " exceeds the budget");
        ready_s[k] = touched_s[k] =
            run(storage_free_s, stored_s[k], node.pagein_time_s, node.pagein_energy_j);
        r.paging_time_s += node.pagein_time_s;
        r.energy_j += node.pagein_energy_j;
        ++r.page_ins;
        break;
      case StepKind::kFree:
        if (!resident[k]) return reject(s, "freeing " + node.name + ", which is not in memory");
        resident[k] = 0;
        memory -= node.output_bytes;
        handed_out_s = std::max(handed_out_s, touched_s[k]);
        break;
    }
  }
  for (int k = 0; k < n; ++k)
    if (!computed[k]) return reject(schedule.steps.size(), graph.nodes[k].name + " is never computed");
  if (!stash_taken) r.stash_step = schedule.steps.size();
  r.total_energy_j = dynamic_j + graph.idle_power_w * r.makespan_s;
  r.valid = true;
  return r;
}

Schedule store_all_schedule(const TrainingGraph& graph) {
  Schedule s;
  const auto users = graph.users();
  const auto inputs = graph.inputs();
  for (int k = 0; k < graph.size(); ++k) {
    s.steps.push_back({StepKind::kCompute, k});
    // Free what k was the last consumer of, and k itself if nothing consumes it.
    for (int i : inputs[k])
      if (users[i].back() == k) s.steps.push_back({StepKind::kFree, i});
    if (users[k].empty()) s.steps.push_back({StepKind::kFree, k});
  }
  return s;
}

namespace {

void put_varint(std::vector<uint8_t>& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<uint8_t>(v | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<uint8_t>(v));
}

uint64_t get_varint(const std::vector<uint8_t>& in, std::size_t& pos) {
  uint64_t v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (pos >= in.size()) throw InputError("schedule encoding ends inside a number");
    const uint8_t b = in[pos++];
    v |= uint64_t{b & 0x7FU} << shift;
    if ((b & 0x80) == 0) return v;
  }
  throw InputError("schedule encoding has a number longer than 64 bits");
}

constexpr uint8_t kEncodingVersion = 1;

}  // namespace

std::vector<uint8_t> encode_schedule(const Schedule& schedule, int node_count) {
  std::vector<uint8_t> out = {'E', 'S', kEncodingVersion};
  put_varint(out, static_cast<uint64_t>(node_count));
  put_varint(out, schedule.steps.size());
  for (const Step& s : schedule.steps)
    put_varint(out, static_cast<uint64_t>(s.node) * 4 + static_cast<uint8_t>(s.kind));
  return out;
}

Schedule decode_schedule(const std::vector<uint8_t>& bytes, int* node_count) {
  if (bytes.size() < 3 || bytes[0] != 'E' || bytes[1] != 'S')
    throw InputError("not an ergon schedule encoding (bad magic)");
  if (bytes[2] != kEncodingVersion)
    throw InputError("schedule encoding version " + std::to_string(bytes[2]) +
                     " is not supported (expected 1)");
  std::size_t pos = 3;
  const uint64_t nodes = get_varint(bytes, pos);
  const uint64_t steps = get_varint(bytes, pos);
  if (nodes > (1U << 24) || steps > bytes.size())
    throw InputError("schedule encoding declares more steps or nodes than it can hold");
  Schedule s;
  s.steps.reserve(steps);
  for (uint64_t i = 0; i < steps; ++i) {
    const uint64_t v = get_varint(bytes, pos);
    if (v / 4 >= nodes) throw InputError("schedule step names a node out of range");
    s.steps.push_back({static_cast<StepKind>(v % 4), static_cast<int>(v / 4)});
  }
  if (pos != bytes.size()) throw InputError("schedule encoding has trailing bytes");
  if (node_count != nullptr) *node_count = static_cast<int>(nodes);
  return s;
}

}  // namespace ergon::planner
