#include "runtime/executor.h"

#include "planner/pipeline.h"

#include <fcntl.h>
#include <malloc.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <climits>
#include <cstring>
#include <mutex>
#include <optional>
#include <random>
#include <span>

#include "common/error.h"
#include "profiler/kernels.h"

namespace ergon::runtime {
namespace {

using planner::ForwardOp;
using planner::kGraphInput;
namespace k = profiler;

using Buffer = std::vector<float>;

std::size_t elements(const std::vector<uint64_t>& shape) {
  std::size_t n = 1;
  for (uint64_t d : shape) n *= static_cast<std::size_t>(d);
  return n;
}

uint32_t u32(uint64_t v) { return static_cast<uint32_t>(v); }

Buffer random_buffer(std::size_t n, uint32_t seed, float scale) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0F, scale);
  Buffer b(n);
  for (float& v : b) v = d(rng);
  return b;
}

bool is_one_of(const std::string& op, std::initializer_list<const char*> names) {
  return std::any_of(names.begin(), names.end(), [&](const char* n) { return op == n; });
}

class ZeroCosts final : public planner::CostModel {
 public:
  planner::NodeCost compute(const std::string&, planner::NodePhase, uint64_t, uint64_t) const override {
    return {};
  }
  planner::NodeCost page_in(uint64_t) const override { return {}; }
  planner::NodeCost page_out(uint64_t) const override { return {}; }
};

}  // namespace

class TrainingIteration::Impl {
 public:
  Impl(const planner::ForwardGraph& f, const planner::TrainingGraph& g, std::filesystem::path scratch,
       uint32_t seed)
      : f_(f), g_(g), n_(static_cast<int>(f.ops.size())), scratch_(std::move(scratch)) {
    if (f_.input_shape.empty() || n_ == 0)
      throw InputError(f_.name + " has no tensor shapes (only zoo models can be executed)");
    if (g_.size() != 2 * n_ + 1) throw InputError("the training graph does not belong to " + f_.name);
    for (int i = 0; i < n_; ++i) check_supported(i);
    receives_gradient_ = g_.nodes[static_cast<std::size_t>(n_)].op == "receive";
    if (f_.ops.front().op == "embedding") {
      std::mt19937 rng(seed);
      std::uniform_int_distribution<int64_t> token(0, static_cast<int64_t>(f_.ops.front().table_rows.front()) - 1);
      ids_.resize(elements(f_.input_shape));
      for (int64_t& id : ids_) id = token(rng);
    } else {
      data_ = random_buffer(elements(f_.input_shape), seed, 1.0F);
    }
    const auto& logits = f_.ops.back().shape;
    const std::size_t classes = logits.back(), rows = elements(logits) / classes;
    for (std::size_t r = 0; r < rows; ++r) labels_.push_back(static_cast<uint32_t>((r * 7 + seed) % classes));
    params_.resize(f_.ops.size());
    grads_.resize(f_.ops.size());
    for (int i = 0; i < n_; ++i) init_parameters(i, seed);
    std::filesystem::create_directories(scratch_);
  }

  ~Impl() { remove_files(); }
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  const std::vector<Buffer>& parameters() const { return params_; }

  void set_parameters(const std::vector<Buffer>& params) {
    if (params.size() != params_.size())
      throw InputError("parameters for " + std::to_string(params.size()) + " ops, " + f_.name + " has " +
                       std::to_string(params_.size()));
    for (std::size_t i = 0; i < params.size(); ++i)
      if (params[i].size() != params_[i].size())
        throw InputError("op " + f_.ops[i].name + " has " + std::to_string(params_[i].size()) +
                         " parameters, not " + std::to_string(params[i].size()));
    params_ = params;
  }

  void set_input(Buffer input) {
    if (!ids_.empty()) throw InputError(f_.name + " begins with an embedding: its input is token ids, not an activation");
    if (input.size() != elements(f_.input_shape))
      throw InputError(f_.name + "'s input has " + std::to_string(elements(f_.input_shape)) + " values, not " +
                       std::to_string(input.size()));
    data_ = std::move(input);
    keep_input_gradient_ = true;
  }

