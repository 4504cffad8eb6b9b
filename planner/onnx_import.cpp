#include "planner/onnx_import.h"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/error.h"
#include "planner/onnx_fold.h"

// How ONNX nodes become ForwardOps. FLOPs and what backward saves follow planner/zoo.cpp; per
// element of the node's output unless said otherwise (a multiply-add is 2 FLOPs):
//   Conv                  conv2d (conv1d, conv3d): 2 * outputs * (C_in / groups) * kernel
//                         elements; backward 2x (1x when it reads only the data batch).
//   Gemm, MatMul          linear when an operand is a parameter, else matmul (attention):
//                         2 * outputs * K; backward as conv.
//   BatchNormalization,   batchnorm / instancenorm / layernorm: 7, backward 9; parameters are
//   InstanceNorm., LayerN. scale and bias (running mean and variance are buffers).
//   Relu 1/1, Clip 2/2 (relu6 when clamping to [0, 6]), LeakyRelu 2/1, Sigmoid and Tanh 4/3,
//   HardSigmoid 3/2, HardSwish 5/4, Erf 8/4, Exp and Log 4/1, Sqrt and Reciprocal 1/2,
//   Neg 1/0, Abs 1/1; Add and Sub 1/0, Mul 1/2, Div 1/3, Pow 4/4, Max and Min 1/1, Where 1/1.
//   Softmax, LogSoftmax   softmax: 5, backward 4 (saves its output).
//   MaxPool, AveragePool  outputs * kernel elements; backward outputs (max), same (average).
//   GlobalAveragePool     avgpool: 1 per input element, backward the same. GlobalMaxPool:
//                         maxpool, 1 per input element, backward 1 per output element.
//   ReduceMean, ReduceSum 1 per input element, backward the same.
//   Concat, Split, Slice, Pad, Expand, Tile, Gather, Cast: copies, 0 FLOPs (the cost model
//   charges their bytes); Gather from an initializer is an embedding (1 per output element
//   backward, the table is a parameter).
// Parameters: the floating-point initializers an op reads, directly or through a view
// (Transpose, Reshape, Cast, Expand, ...), each counted once (tied weights), except batchnorm
// statistics and the bounds and exponents of Clip, Pow, Pad, Resize. The Erf form of GELU arrives
// as Div, Erf, Add, Mul, Mul: five elementwise ops.

