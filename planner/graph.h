#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace ergon::planner {

/// Sentinel for an op input that is the graph's input (the data batch), not another op.
inline constexpr int kGraphInput = -1;

/// One forward operation of a model, with the work it does. FLOPs count a multiply-add as 2.
struct ForwardOp {
  std::string name;              ///< unique in the graph, e.g. "layer1.0.conv1"
  std::string op;                ///< kind: conv2d, batchnorm, relu, add, maxpool, linear, ...
  std::vector<int> inputs;       ///< indices of earlier ops, or kGraphInput
  uint64_t forward_flops = 0;
  uint64_t backward_flops = 0;   ///< gradient w.r.t. inputs and parameters
  uint64_t output_bytes = 0;     ///< the activation this op produces
  uint64_t param_bytes = 0;      ///< weights (gradients and optimizer state are derived)
  /// What autograd saves for the backward pass: the op's inputs and/or its output.
  bool backward_needs_inputs = true;
  bool backward_needs_output = false;
  /// What running the op on real tensors needs (zoo models; empty or 0 from ONNX and graph
  /// JSON): the output's shape (N, C, H, W) or (N, features), and for conv2d and maxpool the
  /// window, stride, padding and groups; `bias` for conv2d and linear.
  std::vector<uint64_t> shape;
  uint64_t kernel = 0, stride = 1, padding = 0, groups = 1;
  bool bias = false;
  /// linear: reads only each sample's first token (BERT's pooler); shares an earlier op's
  /// weights (GPT-2's lm_head).
  bool first_token_only = false, tied_weights = false;
  /// attention_scores: heads, and whether a position sees only those before it.
  uint64_t heads = 0;
  bool causal = false;
  /// embedding: the rows of each summed table (token, position, type).
  std::vector<uint64_t> table_rows;
};

/// A model's forward pass: ops in topological order, the last one producing the logits.
struct ForwardGraph {
  std::string name;
  uint64_t input_bytes = 0;  ///< the data batch
  std::vector<uint64_t> input_shape;  ///< (N, C, H, W) or (N, features); empty when unknown
  std::vector<ForwardOp> ops;
  /// From an importer (ONNX): one line saying what the file held that is not here, and why.
  std::string import_note;

  [[nodiscard]] uint64_t param_bytes() const;
  [[nodiscard]] uint64_t forward_flops() const;
};

enum class NodePhase { kForward, kLoss, kBackward };

/// Cost of computing a node and of paging a tensor on one board.
struct NodeCost {
  double time_s = 0;
  double energy_j = 0;
};


/// A node of the training graph with its costs on one board (from a CostModel).
struct TrainingNode {
  int id = 0;
  std::string name;
  std::string op;
  NodePhase phase = NodePhase::kForward;
  double time_s = 0;
  double energy_j = 0;
  uint64_t output_bytes = 0;
  double pagein_time_s = 0;
  double pagein_energy_j = 0;
  double pageout_time_s = 0;
  double pageout_energy_j = 0;
  /// The work behind the costs, when the graph was built from a model (0 from graph JSON,
  /// which does not carry it): what a board must run to execute the node.
  uint64_t flops = 0;
  uint64_t bytes_touched = 0;  ///< read and written
};

/// Forward nodes, a loss node and backward nodes, numbered in a topological order (node ids
/// are indices); edges run from a producer to a consumer (from < to). This is what every
/// planner plans and what `ergon.training-graph/1` files hold.
struct TrainingGraph {
  std::string name;
  uint64_t fixed_bytes = 0;  ///< parameters, gradients and optimizer state: always resident
  /// Board power with nothing running, watts. Every node's and transfer's energy includes it
  /// for its own duration; `--objective total` charges it over the whole makespan instead,
  /// stalls included (0: energies are dynamic only).
  double idle_power_w = 0;
  std::vector<TrainingNode> nodes;
  std::vector<std::pair<int, int>> edges;
  /// The forward graph it was built from when that carries tensor shapes (zoo models): what
  /// a board needs to run each node's kernel at its real shape. Null otherwise. Forward op i
  /// is node i, the loss node n, op i's backward node 2n - i.
  std::shared_ptr<const ForwardGraph> forward;
  /// Per-phase power modes, the backward pass in another mode than the forward pass: what
  /// computing each node costs once the forward pass is over (every forward node computed
  /// once), by node id. For a forward node that is a recomputation in the backward phase's
  /// mode; the loss and backward nodes carry that mode's costs as their own. Empty: one mode,
  /// each node's own cost throughout.
  std::vector<NodeCost> late_costs;
  /// From a reader of outside data (graph JSON): one line saying what the file held that is
  /// not here, and why. Empty for graphs built here.
  std::string import_note;
  /// The 1 sigma relative uncertainty of one pass's energy under these costs, when the cost
  /// model knows it (measured costs); unset for published profiles and graph files.
  std::optional<double> energy_rel_sigma;