  void set_output_gradient(Buffer gradient) {
    if (!receives_gradient_) throw InputError(f_.name + " ends with its loss: it receives no gradient");
    if (gradient.size() != elements(f_.ops.back().shape))
      throw InputError(f_.name + "'s output gradient has " + std::to_string(elements(f_.ops.back().shape)) +
                       " values, not " + std::to_string(gradient.size()));
    received_gradient_ = std::move(gradient);
  }

  Buffer output() const { return need(n_ - 1); }

  Buffer input_gradient() const {
    if (!keep_input_gradient_) throw InputError(f_.name + " was given no input (set_input): it keeps no input gradient");
    Buffer sum(elements(f_.input_shape), 0.0F);
    bool any = false;
    for (const auto& [op, part] : input_grad_parts_) {  // ascending op, as output_gradient sums
      for (std::size_t j = 0; j < sum.size(); ++j) sum[j] += part[j];
      any = true;
    }
    if (!any) throw DeviceError(f_.name + ": no backward step has computed its input's gradient yet");
    return sum;
  }

  void run(const planner::Step& st) {
    if (st.node < 0 || st.node >= g_.size()) fail("names node " + std::to_string(st.node) + ", not in the graph");
    const auto node = static_cast<std::size_t>(st.node);
    if (computed_.empty()) computed_.assign(static_cast<std::size_t>(g_.size()), 0);
    switch (st.kind) {
      case planner::StepKind::kCompute:
        compute(st.node);
        (computed_[node] != 0 ? result_.recomputes : result_.computes) += 1;
        computed_[node] = 1;
        break;
      case planner::StepKind::kFree:
        if (ram_.erase(st.node) == 0) fail("frees node " + std::to_string(st.node) + ", which is not in memory");
        break;
      case planner::StepKind::kPageOut: {
        const Buffer& b = need(st.node);
        write_file(st.node, b);
        paged_size_[st.node] = b.size();
        result_.paged_out_bytes += b.size() * sizeof(float);
        break;
      }
      case planner::StepKind::kPageIn: {
        const auto size = paged_size_.find(st.node);
        if (size == paged_size_.end()) fail("pages in node " + std::to_string(st.node) + ", never paged out");
        ram_[st.node] = read_file(st.node, size->second);
        result_.paged_in_bytes += size->second * sizeof(float);
        break;
      }
    }
    std::size_t held = 0;
    for (const auto& [id, b] : ram_) held += b.size() * sizeof(float);
    result_.peak_bytes = std::max<uint64_t>(result_.peak_bytes, held);
    ++step_;
  }

  ExecutionResult finish() {
    result_.parameter_grads = grads_;
    remove_files();
    return result_;
  }

  void next_iteration() {
    remove_files();
    input_grad_parts_.clear();
    received_gradient_.reset();
    ram_.clear();
    paged_size_.clear();
    computed_.clear();
    step_ = 0;
    result_ = ExecutionResult{};
  }

 private:
  [[noreturn]] void fail(const std::string& why) const {
    throw DeviceError("schedule step " + std::to_string(step_) + " " + why);
  }

  void check_supported(int i) const {
    const ForwardOp& op = f_.ops[i];
    if (!is_one_of(op.op, {"conv2d", "linear", "batchnorm", "layernorm", "relu", "relu6", "gelu", "tanh",
                           "add", "maxpool", "avgpool", "embedding", "attention_scores", "attention_context"}))
      throw InputError("op " + op.name + " (" + op.op + ") cannot be executed");
    if (op.op == "conv2d") {
      const uint64_t in_ch = in_shape(i)[1];
      if (op.padding != op.kernel / 2 || (op.groups != 1 && !(op.groups == in_ch && op.shape[1] == in_ch)))
        throw InputError("op " + op.name + ": only dense or depthwise convolutions padded by kernel / 2 can be executed");
    }
    if (op.op == "maxpool" && (op.kernel != op.stride || op.padding != 0))
      throw InputError("op " + op.name + ": overlapping max pooling cannot be executed");
    if (op.op == "linear" && op.tied_weights)
      throw InputError("op " + op.name + ": layers with tied weights cannot be executed");
    if (op.op == "embedding" && (i != 0 || op.table_rows.empty()))
      throw InputError("op " + op.name + ": an embedding must be the first op, reading the token ids");
  }