namespace ergon::planner {
namespace {

constexpr int kMaxBatch = 1 << 16;  // as in the zoo: byte and FLOP counts stay far inside 64 bits
constexpr std::size_t kMaxMessageChars = 300;

enum class Saves { kInputs, kOutput, kBoth, kNothing };

/// What becomes of a node.
enum class Role {
  kConstant,  // reads no activation (initializers, Constant, shapes): folded away
  kView,      // its output is its first activation input (Reshape, Flatten, Dropout, ...)
  kOp,        // a ForwardOp
};

struct Elementwise {
  const char* kind;
  uint64_t forward;   // FLOPs per output element
  uint64_t backward;  // FLOPs per output element
  Saves saves;
};

const std::map<std::string, Elementwise>& elementwise_ops() {
  static const std::map<std::string, Elementwise> ops{
      {"Relu", {"relu", 1, 1, Saves::kOutput}},
      {"Clip", {"clip", 2, 2, Saves::kOutput}},
      {"LeakyRelu", {"leaky_relu", 2, 1, Saves::kInputs}},
      {"Sigmoid", {"sigmoid", 4, 3, Saves::kOutput}},
      {"Tanh", {"tanh", 4, 3, Saves::kOutput}},
      {"HardSigmoid", {"hardsigmoid", 3, 2, Saves::kInputs}},
      {"HardSwish", {"hardswish", 5, 4, Saves::kInputs}},
      {"Erf", {"erf", 8, 4, Saves::kInputs}},
      {"Exp", {"exp", 4, 1, Saves::kOutput}},
      {"Log", {"log", 4, 1, Saves::kInputs}},
      {"Sqrt", {"sqrt", 1, 2, Saves::kOutput}},
      {"Reciprocal", {"reciprocal", 1, 2, Saves::kOutput}},
      {"Neg", {"neg", 1, 0, Saves::kNothing}},
      {"Abs", {"abs", 1, 1, Saves::kInputs}},
      {"Add", {"add", 1, 0, Saves::kNothing}},
      {"Sub", {"sub", 1, 0, Saves::kNothing}},
      {"Mul", {"mul", 1, 2, Saves::kInputs}},
      {"Div", {"div", 1, 3, Saves::kInputs}},
      {"Pow", {"pow", 4, 4, Saves::kInputs}},
      {"Max", {"max", 1, 1, Saves::kInputs}},
      {"Min", {"min", 1, 1, Saves::kInputs}},
      {"Where", {"where", 1, 1, Saves::kInputs}},
      {"Softmax", {"softmax", 5, 4, Saves::kOutput}},
      {"LogSoftmax", {"softmax", 5, 4, Saves::kOutput}},
      {"BatchNormalization", {"batchnorm", 7, 9, Saves::kInputs}},
      {"InstanceNormalization", {"instancenorm", 7, 9, Saves::kInputs}},
      {"LayerNormalization", {"layernorm", 7, 9, Saves::kInputs}},
  };
  return ops;
}

/// Data movement: no FLOPs, the cost model charges the bytes.
const std::map<std::string, const char*>& copy_ops() {
  static const std::map<std::string, const char*> ops{
      {"Concat", "concat"}, {"Split", "split"}, {"Slice", "slice"},   {"Pad", "pad"},
      {"Expand", "expand"}, {"Tile", "tile"},   {"Gather", "gather"}, {"Cast", "cast"},
  };
  return ops;
}

const std::set<std::string>& view_ops() {
  static const std::set<std::string> ops{"Reshape",  "Flatten", "Squeeze",  "Unsqueeze",
                                         "Identity", "Dropout", "Transpose"};
  return ops;
}

const std::set<std::string>& other_ops() {
  static const std::set<std::string> ops{"Conv",          "Gemm",        "MatMul",
                                         "MaxPool",       "AveragePool", "GlobalAveragePool",
                                         "GlobalMaxPool", "ReduceMean",  "ReduceSum"};
  return ops;
}

/// Ops whose shapes are metadata: their output is a constant even when they read activations.
bool reads_metadata_only(const std::string& op_type) {
  return op_type == "Shape" || op_type == "Size";
}

bool supported(const std::string& op_type) {
  return elementwise_ops().count(op_type) > 0 || copy_ops().count(op_type) > 0 ||
         view_ops().count(op_type) > 0 || other_ops().count(op_type) > 0;
}

/// Inputs that hold a layer's weights, bias or buffers, never the data batch: what tells a
/// weight that arrives as a graph input (export_params=False) from the data input. MatMul's
/// second operand is a weight when it is a graph input (torch exports Linear on 3-D inputs as
/// MatMul(x, W^T)); Gather's table only when its indices come from a graph input (an
/// embedding of token ids).
bool is_weight_slot(const std::string& op_type, int index) {
  if (op_type == "Conv" || op_type == "ConvTranspose" || op_type == "Gemm" ||
      op_type == "BatchNormalization" || op_type == "InstanceNormalization" ||
      op_type == "LayerNormalization")
    return index >= 1;
  if (op_type == "MatMul" || op_type == "PRelu") return index == 1;
  return false;
}

/// Inputs whose initializers are settings, not parameters.
bool is_setting_input(const std::string& op_type, int index) {
  if (op_type == "BatchNormalization") return index >= 3;  // running mean and variance
  if (op_type == "Clip" || op_type == "Pow" || op_type == "Pad" || op_type == "Resize")
    return index >= 1;
  return false;
}

uint64_t element_bytes(int32_t type) {
  switch (type) {
    case onnx::TensorProto_DataType_UINT8:
    case onnx::TensorProto_DataType_INT8:
    case onnx::TensorProto_DataType_BOOL:
      return 1;
    case onnx::TensorProto_DataType_UINT16:
    case onnx::TensorProto_DataType_INT16:
    case onnx::TensorProto_DataType_FLOAT16:
    case onnx::TensorProto_DataType_BFLOAT16:
      return 2;
    case onnx::TensorProto_DataType_FLOAT:
    case onnx::TensorProto_DataType_INT32:
    case onnx::TensorProto_DataType_UINT32:
      return 4;
    case onnx::TensorProto_DataType_DOUBLE:
    case onnx::TensorProto_DataType_INT64:
    case onnx::TensorProto_DataType_UINT64:
    case onnx::TensorProto_DataType_COMPLEX64:
      return 8;
    case onnx::TensorProto_DataType_COMPLEX128:
      return 16;
    default:
      return 0;
  }
}

bool is_floating(int32_t type) {
  return type == onnx::TensorProto_DataType_FLOAT || type == onnx::TensorProto_DataType_FLOAT16 ||
         type == onnx::TensorProto_DataType_BFLOAT16 || type == onnx::TensorProto_DataType_DOUBLE;
}

/// One line of printable ASCII, whitespace runs collapsed: ONNX's messages span lines.
std::string one_line(std::string_view text) {
  std::string out;
  bool space = false;
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (std::isspace(u) != 0) {
      space = !out.empty();
      continue;
    }
    if (space) out += ' ';
    space = false;
    out += (u >= 0x20 && u < 0x7f) ? c : '?';
    if (out.size() >= kMaxMessageChars) {
      out += "...";
      break;
    }
  }
  if (!out.empty() && out.back() == '.') out.pop_back();
  return out;
}

struct Shape {
  std::vector<int64_t> dims;
  int32_t type = 0;
};

class Importer {
 public:
  Importer(std::filesystem::path path, int batch, std::vector<std::string> data_inputs)
      : path_(std::move(path)), batch_(batch), data_input_names_(std::move(data_inputs)) {}

  /// The first data input's first dimension as exported; 0 when symbolic (after run()).
  [[nodiscard]] int64_t exported_batch() const { return exported_batch_; }

  /// Reads the model from `bytes` instead of the file (the path then only names it).
  void use_bytes(std::string_view bytes) {
    bytes_ = std::string(bytes);
    have_bytes_ = true;
  }

  ForwardGraph run() {
    if (batch_ < 0 || batch_ > kMaxBatch)
      throw InputError("batch must be between 1 and " + std::to_string(kMaxBatch) + ", not " +
                       std::to_string(batch_));
    load();
    classify();
    check();
    set_batch();
    infer_and_fold();
    ForwardGraph g;
    g.name = path_.stem().string();
    g.input_bytes = input_bytes();
    build(g);
    prune(g);
    g.import_note = summary(g);
    return g;
  }

 private:
  [[noreturn]] void fail(const std::string& problem) const {
    throw InputError(path_.string() + ": " + problem);
  }

  static std::string quoted(const std::string& name) { return "'" + one_line(name) + "'"; }

  [[nodiscard]] std::string node_label(int index) const {
    const onnx::NodeProto& node = model_.graph().node(index);
    return node.op_type() + " node " +
           (node.name().empty() ? "#" + std::to_string(index) : quoted(node.name()));
  }