  [[nodiscard]] int size() const { return static_cast<int>(nodes.size()); }
  /// What computing `node` costs before the forward pass is over (`late` false) or after.
  [[nodiscard]] NodeCost compute_cost(int node, bool late) const {
    if (late && !late_costs.empty()) return late_costs[static_cast<std::size_t>(node)];
    return {nodes[static_cast<std::size_t>(node)].time_s, nodes[static_cast<std::size_t>(node)].energy_j};
  }
  /// The first stage of the backward phase in the stage form (stage t computes node t): the
  /// first node that is not a forward node.
  [[nodiscard]] int backward_phase_start() const;
  /// inputs()[k]: producers of node k, ascending. users()[i]: consumers of node i, ascending.
  [[nodiscard]] std::vector<std::vector<int>> inputs() const;
  [[nodiscard]] std::vector<std::vector<int>> users() const;
  /// Every node once, in order: the time and energy floor of any schedule.
  [[nodiscard]] double single_pass_time_s() const;
  [[nodiscard]] double single_pass_energy_j() const;
  /// The smallest activation memory any schedule needs: the largest working set of one node
  /// (its inputs and its output resident at once). Sets `node` to that node.
  [[nodiscard]] uint64_t min_working_set_bytes(int* node = nullptr) const;
  /// Peak activation memory of store-all (every output kept from its computation to its last
  /// use, nothing recomputed or paged).
  [[nodiscard]] uint64_t store_all_peak_bytes() const;
  /// What an activity of `time_s` costing `energy_j` spends above idle power (never negative).
  [[nodiscard]] double dynamic_energy_j(double energy_j, double time_s) const {
    return std::max(0.0, energy_j - idle_power_w * time_s);
  }
  /// Throws InputError naming the problem when ids, edges or costs are not well formed.
  void validate() const;
};

/// Per-phase power modes: `forward_mode`'s graph with the backward phase (the loss, the
/// backward nodes, and forward nodes recomputed after the forward pass) costed as in
/// `backward_mode`, the same model costed in another mode. Paging costs stay
/// `forward_mode`'s. InputError when the two are not the same graph.
TrainingGraph per_phase_graph(const TrainingGraph& forward_mode, const TrainingGraph& backward_mode);


class CostModel {
 public:
  virtual ~CostModel() = default;
  /// Cost of running `flops` of `op` that read and write `bytes` of memory, in `phase` (a
  /// forward op's backward pass may do the same work on the same bytes and still cost
  /// something else: the two are measured apart).
  [[nodiscard]] virtual NodeCost compute(const std::string& op, NodePhase phase, uint64_t flops,
                                         uint64_t bytes) const = 0;
  [[nodiscard]] virtual NodeCost page_in(uint64_t bytes) const = 0;
  [[nodiscard]] virtual NodeCost page_out(uint64_t bytes) const = 0;
  /// Board power with nothing running; the costs above include it for their duration.
  [[nodiscard]] virtual double idle_power_w() const { return 0; }
};

/// Sets `node`'s compute cost (from its op, phase, FLOPs and bytes touched) and its paging
/// costs (from its output bytes) as `costs` prices them.
void apply_costs(TrainingNode& node, const CostModel& costs);

/// Autograd's training graph of a forward graph: forward nodes in order, the loss, then one
/// backward node per op in reverse order. Backward node of op i depends on the gradients of
/// i's consumers (or the loss) and on what i saved (its inputs and/or its output). Fixed bytes
/// = parameters + gradients + `optimizer_copies` x parameters (2 for Adam, 1 for momentum).
TrainingGraph build_training_graph(const ForwardGraph& forward, const CostModel& costs,
                                   int optimizer_copies = 1);

}  // namespace ergon::planner
