#include "planner/reuse.h"

#include <algorithm>
#include <cstddef>

namespace ergon::planner {
namespace {

/// The tensors of a forward graph of n ops, numbered: op i's activation i, its gradient
/// n + i, its weights 2n + i, their gradient 3n + i; the data batch 4n.
class Tensors {
 public:
  explicit Tensors(const ForwardGraph& f) : f_(f), n_(static_cast<int>(f.ops.size())), bytes_(4 * n_ + 1, 0) {
    for (int i = 0; i < n_; ++i) {
      const ForwardOp& op = f.ops[static_cast<std::size_t>(i)];
      bytes_[static_cast<std::size_t>(i)] = bytes_[static_cast<std::size_t>(n_ + i)] = op.output_bytes;
      bytes_[static_cast<std::size_t>(2 * n_ + i)] = bytes_[static_cast<std::size_t>(3 * n_ + i)] = op.param_bytes;
    }
    bytes_.back() = f.input_bytes;
  }
  [[nodiscard]] std::size_t count() const { return bytes_.size(); }
  [[nodiscard]] uint64_t bytes(int t) const { return bytes_[static_cast<std::size_t>(t)]; }

  /// What computing training node `node` touches.
  [[nodiscard]] std::vector<int> compute(int node) const {
    std::vector<int> out;
    if (node < n_) {
      for (int in : op(node).inputs) out.push_back(activation(in));
      out.push_back(2 * n_ + node);
      out.push_back(node);
    } else if (node == n_) {
      out = {n_ - 1, 2 * n_ - 1};
    } else {
      const int i = 2 * n_ - node;
      const ForwardOp& o = op(i);
      out = {n_ + i, 2 * n_ + i, 3 * n_ + i};
      if (o.backward_needs_inputs)
        for (int in : o.inputs) out.push_back(activation(in));
      if (o.backward_needs_output) out.push_back(i);
      for (int in : o.inputs)
        if (in != kGraphInput) out.push_back(n_ + in);
    }
    return out;
  }
  /// What paging training node `node`'s output moves.
  [[nodiscard]] std::vector<int> output(int node) const {
    if (node < n_) return {node};
    if (node == n_) return {2 * n_ - 1};
    std::vector<int> out;
    for (int in : op(2 * n_ - node).inputs)
      if (in != kGraphInput) out.push_back(n_ + in);
    return out;
  }

 private:
  [[nodiscard]] const ForwardOp& op(int i) const { return f_.ops[static_cast<std::size_t>(i)]; }
  [[nodiscard]] int activation(int in) const { return in == kGraphInput ? 4 * n_ : in; }
  const ForwardGraph& f_;
  int n_;
  std::vector<uint64_t> bytes_;
};

}  // namespace

std::vector<std::vector<TouchedTensor>> reuse_distances(const TrainingGraph& graph, const Schedule& schedule) {
  std::vector<std::vector<TouchedTensor>> out;
  if (!graph.forward) return out;
  const Tensors tensors(*graph.forward);
  std::vector<int64_t> last(tensors.count(), -1);  // the touch (step number) each tensor last had
  int64_t clock = 0;
  for (int pass = 0; pass < 2; ++pass) {
    for (const Step& step : schedule.steps) {
      if (step.kind == StepKind::kFree) continue;
      std::vector<int> touched = step.kind == StepKind::kCompute ? tensors.compute(step.node) : tensors.output(step.node);
      std::sort(touched.begin(), touched.end());
      touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
      std::vector<TouchedTensor> entry;
      for (int t : touched) {
        const auto ti = static_cast<std::size_t>(t);
        if (tensors.bytes(t) == 0) continue;
        double distance = kNeverTouched;
        if (last[ti] >= 0) {
          distance = 0;
          for (std::size_t o = 0; o < last.size(); ++o)
            if (o != ti && last[o] > last[ti]) distance += static_cast<double>(tensors.bytes(static_cast<int>(o)));
        }
        entry.push_back({tensors.bytes(t), distance});
      }
      ++clock;
      for (int t : touched) last[static_cast<std::size_t>(t)] = clock;
      if (pass == 1) out.push_back(std::move(entry));
    }
  }
  return out;
}

}  // namespace ergon::planner