  void load() {
    if (have_bytes_) {
      parse(bytes_);
      return;
    }
    std::error_code ec;
    if (std::filesystem::is_directory(path_, ec))
      throw InputError("cannot read onnx file " + path_.string() + ": it is a directory");
    std::ifstream in(path_, std::ios::binary);
    if (!in) {
      std::string reason = std::strerror(errno);
      if (!reason.empty())
        reason[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(reason[0])));
      throw InputError("cannot read onnx file " + path_.string() + ": " + reason);
    }
    std::ostringstream bytes;
    bytes << in.rdbuf();
    if (in.bad()) throw InputError("cannot read onnx file " + path_.string() + ": read failed");
    parse(bytes.str());
  }

  void parse(const std::string& bytes) {
    if (!model_.ParseFromString(bytes))
      fail("not an onnx model (the protobuf does not parse)");
    if (!model_.has_graph() || model_.graph().node_size() == 0)
      fail("not an onnx model (it has no graph nodes)");
  }

  /// Which tensors are activations, and what each node becomes. Before shape inference, so an
  /// unsupported op is reported as such rather than as whatever inference makes of it.
  void classify() {
    const onnx::GraphProto& graph = model_.graph();
    for (const auto& init : graph.initializer()) {
      initializers_[init.name()] = &init;
      param_types_[init.name()] = init.data_type();
      constant_.insert(init.name());
    }
    classify_inputs();

    roles_.resize(static_cast<std::size_t>(graph.node_size()));
    for (int i = 0; i < graph.node_size(); ++i) {
      const onnx::NodeProto& node = graph.node(i);
      bool reads_activation = false;
      for (const std::string& in : node.input()) {
        if (in.empty()) continue;  // an optional input left out
        if (activation_.count(in) > 0) {
          reads_activation = true;
        } else if (constant_.count(in) == 0) {
          fail(node_label(i) + " reads " + quoted(in) +
               ", which no input, initializer or earlier node produces");
        }
      }
      Role role = Role::kConstant;
      if (reads_activation && !reads_metadata_only(node.op_type())) {
        if (!supported(node.op_type()))
          fail("unsupported op type " + one_line(node.op_type()) + " (" + node_label(i) +
               "); supported: " + supported_list());
        role = view_ops().count(node.op_type()) > 0 ? Role::kView : Role::kOp;
      }
      roles_[static_cast<std::size_t>(i)] = role;
      if (role == Role::kConstant && reshapes_only(node.op_type()) && node.input_size() > 0 &&
          node.output_size() > 0) {
        // A parameter seen through a view (torch exports Linear on 3-D inputs as
        // MatMul(x, Transpose(weight))): still that parameter.
        if (const std::string* root = parameter_root(node.input(0))) roots_[node.output(0)] = *root;
      }
      if (role == Role::kConstant && !reads_metadata_only(node.op_type())) {
        // Parameters computed on before an op reads them (Swin's relative position bias
        // table gathered by a constant index, a weight scaled by a constant) still count.
        std::vector<std::string> sources;
        for (int k = 0; k < node.input_size(); ++k) {
          if (is_setting_input(node.op_type(), k)) continue;
          for (const std::string& p : parameter_sources(node.input(k)))
            if (std::find(sources.begin(), sources.end(), p) == sources.end()) sources.push_back(p);
        }
        if (!sources.empty())
          for (const std::string& out : node.output()) sources_[out] = sources;
      }
      if (node.op_type() == "Constant" && node.output_size() > 0) {
        for (const auto& attr : node.attribute())
          if (attr.name() == "value" && attr.has_t()) constant_values_[node.output(0)] = &attr.t();
      }
      for (const std::string& out : node.output()) {
        if (out.empty()) continue;
        (role == Role::kConstant ? constant_ : activation_).insert(out);
      }
    }
  }

  /// The graph input a tensor is, directly or through ops that only rearrange it; "" else.
  [[nodiscard]] std::string traced_input(std::string tensor,
                                         const std::unordered_map<std::string, int>& producer) const {
    for (int hops = 0; hops < 64; ++hops) {
      if (graph_inputs_.count(tensor) > 0) return tensor;
      const auto it = producer.find(tensor);
      if (it == producer.end()) return {};
      const onnx::NodeProto& node = model_.graph().node(it->second);
      if (!reshapes_only(node.op_type()) || node.input_size() == 0) return {};
      tensor = node.input(0);
    }
    return {};
  }