  std::vector<uint64_t> in_shape(int i, std::size_t input = 0) const {
    const int in = f_.ops[i].inputs[input];
    return in == kGraphInput ? f_.input_shape : f_.ops[in].shape;
  }
  std::size_t in_elements(int i, std::size_t input = 0) const {
    return f_.ops[i].inputs[input] == kGraphInput && !ids_.empty() ? ids_.size()
                                                                   : elements(in_shape(i, input));
  }

  /// Weights (excluding bias / shift) and their fan-in for initialization.
  std::size_t weight_count(int i) const {
    const ForwardOp& op = f_.ops[i];
    if (op.op == "conv2d") return static_cast<std::size_t>(op.shape[1] * (in_shape(i)[1] / op.groups) * op.kernel * op.kernel);
    if (op.op == "linear") return static_cast<std::size_t>(op.shape.back() * in_shape(i).back());
    if (op.op == "batchnorm") return static_cast<std::size_t>(op.shape[1]);
    if (op.op == "layernorm") return static_cast<std::size_t>(op.shape.back());
    if (op.op == "embedding") {
      uint64_t rows = 0;
      for (uint64_t r : op.table_rows) rows += r;
      return static_cast<std::size_t>(rows * op.shape.back());
    }
    return 0;
  }
  std::size_t bias_count(int i) const {
    const ForwardOp& op = f_.ops[i];
    if (op.op == "batchnorm") return static_cast<std::size_t>(op.shape[1]);
    if (op.op == "layernorm") return static_cast<std::size_t>(op.shape.back());
    if (!op.bias) return 0;
    return static_cast<std::size_t>(op.op == "linear" ? op.shape.back() : op.shape[1]);
  }

  void init_parameters(int i, uint32_t seed) {
    const ForwardOp& op = f_.ops[i];
    const std::size_t w = weight_count(i);
    if (w == 0) return;
    const auto op_seed = seed * 1000 + static_cast<uint32_t>(i);
    if (op.op == "batchnorm" || op.op == "layernorm") {  // scale 1, shift 0, as PyTorch starts
      params_[i].assign(w + bias_count(i), 0.0F);
      std::fill(params_[i].begin(), params_[i].begin() + static_cast<std::ptrdiff_t>(w), 1.0F);
      return;
    }
    double fan_in = 1;
    if (op.op == "conv2d") fan_in = static_cast<double>((in_shape(i)[1] / op.groups) * op.kernel * op.kernel);
    if (op.op == "linear") fan_in = static_cast<double>(in_shape(i).back());
    // He-style scale keeps activations O(1) through a deep network; biases start small too.
    params_[i] = random_buffer(w + bias_count(i), op_seed, static_cast<float>(std::sqrt(2.0 / fan_in)));
  }

  std::filesystem::path file(int node) const { return scratch_ / ("node-" + std::to_string(node) + ".bin"); }