  /// Which graph inputs are weights and which is the data batch. An initializer is a weight;
  /// so is a graph input (export_params=False) that an op reads as its weight, bias or buffer
  /// (is_weight_slot), or that is added to the output of a weighted MatMul or Gemm (a
  /// Linear's bias). The data inputs are the rest, unless `data_inputs` names them; when more
  /// than one input remains, the importer cannot tell and refuses rather than guess.
  void classify_inputs() {
    const onnx::GraphProto& graph = model_.graph();
    std::vector<std::string> candidates;
    for (const auto& input : graph.input())
      if (constant_.count(input.name()) == 0) {
        candidates.push_back(input.name());
        graph_inputs_.insert(input.name());
      }
    std::unordered_map<std::string, int> producer;
    std::set<std::string> read;
    for (int i = 0; i < graph.node_size(); ++i) {
      for (const std::string& out : graph.node(i).output()) producer[out] = i;
      for (const std::string& in : graph.node(i).input()) read.insert(in);
    }
    std::set<std::string> weights;
    std::map<std::string, std::string> weight_reader;  // weight input -> the node that shows it
    auto rank_of = [&](const std::string& input) {
      for (const auto& in : graph.input())
        if (in.name() == input && in.type().has_tensor_type() && in.type().tensor_type().has_shape())
          return in.type().tensor_type().shape().dim_size();
      return -1;
    };
    bool bias_only = false;  // a Linear's bias is a vector
    auto mark = [&](const std::string& tensor, int node) {
      const std::string input = traced_input(tensor, producer);
      if (input.empty() || (bias_only && rank_of(input) != 1)) return;
      if (weights.insert(input).second) weight_reader[input] = node_label(node);
    };
    for (int i = 0; i < graph.node_size(); ++i) {
      const onnx::NodeProto& node = graph.node(i);
      for (int k = 0; k < node.input_size(); ++k)
        if (is_weight_slot(node.op_type(), k)) mark(node.input(k), i);
      if (node.op_type() == "Gather" && node.input_size() == 2 &&
          !traced_input(node.input(1), producer).empty())
        mark(node.input(0), i);
    }
    auto weighted_product = [&](const std::string& tensor) {
      const auto it = producer.find(tensor);
      if (it == producer.end()) return false;
      const onnx::NodeProto& node = graph.node(it->second);
      if ((node.op_type() != "MatMul" && node.op_type() != "Gemm") || node.input_size() < 2)
        return false;
      const std::string w = traced_input(node.input(1), producer);
      return weights.count(w) > 0 || initializers_.count(node.input(1)) > 0 ||
             roots_from_initializer(node.input(1), producer);
    };
    bias_only = true;
    for (int i = 0; i < graph.node_size(); ++i) {
      const onnx::NodeProto& node = graph.node(i);
      if (node.op_type() != "Add" || node.input_size() != 2) continue;
      for (int k = 0; k < 2; ++k)
        if (weighted_product(node.input(1 - k))) mark(node.input(k), i);
    }

    if (!data_input_names_.empty()) {
      for (const std::string& name : data_input_names_) {
        if (initializers_.count(name) > 0)
          fail("input " + quoted(name) + " is an initializer (a weight), not a data input");
        if (graph_inputs_.count(name) == 0)
          fail("the model has no input " + quoted(name) + " (its inputs: " + list(candidates) + ")");
      }
      for (const std::string& name : data_input_names_) weights.erase(name);
      for (const std::string& name : candidates)
        if (std::find(data_input_names_.begin(), data_input_names_.end(), name) ==
                data_input_names_.end() &&
            read.count(name) > 0)
          weights.insert(name);
    }
    std::vector<std::string> data;
    for (const std::string& name : candidates) {
      if (weights.count(name) > 0) continue;
      if (read.count(name) == 0) {
        unused_inputs_.push_back(name);
        continue;
      }
      data.push_back(name);
    }
    if (data.empty())
      fail(candidates.empty() ? "the model has no data input (every input is an initializer)"
                              : "the model has no data input (every input is read as a weight: " +
                                    list(candidates) + ")");
    if (data.size() > 1 && data_input_names_.empty())
      fail("cannot tell the data input from weights among " + list(data) +
           " (no op reads them as a weight or bias): name the data input (--onnx-input " +
           one_line(data.front()) + ")");
    for (const std::string& name : weights) {
      const auto it = std::find_if(graph.input().begin(), graph.input().end(),
                                   [&](const auto& in) { return in.name() == name; });
      if (!it->type().has_tensor_type() || !it->type().tensor_type().has_shape())
        fail("weight input " + quoted(name) + " (read by " + weight_reader[name] +
             ") has no shape: the importer cannot size it");
      param_types_[name] = it->type().tensor_type().elem_type();
      constant_.insert(name);
      weight_inputs_.insert(name);
    }
    for (const std::string& name : data) {
      data_inputs_.push_back(name);
      activation_.insert(name);
    }
  }

  /// Whether `tensor` is an initializer seen through views (classify has not run yet).
  [[nodiscard]] bool roots_from_initializer(std::string tensor,
                                            const std::unordered_map<std::string, int>& producer) const {
    for (int hops = 0; hops < 64; ++hops) {
      if (initializers_.count(tensor) > 0) return true;
      const auto it = producer.find(tensor);
      if (it == producer.end()) return false;
      const onnx::NodeProto& node = model_.graph().node(it->second);
      if (!reshapes_only(node.op_type()) || node.input_size() == 0) return false;
      tensor = node.input(0);
    }
    return false;
  }

  static std::string list(const std::vector<std::string>& names) {
    std::string out;
    for (std::size_t k = 0; k < names.size() && k < 6; ++k)
      out += (out.empty() ? "" : ", ") + quoted(names[k]);
    if (names.size() > 6) out += " and " + std::to_string(names.size() - 6) + " more";
    return out;
  }

  /// Ops that only rearrange or repeat their first input's elements.
  static bool reshapes_only(const std::string& op_type) {
    return view_ops().count(op_type) > 0 || op_type == "Cast" || op_type == "Expand";
  }

  /// The weights `tensor` is or was computed from without any activation.
  [[nodiscard]] std::vector<std::string> parameter_sources(const std::string& tensor) const {
    if (param_types_.count(tensor) > 0) return {tensor};
    if (const auto it = sources_.find(tensor); it != sources_.end()) return it->second;
    return {};
  }

  /// The initializer `tensor` is, or is a view of; nullptr for anything else.
  [[nodiscard]] const std::string* parameter_root(const std::string& tensor) const {
    if (const auto it = param_types_.find(tensor); it != param_types_.end()) return &it->first;
    if (const auto it = roots_.find(tensor); it != roots_.end()) return &it->second;
    return nullptr;
  }