  void write_file(int node, const Buffer& b) const {
    const std::string path = file(node).string();
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) fail("cannot page out to " + path + ": " + std::strerror(errno));
    const auto* p = reinterpret_cast<const char*>(b.data());
    std::size_t left = b.size() * sizeof(float);
    bool ok = true;
    while (ok && left > 0) {
      const ssize_t n = ::write(fd, p, left);
      ok = n > 0;
      if (ok) p += n, left -= static_cast<std::size_t>(n);
    }
    ok = ok && ::fsync(fd) == 0;  // on the storage, not in the page cache
    const int saved = errno;
    ::close(fd);
    if (!ok) fail("cannot page out to " + path + ": " + std::strerror(saved));
  }

  Buffer read_file(int node, std::size_t floats) const {
    const std::string path = file(node).string();
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail("cannot page in " + path + ": " + std::strerror(errno));
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);  // read from the storage, not the cache
    Buffer b(floats);
    auto* p = reinterpret_cast<char*>(b.data());
    std::size_t left = floats * sizeof(float);
    while (left > 0) {
      const ssize_t n = ::read(fd, p, left);
      if (n <= 0) {
        ::close(fd);
        fail("cannot page in " + path + ": " + (n == 0 ? std::string("file is short") : std::strerror(errno)));
      }
      p += n;
      left -= static_cast<std::size_t>(n);
    }
    ::close(fd);
    return b;
  }

  void remove_files() noexcept {
    std::error_code ignored;
    for (const auto& [node, size] : paged_size_) std::filesystem::remove(file(node), ignored);
    paged_size_.clear();
  }

  const Buffer& need(int node) const {
    const auto it = ram_.find(node);
    if (it == ram_.end())
      fail("needs the output of node " + std::to_string(node) + " (" + g_.nodes[static_cast<std::size_t>(node)].name +
           "), which is not in memory");
    return it->second;
  }
  const Buffer& input_of(int i, std::size_t input) const {
    const int in = f_.ops[i].inputs[input];
    return in == kGraphInput ? data_ : need(in);
  }

  void compute(int node) {
    if (node < n_) {
      ram_[node] = forward(node);
    } else if (node == n_ && receives_gradient_) {
      need(n_ - 1);  // the output went downstream before its gradient came back
      if (!received_gradient_) fail("receives the gradient of the stage's output, which was not given");
      ram_[node] = *received_gradient_;
    } else if (node == n_) {
      const Buffer& logits = need(n_ - 1);
      const std::size_t classes = f_.ops[n_ - 1].shape.back();
      Buffer d(logits.size());
      result_.loss = k::softmax_cross_entropy(u32(logits.size() / classes), u32(classes), logits, labels_, d);
      ram_[node] = std::move(d);
    } else {
      ram_[node] = backward(2 * n_ - node);
    }
  }

  k::ConvShape conv_shape(int i) const {
    const ForwardOp& op = f_.ops[i];
    const auto in = in_shape(i);
    return {u32(in[0]), u32(in[1]), u32(op.shape[1]), u32(in[2]), u32(in[3]), u32(op.kernel), u32(op.stride)};
  }
  k::AttentionShape attention_shape(int scores_op) const {
    const ForwardOp& op = f_.ops[scores_op];
    const auto qkv = in_shape(scores_op);
    return {u32(qkv[0]), u32(qkv[1]), u32(qkv.back() / 3), u32(op.heads), op.causal};
  }
  /// The first token of each sample of (N, T, D): (N, D).
  Buffer first_tokens(const Buffer& x, const std::vector<uint64_t>& shape) const {
    const std::size_t n = shape[0], t = shape[1], d = shape.back();
    Buffer out(n * d);
    for (std::size_t s = 0; s < n; ++s) std::copy_n(x.begin() + static_cast<std::ptrdiff_t>(s * t * d), d, out.begin() + static_cast<std::ptrdiff_t>(s * d));
    return out;
  }

  std::span<float> workspace(std::size_t floats) {
    if (workspace_.size() < floats) workspace_.resize(floats);
    return std::span<float>(workspace_).first(floats);
  }

  Buffer forward(int i) {
    const ForwardOp& op = f_.ops[i];
    const auto in = in_shape(i);
    const Buffer& x = input_of(i, 0);
    Buffer y(elements(op.shape));
    const std::span<const float> p(params_[i]);
    if (op.op == "conv2d") {
      const k::ConvShape s = conv_shape(i);
      if (op.groups == 1) {
        k::conv2d_forward(s, x, p, y, workspace(s.columns_size()));
      } else {
        k::depthwise_conv2d_forward(s, x, p, y);
      }
      add_bias(i, y);
    } else if (op.op == "linear") {
      const std::size_t features = in.back();
      const Buffer rows = op.first_token_only ? first_tokens(x, in) : Buffer{};
      const std::span<const float> xs = op.first_token_only ? std::span<const float>(rows) : std::span<const float>(x);
      k::linear_forward(u32(xs.size() / features), u32(features), u32(op.shape.back()), xs, p, y);
      add_bias(i, y);
    } else if (op.op == "batchnorm") {
      const uint32_t c = u32(in[1]);
      Buffer saved(2 * std::size_t{c});
      k::batch_norm_forward(u32(in[0]), c, u32(elements(in) / in[0] / c), x, p.first(c), p.subspan(c), y, saved);
    } else if (op.op == "layernorm") {
      const uint32_t f = u32(in.back());
      Buffer saved(2 * elements(in) / f);
      k::layer_norm_forward(u32(elements(in) / f), f, x, p.first(f), p.subspan(f), y, saved);
    } else if (op.op == "relu") {
      k::relu_forward(x, y);
    } else if (op.op == "relu6") {
      k::relu6_forward(x, y);
    } else if (op.op == "gelu") {
      k::gelu_forward(x, y);
    } else if (op.op == "tanh") {
      k::tanh_forward(x, y);
    } else if (op.op == "add") {
      k::add_forward(x, input_of(i, 1), y);
    } else if (op.op == "maxpool") {
      k::max_pool_forward(u32(in[0]), u32(in[1]), u32(in[2]), u32(in[3]), u32(op.kernel), x, y);
    } else if (op.op == "avgpool") {
      k::global_avg_pool_forward(u32(in[0]), u32(in[1]), u32(in[2] * in[3]), x, y);
    } else if (op.op == "embedding") {
      const auto rows = table_rows(i);
      k::embedding_forward(u32(in[0]), u32(in[1]), u32(op.shape.back()), rows, ids_, p, y);
    } else if (op.op == "attention_scores") {
      k::attention_scores_forward(attention_shape(i), x, y);
    } else if (op.op == "attention_context") {
      k::attention_context_forward(attention_shape(op.inputs[0]), x, input_of(i, 1), y);
    }
    return y;
  }

  std::vector<uint32_t> table_rows(int i) const {
    std::vector<uint32_t> rows;
    for (uint64_t r : f_.ops[i].table_rows) rows.push_back(u32(r));
    return rows;
  }

  /// Channels of a bias, and how many consecutive outputs share each.
  std::pair<std::size_t, std::size_t> bias_layout(int i) const {
    const ForwardOp& op = f_.ops[i];
    if (op.op == "linear") return {op.shape.back(), 1};
    return {op.shape[1], static_cast<std::size_t>(op.shape[2] * op.shape[3])};
  }
  /// Outputs are [outer][channels][inner]: one bias per channel, a run of `inner` at a time.
  void add_bias(int i, Buffer& y) const {
    if (!f_.ops[i].bias) return;
    const float* bias = params_[i].data() + weight_count(i);
    const auto [channels, inner] = bias_layout(i);
    for (std::size_t j = 0; j < y.size();)
      for (std::size_t c = 0; c < channels; ++c)
        for (std::size_t k = 0; k < inner; ++k, ++j) y[j] += bias[c];
  }
  void bias_gradient(int i, std::span<const float> dy) {
    if (!f_.ops[i].bias) return;
    float* grad = grads_[i].data() + weight_count(i);
    const auto [channels, inner] = bias_layout(i);
    for (std::size_t j = 0; j < dy.size();)
      for (std::size_t c = 0; c < channels; ++c)
        for (std::size_t k = 0; k < inner; ++k, ++j) grad[c] += dy[j];
  }

  /// dL/d(output of op i): the loss's output, or the sum of each consumer's input gradient
  /// (a backward node's output is the gradients of its op's inputs, one after another). With
  /// one consumer it is that consumer's gradient where it lies, not a copy (a copy is work no
  /// profile times); with several, their sum in `sum`.
  std::span<const float> output_gradient(int i, Buffer& sum) const {
    if (i == n_ - 1) return need(n_);
    const std::size_t size_of_output = elements(f_.ops[i].shape);
    int uses = 0;
    std::span<const float> only;
    for (int c = i + 1; c < n_; ++c) {
      const auto& ins = f_.ops[c].inputs;
      std::size_t offset = 0;
      for (std::size_t input = 0; input < ins.size(); ++input) {
        const std::size_t size = in_elements(c, input);
        if (ins[input] == i && ++uses == 1) only = std::span<const float>(need(2 * n_ - c)).subspan(offset, size);
        offset += size;
      }
    }
    if (uses == 1 && only.size() == size_of_output) return only;
    Buffer& dy = sum;
    dy.assign(size_of_output, 0.0F);
    for (int c = i + 1; c < n_; ++c) {
      const auto& ins = f_.ops[c].inputs;
      std::size_t offset = 0;
      for (std::size_t input = 0; input < ins.size(); ++input) {
        const std::size_t size = in_elements(c, input);
        if (ins[input] == i) {
          const Buffer& g = need(2 * n_ - c);
          for (std::size_t j = 0; j < size; ++j) dy[j] += g[offset + j];
        }
        offset += size;
      }
    }
    return dy;
  }

  Buffer backward(int i) {
    const ForwardOp& op = f_.ops[i];
    const auto in = in_shape(i);
    const bool data_only =
        std::all_of(op.inputs.begin(), op.inputs.end(), [](int v) { return v == kGraphInput; });
    Buffer dy_sum;
    const std::span<const float> dy = output_gradient(i, dy_sum);
    std::size_t in_total = 0;
    for (std::size_t input = 0; input < op.inputs.size(); ++input) in_total += in_elements(i, input);
    // The data batch's gradient is never kept (the training graph gives it no memory).
    Buffer dx(in_total);
    const std::span<float> dxs(dx);
    const std::span<const float> p(params_[i]);
    // The kernels overwrite the weight gradients they compute; only the bias gradient
    // accumulates (bias_gradient), from zero. (Zeroing all of it, an embedding table's too, is
    // work no profile times.)
    const std::size_t w = weight_count(i);
    grads_[i].resize(params_[i].size());
    std::fill(grads_[i].begin() + static_cast<std::ptrdiff_t>(std::min(w, grads_[i].size())), grads_[i].end(), 0.0F);
    const std::span<float> dw = std::span<float>(grads_[i]).first(w);
    if (op.op == "conv2d") {
      const k::ConvShape s = conv_shape(i);
      if (op.groups == 1) {
        k::conv2d_backward(s, input_of(i, 0), p, dy, dxs, dw, workspace(s.columns_size()));
      } else {
        k::depthwise_conv2d_backward(s, input_of(i, 0), p, dy, dxs, dw);
      }
      bias_gradient(i, dy);
    } else if (op.op == "linear") {
      const std::size_t features = in.back();
      if (op.first_token_only) {
        const Buffer rows = first_tokens(input_of(i, 0), in);
        Buffer drows(rows.size());
        k::linear_backward(u32(rows.size() / features), u32(features), u32(op.shape.back()), rows, p, dy, drows, dw);
        const std::size_t t = in[1];
        std::fill(dx.begin(), dx.end(), 0.0F);
        for (std::size_t s = 0; s * features < drows.size(); ++s)
          std::copy_n(drows.begin() + static_cast<std::ptrdiff_t>(s * features), features,
                      dx.begin() + static_cast<std::ptrdiff_t>(s * t * features));
      } else {
        k::linear_backward(u32(dx.size() / features), u32(features), u32(op.shape.back()), input_of(i, 0), p, dy,
                           dxs, dw);
      }
      bias_gradient(i, dy);
    } else if (op.op == "batchnorm") {
      const uint32_t c = u32(in[1]), px = u32(elements(in) / in[0] / c);
      Buffer saved(2 * std::size_t{c}), y(elements(in));
      const Buffer& x = input_of(i, 0);
      k::batch_norm_forward(u32(in[0]), c, px, x, p.first(c), p.subspan(c), y, saved);
      k::batch_norm_backward(u32(in[0]), c, px, x, p.first(c), saved, dy, dxs, dw,
                             std::span<float>(grads_[i]).subspan(c));
    } else if (op.op == "layernorm") {
      const uint32_t f = u32(in.back()), rows = u32(elements(in) / f);
      Buffer saved(2 * std::size_t{rows}), y(elements(in));
      const Buffer& x = input_of(i, 0);
      k::layer_norm_forward(rows, f, x, p.first(f), p.subspan(f), y, saved);
      k::layer_norm_backward(rows, f, x, p.first(f), saved, dy, dxs, dw, std::span<float>(grads_[i]).subspan(f));
    } else if (op.op == "relu") {
      k::relu_backward(need(i), dy, dxs);
    } else if (op.op == "relu6") {
      k::relu6_backward(need(i), dy, dxs);
    } else if (op.op == "gelu") {
      k::gelu_backward(input_of(i, 0), dy, dxs);
    } else if (op.op == "tanh") {
      k::tanh_backward(need(i), dy, dxs);
    } else if (op.op == "add") {
      const std::size_t half = in_elements(i, 0);
      k::add_backward(dy, dxs.first(half), dxs.subspan(half));
    } else if (op.op == "maxpool") {
      k::max_pool_backward(u32(in[0]), u32(in[1]), u32(in[2]), u32(in[3]), u32(op.kernel), input_of(i, 0), dy, dxs);
    } else if (op.op == "avgpool") {
      k::global_avg_pool_backward(u32(in[0]), u32(in[1]), u32(in[2] * in[3]), dy, dxs);
    } else if (op.op == "embedding") {
      const auto rows = table_rows(i);
      k::embedding_backward(u32(in[0]), u32(in[1]), u32(op.shape.back()), rows, ids_, dy, dw);
    } else if (op.op == "attention_scores") {
      k::attention_scores_backward(attention_shape(i), input_of(i, 0), need(i), dy, dxs);
    } else if (op.op == "attention_context") {
      const std::size_t scores = in_elements(i, 0);
      k::attention_context_backward(attention_shape(op.inputs[0]), input_of(i, 0), input_of(i, 1), dy,
                                    dxs.first(scores), dxs.subspan(scores));
    }
    if (keep_input_gradient_ && computed_[static_cast<std::size_t>(2 * n_ - i)] == 0) {
      // The stage's input gradient goes back upstream: keep each op's share of it.
      std::size_t offset = 0;
      for (std::size_t input = 0; input < op.inputs.size(); ++input) {
        const std::size_t size = in_elements(i, input);
        if (op.inputs[input] == kGraphInput) {
          Buffer& part = input_grad_parts_[i];
          part.resize(size, 0.0F);
          for (std::size_t j = 0; j < size; ++j) part[j] += dx[offset + j];
        }
        offset += size;
      }
    }
    if (data_only) return {};
    return dx;
  }

  const planner::ForwardGraph& f_;
  const planner::TrainingGraph& g_;
  int n_;
  std::filesystem::path scratch_;
  Buffer data_;
  std::vector<int64_t> ids_;
  std::vector<uint32_t> labels_;
  std::vector<Buffer> params_, grads_;
  std::map<int, Buffer> ram_;
  /// A convolution's im2col columns: one buffer for every step, grown to the largest, as the
  /// profile's (allocated once) and a framework's workspace are; never memory a schedule
  /// holds. A buffer per step would be allocated and zeroed each time, work no profile times.
  Buffer workspace_;
  std::map<int, std::size_t> paged_size_;
  std::vector<char> computed_;
  std::size_t step_ = 0;
  ExecutionResult result_;
  /// A pipeline stage: its loss node receives the next stage's gradient (planner's
  /// build_stage_graph), and an input given by set_input gets its gradient kept.
  bool receives_gradient_ = false;
  bool keep_input_gradient_ = false;
  std::optional<Buffer> received_gradient_;
  std::map<int, Buffer> input_grad_parts_;
};