  static std::string supported_list() {
    std::set<std::string> all(view_ops());
    for (const auto& [name, rule] : elementwise_ops()) all.insert(name);
    for (const auto& [name, kind] : copy_ops()) all.insert(name);
    all.insert(other_ops().begin(), other_ops().end());
    std::string list;
    for (const auto& name : all) list += (list.empty() ? "" : ", ") + name;
    return list;
  }

  /// ONNX's checker. Weights kept in an external data file (save_as_external_data) are
  /// checked as the graph inputs they stand for: the planner needs their shapes, not their
  /// values, so the file need not be there.
  void check() {
    const auto& inits = model_.graph().initializer();
    const bool external = std::any_of(inits.begin(), inits.end(), [](const auto& t) {
      return t.data_location() == onnx::TensorProto_DataLocation_EXTERNAL;
    });
    try {
      if (!external) {
        onnx::checker::check_model(model_);
        return;
      }
      onnx::ModelProto copy = model_;
      onnx::GraphProto& graph = *copy.mutable_graph();
      graph.clear_initializer();
      for (const auto& t : inits) {
        if (t.data_location() != onnx::TensorProto_DataLocation_EXTERNAL) {
          *graph.add_initializer() = t;
          continue;
        }
        ++external_weights_;
        onnx::ValueInfoProto& input = *graph.add_input();
        input.set_name(t.name());
        auto& tensor = *input.mutable_type()->mutable_tensor_type();
        tensor.set_elem_type(t.data_type());
        auto& shape = *tensor.mutable_shape();
        for (int64_t d : t.dims()) shape.add_dim()->set_dim_value(d);
      }
      onnx::checker::check_model(copy);
    } catch (const std::exception& e) {
      fail("not a valid onnx model: " + one_line(e.what()));
    }
  }

  /// Puts the batch into the inputs and drops every stored shape but the inputs', so shape
  /// inference recomputes them all.
  void set_batch() {
    onnx::GraphProto& graph = *model_.mutable_graph();
    for (auto& input : *graph.mutable_input()) {
      if (constant_.count(input.name()) > 0) continue;
      if (!input.type().has_tensor_type() || !input.type().tensor_type().has_shape())
        fail("input " + quoted(input.name()) + " has no shape");
      auto& shape = *input.mutable_type()->mutable_tensor_type()->mutable_shape();
      if (shape.dim_size() > 0 && shape.dim(0).has_dim_value() && exported_batch_ == 0)
        exported_batch_ = shape.dim(0).dim_value();
      if (batch_ > 0 && shape.dim_size() > 0) shape.mutable_dim(0)->set_dim_value(batch_);
      for (int d = 0; d < shape.dim_size(); ++d) {
        const auto& dim = shape.dim(d);
        if (dim.has_dim_value() && dim.dim_value() > 0) continue;
        const std::string what =
            dim.has_dim_param() ? "symbolic (" + quoted(dim.dim_param()) + ")" : "unknown";
        fail("input " + quoted(input.name()) + " dimension " + std::to_string(d) + " is " + what +
             (d == 0 ? ": give a batch size" : ": export the model with fixed sizes"));
      }
    }
    if (batch_ > 0) {
      graph.clear_value_info();
      for (auto& output : *graph.mutable_output())
        if (output.type().has_tensor_type())
          output.mutable_type()->mutable_tensor_type()->clear_shape();
    }
  }

  /// Without ONNX's data propagation: on a weight of the wrong size (the fuzzer's
  /// regressions/wrong_weight_shape_crashed_data_propagation.onnx) Debian's libonnx 1.12
  /// dereferenced a null pointer in it. detail::fold_constants does the shape arithmetic it
  /// did: every file of the corpus imports to the same training graph without it.
  void infer() {
    try {
      onnx::ShapeInferenceOptions options(/*check_type_val=*/true, /*strict_mode_val=*/1,
                                          /*data_prop_val=*/false);
      onnx::shape_inference::InferShapes(model_, onnx::OpSchemaRegistry::Instance(), options);
    } catch (const std::exception& e) {
      fail("shape inference failed: " + one_line(e.what()));
    }
  }

  /// ONNX's shape inference, then folding the shape arithmetic it could not see through
  /// (detail::fold_constants), until a round folds nothing more.
  void infer_and_fold() {
    std::vector<bool> foldable(roles_.size());
    for (std::size_t i = 0; i < roles_.size(); ++i)
      foldable[i] = roles_[i] == Role::kConstant && model_.graph().node(static_cast<int>(i)).op_type() != "Constant";
    const auto static_shape = [&](const std::string& tensor) -> std::optional<std::vector<int64_t>> {
      const auto it = shapes_.find(tensor);
      if (it == shapes_.end()) return std::nullopt;
      return it->second.dims;
    };
    for (int round = 0; round < 256; ++round) {
      infer();
      collect_shapes();
      const int folded = detail::fold_constants(*model_.mutable_graph(), foldable, static_shape);
      folded_ += folded;
      if (folded == 0) break;
    }
    constant_values_.clear();
    for (const auto& node : model_.graph().node()) {
      if (node.op_type() != "Constant" || node.output_size() == 0) continue;
      for (const auto& attr : node.attribute())
        if (attr.name() == "value" && attr.has_t()) constant_values_[node.output(0)] = &attr.t();
    }
  }

  /// One line: what the file held that did not become an op, and why.
  [[nodiscard]] std::string summary(const ForwardGraph& g) const {
    std::map<std::string, int> views;
    int constants = 0;
    for (std::size_t i = 0; i < roles_.size(); ++i) {
      if (roles_[i] == Role::kView) ++views[model_.graph().node(static_cast<int>(i)).op_type()];
      if (roles_[i] == Role::kConstant) ++constants;
    }
    std::string out = std::to_string(model_.graph().node_size()) + " nodes read, " +
                      std::to_string(g.ops.size()) + " ops kept";
    std::vector<std::string> left;
    int view_count = 0;
    std::string view_types;
    for (const auto& [type, n] : views) {
      view_count += n;
      view_types += (view_types.empty() ? "" : ", ") + type;
    }
    if (view_count > 0)
      left.push_back(std::to_string(view_count) + " views (" + view_types + ": no work of their own)");
    if (constants > 0)
      left.push_back(std::to_string(constants) + " constant or shape nodes (" +
                     std::to_string(folded_) + " folded: no activation)");
    if (pruned_ > 0)
      left.push_back(std::to_string(pruned_) + " ops that do not lead to the output " +
                     quoted(model_.graph().output(0).name()));
    if (!unused_inputs_.empty())
      left.push_back(std::to_string(unused_inputs_.size()) + " unused inputs (" + list(unused_inputs_) + ")");
    if (!weight_inputs_.empty())
      out += "; " + std::to_string(weight_inputs_.size()) + " weight inputs counted as parameters";
    if (external_weights_ > 0)
      out += "; " + std::to_string(external_weights_) +
             " weights in an external data file (not read: only their shapes matter)";
    for (std::size_t k = 0; k < left.size(); ++k) out += (k == 0 ? "; left out " : ", ") + left[k];
    return out;
  }

  void collect_shapes() {
    const onnx::GraphProto& graph = model_.graph();
    auto add = [&](const onnx::ValueInfoProto& info) {
      if (!info.type().has_tensor_type()) return;
      const auto& tensor = info.type().tensor_type();
      if (!tensor.has_shape()) return;
      Shape s;
      s.type = tensor.elem_type();
      for (const auto& dim : tensor.shape().dim()) {
        if (!dim.has_dim_value() || dim.dim_value() < 0) return;  // unknown: left out
        s.dims.push_back(dim.dim_value());
      }
      shapes_[info.name()] = std::move(s);
    };
    for (const auto& info : graph.input()) add(info);
    for (const auto& info : graph.value_info()) add(info);
    for (const auto& info : graph.output()) add(info);
    for (const auto& init : graph.initializer()) {
      Shape s;
      s.type = init.data_type();
      s.dims.assign(init.dims().begin(), init.dims().end());
      shapes_[init.name()] = std::move(s);
    }
  }

  const Shape& shape(const std::string& tensor, int node) const {
    const auto it = shapes_.find(tensor);
    if (it == shapes_.end())
      fail("cannot infer the shape of " + quoted(tensor) +
           (node >= 0 ? " (of " + node_label(node) + ")" : std::string()));
    return it->second;
  }

  uint64_t elements(const std::string& tensor, int node) const {
    uint64_t n = 1;
    for (int64_t d : shape(tensor, node).dims) {
      if (d < 0 || __builtin_mul_overflow(n, static_cast<uint64_t>(d), &n))
        fail("tensor " + quoted(tensor) + " is too large");
    }
    return n;
  }

  uint64_t bytes(const std::string& tensor, int node) const {
    const uint64_t per = element_bytes(shape(tensor, node).type);
    if (per == 0) fail("tensor " + quoted(tensor) + " has an element type the planner cannot size");
    uint64_t b = 0;
    if (__builtin_mul_overflow(elements(tensor, node), per, &b))
      fail("tensor " + quoted(tensor) + " is too large");
    return b;
  }

  uint64_t input_bytes() const {
    uint64_t total = 0;
    for (const auto& name : data_inputs_) total += bytes(name, -1);
    return total;
  }

  /// A scalar from an initializer or a Constant node, if `tensor` is one.
  std::optional<double> scalar(const std::string& tensor) const {
    const onnx::TensorProto* t = nullptr;
    if (const auto it = initializers_.find(tensor); it != initializers_.end()) t = it->second;
    if (const auto it = constant_values_.find(tensor); it != constant_values_.end()) t = it->second;
    if (t == nullptr) return std::nullopt;
    if (t->data_type() == onnx::TensorProto_DataType_FLOAT) {
      if (t->float_data_size() == 1) return t->float_data(0);
      if (t->raw_data().size() == sizeof(float)) {
        float f = 0;
        std::memcpy(&f, t->raw_data().data(), sizeof f);
        return f;
      }
    }
    if (t->data_type() == onnx::TensorProto_DataType_DOUBLE) {
      if (t->double_data_size() == 1) return t->double_data(0);
      if (t->raw_data().size() == sizeof(double)) {
        double d = 0;
        std::memcpy(&d, t->raw_data().data(), sizeof d);
        return d;
      }
    }
    return std::nullopt;
  }

  static std::optional<double> float_attribute(const onnx::NodeProto& node, const char* name) {
    for (const auto& attr : node.attribute())
      if (attr.name() == name && attr.has_f()) return attr.f();
    return std::nullopt;
  }

  static std::vector<int64_t> ints_attribute(const onnx::NodeProto& node, const char* name) {
    for (const auto& attr : node.attribute())
      if (attr.name() == name) return {attr.ints().begin(), attr.ints().end()};
    return {};
  }

  static int64_t int_attribute(const onnx::NodeProto& node, const char* name, int64_t fallback) {
    for (const auto& attr : node.attribute())
      if (attr.name() == name && attr.has_i()) return attr.i();
    return fallback;
  }