namespace {

/// Keeps the memory an iteration frees for the next one, as a training framework's caching
/// allocator does and as the profile's buffers (allocated once, run after run) are kept.
/// glibc's defaults give it back to the kernel instead: a freed top of the heap beyond the
/// trim threshold is returned at once (next_iteration frees every activation together), and
/// a buffer above the mmap threshold is a fresh mapping each time. The next iteration then
/// faults every page in again: in bert-tiny's second layer 100 to 144 faults per step, 3 times
/// the step's time, in every iteration (docs/accuracy.md, "Page faults in every iteration").
/// Process-wide, once: buffers up to glibc's largest mmap threshold come from the heap, and
/// the heap is not trimmed.
void keep_freed_memory() {
#if defined(__GLIBC__)
  static std::once_flag once;
  std::call_once(once, [] {
    ::mallopt(M_MMAP_THRESHOLD, static_cast<int>(4 * 1024 * 1024 * sizeof(long)));
    ::mallopt(M_TRIM_THRESHOLD, INT_MAX);
  });
#endif
}

}  // namespace

TrainingIteration::TrainingIteration(const planner::ForwardGraph& forward, const planner::TrainingGraph& graph,
                                     std::filesystem::path scratch, uint32_t seed)
    : impl_((keep_freed_memory(), std::make_unique<Impl>(forward, graph, std::move(scratch), seed))) {}