  /// A unique op name: the node's, or op type and index for an unnamed node.
  std::string op_name(int index) {
    const onnx::NodeProto& node = model_.graph().node(index);
    std::string base =
        node.name().empty() ? node.op_type() + "_" + std::to_string(index) : node.name();
    std::string name = base;
    for (int k = 2; !names_.insert(name).second; ++k) name = base + "#" + std::to_string(k);
    return name;
  }

  void build(ForwardGraph& g) {
    const onnx::GraphProto& graph = model_.graph();
    std::unordered_map<std::string, int> producer;  // activation tensor -> op or kGraphInput
    for (const auto& name : data_inputs_) producer[name] = kGraphInput;
    std::set<std::string> counted_params;

    for (int i = 0; i < graph.node_size(); ++i) {
      const Role role = roles_[static_cast<std::size_t>(i)];
      if (role == Role::kConstant) continue;
      const onnx::NodeProto& node = graph.node(i);
      std::vector<int> inputs;
      std::string first_activation;
      for (const std::string& in : node.input()) {
        const auto it = producer.find(in);
        if (it == producer.end()) continue;
        if (first_activation.empty()) first_activation = in;
        if (std::find(inputs.begin(), inputs.end(), it->second) == inputs.end())
          inputs.push_back(it->second);
      }
      if (role == Role::kView) {
        for (const std::string& out : node.output())
          if (!out.empty()) producer[out] = producer.at(first_activation);
        continue;
      }

      ForwardOp op = make_op(i, first_activation);
      op.name = op_name(i);
      op.inputs = inputs;
      for (int k = 0; k < node.input_size(); ++k) {
        if (is_setting_input(node.op_type(), k)) continue;
        for (const std::string& root : parameter_sources(node.input(k))) {
          if (!is_floating(param_types_.at(root))) continue;
          if (counted_params.insert(root).second) op.param_bytes += bytes(root, i);
        }
      }
      const bool reads_data_only =
          std::all_of(inputs.begin(), inputs.end(), [](int in) { return in == kGraphInput; });
      if (op.op == "conv1d" || op.op == "conv2d" || op.op == "conv3d" || op.op == "linear" ||
          op.op == "matmul")
        op.backward_flops = reads_data_only ? op.forward_flops : 2 * op.forward_flops;

      const int index = static_cast<int>(g.ops.size());
      for (const std::string& out : node.output())
        if (!out.empty()) producer[out] = index;
      g.ops.push_back(std::move(op));
    }

    if (graph.output_size() == 0) fail("the model has no graph output (the logits)");
    const std::string& logits = graph.output(0).name();
    const auto it = producer.find(logits);
    if (it == producer.end() || it->second == kGraphInput)
      fail("output " + quoted(logits) + " is not computed from the data input by any op");
    logits_op_ = it->second;
  }

  ForwardOp make_op(int index, const std::string& x) {
    const onnx::NodeProto& node = model_.graph().node(index);
    const std::string& type = node.op_type();
    const std::string& y = node.output(0);
    ForwardOp op;
    auto saves = [&](Saves s) {
      op.backward_needs_inputs = s == Saves::kInputs || s == Saves::kBoth;
      op.backward_needs_output = s == Saves::kOutput || s == Saves::kBoth;
    };
    op.output_bytes = bytes(y, index);

    if (const auto rule = elementwise_ops().find(type); rule != elementwise_ops().end()) {
      const Elementwise& e = rule->second;
      op.op = e.kind;
      if (type == "Clip") op.op = clip_kind(node);
      const uint64_t n = elements(y, index);
      op.forward_flops = e.forward * n;
      op.backward_flops = e.backward * n;
      saves(e.saves);
      return op;
    }
    if (const auto copy = copy_ops().find(type); copy != copy_ops().end()) {
      op.op = copy->second;
      saves(Saves::kNothing);
      if (type == "Split") {
        op.output_bytes = 0;
        for (const std::string& out : node.output())
          if (!out.empty()) op.output_bytes += bytes(out, index);
      }
      if (type == "Gather" && parameter_root(node.input(0)) != nullptr) {
        op.op = "embedding";
        op.backward_flops = elements(y, index);
      }
      return op;
    }
    if (type == "Conv") {
      const Shape& w = shape(node.input(1), index);
      if (w.dims.size() < 3) fail(node_label(index) + " has a weight of rank below 3");
      uint64_t per_output = 1;  // multiply-adds per output element: (C_in / groups) * kernel
      for (std::size_t d = 1; d < w.dims.size(); ++d)
        per_output *= static_cast<uint64_t>(w.dims[d]);
      op.op = "conv" + std::to_string(w.dims.size() - 2) + "d";
      op.forward_flops = 2 * elements(y, index) * per_output;
      saves(Saves::kInputs);
      return op;
    }
    if (type == "Gemm" || type == "MatMul") {
      const Shape& a = shape(node.input(0), index);
      if (a.dims.empty()) fail(node_label(index) + " multiplies a scalar");
      uint64_t k = static_cast<uint64_t>(a.dims.back());
      if (type == "Gemm" && int_attribute(node, "transA", 0) != 0)
        k = static_cast<uint64_t>(a.dims.front());
      const bool weighted =
          parameter_root(node.input(0)) != nullptr || parameter_root(node.input(1)) != nullptr;
      op.op = weighted ? "linear" : "matmul";
      op.forward_flops = 2 * elements(y, index) * k;
      saves(Saves::kInputs);
      return op;
    }
    if (type == "MaxPool" || type == "AveragePool") {
      uint64_t window = 1;
      for (int64_t k : ints_attribute(node, "kernel_shape")) window *= static_cast<uint64_t>(k);
      const uint64_t n = elements(y, index);
      op.op = type == "MaxPool" ? "maxpool" : "avgpool";
      op.forward_flops = n * window;
      op.backward_flops = type == "MaxPool" ? n : n * window;
      saves(type == "MaxPool" ? Saves::kInputs : Saves::kNothing);
      return op;
    }
    if (type == "GlobalAveragePool" || type == "GlobalMaxPool") {
      const uint64_t n = elements(x, index);
      op.op = type == "GlobalMaxPool" ? "maxpool" : "avgpool";
      op.forward_flops = n;
      op.backward_flops = type == "GlobalMaxPool" ? elements(y, index) : n;
      saves(type == "GlobalMaxPool" ? Saves::kInputs : Saves::kNothing);
      return op;
    }
    // ReduceMean, ReduceSum (the only ops left in other_ops()).
    const uint64_t n = elements(x, index);
    op.op = type == "ReduceMean" ? "reduce_mean" : "reduce_sum";
    op.forward_flops = n;
    op.backward_flops = n;
    saves(Saves::kNothing);
    return op;
  }

  /// relu6 for a clamp to [0, 6] (attributes before opset 11, inputs since), else clip.
  std::string clip_kind(const onnx::NodeProto& node) const {
    std::optional<double> lo = float_attribute(node, "min");
    std::optional<double> hi = float_attribute(node, "max");
    if (node.input_size() > 1 && !node.input(1).empty()) lo = scalar(node.input(1));
    if (node.input_size() > 2 && !node.input(2).empty()) hi = scalar(node.input(2));
    return lo == 0.0 && hi == 6.0 ? "relu6" : "clip";
  }

  /// Keeps the ops the logits depend on, renumbered.
  void prune(ForwardGraph& g) {
    std::vector<bool> live(g.ops.size(), false);
    live[static_cast<std::size_t>(logits_op_)] = true;
    for (int i = logits_op_; i >= 0; --i) {
      if (!live[static_cast<std::size_t>(i)]) continue;
      for (int in : g.ops[static_cast<std::size_t>(i)].inputs)
        if (in != kGraphInput) live[static_cast<std::size_t>(in)] = true;
    }
    std::vector<int> renumber(g.ops.size(), -1);
    std::vector<ForwardOp> kept;
    for (std::size_t i = 0; i < g.ops.size(); ++i) {
      if (!live[i]) continue;
      renumber[i] = static_cast<int>(kept.size());
      ForwardOp op = std::move(g.ops[i]);
      for (int& in : op.inputs)
        if (in != kGraphInput) in = renumber[static_cast<std::size_t>(in)];
      kept.push_back(std::move(op));
    }
    pruned_ = static_cast<int>(g.ops.size() - kept.size());
    g.ops = std::move(kept);
  }

  std::filesystem::path path_;
  int batch_;
  onnx::ModelProto model_;
  std::unordered_map<std::string, const onnx::TensorProto*> initializers_;
  std::unordered_map<std::string, const onnx::TensorProto*> constant_values_;
  std::unordered_map<std::string, std::string> roots_;  // views of initializers -> initializer
  std::unordered_map<std::string, std::vector<std::string>> sources_;  // weights behind constants
  std::set<std::string> constant_;                      // tensors that are not activations
  std::set<std::string> activation_;                    // tensors computed from the data input
  std::vector<std::string> data_input_names_;  // as the caller named them; empty: detect
  std::vector<std::string> data_inputs_;
  std::set<std::string> graph_inputs_;    // graph inputs that are not initializers
  std::set<std::string> weight_inputs_;   // of those, the weights (export_params=False)
  std::vector<std::string> unused_inputs_;
  std::unordered_map<std::string, int32_t> param_types_;  // weights -> element type
  int folded_ = 0;
  int pruned_ = 0;
  int external_weights_ = 0;
  int64_t exported_batch_ = 0;
  std::string bytes_;
  bool have_bytes_ = false;
  std::vector<Role> roles_;
  std::map<std::string, Shape> shapes_;
  std::set<std::string> names_;
  int logits_op_ = -1;
};

}  // namespace

ForwardGraph import_onnx_bytes(std::string_view bytes, const std::string& name, int batch,
                               const std::vector<std::string>& data_inputs) {
  Importer importer(name, batch, data_inputs);
  importer.use_bytes(bytes);
  return importer.run();
}

ForwardGraph import_onnx(const std::filesystem::path& path, int batch,
                         const std::vector<std::string>& data_inputs) {
  Importer importer(path, batch, data_inputs);
  ForwardGraph g = importer.run();
  const int64_t exported = importer.exported_batch();
  if (batch <= 0 || batch == exported) return g;
  // Re-batched: every activation must scale with the batch. An export that baked the batch
  // into a constant (ViT's class token expanded to the traced batch) keeps some at the old
  // size, which would be a plausible graph built on a wrong shape.
  const int other = exported > 0 ? static_cast<int>(exported) : batch + 1;
  const ForwardGraph reference = Importer(path, other, data_inputs).run();
  for (std::size_t i = 0; i < g.ops.size(); ++i) {
    const bool same_op = i < reference.ops.size() && reference.ops[i].name == g.ops[i].name;
    if (same_op && g.ops[i].output_bytes * static_cast<uint64_t>(other) ==
                       reference.ops[i].output_bytes * static_cast<uint64_t>(batch))
      continue;
    throw InputError(path.string() + ": cannot re-batch to " + std::to_string(batch) + ": " +
                     g.ops[i].op + " node '" + g.ops[i].name + "' does not scale with the batch " +
                     "(the export baked its batch into a constant); export at batch " +
                     std::to_string(batch) + " and plan it with that batch");
  }
  return g;
}

}  // namespace ergon::planner