TrainingIteration::~TrainingIteration() = default;
const std::vector<std::vector<float>>& TrainingIteration::parameters() const { return impl_->parameters(); }
void TrainingIteration::set_parameters(const std::vector<std::vector<float>>& parameters) {
  impl_->set_parameters(parameters);
}
void TrainingIteration::run(const planner::Step& step) { impl_->run(step); }
void TrainingIteration::set_input(std::vector<float> input) { impl_->set_input(std::move(input)); }
void TrainingIteration::set_output_gradient(std::vector<float> gradient) {
  impl_->set_output_gradient(std::move(gradient));
}
std::vector<float> TrainingIteration::output() const { return impl_->output(); }
std::vector<float> TrainingIteration::input_gradient() const { return impl_->input_gradient(); }
ExecutionResult TrainingIteration::finish() { return impl_->finish(); }

void TrainingIteration::next_iteration() { impl_->next_iteration(); }

ExecutionResult execute(const planner::ForwardGraph& forward, const planner::TrainingGraph& graph,
                        const planner::Schedule& schedule, const std::filesystem::path& scratch,
                        uint32_t seed, const std::vector<std::vector<float>>* parameters) {
  TrainingIteration it(forward, graph, scratch, seed);
  if (parameters != nullptr) it.set_parameters(*parameters);
  for (const planner::Step& step : schedule.steps) it.run(step);
  return it.finish();
}

std::vector<std::vector<float>> initial_parameters(const planner::ForwardGraph& forward,
                                                   const planner::TrainingGraph& graph, uint32_t seed) {
  return TrainingIteration(forward, graph, std::filesystem::temp_directory_path(), seed).parameters();
}

planner::TrainingGraph structure_of(const planner::ForwardGraph& forward) {
  return planner::build_training_graph(forward, ZeroCosts());
}

planner::TrainingGraph stage_structure_of(const planner::ForwardGraph& forward, int first, int end) {
  return planner::build_stage_graph(forward, first, end, ZeroCosts());
}

uint64_t gradient_digest(const std::vector<std::vector<float>>& grads, uint64_t seed) {
  uint64_t h = seed;
  for (const auto& g : grads) {
    const auto* p = reinterpret_cast<const unsigned char*>(g.data());
    for (std::size_t i = 0; i < g.size() * sizeof(float); ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  }
  return h;
}

}  // namespace ergon::runtime
